"""The scripts in examples/ run as a user runs them, against a real worker."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsfleet.redis_server import RedisServer
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.redis

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def worker(redis_server: RedisServer, tmp_path: Path) -> Iterator[WorkerProcess]:
    w = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": "examples"},
                      tmp_path / "worker.log").start()
    yield w
    w.stop()


def test_broker_and_routes(worker: WorkerProcess) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "broker_and_routes.py"), worker.url],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "brokers: ['demo-broker']" in done.stdout
    assert "changed: Demo" in done.stdout and "perm 4" in done.stdout
    assert "broker unregistered" in done.stdout
