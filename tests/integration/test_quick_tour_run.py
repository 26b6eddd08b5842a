"""The README's quick tour, run as written, start to end (issues 29, 40): worker 1 on an embedded
Redis, worker 2 joining it through the same data directory, the simulation until Ctrl-C, every
admin command, analytics' Redis found by itself with the brokers still there, worker 2 stopped
and the brokers failing over.

Only what cannot run here is replaced: the ports (free ones; worker 1's and admin's default by
NSFLEET_* variables, the others in the text), the data directory (NSFLEET_DATA_DIR), `nsfleet`
(this interpreter) and the `.venv-spark` install (no network in tests; the Spark job itself is
tested in tests/spark). The lines come from README.md (tests/unit/test_quick_tour.py parses them).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsfleet.analytics.cli import default_redis_url
from nsfleet.redis_server import free_port
from tests.unit.test_quick_tour import Step, tour_steps

pytestmark = pytest.mark.redis


class Tour:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports = {p: str(free_port()) for p in ("8080", "8081", "9876", "9877")}
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        nsfleet = bin_dir / "nsfleet"
        nsfleet.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nsfleet "$@"\n')
        nsfleet.chmod(0o755)
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                    "NSFLEET_HOST": "127.0.0.1", "NSFLEET_HTTP_PORT": self.ports["8080"],
                    "NSFLEET_REMOTING_PORT": self.ports["9876"],
                    "NSFLEET_DATA_DIR": str(tmp / "data"), "NSFLEET_DRAIN_TIMEOUT": "2",
                    "COLUMNS": "200"}
        self.env.pop("NSFLEET_REDIS_URL", None)
        self.env["NSFLEET_SERVER"] = self.url("8080")  # admin's default, :8080
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def text(self, command: str) -> str:
        command = re.sub(r"\b(8080|8081|9876|9877)\b", lambda m: self.ports[m.group(1)], command)
        return command.replace("--out nsfleet-report", f"--out {self.tmp / 'report'}")

    def url(self, port: str) -> str:
        return f"http://127.0.0.1:{self.ports[port]}"

    def start(self, name: str, command: str) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{name}.log").open("wb")
        proc = subprocess.Popen(["bash", "-c", f"exec {self.text(command)}"], env=self.env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=self.tmp)
        self.running[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def run(self, command: str) -> str:
        done = subprocess.run(["bash", "-c", self.text(command)], env=self.env, cwd=self.tmp,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    def ctrl_c(self, name: str) -> int:
        proc = self.running.pop(name)
        proc.send_signal(signal.SIGINT)
        return proc.wait(30)

    def stop_all(self) -> None:
        for proc in reversed(list(self.running.values())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _until(check: Any, what: str, within: float) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def tour(tmp_path: Path) -> Iterator[Tour]:
    t = Tour(tmp_path)
    try:
        yield t
    finally:
        t.stop_all()


def _live(tour: Tour, port: str) -> list[dict[str, Any]]:
    return _get(f"{tour.url(port)}/v1/brokers")["brokers"]


def _heartbeating(tour: Tour, port: str, since: float) -> None:
    """Every broker heartbeated through that worker after ``since`` (ms)."""
    _until(lambda: all(b["lastUpdateTimestamp"] > since for b in _live(tour, port)),
           f"heartbeats through :{port}", 15)


def test_the_quick_tour_as_written(tour: Tour) -> None:
    steps = tour_steps()
    assert steps[0].command.startswith("source ")  # the venv: this interpreter plays it
    serve1, serve2 = [s for s in steps if s.command.startswith("nsfleet serve")]
    simulate = next(s for s in steps if s.command.startswith("nsfleet simulate "))
    stop2 = next(s for s in steps if "stop worker 2" in s.said)
    brokers = int(re.search(r"--brokers (\d+)", simulate.command).group(1))  # type: ignore

    tour.start("worker1", serve1.command)
    _until(lambda: _get(f"{tour.url('8080')}/readyz")["status"] == "ready", "worker 1", 60)
    url = (tour.tmp / "data" / "redis.url").read_text().strip()
    assert url in tour.log("worker1")  # "its log shows: ... url=redis://127.0.0.1:<port>/0"
    tour.start("worker2", serve2.command)
    _until(lambda: _get(f"{tour.url('8081')}/readyz")["status"] == "ready", "worker 2", 60)
    # "its log: joined the embedded redis ...": worker 1's, found without being given a URL.
    joined = [line for line in tour.log("worker2").splitlines()
              if "joined the embedded redis" in line]
    assert "joined the embedded redis" in serve2.said and "--redis-url" not in serve2.command
    assert len(joined) == 1 and f"url={url}" in joined[0], tour.log("worker2")
    tour.start("simulate", simulate.command)
    _until(lambda: len(_live(tour, "8080")) == brokers, "the simulated brokers", 60)

    done: list[Step] = [s for s in steps if s in (steps[0], serve1, serve2, simulate)]
    for step in steps:
        if step in done:
            continue
        done.append(step)
        command = step.command
        if "pip install" in command:  # the spark venv: no network here
            continue
        if "nsfleet analytics" in command:
            # Its Redis, found by itself, is worker 1's, with every broker still live.
            assert default_redis_url(tour.env) == url
            assert len(_live(tour, "8080")) == brokers
            continue
        if step is stop2:
            assert tour.ctrl_c("worker2") == 0
            _heartbeating(tour, "8080", since=time.time() * 1000)
        out = tour.run(command)
        if command.startswith("nsfleet admin broker-list"):
            assert f"Live brokers ({brokers})" in out, out
    assert done == steps

    assert tour.ctrl_c("simulate") == 0
    summary = tour.log("simulate")
    assert f"{brokers}/{brokers} brokers registered" in summary, summary[-2000:]
    assert f"{brokers} unregistered" in summary
    failovers = int(re.search(r"(\d+) failovers", summary).group(1))  # type: ignore[union-attr]
    assert failovers >= 1, summary[-2000:]
    assert _live(tour, "8080") == []
