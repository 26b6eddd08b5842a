"""The NameServer's run-time configuration (NamesrvConfig), shared by the whole fleet.

UPDATE_NAMESRV_CONFIG (318) writes to the P:config hash and announces it on the change feed, so an
update sent to any worker applies to every worker; GET_NAMESRV_CONFIG (319) lists it, as Java's
Configuration lists NamesrvConfig and NettyServerConfig together. Only known keys are applied, each
parsed as Java parses its field, and the keys that closed CVE-2023-37582 are refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection

import structlog

from nsfleet.domain.errors import ConfigBlacklisted
from nsfleet.domain.java import parse_boolean, parse_integer
from nsfleet.domain.java_properties import format_properties, parse_properties
from nsfleet.store import RouteStore

log = structlog.get_logger(__name__)

# The keys of Java's NamesrvConfig and NettyServerConfig (the two objects its Configuration
# holds) with their defaults and the Java type properties2Object parses them as. Keys marked "no
# effect" in docs/config.md are accepted and listed for compatibility only.
_INT, _LONG, _BOOL, _STR = "int", "long", "boolean", "String"
TYPED_DEFAULTS: dict[str, tuple[str, str]] = {
    # NamesrvConfig
    "clientRequestThreadPoolNums": (_INT, "8"),
    "clientRequestThreadPoolQueueCapacity": (_INT, "50000"),
    "clusterTest": (_BOOL, "false"),
    "configBlackList": (_STR, "configBlackList;configStorePath;kvConfigPath"),
    "configStorePath": (_STR, ""),
    "defaultThreadPoolNums": (_INT, "16"),
    "defaultThreadPoolQueueCapacity": (_INT, "10000"),
    "deleteTopicWithBrokerRegistration": (_BOOL, "false"),
    "enableAllTopicList": (_BOOL, "true"),
    "enableControllerInNamesrv": (_BOOL, "false"),
    "enableTopicList": (_BOOL, "true"),
    "kvConfigPath": (_STR, ""),
    "needWaitForService": (_BOOL, "false"),
    "notifyMinBrokerIdChanged": (_BOOL, "false"),
    "orderMessageEnable": (_BOOL, "false"),
    "productEnvName": (_STR, "center"),
    "returnOrderTopicConfigToBroker": (_BOOL, "true"),
    "rocketmqHome": (_STR, os.environ.get("ROCKETMQ_HOME", "")),
    "scanNotActiveBrokerInterval": (_LONG, "5000"),
    "supportActingMaster": (_BOOL, "false"),
    "unRegisterBrokerQueueCapacity": (_INT, "3000"),
    "waitSecondsForService": (_INT, "45"),
    # NettyServerConfig (listenPort and bindAddress are each worker's own, see ``static``)
    "serverWorkerThreads": (_INT, "8"),
    "serverCallbackExecutorThreads": (_INT, "0"),
    "serverSelectorThreads": (_INT, "3"),
    "serverOnewaySemaphoreValue": (_INT, "256"),
    "serverAsyncSemaphoreValue": (_INT, "64"),
    "serverChannelMaxIdleTimeSeconds": (_INT, "120"),
    "serverSocketSndBufSize": (_INT, "0"),
    "serverSocketRcvBufSize": (_INT, "0"),
    "writeBufferHighWaterMark": (_INT, "0"),
    "writeBufferLowWaterMark": (_INT, "0"),
    "serverSocketBacklog": (_INT, "1024"),
    "serverNettyWorkerGroupEnable": (_BOOL, "true"),
    "serverPooledByteBufAllocatorEnable": (_BOOL, "true"),
    "enableShutdownGracefully": (_BOOL, "false"),
    "shutdownWaitTimeSeconds": (_INT, "30"),
    "useEpollNativeSelector": (_BOOL, "false"),
}
DEFAULTS: dict[str, str] = {key: default for key, (_, default) in TYPED_DEFAULTS.items()}
# NettyServerConfig keys that are each worker's own (reported by 319 from ``static``), with the
# flag that sets them.
WORKER_KEYS = {"listenPort": "--remoting-port", "bindAddress": "--host"}
_JAVA_TRIMMED = "".join(map(chr, range(33)))
_BOUNDS = {_INT: (-(1 << 31), (1 << 31) - 1), _LONG: (-(1 << 63), (1 << 63) - 1)}


def java_value(key: str, raw: str) -> str | None:
    """``raw`` as MixAll.properties2Object sets the field: Integer.parseInt / Long.parseLong (a
    failure leaves the field as it was: None), Boolean.parseBoolean (untrimmed), or the text
    trimmed."""
    kind = TYPED_DEFAULTS[key][0]
    if kind in _BOUNDS:
        value = parse_integer(raw, *_BOUNDS[kind])
        return None if value is None else str(value)
    if kind == _BOOL:
        return "true" if parse_boolean(raw) else "false"
    return raw.strip(_JAVA_TRIMMED)  # String.trim: every char up to U+0020


ALWAYS_BLACKLISTED = frozenset({"configBlackList", "configStorePath", "kvConfigPath",
                                "rocketmqHome"})


class NamesrvConfig:
    def __init__(self, store: RouteStore, static: dict[str, str] | None = None) -> None:
        self.store = store
        self.static = static or {}  # read-only values reported by 319 (listenPort, ...)
        self.values: dict[str, str] = dict(DEFAULTS)
        self._flags: dict[str, bool] = {}
        self._flags_of: dict[str, str] | None = None  # the values _flags was parsed from
        self.on_change: list[Callable[[], None]] = []  # told after values changed

    async def refresh(self) -> None:
        stored = await self.store.read_config()
        values = DEFAULTS | {k: v for k, v in stored.items()
                             if k in DEFAULTS and java_value(k, v) == v}
        changed, self.values = values != self.values, values
        if changed:
            for callback in self.on_change:
                callback()

    def flag(self, key: str) -> bool:
        # Parsed once per set of values: the cached route reads ask for two flags each.
        if self._flags_of is not self.values:
            self._flags, self._flags_of = {}, self.values
        found = self._flags.get(key)
        if found is None:
            found = self._flags[key] = parse_boolean(self.values.get(key))
        return found

    def number(self, key: str) -> int:
        value = parse_integer(self.values.get(key))
        return int(DEFAULTS[key]) if value is None else value

    def blacklist(self) -> set[str]:
        listed = {k.strip() for k in self.values["configBlackList"].split(";") if k.strip()}
        return listed | ALWAYS_BLACKLISTED

    async def update(self, props: dict[str, str]) -> dict[str, str]:
        """Apply the known keys of ``props`` fleet-wide, each parsed as Java parses its field
        (a value Java cannot parse is ignored); returns what was applied."""
        refused = sorted(set(props) & self.blacklist())
        if refused:
            raise ConfigBlacklisted(", ".join(refused))
        applied = {}
        for key, raw in props.items():
            value = java_value(key, raw) if key in DEFAULTS else None
            if value is not None:
                applied[key] = value
        if applied:
            await self.store.write_config(applied)
            await self.refresh()
        return applied

    @staticmethod
    def parse(text: str) -> dict[str, str]:
        """UPDATE_NAMESRV_CONFIG's body (MixAll.string2Properties); ValueError if malformed."""
        return parse_properties(text)

    def all_values(self) -> dict[str, str]:
        """Every key with its value, the worker's own listenPort and bindAddress included."""
        return dict(sorted((self.values | self.static).items()))

    def properties_text(self) -> str:
        """GET_NAMESRV_CONFIG's body: every key as key=value lines, sorted by key."""
        return format_properties(self.all_values())


async def apply_java_file(config: NamesrvConfig, path: str, props: dict[str, str],
                          worker_keys: Collection[str]) -> None:
    """A Java NameServer's -c file (``props``, read from ``path``): its NamesrvConfig keys apply
    fleet-wide (as they configure a Java NameServer at start); ``worker_keys`` were read as the
    worker's own settings; the rest is named."""
    applied = await config.update({k: v for k, v in props.items()
                                   if k in DEFAULTS and k not in ALWAYS_BLACKLISTED})
    ignored = sorted(set(props) - set(applied) - set(worker_keys))
    log.info("namesrv config file read", path=path, applied=applied,
             worker_settings=sorted(set(props) & set(worker_keys)))
    if ignored:
        log.warning("namesrv config file keys ignored (not implemented, local to a Java "
                    "process, or not parsable)", path=path, keys=ignored)
