"""Issue 23, the address server: ``GET /rocketmq/{subgroup}`` on real worker processes, read as
Java's DefaultTopAddressing.fetchNSAddr and the C++ 2.x client's SyncfetchNsAddr read it; it lists
the live workers only, and the fixed extra addresses come and go with the fleet-wide setting."""

from __future__ import annotations

import signal
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsfleet.cli import main
from nsfleet.redis_server import RedisServer
from nsfleet.service.presence import TTL_MS
from tests.support.fleet import wait_until
from tests.support.workers import WorkerProcess, started
from tests.support.workers import request as http

pytestmark = pytest.mark.redis

JAVA_NAMESRVS = ["10.9.0.1:9876", "10.9.0.2:9876"]


def java_fetch_nsaddr(ws_addr: str, unit_name: str = "",
                      para: dict[str, str] | None = None) -> str | None:
    """DefaultTopAddressing.fetchNSAddr, line by line: the URL it builds from the unit name and
    the extra parameters, a GET, and clearNewLine of a 200 answer (None otherwise)."""
    url = ws_addr
    if para:
        url += f"-{unit_name}?nofix=1&" if unit_name.strip() else "?"
        url += "&".join(f"{k}={v}" for k, v in para.items())
    elif unit_name.strip():
        url += f"-{unit_name}?nofix=1"
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            if resp.status != 200:
                return None
            content = resp.read().decode("utf-8")
    except urllib.error.HTTPError:
        return None
    text = content.strip()
    for newline in ("\r", "\n"):
        if newline in text:
            return text[:text.index(newline)]
    return text


def cpp_fetch_first_segment(port: int, path: str) -> tuple[bytes, bytes]:
    """The C++ 2.x client's request (HTTP/1.0, Connection: close): what the first recv() got,
    which is all it keeps, and what came after it."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n"
                  "Connection: close\r\n\r\n".encode())
        first = s.recv(65536)
        rest = b""
        while chunk := s.recv(65536):
            rest += chunk
    return first, rest


@pytest.fixture
def fleet(redis_server: RedisServer, tmp_path: Path,
          request: pytest.FixtureRequest) -> Iterator[list[WorkerProcess]]:
    namespace = "addr-" + request.node.name.replace("_", "-")[:40]
    env = {"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": namespace,
           "NSFLEET_DRAIN_TIMEOUT": "1"}
    with started(env, tmp_path) as workers:
        yield workers


def remoting_addrs(workers: list[WorkerProcess]) -> set[str]:
    return {f"127.0.0.1:{w.remoting_port}" for w in workers}


def listed(worker: WorkerProcess) -> set[str]:
    answer = java_fetch_nsaddr(f"{worker.url}/rocketmq/nsaddr")
    assert answer is not None
    return set(answer.split(";"))


def test_every_form_a_client_builds_lists_the_live_workers(
        fleet: list[WorkerProcess]) -> None:
    expected = remoting_addrs(fleet)
    for w in fleet:
        base = f"{w.url}/rocketmq/nsaddr"
        for unit, para in (("", None), ("unit1", None), ("", {"label": "abc"}),
                           ("unit1", {"label": "abc", "zone": "z1"})):
            answer = java_fetch_nsaddr(base, unit, para)
            assert answer is not None and set(answer.split(";")) == expected
        # Another rocketmq.namesrv.domain.subgroup is the same fleet.
        assert set((java_fetch_nsaddr(f"{w.url}/rocketmq/other-group") or "").split(";")) \
            == expected
    with urllib.request.urlopen(f"{fleet[0].url}/rocketmq/nsaddr", timeout=3) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        body = resp.read().decode()
    assert body == body.strip() and "\n" not in body  # one line, exactly host:port;host:port


def test_the_cpp_2x_client_gets_the_whole_answer_in_its_first_read(
        fleet: list[WorkerProcess]) -> None:
    first, rest = cpp_fetch_first_segment(fleet[0].http_port, "/rocketmq/nsaddr")
    head, sep, body = first.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and sep, first
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    assert len(body) == length and rest == b""  # then the connection closed
    assert set(body.decode().split(";")) == remoting_addrs(fleet)


def test_extra_addresses_come_and_go_with_the_setting(fleet: list[WorkerProcess],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = fleet
    workers = remoting_addrs(fleet)
    assert main(["admin", "--server", a.url, "address-server", "add", *JAVA_NAMESRVS]) == 0
    for w in fleet:  # fleet-wide: every worker answers the same
        assert listed(w) == workers | set(JAVA_NAMESRVS)
    answer = java_fetch_nsaddr(f"{b.url}/rocketmq/nsaddr") or ""
    assert answer.split(";")[-2:] == JAVA_NAMESRVS  # the workers first, then the extra ones
    capsys.readouterr()
    assert main(["admin", "--server", b.url, "address-server", "show", "--json"]) == 0
    assert '"10.9.0.1:9876"' in capsys.readouterr().out
    assert main(["admin", "--server", b.url, "address-server", "remove", JAVA_NAMESRVS[0]]) == 0
    assert listed(a) == workers | {JAVA_NAMESRVS[1]}
    assert http("PUT", f"{a.url}/v1/address-server/extra", {"addresses": []})[0] == 200
    assert listed(b) == workers
    status, body = http("POST", f"{a.url}/v1/address-server/extra", {"add": ["not-an-address"]})
    assert status == 400 and "host:port" in body["error"]
    assert listed(a) == workers  # nothing written
    assert main(["admin", "--server", a.url, "address-server", "add", "nope"]) == 1


def test_a_killed_worker_leaves_the_answer_within_its_presence_ttl(
        fleet: list[WorkerProcess]) -> None:
    a, b, c = fleet
    c.stop(signal.SIGKILL)
    # Gone once its presence expires (TTL_MS), give or take a refresh period.
    wait_until(lambda: listed(a) == remoting_addrs([a, b]), timeout=TTL_MS / 1000 + 5,
               interval=0.5)
    # A worker stopped with SIGTERM takes itself out at once.
    b.stop()
    assert listed(a) == remoting_addrs([a])


def test_the_advertised_address_is_the_configured_one(redis_server: RedisServer,
                                                      tmp_path: Path) -> None:
    env = {"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": "addr-advertised",
           "NSFLEET_ADVERTISE_ADDRESS": "nsfleet.rocketmq.svc"}
    w = WorkerProcess(env, tmp_path / "worker.log").start()
    try:
        assert listed(w) == {f"nsfleet.rocketmq.svc:{w.remoting_port}"}
    finally:
        w.stop()
