"""Brokers and readers against real workers through a Redis outage (tests/integration/
test_store_outage_fleet.py, bench/outage.py).

Every broker registers with every worker (as a RocketMQ broker registers with every name server
in its list) every ``period`` seconds; readers read each broker's topic from every worker over
HTTP and over remoting, recording whether each read was answered, whether HTTP marked it stale,
and which brokers the route listed. ``phase`` is set by the caller (before, outage, after).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.support.remoting_client import SUCCESS, RemotingClient, loads_fastjson

GET_ROUTEINFO_BY_TOPIC = 105


def broker(i: int, timeout_ms: int) -> dict[str, Any]:
    return {"clusterName": "c1", "brokerAddr": f"10.0.7.{i}:10911", "brokerName": f"b{i}",
            "brokerId": 0, "dataVersion": {"counter": 1, "timestamp": 1},
            "heartbeatTimeoutMillis": timeout_ms,
            "topicConfigTable": {f"T{i}": {}, "Shared": {}}}


@dataclass
class Read:
    phase: str
    protocol: str
    worker: int
    topic: str
    answered: bool
    stale: bool
    brokers: frozenset[str]
    at: float


@dataclass
class OutageLoad:
    http_urls: list[str]
    remoting_ports: list[int]
    brokers: int = 4
    timeout_ms: int = 2000
    period: float = 0.4  # seconds between a broker's registrations
    phase: str = "before"
    reads: list[Read] = field(default_factory=list)
    acked: dict[str, int] = field(default_factory=dict)  # KV key -> value acknowledged
    registrations: dict[str, list[int]] = field(default_factory=dict)  # phase -> statuses
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def register_all(self, session: aiohttp.ClientSession) -> list[int]:
        statuses = []
        for url in self.http_urls:
            for i in range(self.brokers):
                async with session.post(f"{url}/v1/brokers/register",
                                        json=broker(i, self.timeout_ms)) as resp:
                    statuses.append(resp.status)
        return statuses

    async def run(self, seconds: float | None = None) -> None:
        """Until ``stop()`` (or ``seconds``)."""
        timeout = aiohttp.ClientTimeout(total=3)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            clients = [await RemotingClient.connect(p) for p in self.remoting_ports]
            tasks = [asyncio.create_task(self._brokers(session)),
                     asyncio.create_task(self._kv(session))]
            tasks += [asyncio.create_task(self._http_reader(session, w))
                      for w in range(len(self.http_urls))]
            tasks += [asyncio.create_task(self._remoting_reader(clients, w))
                      for w in range(len(self.remoting_ports))]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self._stop.wait()
            self._stop.set()
            await asyncio.gather(*tasks)
            for client in clients:
                await client.close()

    def stop(self) -> None:
        self._stop.set()

    async def _brokers(self, session: aiohttp.ClientSession) -> None:
        while not self._stop.is_set():
            phase = self.phase
            try:
                statuses = await self.register_all(session)
            except (aiohttp.ClientError, TimeoutError):
                statuses = [0]
            self.registrations.setdefault(phase, []).extend(statuses)
            await self._pause(self.period)

    async def _kv(self, session: aiohttp.ClientSession) -> None:
        """Writes whose acknowledgement must survive: one KV value a tick."""
        n = 0
        while not self._stop.is_set():
            n += 1
            url = self.http_urls[n % len(self.http_urls)]
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.put(f"{url}/v1/kv/outage/k{n}",
                                       json={"value": str(n)}) as resp:
                    if resp.status == 200:
                        self.acked[f"k{n}"] = n
            await self._pause(0.1)

    async def _http_reader(self, session: aiohttp.ClientSession, worker: int) -> None:
        url = self.http_urls[worker]
        n = 0
        while not self._stop.is_set():
            topic = f"T{n % self.brokers}"
            n += 1
            phase, answered, stale, names = self.phase, False, False, frozenset[str]()
            try:
                async with session.get(f"{url}/v1/routes/{topic}") as resp:
                    body = await resp.read()
                    answered = resp.status == 200
                    stale = "X-Nsfleet-Stale" in resp.headers and "Age" in resp.headers
                    if answered:
                        names = _brokers(json.loads(body))
            except (aiohttp.ClientError, TimeoutError):
                pass
            self.reads.append(Read(phase, "http", worker, topic, answered, stale, names,
                                   time.monotonic()))
            await self._pause(0.01)

    async def _remoting_reader(self, clients: list[RemotingClient], worker: int) -> None:
        n = 0
        while not self._stop.is_set():
            topic = f"T{n % self.brokers}"
            n += 1
            phase, answered, names = self.phase, False, frozenset[str]()
            try:
                resp = await clients[worker].request(GET_ROUTEINFO_BY_TOPIC, {"topic": topic},
                                                     wait=3.0)
                answered = resp.code == SUCCESS
                if answered and resp.body:
                    names = _brokers(loads_fastjson(resp.body))
            except (TimeoutError, ConnectionError, OSError):
                pass
            self.reads.append(Read(phase, "remoting", worker, topic, answered, False, names,
                                   time.monotonic()))
            await self._pause(0.01)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stop.wait()


def _brokers(route: dict[str, Any]) -> frozenset[str]:
    return frozenset(b["brokerName"] for b in route.get("brokerDatas", []))


def served_fraction(reads: list[Read], phase: str) -> float:
    mine = [r for r in reads if r.phase == phase]
    return sum(r.answered for r in mine) / len(mine) if mine else 0.0


def missing_brokers(reads: list[Read], phase: str) -> list[Read]:
    """Answered reads of T<i> that do not list broker b<i>."""
    return [r for r in reads if r.phase == phase and r.answered
            and f"b{r.topic[1:]}" not in r.brokers]
