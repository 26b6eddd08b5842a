"""Logs stay readable through a Redis outage (issue 29): a real worker, 12 brokers heartbeating
every second over HTTP and 12 over remoting, Redis SIGKILLed for 10 s. Repeated identical errors
are folded by the logging set-up (nsfleet/logs.py): the first is written, then one line with a
count; the metrics still count every one. The lines that matter (the stale view's start, and
the store's return, said calmly) still appear. The admin tool, meanwhile, reports the worker's
503 as an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import Broker, RemotingClient, TopicConf
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.redis
BROKERS = 12
OUTAGE_S = 10.0


def _http_broker(i: int) -> dict[str, Any]:
    return {"clusterName": "c1", "brokerAddr": f"10.0.9.{i}:10911", "brokerName": f"h{i}",
            "brokerId": 0, "topicConfigTable": {f"H{i}": {}, "Shared": {}}}


def _remoting_broker(i: int) -> Broker:
    return Broker("c1", f"10.0.10.{i}:10911", f"r{i}",
                  topics=[TopicConf(f"R{i}"), TopicConf("Shared")])


async def _heartbeats(url: str, port: int, stop: asyncio.Event) -> None:
    """Every broker registers once, then heartbeats each second until ``stop``."""
    timeout = aiohttp.ClientTimeout(total=3)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        clients = [await RemotingClient.connect(port) for _ in range(BROKERS)]
        brokers = [_remoting_broker(i) for i in range(BROKERS)]
        for i, (client, broker) in enumerate(zip(clients, brokers, strict=True)):
            async with session.post(f"{url}/v1/brokers/register", json=_http_broker(i)) as r:
                assert r.status == 200
            assert (await client.call(broker.register_5x())).code == 0
        async with session.get(f"{url}/v1/routes/Shared") as r:  # a view to serve stale
            assert r.status == 200

        async def http_one(i: int) -> None:
            body = {k: v for k, v in _http_broker(i).items() if k != "topicConfigTable"}
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.post(f"{url}/v1/brokers/heartbeat", json=body) as r:
                    await r.read()

        while not stop.is_set():
            await asyncio.gather(*(http_one(i) for i in range(BROKERS)))
            for client, broker in zip(clients, brokers, strict=True):
                await client.oneway(broker.heartbeat())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        for client in clients:
            await client.close()


def _redis_errors(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("nsfleet_redis_errors_total{"))


async def _run(server: RedisServer, worker: WorkerProcess) -> tuple[list[str], float]:
    stop = asyncio.Event()
    load = asyncio.create_task(_heartbeats(worker.url, worker.remoting_port, stop))
    await asyncio.sleep(2.0)
    start = worker.log_path.stat().st_size
    assert server.process is not None
    server.process.send_signal(signal.SIGKILL)
    await asyncio.to_thread(server.process.wait, 10)
    began = time.monotonic()
    # The admin tool meanwhile: the worker did answer (503), and says why.
    admin = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nsfleet", "admin", "--server", worker.url, "kv", "put", "ns", "k",
        "v", stderr=asyncio.subprocess.PIPE)
    _, err = await admin.communicate()
    assert admin.returncode == 1
    assert err.decode().startswith("nsfleet admin kv: the worker answered: Redis unavailable"), err
    assert "-n HOST" not in err.decode()
    await asyncio.sleep(OUTAGE_S - (time.monotonic() - began))
    await asyncio.to_thread(server.start)
    await asyncio.sleep(3.0)  # the return is logged
    with worker.log_path.open("rb") as f:
        f.seek(start)
        lines = f.read().decode().splitlines()
    errors = _redis_errors(worker.url)
    stop.set()
    await load
    return lines, errors


def test_a_ten_second_outage_writes_at_most_twenty_lines(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True,
                         extra_args=["--appendfsync", "always"]).start()
    worker = WorkerProcess({"NSFLEET_REDIS_URL": server.url, "NSFLEET_NAMESPACE": "logs",
                            "NSFLEET_DRAIN_TIMEOUT": "2", "NSFLEET_LOG_FORMAT": "json"},
                           tmp_path / "worker.log")
    try:
        worker.start()
        lines, errors = asyncio.run(_run(server, worker))
    finally:
        if worker.process is not None:
            worker.stop()
        server.stop()
    events = [json.loads(line) for line in lines]
    messages = [e["event"] for e in events]
    assert len(lines) <= 20, "\n".join(lines)
    assert "serving a stale view while the store is away" in messages, messages
    # Redis came back as a new process with every change (appendfsync always): the worker says
    # it reads routes from it again, calmly, and names no loss.
    (back,) = [m for m in messages if m.startswith("store back")]
    assert "new Redis process" in back and "nothing was lost" in back, back
    assert "stopped serving the stale view" not in messages, messages
    # What was folded is said, with its count; the metrics count every failed request (24
    # heartbeats a second for 10 s: a few hundred), including those of a window still open.
    reports = [e for e in events if e["event"] in ("redis error", "remoting request failed")]
    told = sum(e.get("repeated", 1) for e in reports)
    assert any(e.get("repeated") for e in reports) and told > 100, lines
    assert errors >= told, (errors, told)
