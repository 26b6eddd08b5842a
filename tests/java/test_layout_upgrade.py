"""Issue 42, the rolling upgrade: a fleet of the build before the queue data's layout 2 (one hash
per (topic, group) row, layout 1) is upgraded worker by worker while a real RocketMQ 4.9.8 broker
stays registered and readers ask every running worker for routes all along. Old and new workers
serve one store in layout 1 while both run; once the old one is gone the new ones move the store
to layout 2 (docs/table-shape.md, "The move"). No route read may miss at any moment, and after the
move a 4.9.8 producer and consumer run through the upgraded workers. A worker of the old build
started after the move finds no queue data (its routes answer "no route"): the documented reason
not to roll back past the move.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from nsfleet.redis_server import RedisServer
from nsfleet.store.keys import Keys
from tests.java.conftest import fleet_env, remoting
from tests.support import java_rocketmq as jr
from tests.support.workers import WorkerProcess

# The last commit whose workers know layout 1 only (the parent of the switch).
OLD_BUILD = "89c77d3"
NAMESPACE = "layout-upgrade"
TOPIC = "TBW102"  # the broker's auto-create topic: served from its first registration
TOPIC_NOT_EXIST = 17
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def old_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The old build's ``nsfleet`` package and ``lua/`` scripts, from git, run with this venv
    (its dependencies are a subset of this build's)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        if os.environ.get("CI"):
            raise AssertionError("CI runs on a git clone: the old build comes from its history")
        pytest.skip("no git history to take the old build from")
    out = tmp_path_factory.mktemp("old-build")
    archive = out / "old.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), OLD_BUILD,
                    "nsfleet", "lua"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")
    return out


def old_env(env: dict[str, str], old_build: Path) -> dict[str, str]:
    """A worker's environment that runs the old build: its package first on the path, and not
    the current directory (``python -m`` would put this checkout's package before it)."""
    return {**env, "PYTHONPATH": str(old_build), "PYTHONSAFEPATH": "1"}


class RouteWatch:
    """Asks every worker in ``addrs`` for TOPIC's route every 50 ms; notes each miss."""

    def __init__(self) -> None:
        self.addrs: list[str] = []
        self.misses: list[tuple[float, str, int]] = []
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for addr in list(self.addrs):
                code = jr.route_code(addr, TOPIC)
                self.reads += 1
                if code != 0:
                    self.misses.append((time.monotonic(), addr, code))
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def _layout(client: redis.Redis) -> str | None:
    return client.get(Keys(NAMESPACE).layout)


def _wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def watch() -> Iterator[RouteWatch]:
    w = RouteWatch()
    yield w
    w.stop()


def test_a_rolling_upgrade_moves_the_layout_and_no_route_goes_missing(
        java_home: Path, redis_server: RedisServer, old_build: Path, tmp_path: Path,
        watch: RouteWatch) -> None:
    env = fleet_env(redis_server, NAMESPACE)
    keys = Keys(NAMESPACE)
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    for key in client.scan_iter(match=f"{keys.prefix}:*"):
        client.delete(key)
    old = WorkerProcess(old_env(env, old_build), tmp_path / "old.log")
    new = [WorkerProcess(env, tmp_path / f"new{i}.log") for i in range(2)]
    every = [remoting(w) for w in (old, *new)]
    old.start()
    props = ("brokerName=broker-up", "registerNameServerPeriod=10000")
    with jr.broker(";".join(every), tmp_path / "broker-up", *props) as broker:
        try:
            jr.wait_registered(remoting(old), "broker-up", broker.addr)
            _wait(lambda: jr.route_code(remoting(old), TOPIC) == 0, 30, "the route on the old")
            assert client.exists(keys.queue(TOPIC, "broker-up"))  # layout 1, as the old build
            watch.addrs.append(remoting(old))
            # Both builds serve one store in layout 1 while both run.
            for w in new:
                w.start()
                watch.addrs.append(remoting(w))
            time.sleep(2)  # a few sweeps of the new workers: no move while the old one lives
            assert _layout(client) in (None, "1")
            jr.wait_registered(remoting(new[0]), "broker-up", broker.addr)
            # The old worker leaves; its presence lapses and an upgraded worker moves the store.
            watch.addrs.remove(remoting(old))
            old.stop()
            _wait(lambda: _layout(client) == "2", 60, "the move to layout 2")
            moved_at = time.time() * 1000
            assert client.hget(keys.topic_routes(TOPIC), "broker-up") is not None
            _wait(lambda: not list(client.scan_iter(match=f"{keys.prefix}:queue:*")), 30,
                  "layout 1's keys to go")
            # The broker's next registration (every 10 s) lands in layout 2.
            live = keys.broker("DefaultCluster", broker.addr)
            _wait(lambda: float(client.hget(live, "lastUpdateTimestamp") or 0) > moved_at, 30,
                  "a registration after the move")
            watch.stop()
            assert watch.misses == [], watch.misses[:10]
            assert watch.reads > 100
            upgraded = ";".join(remoting(w) for w in new)
            result = jr.e2e(upgraded, "UpgradeTopic", 20)
            assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
            # A worker of the old build started after the move reads layout 1's keys: none left.
            late = WorkerProcess(old_env(env, old_build), tmp_path / "late.log")
            late.start()
            try:
                assert jr.route_code(remoting(late), TOPIC) == TOPIC_NOT_EXIST
            finally:
                late.stop()
        finally:
            for w in (old, *new):
                if w.process is not None and w.process.poll() is None:
                    w.stop()
            client.close()
