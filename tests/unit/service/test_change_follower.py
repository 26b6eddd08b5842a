"""Following the change feed (nsfleet/service/change_follower.py, ChangeFollower) on fakeredis:
every change handed on in order, this worker's own writes synced before it reads again, a sync
that never comes back reported, and a broken subscription told to the outage and taken up
again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis

from nsfleet.metrics import Metrics
from nsfleet.service import change_follower
from nsfleet.service.change_follower import ChangeFollower
from nsfleet.service.outage import StoreOutage
from nsfleet.store import RouteStore
from nsfleet.store.change_feed import Change


@dataclass
class Seen:
    changes: list[Change] = field(default_factory=list)
    out_of_sync: int = 0
    lost: int = 0


@pytest.fixture
async def store(fake_redis: aioredis.Redis) -> RouteStore:
    store = RouteStore(fake_redis, "follow")
    await store.load_scripts()
    return store


@pytest.fixture
async def followed(store: RouteStore) -> AsyncIterator[tuple[ChangeFollower, Seen]]:
    seen = Seen()

    def out_of_sync() -> None:
        seen.out_of_sync += 1

    def lost() -> None:
        seen.lost += 1

    follower = ChangeFollower(store, StoreOutage(Metrics()), apply=seen.changes.append,
                              out_of_sync=out_of_sync, on_lost=lost)
    await follower.start()
    for _ in range(200):
        if follower.subscribed:
            break
        await asyncio.sleep(0.01)
    assert follower.subscribed
    yield follower, seen
    await follower.close()


async def test_changes_are_handed_on_in_order_and_a_sync_waits_for_them(
        store: RouteStore, followed: tuple[ChangeFollower, Seen]) -> None:
    follower, seen = followed
    for i in range(5):
        await store.kv_put("ORDER_TOPIC_CONFIG", f"T{i}", "g:8")
    await follower.sync()  # read your writes: every change published before has been applied
    assert [c.topics for c in seen.changes] == [(f"T{i}",) for i in range(5)]
    revs = [c.rev for c in seen.changes]
    assert revs == sorted(revs) and follower.rev == revs[-1]
    assert seen.out_of_sync == 0


async def test_a_sync_marker_that_never_comes_back_is_reported(
        store: RouteStore, followed: tuple[ChangeFollower, Seen],
        monkeypatch: pytest.MonkeyPatch) -> None:
    follower, seen = followed

    async def swallowed(token: str) -> None:  # published nowhere: it never comes back
        return None

    monkeypatch.setattr(store.changes, "publish_sync", swallowed)
    monkeypatch.setattr(change_follower, "SYNC_TIMEOUT", 0.05)
    await follower.sync()
    assert seen.out_of_sync == 1


async def test_nothing_to_sync_when_nothing_is_cached(store: RouteStore) -> None:
    follower = ChangeFollower(store, StoreOutage(Metrics()), apply=lambda _: None,
                              out_of_sync=lambda: pytest.fail("nothing cached to drop"),
                              on_lost=lambda: None, enabled=False)
    await follower.sync()  # returns at once, publishes nothing
    assert follower.rev == 0


async def test_a_broken_subscription_is_reported_and_taken_up_again(
        store: RouteStore, followed: tuple[ChangeFollower, Seen]) -> None:
    follower, seen = followed
    await store.redis.connection_pool.disconnect()  # the subscription's connection goes too
    for _ in range(300):
        if seen.lost and follower.subscribed:
            break
        await asyncio.sleep(0.01)
    assert seen.lost >= 1 and follower.subscribed
    await store.kv_put("ORDER_TOPIC_CONFIG", "T9", "g:8")
    await follower.sync()
    assert seen.changes[-1].topics == ("T9",)
