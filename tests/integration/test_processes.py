"""``nsfleet serve --processes N`` on real sockets (issue 24): both processes answer on one port,
a SIGKILLed process is restarted while the other keeps answering, /metrics covers the host,
SIGTERM under load stops everything with exit 0 and no traceback (one process or two), and
processes that keep crashing make the supervisor exit non-zero."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from nsfleet.redis_server import free_port
from tests.support.remoting_client import Broker, RemotingClient, TopicConf

pytestmark = pytest.mark.redis

TOPICS = {f"T{i}": {} for i in range(8)}


def is_worker(p: psutil.Process) -> bool:
    try:
        return p.cmdline()[1:4] == ["-m", "nsfleet", "serve"]
    except psutil.Error:  # exited meanwhile
        return False


class Group:
    """``nsfleet serve --processes N`` with its embedded Redis, on loopback ports."""

    def __init__(self, tmp: Path, processes: int, **env: str) -> None:
        self.http_port, self.remoting_port = free_port(), free_port()
        self.log = tmp / "serve.log"
        self.env = {**os.environ, "NSFLEET_HOST": "127.0.0.1",
                    "NSFLEET_HTTP_PORT": str(self.http_port),
                    "NSFLEET_REMOTING_PORT": str(self.remoting_port),
                    "NSFLEET_DATA_DIR": str(tmp / "data"), "NSFLEET_DRAIN_TIMEOUT": "3",
                    "NSFLEET_PROCESSES": str(processes), **env}
        self.processes = processes
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> Group:
        self.proc = subprocess.Popen([sys.executable, "-m", "nsfleet", "serve"], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=self.log.open("ab"),
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        answered: set[object] = set()  # each process binds the port once it is ready
        try:
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, self.log.read_text()[-3000:]
                try:
                    answered.add(self.ready().get("pid"))
                    if len(answered) == self.processes:
                        return self
                except OSError:
                    time.sleep(0.05)
            raise TimeoutError(self.log.read_text()[-3000:])
        except BaseException:
            self.proc.kill()  # never left behind (its processes get SIGTERM from the kernel)
            self.proc.wait()
            raise

    def workers(self) -> list[psutil.Process]:
        """The supervisor's worker processes: its children started as ``python -m nsfleet
        serve`` (argv compared whole, so no path holding "nsfleet" makes its embedded
        redis-server count)."""
        assert self.proc is not None
        return [p for p in psutil.Process(self.proc.pid).children() if is_worker(p)]

    def ready(self) -> dict[str, object]:
        """/readyz over a new connection."""
        url = f"http://127.0.0.1:{self.http_port}/readyz"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return dict(json.loads(resp.read()))

    def ready_pid(self) -> int:
        """The pid of the process that answered /readyz (named with --processes > 1)."""
        body = self.ready()
        assert body["process"] in range(self.processes)
        return int(body["pid"])  # type: ignore[call-overload]

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.read().decode()

    def register(self) -> None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}/v1/brokers/register", method="POST",
            data=json.dumps({"clusterName": "c", "brokerAddr": "127.0.0.1:10911",
                             "brokerName": "b", "brokerId": 0,
                             "topicConfigTable": TOPICS}).encode(),
            headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def text(self) -> str:
        return self.log.read_text()


@pytest.fixture
def group2(tmp_path: Path) -> Iterator[Group]:
    group = Group(tmp_path, 2).start()
    try:
        yield group
    finally:
        if group.proc is not None and group.proc.poll() is None:
            group.proc.kill()
            group.proc.wait()


def _series(text: str, name: str, **labels: str) -> dict[str, float]:
    """{process: value} of the samples of ``name`` with ``labels``."""
    out: dict[str, float] = {}
    for m in re.finditer(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, re.M):
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(found.get(k) == v for k, v in labels.items()):
            out[found["process"]] = out.get(found["process"], 0.0) + float(m.group(2))
    return out


async def _route_reads(port: int, connections: int) -> list[int]:
    codes = []
    for _ in range(connections):  # a new connection each: the kernel spreads them
        client = await RemotingClient.connect(port)
        try:
            codes.append((await client.request(105, {"topic": "T1"})).code)
        finally:
            client.writer.close()
    return codes


def test_both_processes_answer_on_one_port(group2: Group) -> None:
    pids = {p.pid for p in group2.workers()}
    assert len(pids) == 2
    assert {group2.ready_pid() for _ in range(60)} == pids  # HTTP, new connections
    group2.register()
    codes = asyncio.run(_route_reads(group2.remoting_port, 60))
    assert set(codes) == {0}
    text = group2.metrics()  # one scrape, every process
    assert _series(text, "nsfleet_process_up") == {"0": 1.0, "1": 1.0}
    reads = _series(text, "nsfleet_remoting_requests_total", code="105")
    assert set(reads) == {"0", "1"} and all(v > 0 for v in reads.values())
    assert sum(reads.values()) == 60
    assert set(_series(text, "process_start_time_seconds")) == {"0", "1"}
    assert group2.stop() == 0


def test_a_killed_process_is_restarted_and_the_other_keeps_answering(group2: Group) -> None:
    survivor_pid, victim_pid = (p.pid for p in group2.workers())
    # a kept-alive connection to the survivor
    conn = http.client.HTTPConnection("127.0.0.1", group2.http_port, timeout=5)
    for _ in range(100):
        conn.request("GET", "/readyz")
        if json.loads(conn.getresponse().read()).get("pid") == survivor_pid:
            break
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", group2.http_port, timeout=5)
    else:
        pytest.fail("no connection reached the survivor")
    failures: list[str] = []
    answered = 0
    stop = threading.Event()

    def keep_asking() -> None:
        nonlocal answered
        while not stop.is_set():
            conn.request("GET", "/v1/routes/T1")
            resp = conn.getresponse()
            resp.read()
            if resp.status not in (200, 404):
                failures.append(f"{resp.status}")
            answered += 1
            time.sleep(0.005)

    thread = threading.Thread(target=keep_asking)
    thread.start()
    try:
        os.kill(victim_pid, signal.SIGKILL)
        psutil.Process(victim_pid).wait(10) if psutil.pid_exists(victim_pid) else None
        # new connections: all answered by the survivor until the restart, then by both
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                seen.add(group2.ready_pid())
            except OSError as exc:  # a 503 (not ready) is not a failed connection
                assert getattr(exc, "code", None) == 503, exc
            if len(seen - {survivor_pid}) and len(group2.workers()) == 2:
                break
            time.sleep(0.05)
        restarted = {p.pid for p in group2.workers()} - {survivor_pid}
        assert len(restarted) == 1 and victim_pid not in restarted
        assert seen <= {survivor_pid} | restarted
        assert seen & restarted, "the restarted process never answered"
    finally:
        stop.set()
        thread.join()
        conn.close()
    assert failures == [] and answered > 0
    assert "worker process exited: restarting it" in group2.text()
    assert group2.stop() == 0


@pytest.mark.parametrize("processes", [1, 2])
def test_sigterm_under_load_exits_0_without_a_traceback(tmp_path: Path, processes: int) -> None:
    # Sweeps every 50 ms, so one is likely in flight at the SIGTERM (its cancellation was the
    # CancelledError traceback from the Redis client).
    group = Group(tmp_path, processes, NSFLEET_SWEEP_INTERVAL="0.05").start()
    try:
        group.register()
        stop = asyncio.Event()

        async def remoting_load(i: int) -> None:
            broker = Broker("c", f"127.0.0.1:{20000 + i}", f"lb{i}", 0,
                            f"127.0.0.1:{21000 + i}", [TopicConf(f"L{i}-{k}", 4, 4)
                                                       for k in range(4)])
            with_errors = 0
            while not stop.is_set() and with_errors < 50:
                try:
                    client = await RemotingClient.connect(group.remoting_port)
                    for n in range(200):
                        if stop.is_set():
                            break
                        if n % 10 == 0:
                            await client.call(broker.register_5x())
                        else:
                            await client.request(105, {"topic": f"T{n % 8}"})
                    client.writer.close()
                except (TimeoutError, OSError, ConnectionError):
                    with_errors += 1
                    await asyncio.sleep(0.01)

        def http_load() -> None:
            while not stop.is_set():
                try:
                    with urllib.request.urlopen(
                            f"http://127.0.0.1:{group.http_port}/v1/routes/T{time.time_ns() % 8}",
                            timeout=2) as resp:
                        resp.read()
                except OSError:
                    time.sleep(0.01)

        async def run() -> int:
            loop = asyncio.get_running_loop()
            tasks = [asyncio.create_task(remoting_load(i)) for i in range(16)]
            threads = [loop.run_in_executor(None, http_load) for _ in range(4)]
            await asyncio.sleep(2.0)
            code = await asyncio.to_thread(group.stop)
            stop.set()
            await asyncio.gather(*tasks, *threads, return_exceptions=True)
            return code

        assert asyncio.run(run()) == 0
    finally:
        if group.proc is not None and group.proc.poll() is None:
            group.proc.kill()
    log = group.text()
    for bad in ("Traceback", "CancelledError", "raised an exception", "Task was destroyed"):
        assert bad not in log, log[-5000:]
    assert "nsfleet worker stopped" in log
    assert not any(str(tmp_path / "data") in p.cmdline()  # its --dir argument, whole
                   for p in psutil.process_iter() if p.pid != os.getpid()
                   and _cmdline_ok(p)), "a redis-server was left behind"


def _cmdline_ok(p: psutil.Process) -> bool:
    try:
        p.cmdline()
        return True
    except (psutil.Error, OSError):
        return False


def test_processes_that_keep_crashing_make_the_supervisor_exit_non_zero(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")  # every process fails at start on these
    group = Group(tmp_path, 2, NSFLEET_TLS_MODE="enforcing", NSFLEET_TLS_CERT_FILE=missing,
                  NSFLEET_TLS_KEY_FILE=missing)
    group.proc = subprocess.Popen([sys.executable, "-m", "nsfleet", "serve"], env=group.env,
                                  stdin=subprocess.DEVNULL, stdout=group.log.open("ab"),
                                  stderr=subprocess.STDOUT)
    try:
        assert group.proc.wait(60) == 1
    finally:
        if group.proc.poll() is None:
            group.proc.kill()
    # The fatal line is the last: the supervisor writes it once the workers have stopped.
    assert "worker processes keep exiting: giving up" in group.text().strip().splitlines()[-1]
