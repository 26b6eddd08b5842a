"""The address server's tables (nsfleet/store/address_tables.py) on fakeredis and a real
redis-server, and the address a worker advertises by default."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from nsfleet.domain.errors import ValidationError
from nsfleet.metrics import Metrics
from nsfleet.service.address_server import AddressServer
from nsfleet.service.history import ChangeRecorder
from nsfleet.service.presence import advertise_address, primary_address
from nsfleet.store import RouteStore
from nsfleet.store.address_tables import AddressTables


async def test_only_workers_whose_presence_lives_are_listed(store: RouteStore,
                                                            any_redis: aioredis.Redis) -> None:
    directory = AddressTables.of(store)
    await directory.mark_alive("w1", 60_000, "10.0.0.1:9876")
    await directory.mark_alive("w2", 60_000, "10.0.0.2:9876")
    await directory.mark_alive("w3", 60_000, "10.0.0.1:9876")  # two workers behind one address
    assert await directory.live_addresses() == ["10.0.0.1:9876", "10.0.0.2:9876"]
    await any_redis.delete(store.keys.worker("w2"))  # its TTL ran out
    assert await directory.live_addresses() == ["10.0.0.1:9876"]
    assert sorted(await any_redis.hkeys(store.keys.worker_addrs)) == ["w1", "w3"]  # pruned
    await directory.withdraw("w1")
    await directory.withdraw("w3")
    assert await directory.live_addresses() == []
    assert await any_redis.exists(store.keys.worker("w1"))  # presence stays for connections


def address_server(store: RouteStore) -> AddressServer:
    return AddressServer(store, ChangeRecorder(store.history, Metrics()))


async def test_extra_addresses_change_fleet_wide(store: RouteStore) -> None:
    service = address_server(store)
    await AddressTables.of(store).mark_alive("w1", 60_000, "10.0.0.1:9876")
    assert await service.change_extra(add=["10.9.0.2:9876", "10.9.0.1:9876"]) == [
        "10.9.0.1:9876", "10.9.0.2:9876"]
    current = await address_server(store).current()  # another worker sees the same
    assert current.nsaddr == "10.0.0.1:9876;10.9.0.1:9876;10.9.0.2:9876"
    assert await service.change_extra(remove=["10.9.0.1:9876"]) == ["10.9.0.2:9876"]
    assert await service.change_extra(add=["10.0.0.1:9876"], replace=True) == ["10.0.0.1:9876"]
    assert (await service.current()).nsaddr == "10.0.0.1:9876"  # listed once
    with pytest.raises(ValidationError, match="host:port"):
        await service.change_extra(add=["10.9.0.3"])
    assert await service.change_extra() == ["10.0.0.1:9876"]  # nothing half-written
    recorded = await store.history.recent(10)
    assert [c.action for c in recorded] == ["address server extra addresses changed"] * 3


@pytest.mark.parametrize(("configured", "host", "expected"), [
    ("", "127.0.0.1", "127.0.0.1:9876"),
    ("ns.svc", "0.0.0.0", "ns.svc:9876"),
    ("ns.svc:19876", "0.0.0.0", "ns.svc:19876"),
    ("fd00::1", "::", "[fd00::1]:9876"),
    ("[fd00::1]:9000", "::", "[fd00::1]:9000"),
])
def test_the_advertised_address(configured: str, host: str, expected: str) -> None:
    assert advertise_address(configured, host, 9876) == expected


def test_binding_every_interface_advertises_the_primary_address() -> None:
    assert advertise_address("", "0.0.0.0", 9876) == f"{primary_address()}:9876"
    assert not primary_address().startswith("0.")
