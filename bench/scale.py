"""RocketMQ's largest clusters on one fleet (issue 32): B brokers x T topics, every broker serving
every topic, two workers on one Redis, over remoting, side by side with the real Java NameServer.

Phases, each on the same throwaway redis-server and two `nsfleet serve` workers:
* storm: every broker sends its first REGISTER_BROKER at once (half to each worker, one
  connection each) while a separate reader process sends GET_ROUTEINFO_BY_TOPIC for random topics
  through the second worker, 100 a second (``--read-rate``; the same to the Java NameServer):
  storm time, reads (p50/p99/max, failed), every route then listing every broker, the longest
  Redis command (SLOWLOG), and where the time went (CPU seconds of Redis, each worker and the
  sender over the storm);
* storm without reads: the same storm on a Redis and workers of their own with no reader, so
  what the reads cost the storm shows;
* storm rounds (``--storm-rounds``): the storm with reads again, each on a fresh Redis and
  workers, alternating with the Java NameServer's storm on a fresh JVM (``--java``): every
  sample, and the medians over them and the first storm (this machine is shared: one storm
  varies by ±10 % from run to run);
* memory: Redis used_memory per queue row (B x T rows); each worker's RSS and peak RSS after
  the storm and after the rounds;
* rounds: the Redis time (INFO commandstats) of one steady-state 30 s round of every broker:
  unchanged whole re-registrations (the same DataVersion: forceRegister's default) after a
  split round and after a whole round (whole_repeated: the same bytes again), and an
  unchanged 5.x split round (chunks of 800, a new DataVersion each), each round started past the
  workers' unchanged-chunk window (as a round 30 s after the last is) and measured until the
  DataVersions they answered from their memo are written (split_over_whole), and Redis's own
  CPU over the round less its idle CPU over as long (split_over_whole_redis_cpu: script time is
  wall time inside a command, which the cores shared with the workers stretch);
* departures: two thirds of the brokers close their connections at once (the cascades remove
  their rows) while one more broker sends UNREGISTER_BROKER: its answer time, reads meanwhile,
  and when the last row is gone;
* expiry: the brokers left (a third of them) reach their deadline at once: how long until the
  sweeps removed every row, reads meanwhile, the longest Redis command;
* analytics: `nsfleet analytics` over the namespace, on local Spark and on a Spark standalone
  cluster (a master and a worker started here from pyspark's own Spark), wall time;
* java: the same storm and rounds against the Java NameServer (`--java`), as ratios, and the
  storm without reads on a fresh JVM beside nsfleet's (the registrations alone);
* worker_log_events: what the workers logged (warnings and worse) by the storm's end, by event.

Every broker sends the same table by default, so a worker decodes and encodes it once and finds
it in its memo for the other brokers; ``--distinct-tables`` gives each broker a table of its own
(the same topics, queue counts and sysFlag of its own), as brokers of a real fleet send, so every
table is decoded and encoded (and its split rounds are chunks of its own table).

Brokers' bodies are encoded as a 5.x broker's RegisterBrokerBody JSON (tests/support/
register_bodies.py, as bench/remoting_register.py). The full shape is `--brokers 300`; the default
runs in a few minutes on a 2-core machine. Writes bench/results/scale.json.

    .venv/bin/python bench/scale.py [--brokers 60] [--topics 10000] [--java]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

import redis.asyncio as aioredis
from benchlib import free_port, new_results, start_worker, summary, write_results

from nsfleet.domain.model import DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import scripts
from nsfleet.store.unchanged_chunks import FLUSH_INTERVAL, WINDOW
from nsfleet.wire.bodies import RegisterBody, crc32
from tests.support.register_bodies import encode_register_body
from tests.support.remoting_client import ONEWAY_FLAG, V5_3_3, Command, encode

JAVA = Path(__file__).resolve().parents[2] / "shared" / "java-rocketmq" / "namesrv.sh"
REGISTER, UNREGISTER, GET_ROUTE, HEARTBEAT = 103, 104, 105, 904
SPLIT = 800  # splitRegistrationSize
ROUNDS = 5  # alternations of the whole, split and idle rounds; medians are kept
# The brokers' heartbeatTimeoutMillis: at the full shape the phases before the expiry take longer
# than the default 120 s, and no broker may expire before that phase moves their deadlines.
BROKER_TIMEOUT_MS = 3_600_000
# Reads a second during the storms, departures and expiry, the same for both sides (--read-rate).
READ_RATE = 100.0
SCRIPT_BY_SHA = {hashlib.sha1(scripts.source(n).encode()).hexdigest(): n
                 for n in scripts.SCRIPT_NAMES}


def topic(i: int) -> str:
    return f"Topic-{i:05d}"


def body(topics: list[int], counter: int, broker: int | None = None) -> bytes:
    """A broker's table of ``topics``: 8 queues each, the same bytes for every broker; or,
    given ``broker``, queue counts and sysFlag of that broker's own (``--distinct-tables``)."""
    if broker is None:
        table = {topic(i): TopicConfig(topic(i), 8, 8, 6) for i in topics}
    else:
        reads, writes, flag = 1 + broker % 16, 1 + broker // 16 % 16, broker // 256 % 8
        table = {topic(i): TopicConfig(topic(i), reads, writes, 6, flag) for i in topics}
    return encode_register_body(
        RegisterBody(DataVersion(counter, 1_700_000_000_000 + counter, 0), table, []),
        compressed=False, version=V5_3_3)


def whole_tables(args: argparse.Namespace) -> list[bytes]:
    """Each broker's first REGISTER_BROKER body, by broker: one table shared by all, or with
    ``--distinct-tables`` a table of each broker's own (the same topics, other queue counts), so
    no worker decodes or encodes a table once for many brokers."""
    if not args.distinct_tables:
        return [body(list(range(args.topics)), 1)] * args.brokers
    return [body(list(range(args.topics)), 1, broker=b) for b in range(args.brokers)]


def split_tables(args: argparse.Namespace) -> list[list[list[bytes]]]:
    """Each broker's 5.x split registration, by broker then round: two rounds of chunks of
    ``SPLIT`` topics, each chunk under a DataVersion of its own, the table the broker's whole
    registration sends (so an unchanged split round is one)."""
    def rounds(broker: int | None) -> list[list[bytes]]:
        return [[body(list(range(i, min(i + SPLIT, args.topics))), 100 * r + i // SPLIT, broker)
                 for i in range(0, args.topics, SPLIT)] for r in (1, 2)]
    if not args.distinct_tables:
        return [rounds(None)] * args.brokers
    return [rounds(b) for b in range(args.brokers)]


def addr(broker: int) -> str:
    return f"10.{4 + broker // 250}.{broker % 250}.1:10911"


def register_frame(broker: int, data: bytes, opaque: int) -> bytes:
    ext = {"brokerAddr": addr(broker), "brokerId": "0", "brokerName": f"big-{broker}",
           "clusterName": "scale", "haServerAddr": addr(broker), "enableActingMaster": "false",
           "compressed": "false", "bodyCrc32": str(crc32(data)),
           "heartbeatTimeoutMillis": str(BROKER_TIMEOUT_MS)}
    return encode(Command(REGISTER, ext, data, V5_3_3, opaque))


def unregister_frame(broker: int, opaque: int) -> bytes:
    ext = {"brokerAddr": addr(broker), "brokerId": "0", "brokerName": f"big-{broker}",
           "clusterName": "scale"}
    return encode(Command(UNREGISTER, ext, None, V5_3_3, opaque))


def heartbeat_frame(broker: int) -> bytes:
    ext = {"brokerAddr": addr(broker), "brokerName": f"big-{broker}", "clusterName": "scale"}
    return encode(Command(HEARTBEAT, ext, None, V5_3_3, flag=ONEWAY_FLAG))


@contextlib.asynccontextmanager
async def kept_alive(conns: list[Conn]) -> AsyncIterator[None]:
    """The brokers' traffic while a long phase runs (the analytics take minutes at the full
    shape): a oneway BROKER_HEARTBEAT on every connection every 30 s, or the workers close them
    as idle after 120 s, as Java does, and the brokers leave with them."""
    async def beat() -> None:
        while True:
            await asyncio.sleep(30)
            for b, c in enumerate(conns):
                c.writer.write(heartbeat_frame(b))

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


async def answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    (length,) = struct.unpack(">i", await reader.readexactly(4))
    data = await reader.readexactly(length)
    header_len = struct.unpack_from(">I", data)[0] & 0xFFFFFF
    header = json.loads(data[4:4 + header_len])
    return int(header["code"]), data[4 + header_len:]


class Conn:
    """One broker's connection: frames sent and answered one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def call(self, frame: bytes) -> float:
        started = time.perf_counter()
        self.writer.write(frame)
        code, _ = await answer(self.reader)
        if code != 0:
            raise RuntimeError(f"answered code {code}")
        return time.perf_counter() - started

    def close(self) -> None:
        self.writer.close()


# --- the reader process ------------------------------------------------------------------------


def reader_main(port: int, topics: int, rate: float, stop: Any, out: Any) -> None:
    """GET_ROUTEINFO_BY_TOPIC for random topics on 4 connections until ``stop``: latencies (ms)
    and failures (not SUCCESS/TOPIC_NOT_EXIST, or no answer within 3 s) go to ``out``. At
    ``rate`` reads a second in all (each connection on its own schedule; a read answered late
    is followed by the next at once, with no catching up); 0: each read 2 ms after the last
    answer, so the side that answers faster is sent more reads."""
    async def one(samples: list[float], failed: list[int]) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        opaque = 0
        interval = 4 / rate if rate else 0.0
        next_at = time.perf_counter() + random.uniform(0, interval)
        while not stop.is_set():
            if interval:
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
                next_at = max(next_at + interval, time.perf_counter())
            opaque += 1
            frame = encode(Command(GET_ROUTE, {"topic": topic(random.randrange(topics))}, None,
                                   V5_3_3, opaque))
            started = time.perf_counter()
            writer.write(frame)
            try:
                code, _ = await asyncio.wait_for(answer(reader), 3.0)
            except TimeoutError:
                failed[0] += 1
                break
            samples.append((time.perf_counter() - started) * 1000)
            if code not in (0, 17):
                failed[0] += 1
            if not interval:
                await asyncio.sleep(0.002)
        writer.close()

    async def main() -> None:
        samples: list[float] = []
        failed = [0]
        await asyncio.gather(*(one(samples, failed) for _ in range(4)))
        out.put((samples, failed[0]))

    asyncio.run(main())


class Reads:
    """Reads through one worker in their own process (a client sharing the sender's GIL would
    measure the GIL)."""

    def __init__(self, port: int, topics: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop, self.out = ctx.Event(), ctx.Queue()
        self.proc = ctx.Process(target=reader_main,
                                args=(port, topics, READ_RATE, self.stop, self.out))

    def __enter__(self) -> Reads:
        self.proc.start()
        time.sleep(1.0)  # its interpreter and connections up
        return self

    def result(self) -> dict[str, Any]:
        self.stop.set()
        samples, failed = self.out.get(timeout=30)
        self.proc.join(10)
        return {**summary(samples or [0.0], 1), "failed": failed}

    def __exit__(self, *exc: object) -> None:
        if self.proc.is_alive():
            self.proc.kill()


# --- CPU accounting ------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.started = time.perf_counter()

    def read(self) -> dict[str, float]:
        out = {f"{name}_cpu_s": round(cpu_seconds(pid) - self.start[name], 2)
               for name, pid in self.pids.items()}
        out["wall_s"] = round(time.perf_counter() - self.started, 2)
        return out


class CpuTimeline:
    """Each process's CPU every ``SAMPLE_S`` of a storm, as a % of one core: where a storm's
    time goes. With tables of their own it has two phases (the eighth pass, docs/table-shape.md):
    the workers decoding and encoding tables, with Redis about half busy, then Redis alone
    writing what is left while the workers wait."""

    SAMPLE_S = 0.25

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.samples: list[dict[str, int]] = []

    async def run(self) -> None:
        last = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        while True:
            await asyncio.sleep(self.SAMPLE_S)
            now = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
            self.samples.append({name: round((now[name] - last[name]) / self.SAMPLE_S * 100)
                                 for name in now})
            last = now

    def summary(self) -> dict[str, Any]:
        """The samples, and with Redis and workers among the processes: how long the workers
        used a core or more between them (decoding), Redis's mean % of a core meanwhile, and
        Redis's after the last such sample, while it wrote alone."""
        out: dict[str, Any] = {"sample_s": self.SAMPLE_S, "pct_of_a_core": self.samples}
        workers = [n for n in self.pids if n.startswith("worker")]
        if "redis" not in self.pids or not workers or not self.samples:
            return out
        busy = [i for i, s in enumerate(self.samples) if sum(s[n] for n in workers) >= 100]
        after = self.samples[busy[-1] + 1:] if busy else self.samples
        out["workers_decoding_s"] = round(len(busy) * self.SAMPLE_S, 2)
        out["redis_pct_while_workers_decode"] = (
            round(statistics.mean(self.samples[i]["redis"] for i in busy)) if busy else None)
        out["redis_alone_s"] = round(len(after) * self.SAMPLE_S, 2)
        out["redis_pct_after"] = (round(statistics.mean(s["redis"] for s in after))
                                  if after else None)
        return out


# --- phases ------------------------------------------------------------------------------------


async def storm(ports: list[int], brokers: int, frame_of: Any, read_port: int, topics: int,
                pids: dict[str, int], *, reads: bool = True) -> tuple[dict[str, Any], list[Conn]]:
    conns = [await Conn.open(ports[b % len(ports)]) for b in range(brokers)]
    # Built before the clock starts: the sender's encoding is neither side's work (built inside
    # it until the tenth pass: 0.4-1.6 s of every storm at 300 x 10k, both sides').
    frames = [frame_of(b, 1) for b in range(brokers)]
    with Reads(read_port, topics) if reads else contextlib.nullcontext() as reader:
        meter = CpuMeter(pids)
        timeline = CpuTimeline(pids)
        sampling = asyncio.create_task(timeline.run())
        started = time.perf_counter()
        times = await asyncio.gather(*(c.call(f) for f, c in zip(frames, conns, strict=True)))
        elapsed = time.perf_counter() - started
        cpu = meter.read()
        sampling.cancel()
        read = reader.result() if reader is not None else None
    result = {"storm_s": round(elapsed, 2), "slowest_broker_s": round(max(times), 2),
              "cpu": cpu, "cpu_timeline": timeline.summary()}
    if read is not None:
        result["reads_during_ms"] = read
    return result, conns


@dataclass
class Fleet:
    """A throwaway redis-server and two `nsfleet serve` workers on it."""

    server: RedisServer
    client: aioredis.Redis
    tmp: Path
    workers: list[tuple[subprocess.Popen[bytes], int, int]]

    @property
    def ports(self) -> list[int]:
        return [remoting for _, _, remoting in self.workers]

    async def redis_pid(self) -> int:
        return int((await self.client.info("server"))["process_id"])

    def log_events(self) -> dict[str, int]:
        """What the workers logged so far (warnings and worse), by event: a storm that cost a
        worker its change feed, or its store, shows here."""
        seen: Counter[str] = Counter()
        for i in range(len(self.workers)):
            for line in (self.tmp / f"w{i}.log").read_text(errors="replace").splitlines():
                try:
                    event = str(json.loads(line).get("event", line))
                except (ValueError, AttributeError):
                    event = line
                seen[event[:160]] += 1
        return dict(seen)


@contextlib.asynccontextmanager
async def fleet() -> AsyncIterator[Fleet]:
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        client = aioredis.Redis(host=server.host, port=server.port, decode_responses=True)
        workers = [start_worker(server.url, Path(tmp) / f"w{i}.log") for i in range(2)]
        try:
            yield Fleet(server, client, Path(tmp), workers)
        finally:
            for proc, _, _ in workers:
                proc.send_signal(signal.SIGTERM)
            for proc, _, _ in workers:
                proc.wait(30)
            await client.aclose()


def workers_rss(f: Fleet) -> dict[str, list[int]]:
    """Each worker's RSS now and at its peak so far, MiB (the Helm chart's limit: 512)."""
    status = [Path(f"/proc/{proc.pid}/status").read_text() for proc, _, _ in f.workers]
    return {key: [int(text.split(f"{field}:")[1].split()[0]) // 1024 for text in status]
            for key, field in (("rss_mib", "VmRSS"), ("peak_rss_mib", "VmHWM"))}


def whole_frames(wholes: list[bytes]) -> Any:
    """Broker b's REGISTER_BROKER of its whole table."""
    return lambda b, opaque: register_frame(b, wholes[b], opaque)


async def storm_on_own_fleet(args: argparse.Namespace, wholes: list[bytes], *,
                             reads: bool) -> dict[str, Any]:
    """The storm on a Redis and workers of its own. Without reads, beside the storm with them:
    what the route reads made during it cost the registrations (each is a script of ~6 us of
    Redis per group of the route, bench/route_cost.py)."""
    async with fleet() as f:
        await f.client.config_resetstat()
        result, conns = await storm(f.ports, args.brokers, whole_frames(wholes), f.ports[1],
                                    args.topics, {"redis": await f.redis_pid()}, reads=reads)
        result["script_s"] = round(await script_usec(f.client) / 1e6, 2)
        result["worker_log_events"] = f.log_events()
        for conn in conns:
            conn.close()
    return result


async def routes_list_every_broker(port: int, topics: int, brokers: int) -> bool:
    conn = await Conn.open(port)
    try:
        for i, t in enumerate(random.sample(range(topics), min(20, topics))):
            conn.writer.write(encode(Command(GET_ROUTE, {"topic": topic(t)}, None, V5_3_3, i)))
            code, data = await answer(conn.reader)
            if code != 0 or len(json.loads(data)["brokerDatas"]) != brokers:
                return False
        return True
    finally:
        conn.close()


async def script_usec(client: aioredis.Redis) -> int:
    stats = await client.info("commandstats")
    return sum(int(stats[n]["usec"]) for n in ("cmdstat_evalsha", "cmdstat_eval") if n in stats)


async def redis_cpu_ms(client: aioredis.Redis) -> float:
    stats = await client.info("cpu")
    return (float(stats["used_cpu_user"]) + float(stats["used_cpu_sys"])) * 1000


async def script_calls(client: aioredis.Redis) -> int:
    stats = await client.info("commandstats")
    return sum(int(stats[n]["calls"]) for n in ("cmdstat_evalsha", "cmdstat_eval") if n in stats)


async def by_command(client: aioredis.Redis) -> dict[str, float]:
    """Redis time by command (the commands scripts run are counted too), the biggest first."""
    stats = await client.info("commandstats")
    usec = {name.removeprefix("cmdstat_"): int(v["usec"]) for name, v in stats.items()}
    top = sorted(usec.items(), key=lambda kv: -kv[1])[:12]
    return {name: round(us / 1000, 1) for name, us in top}


async def longest_command_ms(client: aioredis.Redis) -> dict[str, float]:
    """The longest Redis commands (SLOWLOG, past 1 ms): ms by command and first key."""
    entries = sorted(await client.slowlog_get(10_000), key=lambda e: -int(e["duration"]))
    out: dict[str, float] = {}
    for e in entries:
        command = e["command"].decode() if isinstance(e["command"], bytes) else e["command"]
        words = command.split(" ")
        name = (f"EVALSHA {SCRIPT_BY_SHA.get(words[1], words[1])}.lua"
                if words[0].lower() == "evalsha" else " ".join(words[:2]))
        out.setdefault(name[:80], round(int(e["duration"]) / 1000, 2))
        if len(out) == 3:
            break
    return out


async def nsfleet_side(args: argparse.Namespace, wholes: list[bytes],
                       split_bodies: list[list[list[bytes]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with fleet() as f:
        client, ports = f.client, f.ports
        await client.config_set("slowlog-log-slower-than", 1000)
        await client.config_set("slowlog-max-len", 10_000)
        pids = {"redis": await f.redis_pid(), "worker1": f.workers[0][0].pid,
                "worker2": f.workers[1][0].pid, "sender": os.getpid()}
        base_mem = int((await client.info("memory"))["used_memory"])
        await client.config_resetstat()
        await client.slowlog_reset()
        result, conns = await storm(ports, args.brokers, whole_frames(wholes), ports[1],
                                    args.topics, pids)
        result["script_s"] = round(await script_usec(client) / 1e6, 2)
        result["redis_ms_by_command"] = await by_command(client)
        result["longest_redis_command_ms"] = await longest_command_ms(client)
        result["every_route_lists_every_broker"] = await routes_list_every_broker(
            ports[1], args.topics, args.brokers)
        result["worker_log_events"] = f.log_events()
        out["storm"] = result
        rows = args.brokers * args.topics
        used = int((await client.info("memory"))["used_memory"]) - base_mem
        out["memory"] = {"queue_rows": rows, "redis_bytes": used,
                         "bytes_per_row": round(used / rows, 1),
                         "workers_after_storm": workers_rss(f)}
        out["rounds"] = await rounds(client, conns, wholes, split_bodies, pids)
        out["memory"]["workers_after_rounds"] = workers_rss(f)
        if args.analytics:
            async with kept_alive(conns):
                out["analytics"] = await asyncio.to_thread(analytics, f.server.url,
                                                           f.tmp / "report")
                out["analytics_spark_standalone"] = await asyncio.to_thread(
                    spark_standalone_analytics, f.server.url, f.tmp / "spark")
        out["departures"] = await departures(client, conns, ports, args)
        out["expiry"] = await expiry(client, ports, args, range(2 * args.brokers // 3,
                                                                args.brokers - 1))
    return out


async def rounds(client: aioredis.Redis, conns: list[Conn], wholes: list[bytes],
                 split_bodies: list[list[list[bytes]]], pids: dict[str, int]) -> dict[str, Any]:
    """Redis script time of one round of every broker: whole and unchanged (the same frame
    again), then split (every chunk a new DataVersion; the first split round records the
    chunks, the others are measured); and the CPU of Redis and both workers over the round
    (the figure to set beside the JVM's)."""
    out: dict[str, Any] = {}
    samples: dict[str, list[float]] = {"whole_unchanged": [], "whole_repeated": [],
                                       "split_unchanged": []}
    counter = 10

    async def split_round() -> None:
        nonlocal counter
        counter += 1
        async def one(b: int, c: Conn) -> None:
            # every chunk under another DataVersion than before
            for chunk in split_bodies[b][counter % 2]:
                await c.call(register_frame(b, chunk, 0))

        await asyncio.gather(*(one(b, c) for b, c in enumerate(conns)))

    for c_b, c in enumerate(conns):
        await c.call(register_frame(c_b, wholes[c_b], 0))
    await split_round()  # records the chunks
    await split_round()  # proves each unchanged: the workers' memos know every chunk's digest
    calls: dict[str, int] = {}
    cpu: dict[str, list[float]] = {"whole_unchanged": [], "whole_repeated": [],
                                   "split_unchanged": []}
    pids = {k: v for k, v in pids.items() if k != "sender"}

    async def whole_round() -> None:
        await asyncio.gather(*(c.call(register_frame(b, wholes[b], 0))
                               for b, c in enumerate(conns)))

    async def idle_round() -> None:
        pass

    # Redis's own CPU over each round, less what it spends idle over as long: script time is
    # wall time inside a command, which the 2 cores shared with both workers stretch.
    redis_cpu: dict[str, list[float]] = {"whole_unchanged": [], "whole_repeated": [],
                                         "split_unchanged": [], "idle": []}
    # Five alternations: script time is wall time inside a command, which the workers' CPU on
    # the 2 cores Redis shares stretches from one round to the next (1.2-2.6x seen over runs).
    for _ in range(ROUNDS):
        # whole_unchanged follows a split round, so each connection's last body is a chunk;
        # whole_repeated is the whole round sent twice, the second measured: a broker that does
        # not split its registrations sends the same body every 30 s.
        for name, prepare, run in (("whole_unchanged", None, whole_round),
                                   ("whole_repeated", whole_round, whole_round),
                                   ("split_unchanged", None, split_round),
                                   ("idle", None, idle_round)):
            if prepare is not None:
                await asyncio.sleep(WINDOW + 0.5)
                await prepare()
            # A round starts past the memo's window, as one 30 s after the last does.
            await asyncio.sleep(WINDOW + 0.5)
            before, n = await script_usec(client), await script_calls(client)
            cpu_before = await redis_cpu_ms(client)
            meter = CpuMeter(pids)
            await run()
            await asyncio.sleep(FLUSH_INTERVAL + 1.0)  # what the memos answered, written
            used = meter.read()
            redis_cpu[name].append(await redis_cpu_ms(client) - cpu_before)
            if name == "idle":
                continue
            samples[name].append((await script_usec(client) - before) / 1000)
            calls[f"{name}_round_script_calls"] = await script_calls(client) - n
            cpu[name].append(sum(v for k, v in used.items() if k.endswith("_cpu_s")))
    idle = statistics.median(redis_cpu.pop("idle"))
    for name, xs in redis_cpu.items():
        out[f"{name}_round_redis_cpu_ms"] = round(statistics.median(xs) - idle, 2)
    out["split_over_whole_redis_cpu"] = round(
        out["split_unchanged_round_redis_cpu_ms"]
        / max(out["whole_unchanged_round_redis_cpu_ms"], 1e-3), 2)
    out.update(calls)
    for name, xs in cpu.items():
        out[f"{name}_round_cpu_s_redis_and_workers"] = round(statistics.median(xs), 2)
    for name, xs in samples.items():
        out[f"{name}_round_redis_ms"] = round(statistics.median(xs), 2)
        out[f"{name}_round_redis_ms_each"] = [round(x, 2) for x in xs]
    out["split_over_whole"] = round(out["split_unchanged_round_redis_ms"]
                                    / max(out["whole_unchanged_round_redis_ms"], 1e-3), 2)
    return out


def phase_cap(args: argparse.Namespace) -> float:
    """How long the departures and expiry phases may wait for the last row to go: 2 s per
    broker, at least 120 s (the figure is the time taken; the cap only bounds a broken run)."""
    return max(120.0, 2.0 * args.brokers)


async def departures(client: aioredis.Redis, conns: list[Conn], ports: list[int],
                     args: argparse.Namespace) -> dict[str, Any]:
    """Two thirds of the brokers (40 of 60) close their connections at once, and one more
    unregisters meanwhile."""
    leaving = conns[: 2 * len(conns) // 3]
    await client.slowlog_reset()
    with Reads(ports[1], args.topics) as reads:
        started = time.perf_counter()
        for c in leaving:
            c.close()
        unregister = await conns[-1].call(unregister_frame(len(conns) - 1, 1))
        # Until the cascades are done: no removed group left to drain, and a topic's queue data
        # holds only the brokers that stayed (layout 2, a new store's: one hash per topic).
        remaining = len(conns) - len(leaving) - 1
        while time.perf_counter() - started < phase_cap(args):
            if (await client.hlen(f"nsfleet:{{default}}:topic:{topic(0)}") == remaining
                    and not await client.scard("nsfleet:{default}:idx:cleanups")):
                break
            await asyncio.sleep(0.05)
        gone = time.perf_counter() - started
        read = reads.result()
    return {"brokers_leaving": len(leaving), "unregister_answer_s": round(unregister, 2),
            "cascades_done_s": round(gone, 2), "reads_during_ms": read,
            "longest_redis_command_ms": await longest_command_ms(client)}


def analytics(redis_url: str, out: Path, master: str | None = None) -> dict[str, Any]:
    """`nsfleet analytics` over the namespace, on local Spark or on ``master``: its wall time."""
    extra = ["--master", master, "--conf", f"spark.pyspark.python={sys.executable}"] if master \
        else []
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nsfleet", "analytics", "--redis-url", redis_url,
                           "--out", str(out), *extra], capture_output=True, timeout=1800,
                          check=False)
    result: dict[str, Any] = {"wall_s": round(time.perf_counter() - started, 1),
                              "exit": done.returncode}
    if done.returncode:
        result["stderr_tail"] = done.stderr.decode(errors="replace")[-1000:]
    return result


def spark_standalone_analytics(redis_url: str, work: Path) -> dict[str, Any]:
    """`nsfleet analytics` on a Spark standalone cluster started here from pyspark's own Spark
    (a master and one worker with every core of this machine, on loopback), then stopped."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": str(work / "logs"),
           "SPARK_LOCAL_IP": "127.0.0.1"}
    port, ui, worker_ui = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    work.mkdir(parents=True, exist_ok=True)
    procs = [subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host",
                               "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
                              env=env, stdout=(work / "master.log").open("wb"),
                              stderr=subprocess.STDOUT, start_new_session=True)]
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host",
             "127.0.0.1", "--cores", str(os.cpu_count() or 2), "--memory", "4g",
             "--webui-port", str(worker_ui), "--work-dir", str(work / "work")],
            env=env, stdout=(work / "worker.log").open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True))
        deadline = time.monotonic() + 60
        while b"Successfully registered with master" not in (work / "worker.log").read_bytes():
            if time.monotonic() > deadline:
                return {"error": "the Spark standalone worker did not register in 60 s"}
            time.sleep(0.2)
        return {"master": "standalone, 1 worker, every core, on loopback",
                **analytics(redis_url, work / "report", master_url)}
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(30)


async def expiry(client: aioredis.Redis, ports: list[int], args: argparse.Namespace,
                 brokers: range) -> dict[str, Any]:
    """The brokers left after the departures (a third of them all) reach their deadline at
    once, their connections still open: the workers' sweeps (every 10 s) expire them. Their
    deadline is moved to now (the live row's TTL and the deadline set, as time passing would),
    then: how long until the last row is gone, reads meanwhile, the longest Redis command."""
    await client.slowlog_reset()
    seconds, micros = await client.time()
    now_ms = seconds * 1000 + micros // 1000
    with Reads(ports[1], args.topics) as reads:
        started = time.perf_counter()
        for b in brokers:
            await client.zadd("nsfleet:{default}:idx:deadlines", {f"scale\t{addr(b)}": now_ms})
            await client.pexpire(f"nsfleet:{{default}}:broker:scale:{addr(b)}", 1)
        while time.perf_counter() - started < phase_cap(args):
            if (not await client.scard("nsfleet:{default}:idx:topics")
                    and not await client.scard("nsfleet:{default}:idx:cleanups")):
                break
            await asyncio.sleep(0.05)
        gone = time.perf_counter() - started
        read = reads.result()
    return {"brokers_expiring": len(brokers), "rows": len(brokers) * args.topics,
            "all_gone_after_deadline_s": round(gone, 2), "sweep_interval_s": 10,
            "reads_during_ms": read, "longest_redis_command_ms": await longest_command_ms(client)}


# --- Java --------------------------------------------------------------------------------------


def start_java(port: int, heap: str) -> subprocess.Popen[bytes]:
    """The Java NameServer on ``port`` (its own process group, so all of it stops)."""
    log = Path(tempfile.gettempdir()) / f"scale-namesrv-{port}.log"
    with log.open("wb") as out:
        return subprocess.Popen(["bash", str(JAVA), str(port)],
                                env={**os.environ, "NAMESRV_HEAP": heap}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


@contextlib.asynccontextmanager
async def java_namesrv(args: argparse.Namespace) -> AsyncIterator[tuple[int, int]]:
    """A Java NameServer, once it answers: (port, pid)."""
    port = free_port()
    proc = start_java(port, args.java_heap)
    try:
        for _ in range(600):
            try:
                probe = await Conn.open(port)
                probe.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        yield port, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


async def java_storm(port: int, pid: int, args: argparse.Namespace, wholes: list[bytes], *,
                     reads: bool = True) -> tuple[dict[str, Any], list[Conn]]:
    conns = [await Conn.open(port) for _ in range(args.brokers)]
    frames = [register_frame(b, wholes[b], 1) for b in range(args.brokers)]  # as storm()'s
    with Reads(port, args.topics) if reads else contextlib.nullcontext() as reader:
        meter = CpuMeter({"java": pid})
        started = time.perf_counter()
        await asyncio.gather(*(c.call(frame) for frame, c in zip(frames, conns, strict=True)))
        elapsed = time.perf_counter() - started
        cpu = meter.read()
        read = reader.result() if reader is not None else None
    result = {"storm_s": round(elapsed, 2), "cpu": cpu}
    if read is not None:
        result["reads_during_ms"] = read
    return result, conns


async def java_storm_without_reads(args: argparse.Namespace, wholes: list[bytes]) -> dict[str, Any]:
    """The storm alone on a fresh JVM, beside nsfleet's storm without reads: the registrations'
    cost with no reader sharing the two cores."""
    async with java_namesrv(args) as (port, pid):
        result, conns = await java_storm(port, pid, args, wholes, reads=False)
        for conn in conns:
            conn.close()
    return result


async def java_side(args: argparse.Namespace, wholes: list[bytes],
                    split_bodies: list[list[list[bytes]]]) -> dict[str, Any]:
    async with java_namesrv(args) as (port, pid):
        out, conns = await java_storm(port, pid, args, wholes)
        out["every_route_lists_every_broker"] = await routes_list_every_broker(
            port, args.topics, args.brokers)
        # A steady-state round: its CPU (the JVM's, as nsfleet's is Redis time).
        for name, frames in (("whole", lambda b: [register_frame(b, wholes[b], 2)]),
                             ("split", lambda b: [register_frame(b, c, 3)
                                                  for c in split_bodies[b][0]])):
            meter = CpuMeter({"java": pid})

            async def one(b: int, c: Conn, frames: Any = frames) -> None:
                for frame in frames(b):
                    await c.call(frame)

            await asyncio.gather(*(one(b, c) for b, c in enumerate(conns)))
            round_cpu = meter.read()
            out[f"{name}_round_cpu_s"] = round_cpu["java_cpu_s"]
            out[f"{name}_round_wall_s"] = round_cpu["wall_s"]
        for c in conns:
            c.close()
        return out


async def storm_rounds(args: argparse.Namespace, wholes: list[bytes]) -> dict[str, Any]:
    """The storm with reads ``args.storm_rounds`` more times, each on a fresh Redis and workers,
    alternating with the Java NameServer's storm on a fresh JVM (``--java``)."""
    samples: dict[str, list[Any]] = {"nsfleet_storm_s": [], "nsfleet_reads_p99_ms": [],
                                     "nsfleet_reads_max_ms": [], "nsfleet_reads_failed": []}
    if args.java:
        samples["java_storm_s"] = []
    for _ in range(args.storm_rounds):
        result = await storm_on_own_fleet(args, wholes, reads=True)
        samples["nsfleet_storm_s"].append(result["storm_s"])
        read = result["reads_during_ms"]
        samples["nsfleet_reads_p99_ms"].append(read["p99"])
        samples["nsfleet_reads_max_ms"].append(read["max"])
        samples["nsfleet_reads_failed"].append(read["failed"])
        if args.java:
            async with java_namesrv(args) as (port, pid):
                java, conns = await java_storm(port, pid, args, wholes)
                for conn in conns:
                    conn.close()
            samples["java_storm_s"].append(java["storm_s"])
    return samples


def storm_medians(results: dict[str, Any]) -> dict[str, Any]:
    """Medians over the first storm and the storm rounds, nsfleet's and Java's."""
    extra = results["nsfleet"].get("storm_rounds", {})
    storm = results["nsfleet"]["storm"]
    ns = [storm["storm_s"], *extra.get("nsfleet_storm_s", [])]
    out: dict[str, Any] = {
        "samples": len(ns),
        "nsfleet_storm_s": round(statistics.median(ns), 2),
        "nsfleet_reads_p99_ms": round(statistics.median(
            [storm["reads_during_ms"]["p99"], *extra.get("nsfleet_reads_p99_ms", [])]), 1),
        "nsfleet_reads_max_ms": max([storm["reads_during_ms"]["max"],
                                     *extra.get("nsfleet_reads_max_ms", [])]),
        "nsfleet_reads_failed": storm["reads_during_ms"]["failed"]
        + sum(extra.get("nsfleet_reads_failed", [])),
    }
    if "java" in results:
        java = [results["java"]["storm_s"], *extra.get("java_storm_s", [])]
        out["java_storm_s"] = round(statistics.median(java), 2)
        out["nsfleet_over_java"] = round(out["nsfleet_storm_s"] / out["java_storm_s"], 2)
    return out


async def main() -> None:
    global READ_RATE  # the reader processes Reads starts take it from here
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=60)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--java", action="store_true", help="also the Java NameServer")
    parser.add_argument("--java-heap", default="2g")
    parser.add_argument("--skip-nsfleet", action="store_true")
    parser.add_argument("--no-analytics", dest="analytics", action="store_false",
                        help="skip `nsfleet analytics` over the namespace")
    parser.add_argument("--storm-rounds", type=int, default=3,
                        help="more storms with reads, alternating with Java's (medians)")
    parser.add_argument("--distinct-tables", action="store_true",
                        help="every broker a table of its own (queue counts differ), not one "
                             "table sent by all")
    parser.add_argument("--read-rate", type=float, default=READ_RATE,
                        help="route reads a second during the storms (0: each read 2 ms after "
                             "the last answer, as many as the side answers)")
    args = parser.parse_args()
    READ_RATE = args.read_rate
    results = new_results(args)
    results["shared_machine"] = "2 cores shared with other work: compare ratios, not absolutes"
    wholes = whole_tables(args)
    split_bodies = split_tables(args)
    if not args.skip_nsfleet:
        results["nsfleet"] = await nsfleet_side(args, wholes, split_bodies)
        results["nsfleet"]["storm_without_reads"] = await storm_on_own_fleet(args, wholes,
                                                                             reads=False)
    if args.java:
        results["java"] = await java_side(args, wholes, split_bodies)
        results["java"]["storm_without_reads"] = await java_storm_without_reads(args, wholes)
        if "nsfleet" in results:
            results["storm_nsfleet_over_java"] = round(
                results["nsfleet"]["storm"]["storm_s"] / results["java"]["storm_s"], 2)
            results["storm_without_reads_nsfleet_over_java"] = round(
                results["nsfleet"]["storm_without_reads"]["storm_s"]
                / results["java"]["storm_without_reads"]["storm_s"], 2)
    if "nsfleet" in results:
        if args.storm_rounds:
            results["nsfleet"]["storm_rounds"] = await storm_rounds(args, wholes)
        results["storm_medians"] = storm_medians(results)
    write_results("scale", results)


if __name__ == "__main__":
    asyncio.run(main())
