"""Soak through real faults (issue 15): 200 simulated brokers x ~50 topics registering over the
remoting protocol through a local HAProxy (PROXY protocol v2 toward the workers' 9876), readers
fetching routes throughout (through HAProxy and directly, remoting and HTTP); meanwhile a random
worker is killed with SIGKILL and restarted every 20-30 s, and Redis is restarted once.

Afterwards: failed reads per phase, registrations lost (brokers whose registration was
acknowledged but are missing once the faults have ended), and the structural invariant check of
tests/support/invariants.py over every key. Results: bench/results/soak.json.

Phases: ``steady`` (no fault in progress, before the last fault), ``worker-kill`` (from a SIGKILL
until that worker answers /readyz again), ``redis-restart`` (from stopping Redis until it answers
again), ``recovered`` (after the last fault, the final --recovery seconds). A read fails when the
client's retry policy is exhausted: a direct client rotates through the three workers (as a
RocketMQ client rotates name server addresses); a client of the load balancer tries it 3 times.

  python bench/soak.py [--duration 180] [--quick]      # --quick: 60 s
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from benchlib import new_results, write_results

from nsfleet.client.http import FleetHttp, FleetUnavailable
from nsfleet.redis_server import RedisServer, free_port
from nsfleet.simulate.plan import SimBroker, make_plan
from nsfleet.store.keys import Keys
from nsfleet.wire.codec import CURRENT_VERSION, FrameDecoder, RemotingCommand, encode_frame

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support
from tests.support import invariants

HAPROXY = "/usr/sbin/haproxy"
NAMESPACE = "soak"
REGISTER_BROKER, GET_ROUTE = 103, 105
SUCCESS = 0
ATTEMPT_TIMEOUT = 3.0
LB_ATTEMPTS = 3
READ_PAUSE = 0.02  # seconds between one reader's requests
_opaque = itertools.count(1)


# --- the clock of phases -----------------------------------------------------------------------

@dataclass
class Counts:
    ok: int = 0
    failed: int = 0
    attempts_failed: int = 0  # attempts a retry then covered, or not
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class Phases:
    def __init__(self) -> None:
        self.current = "steady"
        self.started = time.monotonic()
        self.seconds: dict[str, float] = defaultdict(float)
        self.reads: dict[str, dict[str, Counts]] = defaultdict(lambda: defaultdict(Counts))
        self.registrations: dict[str, Counts] = defaultdict(Counts)
        self.faults: list[dict[str, Any]] = []
        self._since = time.monotonic()

    def enter(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[self.current] += now - self._since
        self.current, self._since = name, now

    def close(self) -> None:
        self.enter(self.current)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


# --- processes -----------------------------------------------------------------------------------

@dataclass
class Worker:
    """One `nsfleet serve` on fixed loopback ports, so it can be restarted behind HAProxy."""

    redis_url: str
    log: Path
    http_port: int = field(default_factory=free_port)
    remoting_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        env = {**os.environ, "NSFLEET_REDIS_URL": self.redis_url, "NSFLEET_HOST": "127.0.0.1",
               "NSFLEET_HTTP_PORT": str(self.http_port),
               "NSFLEET_REMOTING_PORT": str(self.remoting_port), "NSFLEET_NAMESPACE": NAMESPACE,
               "NSFLEET_LOG_LEVEL": "warning", "NSFLEET_DRAIN_TIMEOUT": "2"}
        self.proc = subprocess.Popen([sys.executable, "-m", "nsfleet", "serve"], env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log.open("ab"),
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(self.log.read_text()[-2000:])
            if ready(f"http://127.0.0.1:{self.http_port}"):
                return
            time.sleep(0.1)
        raise TimeoutError(self.log.read_text()[-2000:])

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


def wait_ready(base_url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready(base_url):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{base_url}/readyz")
        time.sleep(0.05)


def start_haproxy(config: Path, log: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([HAPROXY, "-f", str(config), "-db"], stdout=log.open("ab"),
                            stderr=subprocess.STDOUT)
    time.sleep(1.0)
    if proc.poll() is not None:
        raise RuntimeError(log.read_text()[-2000:])
    return proc


def haproxy_config(workers: list[Worker], remoting_port: int, http_port: int) -> str:
    remoting = "\n".join(
        f"    server w{i} 127.0.0.1:{w.remoting_port} send-proxy-v2 check inter 500 fastinter 100 "
        "fall 1 rise 1" for i, w in enumerate(workers))
    http = "\n".join(f"    server w{i} 127.0.0.1:{w.http_port} check inter 500 fastinter 100 "
                     "fall 1 rise 1" for i, w in enumerate(workers))
    # Remoting: TCP, PROXY v2 toward the workers (they read the client's address from it). HTTP:
    # plain (the HTTP PROXY support is not used here), GETs retried on another server.
    return f"""global
    maxconn 4096
defaults
    timeout connect 1s
    timeout client 300s
    timeout server 300s
    retries 3
    option redispatch
frontend remoting
    mode tcp
    bind 127.0.0.1:{remoting_port}
    default_backend remoting
backend remoting
    mode tcp
    balance roundrobin
{remoting}
frontend http
    mode http
    bind 127.0.0.1:{http_port}
    default_backend http
backend http
    mode http
    balance roundrobin
    option httpchk GET /readyz
    retry-on all-retryable-errors
{http}
"""


# --- a remoting connection ----------------------------------------------------------------------

class Conn:
    """One TCP connection; responses matched to requests by opaque."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.closed = False
        self._task = asyncio.create_task(self._read(reader))

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port),
                                                ATTEMPT_TIMEOUT)
        return cls(reader, writer)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for cmd in decoder.feed(data):
                    fut = self.pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
        except (OSError, ValueError):
            pass
        finally:
            self.closed = True
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection closed"))

    async def call(self, code: int, ext: dict[str, str], body: bytes | None = None
                   ) -> RemotingCommand:
        if self.closed:
            raise ConnectionError("connection closed")
        cmd = RemotingCommand(code=code, version=CURRENT_VERSION, opaque=next(_opaque),
                              ext_fields=ext, body=body)
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self.pending[cmd.opaque] = fut
        self.writer.write(encode_frame(cmd))
        try:
            return await asyncio.wait_for(fut, ATTEMPT_TIMEOUT)
        finally:
            self.pending.pop(cmd.opaque, None)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


# --- brokers -------------------------------------------------------------------------------------

def register_request(b: SimBroker, counter: int, timeout_ms: int) -> tuple[dict[str, str], bytes]:
    """A 5.x broker's REGISTER_BROKER (BrokerOuterAPI.registerBrokerAll), uncompressed JSON."""
    ident = b.identity
    table = {tc.topic_name: {"topicName": tc.topic_name, "readQueueNums": tc.read_queue_nums,
                             "writeQueueNums": tc.write_queue_nums, "perm": tc.perm,
                             "topicSysFlag": tc.topic_sys_flag, "order": tc.order,
                             "topicFilterType": "SINGLE_TAG", "attributes": {}}
             for tc in b.topics}
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "timestamp": 1_700_000_000_000, "stateVersion": 0},
        "topicConfigTable": table}}).encode()
    ext = {"brokerAddr": ident.broker_addr, "brokerId": str(ident.broker_id),
           "brokerName": ident.broker_name, "clusterName": ident.cluster,
           "haServerAddr": ident.ha_server_addr or "", "enableActingMaster": "false",
           "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
           "heartbeatTimeoutMillis": str(timeout_ms)}
    return ext, body


async def broker_loop(b: SimBroker, lb_port: int, period: float, timeout_ms: int,
                      phases: Phases, acked: set[str], stop: asyncio.Event) -> None:
    """Registers every ``period`` over one connection through HAProxy; a failed cycle drops the
    connection, and the next cycle reconnects (a Java broker's registerBrokerAll)."""
    ext, body = register_request(b, 1, timeout_ms)
    conn: Conn | None = None
    await asyncio.sleep(random.uniform(0, period))
    try:
        while not stop.is_set():
            counts = phases.registrations[phases.current]
            try:
                if conn is None or conn.closed:
                    conn = await Conn.open(lb_port)
                reply = await conn.call(REGISTER_BROKER, ext, body)
                if reply.code != SUCCESS:
                    raise RuntimeError(f"code {reply.code}")
                counts.ok += 1
                acked.add(b.identity.broker_addr)
            except (OSError, TimeoutError, RuntimeError) as exc:
                counts.failed += 1
                counts.errors[type(exc).__name__ + " " + str(exc)[:60]] += 1
                if conn is not None:
                    await conn.close()
                conn = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), period)
    finally:
        if conn is not None:
            await conn.close()


# --- readers -------------------------------------------------------------------------------------

async def remoting_reader(kind: str, ports: list[int], attempts: int, topics: list[str],
                          phases: Phases, stop: asyncio.Event) -> None:
    """One connection at a time; on failure the next address of ``ports`` (cycled) is tried,
    up to ``attempts`` times."""
    rotation = itertools.cycle(random.sample(ports, len(ports)))
    port, conn = next(rotation), None
    try:
        while not stop.is_set():
            counts = phases.reads[phases.current][kind]
            topic = random.choice(topics)
            for _ in range(attempts):
                try:
                    if conn is None or conn.closed:
                        conn = await Conn.open(port)
                    reply = await conn.call(GET_ROUTE, {"topic": topic})
                    if reply.code != SUCCESS:
                        raise RuntimeError(f"code {reply.code} {reply.remark or ''}"[:80])
                    counts.ok += 1
                    break
                except (OSError, TimeoutError, RuntimeError) as exc:
                    counts.attempts_failed += 1
                    counts.errors[type(exc).__name__ + " " + str(exc)[:80]] += 1
                    if conn is not None:
                        await conn.close()
                    port, conn = next(rotation), None
                    await asyncio.sleep(0.05)
            else:
                counts.failed += 1
            await asyncio.sleep(READ_PAUSE)
    finally:
        if conn is not None:
            await conn.close()


async def http_reader(kind: str, urls: list[str], topics: list[str], phases: Phases,
                      stop: asyncio.Event) -> None:
    """FleetHttp: fails over through ``urls`` on a connection error, timeout or 5xx. With one
    URL (the load balancer) it is asked again, LB_ATTEMPTS times in all."""
    client = FleetHttp(urls * (LB_ATTEMPTS if len(urls) == 1 else 1), timeout=ATTEMPT_TIMEOUT,
                       shuffle=True)
    try:
        while not stop.is_set():
            counts = phases.reads[phases.current][kind]
            topic = random.choice(topics)
            failovers = client.failovers
            try:
                await client.request("GET", f"/v1/routes/{topic}")
                counts.ok += 1
            except FleetUnavailable as exc:
                counts.failed += 1
                counts.errors[str(exc)[:120]] += 1
            except aiohttp.ClientError as exc:
                counts.failed += 1
                counts.errors[type(exc).__name__] += 1
            counts.attempts_failed += client.failovers - failovers
            await asyncio.sleep(READ_PAUSE)
    finally:
        await client.close()


# --- the faults ----------------------------------------------------------------------------------

async def chaos(workers: list[Worker], redis_server: RedisServer, lb_http: str,
                phases: Phases, warmup: float, faults_end: float) -> None:
    """SIGKILL a random worker and restart it every 20-30 s; restart Redis once, in the middle
    of the fault window, between two kills. The Redis fault lasts until Redis answers and the
    load balancer serves /readyz again (its health checks marked every worker down, as they
    should, while the workers had no Redis)."""
    async def until(t: float) -> None:
        await asyncio.sleep(max(0.0, t - phases.elapsed()))

    async def kill_one() -> None:
        w = random.choice(workers)
        assert w.proc is not None
        t0 = phases.elapsed()
        phases.enter("worker-kill")
        w.proc.send_signal(signal.SIGKILL)
        w.proc.wait()
        await asyncio.to_thread(w.start)
        phases.enter("steady")
        phases.faults.append({"at": round(t0, 1), "fault": f"SIGKILL worker :{w.remoting_port}",
                              "back_after_s": round(phases.elapsed() - t0, 2)})

    async def restart_redis() -> None:
        t0 = phases.elapsed()
        phases.enter("redis-restart")
        await asyncio.to_thread(redis_server.stop)
        await asyncio.sleep(3.0)
        await asyncio.to_thread(redis_server.start)
        await asyncio.to_thread(wait_ready, lb_http)
        phases.enter("steady")
        phases.faults.append({"at": round(t0, 1), "fault": "Redis restart (SIGTERM, 3 s down)",
                              "back_after_s": round(phases.elapsed() - t0, 2)})

    redis_done = False
    middle = (warmup + faults_end) / 2
    await until(warmup)
    while phases.elapsed() < faults_end:
        await kill_one()
        next_kill = phases.elapsed() + random.uniform(20, 30)
        if not redis_done and (next_kill > middle or next_kill > faults_end):
            await until((phases.elapsed() + min(next_kill, faults_end)) / 2)
            await restart_redis()
            redis_done = True
        if next_kill > faults_end:
            break
        await until(next_kill)
    if not redis_done:
        await restart_redis()
    phases.enter("recovered")


# --- checks after the run ------------------------------------------------------------------------

async def lost_registrations(redis_url: str, brokers: list[SimBroker],
                             acked: set[str]) -> dict[str, Any]:
    """Acknowledged brokers whose live row, or (masters) whose topics' queue rows, are gone."""
    keys = Keys(NAMESPACE)
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        pipe = client.pipeline(transaction=False)
        for b in brokers:
            pipe.exists(keys.broker(b.identity.cluster, b.identity.broker_addr))
        live = await pipe.execute()
        pipe = client.pipeline(transaction=False)
        expected = [(tc.topic_name, b.identity.broker_name) for b in brokers
                    if b.identity.broker_id == 0 for tc in b.topics]
        for topic, name in expected:
            pipe.hexists(keys.topic_routes(topic), name)
        queues = await pipe.execute()
        problems = await invariants.orphans(client, keys)
    finally:
        await client.aclose()
    missing = [b.identity.broker_addr for b, ok in zip(brokers, live, strict=True)
               if not ok and b.identity.broker_addr in acked]
    return {"acknowledged_brokers": len(acked), "lost_registrations": len(missing),
            "lost_examples": missing[:5],
            "missing_queue_rows": sum(1 for ok in queues if not ok),
            "queue_rows_expected": len(expected),
            "invariant_problems": len(problems), "invariant_examples": problems[:5]}


def summarize(phases: Phases) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("steady", "worker-kill", "redis-restart", "recovered"):
        reads = phases.reads.get(name, {})
        regs = phases.registrations.get(name, Counts())
        out[name] = {
            "seconds": round(phases.seconds.get(name, 0.0), 1),
            "reads": {kind: {"ok": c.ok, "failed": c.failed,
                             "attempts_failed": c.attempts_failed,
                             "errors": dict(sorted(c.errors.items(), key=lambda e: -e[1])[:3])}
                      for kind, c in sorted(reads.items())},
            "failed_reads": sum(c.failed for c in reads.values()),
            "reads_total": sum(c.ok + c.failed for c in reads.values()),
            "registrations": {"ok": regs.ok, "failed": regs.failed,
                              "errors": dict(sorted(regs.errors.items(),
                                                    key=lambda e: -e[1])[:3])},
        }
    return out


# --- the run -------------------------------------------------------------------------------------

async def soak(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    plan = make_plan(args.brokers, args.topics)
    user_topics = sorted(t for t in plan.topics if t.startswith("TopicTest-"))
    redis_server = RedisServer(tmp / "redis", appendonly=True).start()
    workers = [Worker(redis_server.url, tmp / f"worker{i}.log") for i in range(3)]
    haproxy: subprocess.Popen[bytes] | None = None
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    try:
        for w in workers:
            await asyncio.to_thread(w.start)
        lb_remoting, lb_http = free_port(), free_port()
        config = tmp / "haproxy.cfg"
        config.write_text(haproxy_config(workers, lb_remoting, lb_http))
        haproxy = await asyncio.to_thread(start_haproxy, config, tmp / "haproxy.log")

        phases = Phases()
        acked: set[str] = set()
        timeout_ms = int(args.broker_timeout * 1000)
        tasks += [asyncio.create_task(broker_loop(b, lb_remoting, args.period, timeout_ms,
                                                  phases, acked, stop)) for b in plan.brokers]
        # Readers start once every broker has registered (a route read before that may find
        # no route, which is not a fault).
        registered_by = time.monotonic() + args.period + 30
        while len(acked) < len(plan.brokers) and time.monotonic() < registered_by:  # noqa: ASYNC110
            await asyncio.sleep(0.2)  # (acked is filled by 200 tasks: polling it is simplest)
        direct_remoting = [w.remoting_port for w in workers]
        direct_http = [f"http://127.0.0.1:{w.http_port}" for w in workers]
        for _ in range(args.readers):
            tasks += [
                asyncio.create_task(remoting_reader("remoting-via-haproxy", [lb_remoting],
                                                    LB_ATTEMPTS, user_topics, phases, stop)),
                asyncio.create_task(remoting_reader("remoting-direct", direct_remoting,
                                                    len(workers), user_topics, phases, stop)),
                asyncio.create_task(http_reader("http-via-haproxy", [f"http://127.0.0.1:{lb_http}"],
                                                user_topics, phases, stop)),
                asyncio.create_task(http_reader("http-direct", direct_http, user_topics,
                                                phases, stop)),
            ]
        phases.started = time.monotonic()
        recovery = max(args.recovery, 1.5 * args.period)
        faults_end = args.duration - recovery
        await chaos(workers, redis_server, f"http://127.0.0.1:{lb_http}", phases, args.warmup,
                    faults_end)
        await asyncio.sleep(max(0.0, args.duration - phases.elapsed()))
        phases.close()
        lost = await lost_registrations(redis_server.url, plan.brokers, acked)
        stop.set()
        await asyncio.gather(*tasks)
        return {"plan": {"brokers": len(plan.brokers), "groups": plan.groups,
                         "topics": len(plan.topics),
                         "topics_per_broker": round(sum(len(b.topics) for b in plan.brokers)
                                                    / len(plan.brokers), 1)},
                "faults": phases.faults, "phases": summarize(phases), "after": lost}
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if haproxy is not None and haproxy.poll() is None:
            haproxy.terminate()
            haproxy.wait(10)
        for w in workers:
            w.stop(signal.SIGKILL)
        redis_server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=180.0, help="seconds (120-300)")
    parser.add_argument("--quick", action="store_true", help="a 60 s run")
    parser.add_argument("--brokers", type=int, default=200)
    parser.add_argument("--topics", type=int, default=2500,
                        help="user topics of the plan (2500 gives ~50 topics per broker)")
    parser.add_argument("--period", type=float, default=10.0,
                        help="seconds between a broker's registrations (Java: 30)")
    parser.add_argument("--broker-timeout", type=float, default=40.0,
                        help="heartbeatTimeoutMillis the brokers send, in seconds")
    parser.add_argument("--readers", type=int, default=2, help="readers of each kind")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds before the first fault")
    parser.add_argument("--recovery", type=float, default=20.0,
                        help="seconds after the last fault (the recovered phase)")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.warmup, args.recovery = 60.0, 8.0, 15.0
    if not os.access(HAPROXY, os.X_OK):
        sys.exit(f"{HAPROXY} not found (Debian package haproxy)")
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp:
        results.update(asyncio.run(asyncio.wait_for(soak(args, Path(tmp)),
                                                    args.duration + 180)))
    write_results("soak", results)


if __name__ == "__main__":
    main()
