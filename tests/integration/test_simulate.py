"""``nsfleet simulate`` against real workers: 50 brokers and 500 topics, unregistration at the
end, Ctrl-C, and an unreachable fleet."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsfleet.cli import main
from nsfleet.redis_server import RedisServer, free_port
from tests.support.fleet import Fleet, wait_until

pytestmark = pytest.mark.redis
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fleet(redis_server: RedisServer) -> Iterator[Fleet]:
    with Fleet(redis_server.url, workers=3) as f:
        yield f


def _admin_json(capsys: pytest.CaptureFixture[str], fleet: Fleet, *argv: str) -> dict:
    assert main(["admin", "--server", fleet.servers, "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_50_brokers_500_topics_all_listed(fleet: Fleet,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--brokers", "50", "--topics", "500", "--clusters", "3",
                 "--server", fleet.servers, "--duration", "1", "--heartbeat", "0.2",
                 "--keep", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert summary["registered"] == 50 and summary["failed"] == 0 and summary["kept"]
    assert summary["heartbeats"] > 0 and summary["errors"] == 0
    assert "50/50 brokers registered" in err  # the display and summary go to stderr

    brokers = _admin_json(capsys, fleet, "broker-list")["brokers"]
    assert len(brokers) == 50
    assert {b["clusterName"] for b in brokers} == {"DefaultCluster-1", "DefaultCluster-2",
                                                   "DefaultCluster-3"}
    assert any(b["brokerId"] == 1 for b in brokers)  # some groups have a slave
    assert main(["admin", "--server", fleet.servers, "broker-list"]) == 0
    assert "Live brokers (50)" in capsys.readouterr().out
    topics = set(_admin_json(capsys, fleet, "topic-list")["topicList"])
    assert {f"TopicTest-{i}" for i in range(500)} <= topics
    assert {"TBW102", "%RETRY%GID_TopicTest-0", "SELF_TEST_TOPIC"} <= topics
    assert len(topics) == summary["topics"]


def test_unregisters_everything_at_the_end(fleet: Fleet,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--brokers", "8", "--topics", "40", "--server", fleet.servers,
                 "--duration", "0.3", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["unregistered"] == 8
    assert _admin_json(capsys, fleet, "broker-list") == {"brokers": []}
    assert _admin_json(capsys, fleet, "cluster-list")["brokerAddrTable"] == {}


def test_ctrl_c_stops_and_unregisters(fleet: Fleet) -> None:
    env = {**os.environ, "NSFLEET_SERVER": fleet.servers}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsfleet", "simulate", "--brokers", "5", "--topics", "10"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(fleet.brokers()) == 5 or proc.poll() is not None, 20, 0.1)
        assert proc.poll() is None, proc.communicate()[1].decode()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert "5 unregistered" in err.decode()
    assert fleet.brokers() == []


def test_exit_status_1_when_no_worker_answers(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--brokers", "2", "--topics", "1", "--duration", "0",
                 "--server", f"http://127.0.0.1:{free_port()}", "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 1 and "0/2 brokers registered" in err and "no nsfleet worker answered" in err
    assert main(["simulate", "--brokers", "0"]) == 2
    assert "need brokers >= 1" in capsys.readouterr().err
