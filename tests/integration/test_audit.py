"""The audit trail: one JSON line per change of the tables, with the client's address, in the
--log-file (rotated); unchanged heartbeats and re-registrations stay silent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsfleet.redis_server import RedisServer
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis

BROKER = {"clusterName": "c1", "brokerAddr": "10.0.0.1:10911", "brokerName": "broker-a",
          "brokerId": 0, "dataVersion": {"counter": 1, "timestamp": 1},
          "topicConfigTable": {"T1": {}, "T2": {}}}
IDENT = {k: BROKER[k] for k in ("clusterName", "brokerAddr", "brokerName", "brokerId")}


def test_every_change_leaves_one_audit_line(redis_server: RedisServer, tmp_path: Path) -> None:
    log_file = tmp_path / "nsfleet.log"
    worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": "audit",
                            "NSFLEET_LOG_FILE": str(log_file)}, tmp_path / "stderr.log").start()
    try:
        url = worker.url
        assert http("POST", f"{url}/v1/brokers/register", BROKER)[0] == 200
        assert http("POST", f"{url}/v1/brokers/register", BROKER)[0] == 200  # unchanged
        assert http("POST", f"{url}/v1/brokers/heartbeat", IDENT)[0] == 200  # silent
        assert http("POST", f"{url}/v1/brokers/broker-a/wipe-write-perm")[0] == 200
        assert http("PUT", f"{url}/v1/kv/ns/k", {"value": "v"})[0] == 200
        assert http("DELETE", f"{url}/v1/kv/ns/k")[0] == 200
        assert http("PUT", f"{url}/v1/namesrv-config", {"clusterTest": "true"})[0] == 200
        assert http("DELETE", f"{url}/v1/topics/T2")[0] == 200
        assert http("POST", f"{url}/v1/brokers/unregister", IDENT)[0] == 200
    finally:
        assert worker.stop() == 0
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    trail = [entry for entry in lines if entry.get("audit")]
    assert [e["event"] for e in trail] == [
        "broker registered", "write perm wiped", "kv put", "kv deleted",
        "namesrv config updated", "topic deleted", "broker unregistered"]
    assert all(e["remote"] == "127.0.0.1" for e in trail)
    assert trail[0]["broker_name"] == "broker-a" and trail[0]["topics"] == 2
    assert trail[4]["applied"] == {"clusterTest": "true"}
