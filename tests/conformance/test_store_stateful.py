"""Property-based stateful test: random register / unregister / heartbeat / expire / delete-topic /
register-topic / wipe & add perm sequences run against RouteStore and against the pure-Python model
of the Java tables (route_model.py). After every step the routes of every topic in the pool,
cluster info and the topic list must agree with the model, every change of a topic's route or
queue rows must be announced on the change feed (its topic named, or "*"; what the workers' route
caches and topic summaries rely on) with a fresh change counter, and no orphan index entry may
exist in Redis (invariants.py).

The universe is small on purpose: two clusters, three broker groups (g3 in cluster c2 reuses g1's
addresses, so (cluster, addr) keys collide only by address), five topics. Every brokerName stays
in one cluster. Heartbeat timeouts and sweep horizons are far apart, so "due" does not depend on
how long a step took, and no live row reaches its real TTL during an example.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, TypeVar

import fakeredis
import hypothesis.strategies as st
import redis.asyncio as aioredis
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from nsfleet.domain.errors import RegistrationRejected
from nsfleet.domain.model import BrokerRegistration, DataVersion, QueueData, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from nsfleet.store.change_feed import parse
from tests.support.invariants import orphans
from tests.support.route_model import RouteModel

T = TypeVar("T")

CLUSTER_OF = {"g1": "c1", "g2": "c1", "g3": "c2"}
SHARED_HOSTS = ["10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"]
ADDRS = {"g1": SHARED_HOSTS, "g2": ["10.0.1.1:10911", "10.0.1.2:10911", "10.0.1.3:10911"],
         "g3": SHARED_HOSTS}
GROUPS = sorted(CLUSTER_OF)
IDS = [0, 1, 2]
TOPICS = ["T0", "T1", "T2", "T3", "T4"]
TIMEOUTS = [None, 60_000, 3_600_000, 86_400_000]  # None = the 120 s default
HORIZONS = [600_000, 36_000_000]

topic_configs = st.lists(
    st.builds(TopicConfig, st.sampled_from(TOPICS), st.sampled_from([4, 8]),
              st.sampled_from([4, 8]), st.sampled_from([2, 4, 6, 7]), st.sampled_from([0, 1, 2])),
    max_size=4, unique_by=lambda tc: tc.topic_name)
full_tables = st.lists(
    st.builds(TopicConfig, st.sampled_from(TOPICS), st.just(8), st.just(8),
              st.sampled_from([6, 7])), min_size=2, max_size=4, unique_by=lambda tc: tc.topic_name)
data_versions = st.builds(DataVersion, st.sampled_from([1, 2]), st.sampled_from([100, 200]),
                          st.sampled_from([0, 1, 2]))
filter_lists = st.sampled_from([None, [], ["10.9.0.1:7000"], ["10.9.0.1:7000", "10.9.0.2:7000"]])
queue_datas = st.lists(
    st.builds(QueueData, st.sampled_from([*GROUPS, "gx"]), st.sampled_from([4, 8]),
              st.sampled_from([4, 8]), st.sampled_from([4, 6]), st.sampled_from([0, 1])),
    max_size=3)


def _route_dicts(reads: list[Any]) -> list[Any]:
    return [None if r is None else r.to_dict() for r in reads]


class StoreMachine(RuleBasedStateMachine):
    """One example = one fresh Redis, one fresh model. Subclasses choose the Redis."""

    connect: ClassVar[Callable[[], Coroutine[Any, Any, aioredis.Redis]]]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.redis = self.run(type(self).connect())
        # Every registration is first offered as a digest, so the O(1) path is checked too.
        self.store = RouteStore(self.redis, "prop", probe_min_topics=0)
        self.run(self.store.load_scripts())
        self.model = RouteModel()
        self.connections: list[tuple[str, str, str, str]] = []
        self.registrations = 0
        self.run(self.store.mark_worker_alive("w", 3_600_000))
        self.last_registration: dict[tuple[str, str], BrokerRegistration] = {}
        self.seen_routes: list[Any] = [None] * len(TOPICS)
        self.seen_tables: Any = ({"brokerAddrTable": {}, "clusterAddrTable": {}}, [])
        self.seen_rev = 0
        self.seen_rows: list[Any] = [()] * len(TOPICS)
        self.checks = 0
        self.pubsub = self.redis.pubsub()
        self.run(self.pubsub.subscribe(self.store.keys.changes))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.pubsub.aclose())
        self.run(self.redis.aclose())
        self.loop.close()

    # --- rules ---------------------------------------------------------------------------------

    def _register(self, group: str, slot: int, broker_id: int, acting: bool | None,
                  dv: DataVersion, topics: list[TopicConfig], timeout: int | None,
                  filters: list[str] | None, zone: str | None, delete_absent: bool) -> None:
        cluster, addr = CLUSTER_OF[group], ADDRS[group][slot]
        reg = BrokerRegistration(cluster, addr, group, broker_id, addr.replace(":10911", ":10912"),
                                 zone, timeout, acting, dv, topics, filters)
        self.registrations += 1
        conn = f"w:{self.registrations % 4}"
        try:
            expected = self.model.register(reg, delete_absent, conn)
        except RegistrationRejected:
            expected = None
        try:
            got = self.run(self.store.register_broker(reg, delete_absent_topics=delete_absent,
                                                      connection=conn))
        except RegistrationRejected:
            got = None
        if expected is None or got is None:
            assert got is expected, (got, expected)
            event("register: rejected")
            return
        event(f"register: {'fenced' if got.fenced else 'ok'}")
        assert (got.fenced, got.master_addr, got.ha_server_addr, got.generation) == (
            expected.fenced, expected.master_addr, expected.ha_server_addr, expected.generation)
        if not got.fenced:
            self.connections.append((cluster, addr, group, conn))
            self.last_registration[(cluster, addr)] = reg

    # Registration has several rules so that it outweighs the removals and tables fill up.
    @rule(group=st.sampled_from(GROUPS), slot=st.integers(0, 2), broker_id=st.sampled_from(IDS),
          acting=st.sampled_from([None, False, True]), dv=data_versions, topics=topic_configs,
          timeout=st.sampled_from(TIMEOUTS), filters=filter_lists,
          zone=st.sampled_from([None, "z1", "z2"]), delete_absent=st.booleans())
    def register(self, **kw: Any) -> None:
        """Any registration, including single-topic ones (the #4522 guard)."""
        self._register(**kw)

    @rule(group=st.sampled_from(GROUPS), slot=st.integers(0, 2), broker_id=st.sampled_from(IDS),
          acting=st.sampled_from([None, False, True]), dv=data_versions, topics=full_tables,
          timeout=st.sampled_from(TIMEOUTS), zone=st.sampled_from([None, "z1"]))
    def register_full(self, **kw: Any) -> None:
        """A full registration (two topics or more): never refused by the single-topic guard."""
        self._register(filters=None, delete_absent=False, **kw)

    @rule(group=st.sampled_from(GROUPS), timeout=st.sampled_from(TIMEOUTS), topics=full_tables,
          acting=st.sampled_from([None, False, True]))
    def register_group(self, group: str, timeout: int | None, topics: list[TopicConfig],
                       acting: bool | None) -> None:
        """A whole group comes up (master and two slaves): fills the live table, so the sweep's
        mass-expiry guard gets something to guard."""
        for broker_id in range(3):
            self._register(group, broker_id, broker_id, acting, DataVersion(1, 100), topics,
                           timeout, None, None, False)

    @precondition(lambda self: self.last_registration)
    @rule(pick=st.integers(min_value=0), acting=st.sampled_from(["same", None, False, True]),
          drop_last_topic=st.booleans())
    def reregister(self, pick: int, acting: Any, drop_last_topic: bool) -> None:
        """The periodic re-registration: the same DataVersion and topics as last time (maybe one
        topic fewer, or another enableActingMaster), so stored queue data is mostly kept."""
        last = list(self.last_registration.values())[pick % len(self.last_registration)]
        topics = list(last.topic_configs[:-1] if drop_last_topic else last.topic_configs)
        self._register(last.name, ADDRS[last.name].index(last.addr), last.broker_id,
                       last.enable_acting_master if acting == "same" else acting,
                       last.data_version, topics, last.heartbeat_timeout_millis,
                       last.filter_server_list, last.zone_name, False)

    @precondition(lambda self: self.last_registration)
    @rule(pick=st.integers(min_value=0), bump=st.sampled_from(["counter", "timestamp", "state"]))
    def reregister_next_version(self, pick: int, bump: str) -> None:
        """The same table under a new DataVersion (Java rewrites every topic with the values it
        has; nsfleet skips that when Redis already holds them, which the model checks)."""
        last = list(self.last_registration.values())[pick % len(self.last_registration)]
        dv = last.data_version
        dv = DataVersion(dv.counter + (bump == "counter"), dv.timestamp + (bump == "timestamp"),
                         dv.state_version + (bump == "state"))
        self._register(last.name, ADDRS[last.name].index(last.addr), last.broker_id,
                       last.enable_acting_master, dv, list(last.topic_configs),
                       last.heartbeat_timeout_millis, last.filter_server_list, last.zone_name,
                       False)

    @precondition(lambda self: any(g.members for g in self.model.groups.values()))
    @rule(pick=st.integers(min_value=0), slot=st.integers(0, 2), dv=data_versions,
          topics=full_tables, acting=st.sampled_from([None, False, True]))
    def register_takeover(self, pick: int, slot: int, dv: DataVersion,
                          topics: list[TopicConfig], acting: bool | None) -> None:
        """Another address claims an id a group already has (slave/master switch, or a stale
        stateVersion that must be fenced)."""
        taken = sorted((n, i) for n, g in self.model.groups.items() for i in g.members)
        group, broker_id = taken[pick % len(taken)]
        self._register(group, slot, broker_id, acting, dv, topics, None, None, None, False)

    @rule(group=st.sampled_from(GROUPS), slot=st.integers(0, 2),
          name=st.none() | st.sampled_from(GROUPS))
    def unregister(self, group: str, slot: int, name: str | None) -> None:
        """UNREGISTER_BROKER; sometimes naming another group than the one that registered."""
        cluster, addr = CLUSTER_OF[group], ADDRS[group][slot]
        name = name or group
        expected = self.model.unregister(cluster, addr, name)
        assert self.run(self.store.unregister_broker(cluster, addr, name)) == expected

    @precondition(lambda self: self.connections)
    @rule(pick=st.integers(min_value=0))
    def channel_destroy(self, pick: int) -> None:
        """A closed connection: the broker goes when no other connection it registered over is
        open (the connection is often stale by now, or shared by several brokers)."""
        cluster, addr, name, conn = self.connections[pick % len(self.connections)]
        expected = self.model.unregister(cluster, addr, name, conn)
        got = self.run(self.store.unregister_broker(cluster, addr, name, closed_connection=conn))
        assert got == expected
        event(f"channel destroy: {got}")

    @rule(group=st.sampled_from(GROUPS), slot=st.integers(0, 2))
    def heartbeat(self, group: str, slot: int) -> None:
        cluster, addr = CLUSTER_OF[group], ADDRS[group][slot]
        assert self.run(self.store.heartbeat(cluster, addr)) == self.model.heartbeat(cluster, addr)

    @rule(group=st.sampled_from(GROUPS), slot=st.integers(0, 2), dv=data_versions)
    def query_data_version(self, group: str, slot: int, dv: DataVersion) -> None:
        cluster, addr = CLUSTER_OF[group], ADDRS[group][slot]
        got = self.run(self.store.query_data_version(cluster, addr, dv))
        assert got == self.model.query_data_version(cluster, addr, dv)

    @rule(horizon=st.sampled_from(HORIZONS), guard_share=st.sampled_from([0.0, 0.5]))
    def expire(self, horizon: int, guard_share: float) -> None:
        """The sweep as of a future time: every broker whose timeout is below the horizon is due."""
        sec, usec = self.run(self.redis.time())
        now = sec * 1000 + usec // 1000
        got = self.run(self.store.sweep(now_ms=now + horizon, guard_share=guard_share,
                                        guard_max_hold_ms=10**12))
        expected = self.model.sweep(horizon, guard_share)
        assert (got.held, got.due, got.live) == (expected.held, expected.due, expected.live)
        assert sorted(got.removed) == sorted(expected.removed)
        event(f"sweep: {'held' if got.held else len(got.removed)}")

    @rule(topic=st.sampled_from(TOPICS), cluster=st.sampled_from([None, "c1", "c2", "c9"]))
    def delete_topic(self, topic: str, cluster: str | None) -> None:
        expected = self.model.delete_topic(topic, cluster)
        assert self.run(self.store.delete_topic(topic, cluster)) == expected

    @rule(topic=st.sampled_from(TOPICS), qds=queue_datas)
    def register_topic(self, topic: str, qds: list[QueueData]) -> None:
        expected = self.model.register_topic(topic, qds)
        assert self.run(self.store.register_topic(topic, qds)) == expected

    @rule(name=st.sampled_from([*GROUPS, "gx"]), op=st.sampled_from(["wipe", "add"]))
    def write_perm(self, name: str, op: str) -> None:
        call = self.store.wipe_write_perm if op == "wipe" else self.store.add_write_perm
        assert self.run(call(name)) == self.model.write_perm(name, op)

    # --- checks after every step ---------------------------------------------------------------

    @invariant()
    def store_agrees_with_model(self) -> None:
        self.run(self._check())

    async def _check(self) -> None:
        store, model = self.store, self.model
        reads = [await store.pickup_route(t) for t in TOPICS]
        routes = _route_dicts([None if r is None else r.route for r in reads])
        assert routes == _route_dicts([model.route(t) for t in TOPICS])
        tables = ((await store.cluster_info()).to_dict(), await store.all_topics())
        assert tables == (model.cluster_info().to_dict(), model.all_topics())
        assert await orphans(self.redis, store.keys) == []

        # Announcements: a topic whose route or queue rows changed was named by a change message
        # (or "*" came), and any change to a route or to the cluster tables bumped the rev.
        rows = [r.queues for r in await store.topic_summary_rows.rows(TOPICS)]
        named, everything = await self._announced()
        for topic, route, seen, now, before in zip(TOPICS, routes, self.seen_routes, rows,
                                                   self.seen_rows, strict=True):
            if route != seen or now != before:
                assert everything or topic in named, (topic, route, seen, now, before)
        rev = await store.rev()
        if routes != self.seen_routes or tables != self.seen_tables:
            assert rev > self.seen_rev
        self.seen_routes, self.seen_tables, self.seen_rev = routes, tables, rev
        self.seen_rows = rows

    async def _announced(self) -> tuple[set[str], bool]:
        """The topics the change messages since the last check named, and whether one said
        "*": read up to a marker published now (a subscriber gets messages in order)."""
        self.checks += 1
        marker = f"0 @sync:check-{self.checks}"
        await self.redis.publish(self.store.keys.changes, marker)
        named: set[str] = set()
        everything = False
        deadline = self.loop.time() + 5.0
        while True:
            assert self.loop.time() < deadline, "the check's marker never came back"
            # None for the subscription's own confirmation, which is skipped.
            msg = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if msg is None:
                continue
            data = msg["data"].decode() if isinstance(msg["data"], bytes) else msg["data"]
            if data == marker:
                return named, everything
            change = parse(data)
            named.update(change.topics)
            everything = everything or change.all_routes


SETTINGS = settings(max_examples=100, stateful_step_count=30, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_store_matches_model_on_fakeredis() -> None:
    class FakeMachine(StoreMachine):
        @staticmethod
        async def connect() -> aioredis.Redis:
            return fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer(),
                                                decode_responses=True)

    run_state_machine_as_test(FakeMachine, settings=SETTINGS)


def test_store_matches_model_on_redis_server(redis_server: RedisServer) -> None:
    class RealMachine(StoreMachine):
        @staticmethod
        async def connect() -> aioredis.Redis:
            client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
            await client.flushall()
            return client

    run_state_machine_as_test(RealMachine, settings=settings(
        SETTINGS, max_examples=40, stateful_step_count=30))
