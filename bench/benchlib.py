"""What the benchmark scripts share: a worker process to load, and the results file."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
from argparse import Namespace
from pathlib import Path

import redis.asyncio as aioredis

from nsfleet.redis_server import free_port

RESULTS_DIR = Path(__file__).parent / "results"


def start_worker(redis_url: str, log: Path, **env: str) -> tuple[subprocess.Popen[bytes],
                                                                 int, int]:
    """An `nsfleet serve` process on loopback, once ready: (process, HTTP port, remoting port).
    ``env`` adds NSFLEET_* settings (e.g. NSFLEET_NAMESPACE)."""
    http_port, remoting_port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsfleet", "serve"],
        env={**os.environ, "NSFLEET_REDIS_URL": redis_url, "NSFLEET_HOST": "127.0.0.1",
             "NSFLEET_HTTP_PORT": str(http_port), "NSFLEET_REMOTING_PORT": str(remoting_port),
             "NSFLEET_LOG_LEVEL": "warning", **env},
        stdout=log.open("ab"), stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/readyz", timeout=1):
                return proc, http_port, remoting_port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(log.read_text()[-2000:])


def new_results(args: Namespace) -> dict[str, object]:
    return {"machine": machine(), "args": vars(args)}


def write_results(name: str, results: dict[str, object]) -> None:
    """Print the figures and write them to bench/results/<name>.json."""
    RESULTS_DIR.mkdir(exist_ok=True)
    text = json.dumps(results, indent=2) + "\n"
    (RESULTS_DIR / f"{name}.json").write_text(text)
    print(text, end="")


def machine() -> dict[str, object]:
    """What the figures were measured on: CPU, Python, Redis, and how loaded the machine was."""
    from nsfleet.redis_server import discover, server_version

    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    server = discover()  # what RedisServer runs (NSFLEET_REDIS_SERVER picks another)
    found = server_version(server.path)
    version = ".".join(map(str, found)) if found else "?"
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "python": platform.python_version(),
            "redis": version, "redis_server": f"{Path(server.path).name} ({server.source})",
            "loadavg_at_start": list(os.getloadavg()),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def summary(samples: list[float], digits: int = 3) -> dict[str, float]:
    """n, p50, p99 and max of ``samples`` (any unit)."""
    ordered = sorted(samples)
    return {"n": len(ordered), "p50": round(statistics.median(ordered), digits),
            "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], digits),
            "max": round(ordered[-1], digits)}


class ScriptClock:
    """Redis time spent in scripts between ``reset()`` and ``read()``: the total (INFO
    commandstats, EVAL + EVALSHA) and the longest single call (SLOWLOG, every call logged)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client

    async def reset(self) -> None:
        await self.client.config_set("slowlog-log-slower-than", 0)
        await self.client.config_set("slowlog-max-len", 100_000)
        await self.client.config_resetstat()
        await self.client.slowlog_reset()

    async def read(self) -> dict[str, float]:
        stats = await self.client.info("commandstats")
        calls = usec = 0
        for name in ("cmdstat_evalsha", "cmdstat_eval"):
            if name in stats:
                calls += int(stats[name]["calls"])
                usec += int(stats[name]["usec"])
        longest = 0
        for entry in await self.client.slowlog_get(100_000):
            command = entry["command"]
            if isinstance(command, bytes):
                command = command.decode(errors="replace")
            if command.lower().startswith("eval"):
                longest = max(longest, int(entry["duration"]))
        return {"script_calls": calls, "script_ms": round(usec / 1000, 3),
                "longest_script_ms": round(longest / 1000, 3)}
