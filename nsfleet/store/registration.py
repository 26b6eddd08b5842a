"""REGISTER_BROKER in Redis (RouteInfoManager.registerBroker), the chunked protocol in one place
(docs/architecture.md, "The unchanged re-registration" and "Bounded script time"): a table is
validated and encoded once per distinct table, offered as its digest first when big (an
unchanged re-registration then costs O(1)), else sent whole in one call or, past ``chunk_rows``
rows, as register_broker.lua's "head", register_topics.lua per chunk and register_commit.lua."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from nsfleet.domain import validation
from nsfleet.domain.errors import RegistrationRejected
from nsfleet.domain.model import (
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    BrokerRegistration,
    CheckedTopics,
    RegisterResult,
    topic_queue_mapping_info,
)
from nsfleet.runtime.memo import BoundedMemo
from nsfleet.runtime.table_thread import in_table_thread
from nsfleet.store import scripts
from nsfleet.store.departures import Departures
from nsfleet.store.joint_chunks import JointChunks, joinable
from nsfleet.store.keys import GROUP_TOPICS_COUNTER, ORDER_TOPIC_CONFIG
from nsfleet.store.redis_errors import translating_redis_errors
from nsfleet.store.replies import ScriptReplyError, Status
from nsfleet.store.script_calls import ScriptCalls, flag, json_arg, pairs, table_chunks
from nsfleet.store.unchanged_chunks import Pending, UnchangedChunks

PROBE_MIN_TOPICS = 64  # below this, sending the table costs less than a second round trip
# A table of more topics is validated and encoded in the table thread (runtime/table_thread.py):
# that is milliseconds per thousand topics, which would otherwise hold every read the worker
# serves meanwhile.
OFF_LOOP_TOPICS = 500


@translating_redis_errors
class BrokerRegistrar:
    def __init__(self, calls: ScriptCalls, departures: Departures, *,
                 probe_min_topics: int = PROBE_MIN_TOPICS) -> None:
        """``departures`` drains what a removed group left before its name registers again;
        registrations of at least ``probe_min_topics`` topics are first offered as a digest."""
        self._calls = calls
        self._keys = calls.keys
        self._departures = departures
        self.probe_min_topics = probe_min_topics
        # Validated and encoded tables by the identity of the (immutable) table sent.
        self._tables: BoundedMemo[tuple[Any, ...]] = BoundedMemo()
        # Registrations proven unchanged, which answer the rest of a split round without Redis.
        self.unchanged_chunks = UnchangedChunks(self._write_data_versions)
        # First registrations' chunks, written with those of other groups' (a storm).
        self.joint_chunks = JointChunks(calls)

    def _encoded_table(self, reg: BrokerRegistration, delete_absent_topics: bool
                       ) -> tuple[int, list[list[Any]], list[bytes], list[bytes], str]:
        """Validate ``reg`` and encode its topic table as the scripts take it: how many rows,
        the static-topic mappings, both in chunks, and the digest taken over those chunks."""
        source = reg.topic_configs
        # The same table object again (a broker re-sending the bytes a front end remembers):
        # its checks and encoding are a pure function of it. Static topics depend on more.
        key = (id(source), delete_absent_topics)
        kept = reg.table_memo if reg.table_memo is not None else {}
        known = None
        if not reg.topic_queue_mappings:
            known = kept.get(delete_absent_topics) or self._tables.get(key)
        if known is not None and known[0] is source:
            reg.validated(known[1])
            kept[delete_absent_topics] = known
            return known[2], [], known[3], [], known[4]
        reg.validated()
        # Java files a mapping under its own bname; only storable topic names are kept.
        mappings = []
        for topic, raw in sorted(reg.topic_queue_mappings.items()):
            if validation.routable(topic):
                info = topic_queue_mapping_info(raw, reg.name or "")
                mappings.append([topic, info["bname"],
                                 json.dumps(info, separators=(",", ":"), sort_keys=True)])
        # Only the chunks are remembered, not rows (~90 B a topic of every table a worker sees).
        n = self._calls.chunk_rows
        topic_chunks = table_chunks(reg.topic_configs, n)
        row_count = len(reg.topic_configs)
        mapping_chunks = [json_arg(mappings[i:i + n]) for i in range(0, len(mappings), n)]
        hasher = hashlib.blake2b(flag(delete_absent_topics).encode(), digest_size=16)
        for text in (*topic_chunks, b"|", *mapping_chunks):
            hasher.update(text)
        digest = hasher.hexdigest()
        if not mappings and isinstance(source, tuple):
            checked = CheckedTopics(reg.topics_sent, reg.topic_configs, reg.dropped_topics)
            kept[delete_absent_topics] = (source, checked, row_count, topic_chunks, digest)
            self._tables.put(key, kept[delete_absent_topics], row_count)
        return row_count, mappings, topic_chunks, mapping_chunks, digest

    async def register_broker(self, reg: BrokerRegistration, *, delete_absent_topics: bool = False,
                              return_order_conf: bool = True,
                              connection: str | None = None) -> RegisterResult:
        """Register (RouteInfoManager.registerBroker). ``connection`` names the remoting
        connection it came over ("<worker>:<n>"), which then keeps the broker registered until
        it closes (``connection_closed``)."""
        if len(reg.topic_configs) > OFF_LOOP_TOPICS:
            table = await in_table_thread(self._encoded_table, reg, delete_absent_topics)
        else:
            table = self._encoded_table(reg, delete_absent_topics)
        row_count, mappings, topic_chunks, mapping_chunks, digest = table
        dv = reg.data_version
        timeout = reg.heartbeat_timeout_millis or DEFAULT_HEARTBEAT_TIMEOUT_MS
        acting = "" if reg.enable_acting_master is None else str(reg.enable_acting_master).lower()
        filters = list(reg.filter_server_list) if reg.filter_server_list is not None else None

        def args(mode: str) -> scripts.RegisterBrokerArgs:
            full = mode == "full"
            return scripts.RegisterBrokerArgs(
                cluster=reg.cluster, addr=reg.addr, name=reg.name, id=reg.broker_id,
                ha_addr=reg.ha_server_addr or "", zone=reg.zone_name or "", timeout_ms=timeout,
                acting_master=acting, dv_counter=dv.counter, dv_timestamp=dv.timestamp,
                state_version=dv.state_version,
                filter_count=-1 if filters is None else len(filters),
                topic_count=row_count if full else 0, delete_absent=flag(delete_absent_topics),
                want_kv=flag(return_order_conf), topics_sent=reg.topics_sent,
                connection=connection or "", mapping_count=len(mappings), digest=digest,
                mode=mode, row_budget=self._calls.chunk_rows,
                topics=topic_chunks[0] if full and topic_chunks else "",
                mappings=mapping_chunks[0] if full and mapping_chunks else "[]",
                filters=filters or ())

        # What register_broker.lua compares as the registration's meta, with what else shapes
        # the answer: equal, and the digest proven, the memo may answer (``unchanged_chunks``).
        meta = (reg.name, reg.broker_id, reg.ha_server_addr or "", reg.zone_name or "", timeout,
                acting, dv.state_version, None if filters is None else tuple(filters),
                return_order_conf, connection or "")
        memo, key = self.unchanged_chunks, (reg.cluster or "", reg.addr or "")
        remembered = memo.answer(key, meta, digest, dv)
        if remembered is not None:
            remembered.dropped_topics = reg.dropped_topics
            return remembered
        memo.written_now(key)  # this call writes its own DataVersion
        ticket = memo.ticket()
        keys = [self._keys.kv_namespaces, self._keys.kv_table(ORDER_TOPIC_CONFIG)]
        # A big table is first offered as its digest: an unchanged re-registration (a broker's
        # every 30 s) then costs O(1) in Redis and sends no topics; otherwise it is sent whole,
        # in one call when it is small, else in chunks (``_register_in_chunks``).
        chunked = row_count + len(mappings) > self._calls.chunk_rows
        mode = "probe" if chunked or row_count >= self.probe_min_topics else "full"
        for _ in range(5):  # "drain" answers are followed by a drain, then a retry
            if mode == "full" and chunked:
                mode = "head"
            status, rest = await self._calls.call("register_broker", args(mode), keys)
            if status is Status.DRAIN:
                await self._departures.drain_cleanups(only=reg.name)
                continue
            if status is Status.FULL or status is Status.CHUNK:
                mode = "head" if status is Status.CHUNK else "full"
                continue
            break
        changed = False
        if status is Status.HEAD:
            changed, rest = await self._register_in_chunks(
                reg, rest, topic_chunks, mapping_chunks, digest, delete_absent_topics,
                return_order_conf)
        if status is Status.FENCED:
            await self._departures.drain_cleanups(only=reg.name)
            return RegisterResult(fenced=True, dropped_topics=reg.dropped_topics)
        result = _registered(reg, status, rest, changed)
        # A probe answered "ok" needed no per-topic work; announcing nothing, it left the
        # registration as Redis held it: proven unchanged. Not a slave's with a master: its
        # answer carries the master's HA address, which changes without an announcement.
        if (mode == "probe" and status is Status.OK and not result.changed
                and result.master_addr is None):
            memo.remember(key, meta, digest, result, ticket, timeout)
        else:
            memo.forget(key)
        return result

    async def _write_data_versions(self, pending: list[Pending]) -> int:
        """register_data_version.lua for the memo's pending DataVersions; how many were
        written (the others' registrations were superseded or removed)."""
        _, (written,) = await self._calls.call(
            "register_data_version",
            scripts.RegisterDataVersionArgs([v for broker in pending for v in broker]))
        return int(written)

    async def write_pending_data_version(self, cluster: str, addr: str) -> None:
        """The broker's DataVersion the memo answered, written now (QUERY_DATA_VERSION)."""
        await self.unchanged_chunks.flush((cluster, addr))

    async def _register_in_chunks(self, reg: BrokerRegistration, head: list[Any],
                                  topic_chunks: list[bytes],
                                  mapping_chunks: list[bytes], digest: str, delete_absent: bool,
                                  return_order_conf: bool) -> tuple[bool, list[Any]]:
        """After register_broker.lua's "head" call: the queue data in chunks of at most
        ``chunk_rows`` rows (register_topics.lua), the rows deleteTopicWithBroker-
        Registration drops likewise, then register_commit.lua. A worker dying half-way leaves the
        registration record "pending", so the broker's next registration does it all again.
        Returns (changed, the commit's answer after its status)."""
        generation, force, clear_write, writer, head_changed, fresh, epoch = head
        changed = head_changed == "1"

        def chunk(topics: bytes | str, mappings: bytes | str, absent: bytes | str,
                  fresh: str, absent_lists: bytes | str = "") -> scripts.RegisterTopicsArgs:
            return scripts.RegisterTopicsArgs(reg.cluster, reg.addr, reg.name, generation, force,
                                              clear_write, topics, mappings, absent, fresh,
                                              absent_lists)

        stale = False
        # The group's topicsEpoch as the chunks leave it, unless another writer changed a row
        # meanwhile: then the commit records no epoch and the next registration does it all.
        expected_epoch = int(epoch)
        # ... and as it would be had the chunks only added rows (which leaves the broker's other
        # recorded tables valid, lua/includes/tables.lua).
        added_epoch = int(epoch)
        if writer == "1":
            n = self._calls.chunk_rows
            calls = [chunk(text, "[]", "[]", fresh) for text in topic_chunks]
            joint: list[scripts.RegisterTopicsArgs] = []
            if calls and joinable(calls[0]):
                joint, calls = calls, []
            calls += [chunk("", text, "[]", fresh) for text in mapping_chunks]
            # A "stale" chunk: a newer registration of the broker, or its removal, took over.
            replies = await self.joint_chunks.write(joint) if joint else []
            if not any(status is Status.STALE for status, _ in replies):
                replies += await self._calls.call_many("register_topics", calls,
                                                       stop_on=Status.STALE)
            for status, rest in replies:
                stale = stale or status is Status.STALE
                if status is Status.OK:
                    changed = changed or rest[0] == "1"
                    expected_epoch += int(rest[1])
                    added_epoch += int(rest[2])
            if delete_absent and not stale:
                incoming = {tc.topic_name for tc in reg.topic_configs}
                listed = await self._listed_topics(reg.name)
                # In the order of the lists, so that each call rewrites few of them.
                absent = [t for t in listed if t not in incoming]
                calls = [chunk("", "[]", json_arg(part), "0", _lists_naming(part, listed))
                         for part in (absent[i:i + n] for i in range(0, len(absent), n))]
                for status, rest in await self._calls.call_many("register_topics", calls,
                                                          stop_on=Status.STALE):
                    if status is Status.OK:
                        changed = changed or rest[0] == "1"
                        expected_epoch += int(rest[1])
        _, rest = await self._calls.call(
            "register_commit",
            scripts.RegisterCommitArgs(reg.cluster, reg.addr, reg.name, reg.broker_id, generation,
                                   digest, flag(return_order_conf), expected_epoch,
                                   flag(force == "1" and writer == "1"), added_epoch),
            [self._keys.kv_namespaces, self._keys.kv_table(ORDER_TOPIC_CONFIG)])
        return changed, rest


    async def _listed_topics(self, name: str) -> dict[str, list[str]]:
        """The topics group ``name`` lists (docs/queue-data-layouts.md; in layout 2 a superset
        of those it has a row of: the chunk skips the others), each with the list fields that
        name it (layout 2; none in layout 1, which keeps a set), in the order of the lists."""
        if self._calls.layout == scripts.LAYOUT_TOPICS:
            lists = await self._calls.redis.hgetall(self._keys.group_topics(name))
            listed: dict[str, list[str]] = {}
            for field, text in lists.items():
                if field != GROUP_TOPICS_COUNTER:
                    for t in text.split("\n"):
                        if t:
                            listed.setdefault(t, []).append(field)
            return listed
        return {t: [] async for t in self._calls.redis.sscan_iter(
            self._keys.broker_topics(name), count=1000)}


def _lists_naming(topics: list[str], listed: dict[str, list[str]]) -> bytes | str:
    """register_topics.lua's arg_absent_lists: the list fields that name ``topics`` (layout 2),
    or "" for every list (layout 1 keeps no lists)."""
    fields = dict.fromkeys(f for t in topics for f in listed[t])
    return json_arg(list(fields)) if fields else ""


def _registered(reg: BrokerRegistration, status: Status, rest: list[Any],
                changed: bool) -> RegisterResult:
    """register_broker.lua's last answer (not a fenced one) as the registration's result."""
    if status is Status.REJECTED:
        raise RegistrationRejected
    if status not in (Status.OK, Status.HEAD):
        raise ScriptReplyError(f"register_broker: still {status!r} after draining")
    master, ha, generation, changed_flag, kv_flag, *kv = rest
    return RegisterResult(master_addr=master or None, ha_server_addr=ha or None,
                          kv_table=pairs(kv) if kv_flag == "1" else None,
                          generation=int(generation), dropped_topics=reg.dropped_topics,
                          changed=changed or changed_flag == "1")
