"""Cached route reads per second over remoting and over HTTP with `nsfleet serve --processes P`,
for several P in one run against one Redis, and each P's ratio to one process: does a host's
throughput grow with its cores?

For each P: a fresh `nsfleet serve --processes P` on loopback (route cache on, one registered
broker group), a warm-up, then S seconds of GET_ROUTEINFO_BY_TOPIC (105) from
bench/remoting_load.c (compiled here with gcc; pipelined on many connections, one process per
loader) and S seconds of `GET /v1/routes/T` from wrk (keep-alive connections, one thread per
loader). The CPU each worker process and Redis used in each phase is measured (psutil), so a
row where the generators or Redis were the limit shows it.

    .venv/bin/python bench/cores.py                         # P = 1, 2 (this machine)
    .venv/bin/python bench/cores.py --processes 1,2,4,8,16 --loaders 8 --seconds 10

On a machine with C cores, keep P + loaders <= C (the generators need cores of their own: with
too few, the ratio measures the machine, not nsfleet). Writes bench/results/cores.json (or
--out NAME: bench/results/NAME.json). Needs gcc and wrk (Debian: apt-get install gcc wrk).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
from benchlib import machine, write_results

from nsfleet.redis_server import RedisServer, free_port

HERE = Path(__file__).parent
TOPIC = "CoresTopic"


def start_group(redis_url: str, processes: int, log: Path) -> tuple[subprocess.Popen[bytes],
                                                                     int, int]:
    http_port, remoting_port = free_port(), free_port()
    env = {**os.environ, "NSFLEET_REDIS_URL": redis_url, "NSFLEET_HOST": "127.0.0.1",
           "NSFLEET_HTTP_PORT": str(http_port), "NSFLEET_REMOTING_PORT": str(remoting_port),
           "NSFLEET_LOG_LEVEL": "warning", "NSFLEET_NAMESPACE": "cores",
           "NSFLEET_PROCESSES": str(processes)}
    proc = subprocess.Popen([sys.executable, "-m", "nsfleet", "serve"], env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    answered: set[object] = set()  # each process binds the port once it is ready
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log.read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/readyz",
                                        timeout=1) as resp:
                answered.add(json.loads(resp.read()).get("pid"))
            if len(answered) == processes:
                return proc, http_port, remoting_port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(log.read_text()[-3000:])


def workers(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The processes that serve: the supervisor's children, or the lone worker itself."""
    me = psutil.Process(proc.pid)
    # argv compared whole: the embedded redis-server's path may hold "nsfleet" too
    children = [p for p in me.children() if p.cmdline()[1:4] == ["-m", "nsfleet", "serve"]]
    return children or [me]


def register(http_port: int) -> None:
    body = {"clusterName": "cores", "brokerAddr": "127.0.0.1:10911", "brokerName": "b0",
            "brokerId": 0, "topicConfigTable": {TOPIC: {"readQueueNums": 8,
                                                         "writeQueueNums": 8},
                                                 "Other": {}}}
    req = urllib.request.Request(f"http://127.0.0.1:{http_port}/v1/brokers/register",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200


class CpuMeter:
    """CPU seconds of some processes between start() and stop(), as % of one core each."""

    def __init__(self, procs: dict[str, psutil.Process]) -> None:
        self.procs = procs
        self.before: dict[str, float] = {}
        self.started = 0.0

    @staticmethod
    def _cpu(p: psutil.Process) -> float:
        t = p.cpu_times()
        return t.user + t.system

    def start(self) -> None:
        self.before = {k: self._cpu(p) for k, p in self.procs.items()}
        self.started = time.monotonic()

    def stop(self) -> dict[str, float]:
        elapsed = time.monotonic() - self.started
        return {k: round((self._cpu(p) - self.before[k]) / elapsed * 100, 1)
                for k, p in self.procs.items()}


def remoting(binary: Path, port: int, seconds: float, loaders: int, connections: int,
             window: int) -> dict[str, float]:
    runs = [subprocess.Popen([str(binary), "127.0.0.1", str(port), TOPIC, str(connections),
                              str(window), str(seconds)], stdout=subprocess.PIPE, text=True)
            for _ in range(loaders)]
    outs = [json.loads(p.communicate(timeout=seconds + 60)[0]) for p in runs]
    return {"reads_per_s": round(sum(o["requests_per_s"] for o in outs)),
            "p50_ms": round(max(o["p50_ms"] for o in outs), 3),
            "p99_ms": round(max(o["p99_ms"] for o in outs), 3)}


def http(port: int, seconds: float, loaders: int, connections: int) -> dict[str, float]:
    out = subprocess.run(["wrk", f"-t{loaders}", f"-c{max(connections, loaders)}",
                          f"-d{int(seconds)}s", "--latency",
                          f"http://127.0.0.1:{port}/v1/routes/{TOPIC}"],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(out)
    rps = next(line.split()[-1] for line in out.splitlines() if line.startswith("Requests/sec"))
    return {"reads_per_s": round(float(rps))}


def measure(redis: RedisServer, processes: int, args: argparse.Namespace, binary: Path,
            tmp: Path) -> dict[str, object]:
    proc, http_port, remoting_port = start_group(redis.url, processes, tmp / f"p{processes}.log")
    try:
        register(http_port)
        assert redis.process is not None
        procs = {f"worker{k}": p for k, p in enumerate(workers(proc))}
        procs["redis"] = psutil.Process(redis.process.pid)
        loaders = args.loaders or max(1, min(processes, (os.cpu_count() or 2) - processes))
        remoting(binary, remoting_port, 1, loaders, args.connections, args.window)  # warm-up
        meter = CpuMeter(procs)
        meter.start()
        row_r = remoting(binary, remoting_port, args.seconds, loaders, args.connections,
                         args.window)
        row_r["cpu_percent"] = meter.stop()  # type: ignore[assignment]
        http(http_port, 1, loaders, args.http_connections)  # warm-up
        meter.start()
        row_h = http(http_port, args.seconds, loaders, args.http_connections)
        row_h["cpu_percent"] = meter.stop()  # type: ignore[assignment]
        return {"processes": processes, "loaders": loaders, "remoting": row_r, "http": row_h}
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        if code != 0:
            raise RuntimeError(f"serve --processes {processes} exited {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", default="1,2",
                        help="comma-separated process counts (1 is always measured: the base)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--loaders", type=int, default=0,
                        help="load generator processes/threads per protocol (0: min(P, the "
                             "cores left over by P))")
    parser.add_argument("--connections", type=int, default=32,
                        help="remoting connections per loader")
    parser.add_argument("--window", type=int, default=16,
                        help="remoting requests in flight per connection")
    parser.add_argument("--http-connections", type=int, default=64)
    parser.add_argument("--out", default="cores")
    args = parser.parse_args()
    counts = sorted({1, *(int(p) for p in args.processes.split(","))})
    if shutil.which("wrk") is None or shutil.which("gcc") is None:
        raise SystemExit("needs wrk and gcc (Debian: apt-get install wrk gcc)")
    results: dict[str, object] = {"machine": machine(), "args": vars(args)}
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        binary = tmp / "remoting_load"
        subprocess.run(["gcc", "-O2", "-o", str(binary), str(HERE / "remoting_load.c")],
                       check=True)
        with RedisServer(data_dir=tmp / "redis", appendonly=False) as redis:
            for p in counts:
                rows.append(measure(redis, p, args, binary, tmp))
                print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    for row in rows:
        row["ratio_to_1"] = {
            proto: round(row[proto]["reads_per_s"] / base[proto]["reads_per_s"], 2)  # type: ignore[index]
            for proto in ("remoting", "http")}
    results["runs"] = rows
    write_results(args.out, results)


if __name__ == "__main__":
    main()
