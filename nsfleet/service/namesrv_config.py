"""The NameServer's run-time configuration (NamesrvConfig), shared by the whole fleet.

UPDATE_NAMESRV_CONFIG (318) writes to the P:config hash and announces it on the change feed, so an
update sent to any worker applies to every worker; GET_NAMESRV_CONFIG (319) lists it. Only known
keys are applied and the keys that closed CVE-2023-37582 are refused.
"""

from __future__ import annotations

import os

from nsfleet.domain.errors import ConfigBlacklisted
from nsfleet.domain.java import parse_boolean, parse_integer
from nsfleet.domain.java_properties import format_properties, parse_properties
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


class NamesrvConfig:
    def __init__(self, store: RouteStore, static: dict[str, str] | None = None) -> None:
        self.store = store
        self.static = static or {}  # read-only values reported by 319 (listenPort, ...)
        self.values: dict[str, str] = dict(DEFAULTS)

    async def refresh(self) -> None:
        stored = await self.store.read_config()
        self.values = DEFAULTS | {k: v for k, v in stored.items() if k in DEFAULTS}

    def flag(self, key: str) -> bool:
        return parse_boolean(self.values.get(key))

    def number(self, key: str) -> int:
        value = parse_integer(self.values.get(key))
        return int(DEFAULTS[key]) if value is None else value

    def blacklist(self) -> set[str]:
        listed = {k.strip() for k in self.values["configBlackList"].split(";") if k.strip()}
        return listed | ALWAYS_BLACKLISTED

    async def update(self, props: dict[str, str]) -> dict[str, str]:
        """Apply the known keys of ``props`` fleet-wide; returns what was applied."""
        refused = sorted(set(props) & self.blacklist())
        if refused:
            raise ConfigBlacklisted(", ".join(refused))
        applied = {k: v for k, v in props.items() if k in DEFAULTS}
        if applied:
            await self.store.write_config(applied)
            await self.refresh()
        return applied

    @staticmethod
    def parse(text: str) -> dict[str, str]:
        """UPDATE_NAMESRV_CONFIG's body (MixAll.string2Properties); ValueError if malformed."""
        return parse_properties(text)

    def properties_text(self) -> str:
        """GET_NAMESRV_CONFIG's body: every key as key=value lines, sorted by key."""
        return format_properties(self.values | self.static)
