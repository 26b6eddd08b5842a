"""What operators change: topics (delete, create, REGISTER_TOPIC_IN_NAMESRV), the write perm of
a broker group, the KV config and the fleet's NamesrvConfig. Each write is recorded in the fleet's
change history."""

from __future__ import annotations

from collections.abc import Sequence

from nsfleet.domain import validation
from nsfleet.domain.errors import (
    BadRequest,
    ConfigUnparsable,
    KvKeyMissing,
    KvNotFound,
    UnknownBrokerGroup,
    UnknownConfigKeys,
    ValidationError,
)
from nsfleet.domain.model import QueueData
from nsfleet.service.context import ServicePart
from nsfleet.service.namesrv_config import DEFAULTS as DEFAULT_CONFIG
from nsfleet.service.namesrv_config import WORKER_KEYS


class Administration(ServicePart):
    async def wipe_write_perm(self, name: str | None, *, known_only: bool = False) -> int:
        """Topics whose write perm was removed; a name no registration accepts has none.
        ``known_only`` (the HTTP API) refuses a group no registration created: Java answers
        it with a count of 0, which the remoting answer keeps."""
        return await self._write_perm(name, True, known_only)

    async def add_write_perm(self, name: str | None, *, known_only: bool = False) -> int:
        return await self._write_perm(name, False, known_only)

    async def _write_perm(self, name: str | None, wipe: bool, known_only: bool) -> int:
        if not validation.is_valid(validation.name, name):
            if known_only:
                raise UnknownBrokerGroup(name)
            return 0
        assert name is not None
        store = self._store
        count = await self._written(store.wipe_write_perm(name) if wipe
                                    else store.add_write_perm(name))
        # A group with queue data is known; only a count of 0 needs the second look.
        if known_only and count == 0 and await store.unknown_groups([name]):
            raise UnknownBrokerGroup(name)
        await self.history.record("write perm wiped" if wipe else "write perm added",
                                  broker_name=name, topics=count)
        return count

    async def broker_member_group(self, name: str | None) -> dict[int, str]:
        """GET_BROKER_MEMBER_GROUP: the group's brokerId -> address map (empty if unknown)."""
        if not validation.is_valid(validation.name, name):
            return {}
        assert name is not None
        return (await self._store.broker_member_group("", name)).broker_addrs

    async def delete_topic(self, topic: str | None, cluster: str | None = None) -> int:
        """Queue data rows removed (of ``cluster``'s groups only, when named); a topic or
        cluster name no write accepts has none."""
        if not validation.is_valid(validation.route_topic, topic) or (
                cluster and not validation.is_valid(validation.name, cluster)):
            return 0
        assert topic is not None
        removed = await self._written(self._store.delete_topic(topic, cluster or None))
        if removed:
            await self.history.record("topic deleted", topic=topic, cluster=cluster,
                                      queue_datas=removed)
        return removed

    async def create_topic(self, topic: str | None, queue_datas: Sequence[QueueData]) -> int:
        """A topic created through nsfleet's own API: its name follows TopicValidator and its
        queue data the limits of a topic a user creates; then it is registered as
        REGISTER_TOPIC_IN_NAMESRV registers one."""
        for i, q in enumerate(queue_datas):
            validation.queue_nums(q.read_queue_nums, f"queueDatas[{i}].readQueueNums")
            validation.queue_nums(q.write_queue_nums, f"queueDatas[{i}].writeQueueNums")
            validation.perm(q.perm, f"queueDatas[{i}].perm")
            validation.integer(q.topic_sys_flag, f"queueDatas[{i}].topicSysFlag", 0)
            validation.name(q.broker_name, f"queueDatas[{i}].brokerName")
        topic = validation.topic(topic)
        # Java skips a group it does not know (and stops there); a person is told, and
        # nothing is written.
        unknown = set(await self._store.unknown_groups([q.broker_name for q in queue_datas]))
        for i, q in enumerate(queue_datas):
            if q.broker_name in unknown:
                raise ValidationError(f"queueDatas[{i}].brokerName",
                                      f"no broker group {q.broker_name} is registered (a topic "
                                      "is written to registered broker groups only); nothing "
                                      "written")
        return await self.register_topic(topic, queue_datas)

    async def register_topic(self, topic: str | None, queue_datas: Sequence[QueueData]) -> int:
        """REGISTER_TOPIC_IN_NAMESRV (RouteInfoManager.registerTopic): only known broker groups
        are written. An empty list is ignored whatever the topic. A brokerName no registration
        accepts is an unknown group, and Java stops at an unknown group: a new topic is then not
        created at all, an existing one keeps what was written before it. Returns the rows
        written."""
        if not queue_datas:
            return 0
        topic = validation.route_topic(topic)
        known: list[QueueData] = []
        for qd in queue_datas:
            if not validation.is_valid(validation.name, qd.broker_name):
                if not await self._store.topic_exists(topic):
                    return 0
                break
            known.append(qd)
        if not known:
            return 0
        written = await self._written(self._store.register_topic(topic, known))
        if written:
            await self.history.record("topic registered", topic=topic,
                                      broker_names=[q.broker_name for q in known],
                                      queue_datas=written)
        return written

    async def kv_put(self, namespace: str | None, key: str | None, value: str | None) -> bool:
        """A value is required: Java stores a missing one as a null that Redis cannot hold
        (docs/compatibility.md)."""
        if namespace is None or key is None:
            raise KvKeyMissing
        if value is None:
            raise BadRequest("the custom field <value> is null")
        changed = await self._written(self._store.kv_put(namespace, key, value))
        if changed:
            await self.history.record("kv put", namespace=namespace, key=key, value=value)
        return changed

    async def kv_get(self, namespace: str | None, key: str | None) -> str:
        value = None
        if (validation.is_valid(validation.kv_part, namespace)
                and validation.is_valid(validation.kv_part, key)):
            assert namespace is not None and key is not None
            value = await self._store.kv_get(namespace, key)
        if value is None:
            raise KvNotFound(namespace, key)
        return value

    async def kv_delete(self, namespace: str | None, key: str | None) -> bool:
        """True when a value was removed; a namespace or key no write accepts has none."""
        if not (validation.is_valid(validation.kv_part, namespace)
                and validation.is_valid(validation.kv_part, key)):
            return False
        assert namespace is not None and key is not None
        deleted = await self._written(self._store.kv_delete(namespace, key))
        if deleted:
            await self.history.record("kv deleted", namespace=namespace, key=key)
        return deleted

    async def kv_list(self, namespace: str | None) -> dict[str, str]:
        table = None
        if validation.is_valid(validation.kv_part, namespace):
            assert namespace is not None
            table = await self._store.kv_list(namespace)
        if table is None:
            raise KvNotFound(namespace, whole_namespace=True)
        return table

    async def kv_namespaces(self) -> list[str]:
        return await self._store.kv_namespaces()

    async def update_config(self, properties_text: str | None) -> dict[str, str]:
        """UPDATE_NAMESRV_CONFIG: Java Properties text; what was applied fleet-wide."""
        if not properties_text:
            return {}
        try:
            props = self.config.parse(properties_text)
        except ValueError:
            raise ConfigUnparsable from None
        return await self.update_config_values(props)

    def config_text(self) -> str:
        """GET_NAMESRV_CONFIG's body."""
        return self.config.properties_text()

    def config_values(self) -> dict[str, str]:
        """Every NamesrvConfig (and NettyServerConfig) key with its value, as 319 lists them."""
        return self.config.all_values()

    async def update_config_values(self, values: dict[str, str], *,
                                   known_only: bool = False) -> dict[str, str]:
        """UPDATE_NAMESRV_CONFIG with the properties already split: the same blacklist and the
        same parsing; what was applied fleet-wide. Java ignores unknown keys; ``known_only``
        (the HTTP API) refuses the whole request instead, naming them."""
        if known_only:
            strays = sorted(set(values) - set(DEFAULT_CONFIG))
            if strays:
                raise UnknownConfigKeys([k for k in strays if k not in WORKER_KEYS],
                                        {k: WORKER_KEYS[k] for k in strays if k in WORKER_KEYS})
        applied = await self.config.update(values)
        if applied:
            await self.history.record("namesrv config updated", applied=applied)
        return applied
