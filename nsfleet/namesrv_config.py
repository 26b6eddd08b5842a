"""The NameServer's run-time configuration (NamesrvConfig, §4.1), shared by the whole fleet.

UPDATE_NAMESRV_CONFIG (318) writes to the P:config hash and announces it on the change feed, so an
update sent to any worker applies to every worker; GET_NAMESRV_CONFIG (319) lists it. Only known
keys are applied and the keys that closed CVE-2023-37582 are refused.
"""

from __future__ import annotations

import os

from nsfleet.store import RouteStore

# NamesrvConfig keys with their Java defaults. Keys marked "no effect" in docs/config.md are
# accepted and listed for compatibility only.
DEFAULTS: dict[str, str] = {
    "clientRequestThreadPoolNums": "8",
    "clientRequestThreadPoolQueueCapacity": "50000",
    "clusterTest": "false",
    "configBlackList": "configBlackList;configStorePath;kvConfigPath",
    "configStorePath": "",
    "defaultThreadPoolNums": "16",
    "defaultThreadPoolQueueCapacity": "10000",
    "deleteTopicWithBrokerRegistration": "false",
    "enableAllTopicList": "true",
    "enableControllerInNamesrv": "false",
    "enableTopicList": "true",
    "kvConfigPath": "",
    "needWaitForService": "false",
    "notifyMinBrokerIdChanged": "false",
    "orderMessageEnable": "false",
    "productEnvName": "center",
    "returnOrderTopicConfigToBroker": "true",
    "rocketmqHome": os.environ.get("ROCKETMQ_HOME", ""),
    "scanNotActiveBrokerInterval": "5000",
    "supportActingMaster": "false",
    "unRegisterBrokerQueueCapacity": "3000",
    "waitSecondsForService": "45",
}
ALWAYS_BLACKLISTED = frozenset({"configBlackList", "configStorePath", "kvConfigPath",
                                "rocketmqHome"})


class BlacklistedKey(Exception):
    """An update named a key that may never be changed remotely."""


def parse_bool(value: str | None) -> bool:
    """Java's Boolean.parseBoolean: only a case-insensitive "true" is true."""
    return value is not None and value.strip().lower() == "true"


class NamesrvConfig:
    def __init__(self, store: RouteStore, static: dict[str, str] | None = None) -> None:
        self.store = store
        self.static = static or {}  # read-only values reported by 319 (listenPort, ...)
        self.values: dict[str, str] = dict(DEFAULTS)

    async def refresh(self) -> None:
        stored = await self.store.redis.hgetall(self.store.keys.config)
        self.values = DEFAULTS | {k: v for k, v in stored.items() if k in DEFAULTS}

    def flag(self, key: str) -> bool:
        return parse_bool(self.values.get(key))

    def number(self, key: str) -> int:
        try:
            return int(self.values.get(key, DEFAULTS[key]))
        except ValueError:
            return int(DEFAULTS[key])

    def blacklist(self) -> set[str]:
        listed = {k.strip() for k in self.values["configBlackList"].split(";") if k.strip()}
        return listed | ALWAYS_BLACKLISTED

    async def update(self, props: dict[str, str]) -> dict[str, str]:
        """Apply the known keys of ``props`` fleet-wide; returns what was applied."""
        refused = sorted(set(props) & self.blacklist())
        if refused:
            raise BlacklistedKey(", ".join(refused))
        applied = {k: v for k, v in props.items() if k in DEFAULTS}
        if applied:
            redis = self.store.redis
            await redis.hset(self.store.keys.config, mapping=applied)
            await redis.publish(self.store.keys.changes, "0 @config")
            await self.refresh()
        return applied

    def properties_text(self) -> str:
        """GET_NAMESRV_CONFIG's body: every key as key=value lines, sorted by key."""
        merged = self.values | self.static
        return "".join(f"{k}={merged[k]}\n" for k in sorted(merged))
