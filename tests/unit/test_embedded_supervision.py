"""nsfleet.embedded without a server: the restart policy (one log line per exit, backoff,
giving up), what a failed start says about a corrupt AOF, the AOF files a repair looks at, that
a start that cannot join leaves the running worker's redis.url, the kept port, and which run
files name an owner to join."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import structlog

from nsfleet import embedded
from nsfleet.embedded import (
    PORT_FILE,
    RUN_FILE,
    URL_FILE,
    CorruptAof,
    EmbeddedRedis,
    EmbeddedRedisDied,
    aof_files,
    check_aof_command,
    running_owner,
)
from nsfleet.redis_server import ServerExited, exit_status, free_port, port_free


class FakeProcess:
    def __init__(self) -> None:
        self.code: int | None = None
        self.pid = 4242

    def poll(self) -> int | None:
        return self.code


class FakeServer:
    """Stands in for RedisServer: ``fail`` makes the next starts exit at once."""

    def __init__(self, data_dir: Path) -> None:
        self.process = FakeProcess()
        self.url = "redis://127.0.0.1:6390/0"
        self.log_path = data_dir / "redis.log"
        self.fail = 0
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        if self.fail:
            self.fail -= 1
            raise ServerExited(1, ["# Bad file format reading the append only file"])
        self.process = FakeProcess()

    def log_tail(self, lines: int = 5) -> list[str]:
        return ["* Ready to accept connections tcp"][-lines:]


@pytest.fixture
def owned(tmp_path: Path) -> Any:
    e = EmbeddedRedis(str(tmp_path))
    server = FakeServer(tmp_path)
    e.server = server  # type: ignore[assignment]
    e._lock = (tmp_path / "nsfleet.lock").open("w")
    e._started = 0.0
    yield e, server
    e._lock.close()


def test_an_exit_is_one_line_then_a_restart_after_the_backoff(owned: Any) -> None:
    e, server = owned
    e.supervise(100.0)
    assert e.restart_at is None and server.starts == 0  # running: nothing to do
    server.process.code = -9
    with structlog.testing.capture_logs() as logs:
        e.supervise(100.0)
        e.supervise(100.3)  # still backing off: no second line, no start
    assert [entry["event"] for entry in logs] == ["embedded redis exited: restarting it"]
    assert logs[0]["status"] == "killed by SIGKILL" and logs[0]["restart_in_s"] == 0.5
    assert "Ready to accept" in logs[0]["log_tail"]
    assert server.starts == 0
    with structlog.testing.capture_logs() as logs:
        e.supervise(100.5)
    assert server.starts == 1 and e.restart_at is None
    assert [entry["event"] for entry in logs] == ["embedded redis restarted"]


def test_backoff_doubles_while_it_keeps_failing_then_the_owner_gives_up(owned: Any) -> None:
    e, server = owned
    server.process.code = 1
    server.fail = 100
    now, delays = 10.0, []
    with pytest.raises(EmbeddedRedisDied, match="exited 6 times within 60 s") as died:
        for _ in range(20):
            e.supervise(now)
            if e.restart_at is not None:
                delays.append(e.restart_at - now)
                now = e.restart_at
    assert delays[:5] == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert "giving up" in str(died.value) and str(e.server.log_path) in str(died.value)


def test_a_server_that_ran_long_restarts_after_the_first_backoff(owned: Any) -> None:
    e, server = owned
    e._backoff = 8.0  # after earlier failures
    e._started = 0.0
    server.process.code = 1
    e.supervise(embedded.STABLE_AFTER + 1)
    assert e.restart_at == embedded.STABLE_AFTER + 1 + embedded.BACKOFF_FIRST


def test_exits_outside_the_window_do_not_count(owned: Any) -> None:
    e, server = owned
    now, delays = 0.0, []
    for _ in range(12):  # one exit every 40 s: never more than 2 in the window
        server.process.code = 1
        e.supervise(now)
        restart = e.restart_at
        delays.append(restart - now)
        e.supervise(restart)
        assert e.restart_at is None  # restarted, not given up
        now = restart + 40
    assert server.starts == 12
    assert delays == [embedded.BACKOFF_FIRST] * 12  # each ran 40 s: its backoff reset
    assert len(e._exits) <= 2


def test_a_start_that_cannot_join_leaves_the_running_workers_redis_url(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "JOIN_WAIT", 0.3)
    (tmp_path / URL_FILE).write_text("redis://127.0.0.1:7000/0\n")
    with (tmp_path / "nsfleet.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the running worker's, no run file
        refused = EmbeddedRedis(str(tmp_path))
        with pytest.raises(RuntimeError, match=r"another nsfleet worker .* did not answer"):
            refused.start()
        assert refused.joined is None
        refused.stop()  # as the supervisor's clean-up does
        assert (tmp_path / URL_FILE).read_text() == "redis://127.0.0.1:7000/0\n"
        with (tmp_path / "nsfleet.lock").open("w") as probe, pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_multi_part_aof_files_last_the_incr_one(tmp_path: Path) -> None:
    d = tmp_path / "appendonlydir"
    d.mkdir()
    (d / "appendonly.aof.manifest").write_text(
        "file appendonly.aof.2.incr.aof seq 2 type i\n"
        "file appendonly.aof.1.base.rdb seq 1 type b\n")
    assert aof_files(tmp_path) == [d / "appendonly.aof.1.base.rdb", d / "appendonly.aof.2.incr.aof"]


def test_single_aof_file_and_none(tmp_path: Path) -> None:
    assert aof_files(tmp_path) == []
    (tmp_path / "appendonly.aof").write_text("")
    assert aof_files(tmp_path) == [tmp_path / "appendonly.aof"]


def test_check_aof_is_the_servers_own_binary_under_the_tools_name() -> None:
    assert check_aof_command("/x/valkey-server", Path("/d/a.aof"))[:2] == ["valkey-check-aof",
                                                                          "--fix"]
    assert check_aof_command("/usr/bin/redis-server", Path("/d/a.aof")) == [
        "redis-check-aof", "--fix", "/d/a.aof"]


@pytest.mark.parametrize(("line", "named"), [
    ("# Bad file format reading the append only file appendonly.aof.1.incr.aof: make a backup "
     "of your AOF file, then use ./valkey-check-aof --fix <filename.manifest>",
     "appendonlydir/appendonly.aof.1.incr.aof"),
    ("# Bad file format reading the append only file: make a backup of your AOF file, then use "
     "./redis-check-aof --fix <filename>", "appendonly.aof"),
])
def test_a_corrupt_aof_start_says_the_file_the_data_dir_and_the_fix(tmp_path: Path, line: str,
                                                                     named: str) -> None:
    if "incr" in named:
        (tmp_path / "appendonlydir").mkdir()
        (tmp_path / "appendonlydir" / "appendonly.aof.manifest").write_text(
            "file appendonly.aof.1.base.rdb seq 1 type b\n"
            "file appendonly.aof.1.incr.aof seq 1 type i\n")
    else:
        (tmp_path / "appendonly.aof").write_text("")
    error = EmbeddedRedis(str(tmp_path))._diagnose(ServerExited(1, ["* loading", line]))
    assert isinstance(error, CorruptAof)
    text = str(error)
    assert str(tmp_path / named) in text and f"data dir {tmp_path}" in text
    assert "--repair-aof" in text and "exited with 1" in text
    assert len(text.splitlines()) <= 6


def test_another_failed_start_names_the_log(tmp_path: Path) -> None:
    error = EmbeddedRedis(str(tmp_path))._diagnose(ServerExited(1, ["# Can't bind"]))
    assert not isinstance(error, CorruptAof)
    assert "Can't bind" in str(error) and str(tmp_path / "redis.log") in str(error)


def test_exit_status_names_signals() -> None:
    assert exit_status(-9) == "killed by SIGKILL"
    assert exit_status(1) == "exited with 1"


def test_the_kept_port_is_reused_while_free(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / PORT_FILE).write_text(f"{port}\n")
    with structlog.testing.capture_logs() as logs:
        assert EmbeddedRedis(str(tmp_path))._choose_port() == port
    assert logs == []


def test_a_taken_kept_port_is_replaced_and_said(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert not port_free(port)
        (tmp_path / PORT_FILE).write_text(f"{port}\n")
        with structlog.testing.capture_logs() as logs:
            chosen = EmbeddedRedis(str(tmp_path))._choose_port()
    assert chosen != port
    assert [(e["event"], e["port"], e["new_port"]) for e in logs] == [
        ("embedded redis port taken by another process: using a new one", port, chosen)]


def test_a_first_start_picks_a_port_without_a_word(tmp_path: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        assert EmbeddedRedis(str(tmp_path))._choose_port() > 0
    assert logs == []


def test_a_run_file_names_no_owner_when_stale_or_unreadable(tmp_path: Path) -> None:
    assert running_owner(tmp_path) is None  # none
    (tmp_path / RUN_FILE).write_text("{not json")
    assert running_owner(tmp_path) is None
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / RUN_FILE).write_text(json.dumps({"url": f"redis://127.0.0.1:{free_port()}/0",
                                                 "owner_pid": gone.pid}))
    assert running_owner(tmp_path) is None  # its owner is gone
    (tmp_path / RUN_FILE).write_text(json.dumps({"url": f"redis://127.0.0.1:{free_port()}/0",
                                                 "owner_pid": os.getpid()}))
    assert running_owner(tmp_path) is None  # alive, but nothing answers there


def test_a_repair_is_refused_while_another_worker_runs_the_server(tmp_path: Path) -> None:
    with (tmp_path / "nsfleet.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RuntimeError, match=r"--repair-aof: another nsfleet worker runs the "
                                               r"embedded Redis in .*: stop it first"):
            EmbeddedRedis(str(tmp_path), repair_aof=True).start()
