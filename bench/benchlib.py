"""What the benchmark scripts share: a worker process to load, and the results file."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
import urllib.request
from argparse import Namespace
from pathlib import Path

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
    return {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "args": vars(args)}


def write_results(name: str, results: dict[str, object]) -> None:
    """Print the figures and write them to bench/results/<name>.json."""
    RESULTS_DIR.mkdir(exist_ok=True)
    text = json.dumps(results, indent=2) + "\n"
    (RESULTS_DIR / f"{name}.json").write_text(text)
    print(text, end="")
