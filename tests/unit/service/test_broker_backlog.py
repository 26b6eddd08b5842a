"""The backlog of what brokers sent while the store was away (nsfleet/service/broker_backlog.py):
the newest per broker, heartbeats keeping the registration they refer to, bounded, and only
what still proves its broker alive handed to the replay."""

from __future__ import annotations

import pytest

from nsfleet.domain.model import BrokerRegistration
from nsfleet.service import broker_backlog
from nsfleet.service.broker_backlog import BrokerBacklog


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Monotonic:
    fake = Monotonic()
    monkeypatch.setattr(broker_backlog.time, "monotonic", fake)
    return fake


def registration(i: int) -> BrokerRegistration:
    return BrokerRegistration("c1", f"10.0.0.{i}:10911", f"g{i}", 0)


def test_the_newest_registration_per_broker_is_kept(clock: Monotonic) -> None:
    backlog = BrokerBacklog()
    first, second = registration(1), registration(1)
    backlog.registration(first, "conn-a", 120)
    clock.now += 1
    backlog.registration(second, "conn-b", 120)
    (item,) = backlog.take()
    assert item.registration is second and item.connection == "conn-b" and item.at == 101
    assert len(backlog) == 0 and backlog.take() == []


def test_a_heartbeat_keeps_the_registration_and_refreshes_it(clock: Monotonic) -> None:
    backlog = BrokerBacklog()
    reg = registration(1)
    backlog.registration(reg, "conn-a", 120)
    clock.now += 100
    backlog.heartbeat("c1", "10.0.0.1:10911", 120)
    clock.now += 100  # 200 s after the registration, 100 s after the heartbeat
    (item,) = backlog.take()
    assert item.registration is reg and item.at == 200
    backlog.heartbeat("c1", "10.0.0.2:10911", 120)  # a heartbeat alone is remembered too
    (only,) = backlog.take()
    assert only.registration is None and only.addr == "10.0.0.2:10911"


def test_what_no_longer_proves_its_broker_alive_is_not_replayed(clock: Monotonic) -> None:
    backlog = BrokerBacklog()
    backlog.registration(registration(1), None, 120)
    backlog.registration(registration(2), None, 30)
    clock.now += 60
    assert [i.addr for i in backlog.take()] == ["10.0.0.1:10911"]


def test_a_closed_connection_no_longer_keeps_its_broker(clock: Monotonic) -> None:
    backlog = BrokerBacklog()
    backlog.registration(registration(1), "conn-a", 120)
    backlog.connection_closed("c1", "10.0.0.1:10911", "conn-other")
    backlog.connection_closed("c1", "10.0.0.9:10911", "conn-a")  # unknown broker: nothing
    (item,) = backlog.take()
    assert item.connection == "conn-a"
    backlog.restore(item)
    backlog.connection_closed("c1", "10.0.0.1:10911", "conn-a")
    assert backlog.take()[0].connection is None


def test_the_backlog_is_bounded_the_oldest_broker_going_first(clock: Monotonic) -> None:
    backlog = BrokerBacklog(max_brokers=3)
    for i in range(5):
        backlog.registration(registration(i), None, 120)
    backlog.registration(registration(2), None, 120)  # sent again: the newest now
    assert len(backlog) == 3
    assert [i.addr for i in backlog.take()] == ["10.0.0.3:10911", "10.0.0.4:10911",
                                                 "10.0.0.2:10911"]
