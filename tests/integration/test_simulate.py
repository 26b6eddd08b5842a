"""``nsfleet simulate`` against real workers: 50 brokers and 500 topics, unregistration at the
end, Ctrl-C, and an unreachable fleet."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
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
    assert summary["topics"] == 500
    assert len(topics) == summary["topics"] + summary["system_topics"]


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
    # The failed registrations are errors, and --topics 1 is one topic, beside the system ones.
    assert "first error: " in err and " 2 errors " in err and " 0 errors " not in err
    assert "1 topic + " in err and "system and retry topics" in err
    # The bar counts brokers registered, not attempts, and names the failures; nothing was
    # registered, so there is no unregistering bar.
    assert "registered (2 failed)" in err and "0/2" in err and "2/2" not in err
    assert "unregistering" not in err
    assert main(["simulate", "--brokers", "0"]) == 2
    assert "need brokers >= 1" in capsys.readouterr().err


def test_remoting_brokers_register_heartbeat_and_unregister(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """-n drives the brokers over remoting (REGISTER_BROKER, QUERY_DATA_VERSION,
    UNREGISTER_BROKER) on connections kept open, failing over through the list as admin -n."""
    dead = f"127.0.0.1:{free_port()}"
    addrs = ";".join([dead] + [f"127.0.0.1:{s.remoting_port}" for s in fleet.settings])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsfleet", "simulate", "--brokers", "6", "--topics", "12",
         "-n", addrs, "--heartbeat", "0.2", "--json"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(fleet.brokers()) == 6 or proc.poll() is not None, 20, 0.1)
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert {b["clusterName"] for b in fleet.brokers()} == {"DefaultCluster"}
        # QUERY_DATA_VERSION (322) heartbeats reach the workers.
        wait_until(lambda: any('code="322"' in _metrics(url) for url in fleet.urls), 20, 0.1)
        route = _admin_json(capsys, fleet, "topic-route", "TopicTest-3")
        assert route["queueDatas"] and route["brokerDatas"]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    summary = json.loads(out)
    assert summary["registered"] == 6 and summary["unregistered"] == 6
    assert summary["heartbeats"] > 0 and summary["errors"] == 0
    assert fleet.brokers() == []


def _metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        return resp.read().decode()


@pytest.mark.parametrize(("argv", "message"), [
    (["-n", "http://127.0.0.1:8080"], "for a worker's HTTP URL use --server http://127.0.0.1:8080"),
    (["-n", "127.0.0.1:9876", "--server", "http://127.0.0.1:8080"], "not both"),
    (["-n", "nohost"], "is not host:port"),
    (["-n", "127.0.0.1:9876", "--keep"], "use --server to keep them"),
])
def test_namesrv_addr_means_remoting_as_in_admin(argv: list[str], message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--duration", "0", *argv]) == 2
    assert message in capsys.readouterr().err


def test_progress_stays_where_a_stopped_run_got_to() -> None:
    import asyncio
    import io

    from rich.console import Console
    from rich.progress import Progress

    from nsfleet.simulate.brokers import _wait

    async def run() -> float:
        stop = asyncio.Event()
        with Progress(console=Console(file=io.StringIO())) as progress:
            task = progress.add_task("running", total=60)
            asyncio.get_running_loop().call_later(0.3, stop.set)
            await _wait(stop, 60, [], progress, task)
            (state,) = progress.tasks
            assert state.description.startswith("stopped")
            return state.completed

    assert 0.2 < asyncio.run(run()) < 5
