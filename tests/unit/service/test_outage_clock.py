"""The outage clock (nsfleet/service/outage.py, OutageClock): the "now" the sweep expires by
while the store is away and for one heartbeat after it returned, on a clock the test moves."""

from __future__ import annotations

import pytest

from nsfleet.service import outage
from nsfleet.service.outage import OutageClock


class Wall:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> Wall:
    clock = Wall(1_000_000)
    monkeypatch.setattr(outage, "_now_ms", clock)
    return clock


def test_without_an_outage_the_sweep_uses_the_redis_clock(wall: Wall) -> None:
    clock = OutageClock(grace=30)
    assert clock.sweep_now_ms() is None
    clock.ended()  # nothing began: nothing ends
    assert clock.sweep_now_ms() is None


def test_the_sweep_expires_by_the_moment_the_store_went_away_until_a_grace_after(
        wall: Wall) -> None:
    clock = OutageClock(grace=30)
    clock.began()
    lost = wall.ms
    wall.ms += 300_000  # five minutes away
    assert clock.sweep_now_ms() == lost
    clock.ended()
    wall.ms += 29_000  # back, within one heartbeat
    assert clock.sweep_now_ms() == lost
    wall.ms += 2_000  # the grace has passed: the Redis clock again, and the outage forgotten
    assert clock.sweep_now_ms() is None
    assert clock.sweep_now_ms() is None


def test_an_outage_within_the_last_ones_grace_extends_it(wall: Wall) -> None:
    clock = OutageClock(grace=30)
    clock.began()
    first = wall.ms
    wall.ms += 10_000
    clock.ended()
    wall.ms += 5_000  # away again before brokers had their heartbeat
    clock.began()
    assert clock.sweep_now_ms() == first
    wall.ms += 60_000
    clock.ended()
    wall.ms += 31_000
    assert clock.sweep_now_ms() is None
    clock.began()  # a later outage is a new one
    assert clock.sweep_now_ms() == wall.ms
