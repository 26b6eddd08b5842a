"""Route parts (store/route_parts.py): each group entry and queue row route.lua returns is parsed
once and shared by every route listing it unchanged, with its dict (SharedDicts); a changed
group is a new part at once, and a route read before keeps what it was read with."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.model import (
    SHARED_DICTS,
    BrokerData,
    BrokerRegistration,
    DataVersion,
    QueueData,
    SharedDicts,
    TopicConfig,
    TopicRouteData,
)
from nsfleet.store import RouteStore, route_parts
from nsfleet.store.route_parts import RouteParts

TOPICS = [TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)]


@pytest.fixture
async def real_store(real_redis: aioredis.Redis) -> RouteStore:
    store = RouteStore(real_redis, "parts")
    await store.load_scripts()
    return store


def member(name: str, broker_id: int, addr: str, *, timeout: int | None = None,
           acting: bool = False) -> BrokerRegistration:
    return BrokerRegistration("c1", addr, name, broker_id, heartbeat_timeout_millis=timeout,
                              enable_acting_master=acting, data_version=DataVersion(1, 100),
                              topic_configs=TOPICS)


async def test_routes_listing_a_group_unchanged_share_its_parts(store: RouteStore) -> None:
    await store.register_broker(member("b1", 0, "10.0.0.1:10911"))
    await store.register_broker(member("b1", 1, "10.0.0.2:10911"))
    one, two = await store.pickup_route("T1"), await store.pickup_route("T2")
    assert one is not None and two is not None
    assert one.route.broker_datas[0] is two.route.broker_datas[0]
    assert one.route.queue_datas[0] is two.route.queue_datas[0]
    assert one.route.broker_datas == [BrokerData("c1", "b1", {0: "10.0.0.1:10911",
                                                              1: "10.0.0.2:10911"})]
    assert one.route.queue_datas == [QueueData("b1", 8, 8, 6)]
    # Their dicts too, equal to the dicts a part not shared gets.
    d1, d2 = one.route.to_dict(), two.route.to_dict()
    assert d1["brokerDatas"][0] is d2["brokerDatas"][0]
    fresh = TopicRouteData([QueueData("b1", 8, 8, 6)], [BrokerData(
        "c1", "b1", {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"})])
    assert d1 == fresh.to_dict()
    assert one.route.to_dict(acting_master=False) == fresh.to_dict(acting_master=False)


async def test_a_group_changed_mid_reads_is_a_new_part(store: RouteStore) -> None:
    """The change injected between two reads: the second shows it, the first keeps its own."""
    await store.register_broker(member("b1", 0, "10.0.0.1:10911"))
    before = await store.pickup_route("T1")
    assert before is not None
    await store.register_broker(member("b1", 1, "10.0.0.2:10911"))
    after = await store.pickup_route("T1")
    assert after is not None
    assert before.route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
    assert before.route.to_dict()["brokerDatas"][0]["brokerAddrs"] == {0: "10.0.0.1:10911"}
    assert after.route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911",
                                                        1: "10.0.0.2:10911"}


async def test_reads_meanwhile_never_see_a_part_older_than_their_reply(
        store: RouteStore) -> None:
    """Reads racing registrations that add members one by one: each route read lists at least
    the members registered before it began."""
    await store.register_broker(member("b1", 0, "10.0.0.1:10911"))
    registered = 1

    async def register() -> None:
        nonlocal registered
        for i in range(1, 30):
            await store.register_broker(member("b1", i, f"10.0.1.{i}:10911"))
            registered = i + 1

    async def read() -> None:
        for _ in range(60):
            known = registered
            read = await store.pickup_route("T1")
            assert read is not None and len(read.route.broker_datas[0].broker_addrs) >= known
            await asyncio.sleep(0)

    await asyncio.gather(register(), read(), read())


async def test_a_member_past_its_deadline_leaves_the_shared_part_alone(
        real_store: RouteStore) -> None:
    """Master expired, slave live, acting master on: the route shows the slave alone and no
    write perm, the next route with both live is the shared part again."""
    s = real_store
    await s.register_broker(member("b1", 0, "10.0.0.1:10911", timeout=300, acting=True))
    await s.register_broker(member("b1", 1, "10.0.0.2:10911", acting=True))
    both = await s.pickup_route("T1")
    assert both is not None and both.route.queue_datas[0].perm == 6
    for _ in range(60):
        await asyncio.sleep(0.05)
        alone = await s.pickup_route("T1")
        assert alone is not None
        if len(alone.route.broker_datas[0].broker_addrs) == 1:
            break
    assert alone.route.broker_datas[0].broker_addrs == {1: "10.0.0.2:10911"}
    assert alone.route.queue_datas[0].perm == 4
    assert both.route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert both.route.queue_datas[0].perm == 6
    await s.register_broker(member("b1", 0, "10.0.0.1:10911", acting=True))
    again = await s.pickup_route("T1")
    assert again is not None and again.route.broker_datas[0] is both.route.broker_datas[0]


def test_an_acting_master_group_without_its_master_shows_no_write_perm() -> None:
    parts = RouteParts()
    row = "8\t8\t6\t0"
    slave = parts.group("b1", "c1\ttrue\t\n1\t10.0.0.2:10911\tc1")
    assert parts.queue("b1", row, slave, {1: "10.0.0.2:10911"}) == QueueData("b1", 8, 8, 4, 0)
    assert parts.queue("b1", "8\t8\t4\t0", slave, {1: "10.0.0.2:10911"}) == QueueData(
        "b1", 8, 8, 4, 0)
    plain = parts.group("b1", "c1\tfalse\t\n1\t10.0.0.2:10911\tc1")
    assert parts.queue("b1", row, plain, {1: "10.0.0.2:10911"}).perm == 6
    both = parts.group("b1", "c1\ttrue\tz\n0\t10.0.0.1:10911\tc1")
    assert parts.queue("b1", row, both, {0: "10.0.0.1:10911"}).perm == 6
    assert parts.queue("b1", row, both, {}).perm == 4  # its master past its deadline
    assert both.broker == BrokerData("c1", "b1", {0: "10.0.0.1:10911"}, True, "z")


def test_a_group_without_a_group_row_has_no_members() -> None:
    group = RouteParts().group("b1", "")
    assert group.broker is None and group.members == ()


def test_the_tables_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(route_parts, "MAX_PARTS", 4)
    parts = RouteParts()
    first = parts.group("b0", "c1\tfalse\t\n0\t10.0.0.1:10911\tc1")
    for i in range(1, 10):
        group = parts.group(f"b{i}", "c1\tfalse\t\n0\t10.0.0.1:10911\tc1")
        parts.queue(f"b{i}", "8\t8\t6\t0", group, {0: "10.0.0.1:10911"})
        assert len(parts._groups) <= 4 and len(parts._queues) <= 4
    again = parts.group("b0", "c1\tfalse\t\n0\t10.0.0.1:10911\tc1")
    assert again == first and again is not first


def test_shared_dicts_are_found_by_identity_and_bounded() -> None:
    shared = SharedDicts(2)
    a, b = BrokerData("c", "a", {1: "x:1", 0: "y:1"}), BrokerData("c", "a", {1: "x:1", 0: "y:1"})
    shared.add(a)
    assert shared.broker(a, True) is shared.broker(a, True)
    assert shared.broker(b, True) is not shared.broker(b, True)  # equal, not the one added
    assert shared.broker(a, True) == b.to_dict() and shared.broker(a, False) == b.to_dict(
        acting_master=False)
    assert list(shared.broker(a, True)["brokerAddrs"]) == [0, 1]
    q = QueueData("a", 8, 8, 6)
    shared.add(q)
    assert shared.queue(q) is shared.queue(q) and shared.queue(q) == q.to_dict()
    shared.add(BrokerData("c", "z"))  # past its limit: emptied first
    assert shared.broker(a, True) is not shared.broker(a, True)
    assert SHARED_DICTS.limit >= 2 * route_parts.MAX_PARTS
