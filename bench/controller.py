"""The controller (docs/controller.md) beside Java's, in one run (issue 41).

1. **Heartbeats**: what a controller heartbeat (904, one a second per broker) costs Redis, as
   script time per call (INFO commandstats) with 10 and with 10,000 replicas alive: O(1) (three
   alternating runs each, the median).
2. **Failover** (with ``--java``, or ``--nsfleet-only``): two real RocketMQ 5.3.3 brokers of one
   set in controller mode (``allAckInSyncStateSet=true``) on a fleet of two workers, and two on
   Java's NameServer with its embedded DLedger controller, up at once; rounds alternate between
   the two. Each round kills the master (``kill -9``) and times the election (GET_REPLICA_INFO
   names the slave) and the route flip (the name server's cluster info lists it as brokerId 0),
   then restarts the old master and waits until it is back in the SyncStateSet. Then a master
   SIGSTOPped (its connection stays open; its heartbeats stop: the 10 s heartbeat timeout
   decides), SIGCONT'd after the election.

Needs shared/java-rocketmq5 and shared/java-rocketmq5-controller beside the clone (their
README.md). Writes bench/results/controller.json.

    .venv/bin/python bench/controller.py [--rounds 5] [--stop-rounds 3] [--nsfleet-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from benchlib import new_results, start_worker, write_results

from nsfleet.domain.controller import ControllerHeartbeat
from nsfleet.redis_server import RedisServer, free_port
from nsfleet.store import RouteStore

REPO = Path(__file__).resolve().parents[1]
SET = "broker-a"


def shared(name: str) -> Path:
    for base in (REPO, *REPO.parents):
        if (base / "shared" / name).is_dir():
            return base / "shared" / name
    sys.exit(f"shared/{name} not found beside the clone")


CTL_HOME = shared("java-rocketmq5-controller")
sys.path.insert(0, str(CTL_HOME))
from ctlquery import call  # noqa: E402  (the shared folder's stdlib-only remoting client)

# --- 1. heartbeats ------------------------------------------------------------------------------


async def heartbeat_cost(replicas: int, calls: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        store = RouteStore(client, "bench")
        await store.load_scripts()
        ct = store.controller

        def beat(i: int) -> ControllerHeartbeat:
            return ControllerHeartbeat("C", f"set-{i // 2}", f"10.0.{i // 250}.{i % 250}:10911",
                                       i % 2 + 1, 3, 10**9 + i, 10**9, 10_000, 0)

        for i in range(replicas):
            await ct.heartbeat(beat(i), "w:1")
        await client.config_resetstat()
        started = time.perf_counter()
        for _ in range(calls):
            await ct.heartbeat(beat(random.randrange(replicas)), "w:1")
        wall = time.perf_counter() - started
        stats = await client.info("commandstats")
        evalsha = stats["cmdstat_evalsha"]
        await client.aclose()
    return {"replicas": replicas, "heartbeats": calls,
            "redis_us_per_heartbeat": round(int(evalsha["usec"]) / int(evalsha["calls"]), 2),
            "script_calls_per_heartbeat": round(int(evalsha["calls"]) / calls, 2),
            "worker_wall_us_per_heartbeat": round(wall / calls * 1e6, 1)}


# --- 2. failover --------------------------------------------------------------------------------


def free_broker_port() -> int:
    """A port P with P-2 (fastListenPort) and P+1 (HA) free too."""
    while True:
        port = random.randrange(31000, 59000)
        try:
            for p in (port - 2, port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue


@dataclass
class Broker:
    port: int
    store: Path
    conf: list[str]
    namesrv: str
    proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(CTL_HOME / "broker-ctl.sh"), self.namesrv, str(self.port), str(self.store),
             *self.conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@dataclass
class Side:
    """One deployment under test: where its controller and its routes are asked."""

    name: str
    controller: str
    namesrv: str
    brokers: list[Broker] = field(default_factory=list)
    rounds: list[dict[str, float]] = field(default_factory=list)
    stops: list[dict[str, float]] = field(default_factory=list)

    def replica(self) -> dict[str, Any]:
        try:
            r = call(self.controller, 1004, {"brokerName": SET}, timeout=2)
            body = json.loads(r["body"]) if r.get("body") else {}
            return {**(r.get("ext") or {}), **body}
        except Exception:  # a controller between answers: ask again
            return {}

    def route(self) -> dict[str, str]:
        try:
            r = call(self.namesrv, 106, timeout=2)
            d = json.loads(re.sub(r'([{,])(-?\d+):', r'\1"\2":', r["body"]))
            return d["brokerAddrTable"].get(SET, {}).get("brokerAddrs", {})
        except Exception:
            return {}

    def leads(self) -> bool:
        try:
            return call(self.controller, 1005, timeout=1)["ext"].get("isLeader") == "true"
        except OSError:  # not listening yet
            return False

    def master(self) -> Broker | None:
        addr = self.replica().get("masterAddress")
        return next((b for b in self.brokers if b.addr == addr), None)

    def whole(self) -> bool:
        """Both replicas in sync and the route showing both."""
        return sorted(self.replica().get("syncStateSet") or []) == [1, 2] and \
            len(self.route()) == 2


def wait(pred: Callable[[], Any], timeout: float, step: float = 0.02) -> float | None:
    started = time.time()
    while time.time() - started < timeout:
        if pred():
            return time.time() - started
        time.sleep(step)
    return None


def fail_master(side: Side, sig: int, timeout: float) -> dict[str, float]:
    master = side.master()
    assert master is not None, f"{side.name}: no master"
    epoch = int(side.replica().get("masterEpoch", 0))
    started = time.time()
    master.signal(sig)
    elected = wait(lambda: side.replica().get("masterAddress") not in (None, master.addr)
                   and int(side.replica().get("masterEpoch", 0)) > epoch, timeout)
    flipped = wait(lambda: side.route().get("0") not in (None, master.addr),
                   max(1.0, timeout - (time.time() - started)))
    if flipped is not None:
        flipped = time.time() - started
    if sig == signal.SIGSTOP:
        master.signal(signal.SIGCONT)
    else:
        master.kill()
        master.start()
    back = wait(side.whole, 90, 0.5)
    return {"elected_s": round(elected, 3) if elected is not None else -1,
            "route_flip_s": round(flipped, 3) if flipped is not None else -1,
            "old_master_back_s": round(back, 1) if back is not None else -1}


def start_side(side: Side, work: Path, controller_addr: str) -> None:
    conf = ["enableControllerMode=true", f"controllerAddr={controller_addr}",
            "allAckInSyncStateSet=true", "brokerId=-1", "brokerRole=SLAVE"]
    for i in range(2):
        b = Broker(free_broker_port(), work / f"{side.name}-b{i}", conf, side.namesrv)
        b.start()
        side.brokers.append(b)
        if i == 0:  # the first elects itself; the second joins it
            assert wait(lambda: side.master() is not None, 120, 0.5), f"{side.name}: no master"
    assert wait(side.whole, 120, 0.5), f"{side.name}: the slave never joined"


def failover(args: argparse.Namespace, work: Path, redis_url: str) -> dict[str, Any]:
    workers: list[subprocess.Popen[bytes]] = []
    java_ns: subprocess.Popen[bytes] | None = None
    sides: list[Side] = []
    try:
        ports = []
        for i in range(2):
            proc, _, port = start_worker(redis_url, work / f"worker{i}.log",
                                         NSFLEET_SWEEP_INTERVAL="1")
            workers.append(proc)
            ports.append(port)
        fleet = ";".join(f"127.0.0.1:{p}" for p in ports)
        sides.append(Side("nsfleet", f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[0]}"))
        start_side(sides[0], work, fleet)
        if not args.nsfleet_only:
            ns_port, ctl_port = free_port(), free_port()
            java_ns = subprocess.Popen(
                [str(CTL_HOME / "namesrv-ctl.sh"), str(ns_port), str(ctl_port),
                 str(work / "java-ns")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            java = Side("java", f"127.0.0.1:{ctl_port}", f"127.0.0.1:{ns_port}")
            assert wait(java.leads, 90, 0.5), "the Java controller never led"
            sides.append(java)
            start_side(java, work, java.controller)
        for _ in range(args.rounds):  # alternate: the same machine state for both
            for side in sides:
                side.rounds.append(fail_master(side, signal.SIGKILL, 30))
        for _ in range(args.stop_rounds):
            for side in sides:
                side.stops.append(fail_master(side, signal.SIGSTOP, 40))
    finally:
        for side in sides:
            for b in side.brokers:
                b.kill()
        if java_ns is not None:
            os.killpg(java_ns.pid, signal.SIGKILL)
            java_ns.wait()
        for proc in workers:
            proc.terminate()
            proc.wait()
    out: dict[str, Any] = {}
    for side in sides:
        def median(rows: list[dict[str, float]], key: str) -> float:
            values = [r[key] for r in rows if r[key] >= 0]
            return round(statistics.median(values), 3) if values else -1
        out[side.name] = {
            "kill9_elected_s_median": median(side.rounds, "elected_s"),
            "kill9_route_flip_s_median": median(side.rounds, "route_flip_s"),
            "sigstop_elected_s_median": median(side.stops, "elected_s"),
            "sigstop_route_flip_s_median": median(side.stops, "route_flip_s"),
            "kill9_rounds": side.rounds, "sigstop_rounds": side.stops}
    return out


async def heartbeats() -> dict[str, Any]:
    """Three alternating runs per size (a shared machine): each run's figures and the median."""
    runs: dict[int, list[dict[str, float]]] = {10: [], 10_000: []}
    for _ in range(3):
        for n, out in runs.items():
            out.append(await heartbeat_cost(n, 5000))
    return {f"{n}_replicas": {
        "redis_us_per_heartbeat_median": statistics.median(
            r["redis_us_per_heartbeat"] for r in out),
        "script_calls_per_heartbeat": out[0]["script_calls_per_heartbeat"], "runs": out}
        for n, out in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="kill -9 rounds per side")
    parser.add_argument("--stop-rounds", type=int, default=3, help="SIGSTOP rounds per side")
    parser.add_argument("--nsfleet-only", action="store_true", help="no Java controller")
    parser.add_argument("--heartbeats-only", action="store_true", help="no failover rounds")
    args = parser.parse_args()
    results = new_results(args)
    results["heartbeats"] = asyncio.run(heartbeats())
    if not args.heartbeats_only:
        with tempfile.TemporaryDirectory() as tmp, \
                RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
            results["failover"] = failover(args, Path(tmp), server.url)
    write_results("controller", results)


if __name__ == "__main__":
    main()
