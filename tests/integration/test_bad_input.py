"""Bad input through every front door costs a worker nothing (docs/compatibility.md, "Bad
input").

One real ``nsfleet serve`` process, its log in a file, gets seeded random bad input for a bounded
time: JSON bodies nested past the limit, cut short, of the wrong type or not UTF-8 on every HTTP
endpoint that reads one; malformed HTTP (a bad version, request line, header token or
Content-Length); remoting frames with a huge header value, deep nesting or non-standard JSON
past what is read leniently; KV names no Redis key may carry, over both protocols. Checked:
every request is answered with a clear error (never 500, never a hang), a legitimate route read
and ``/readyz`` keep being answered, the log gets no traceback, at most one line per bad request
and no line over 4 KB, the worker gives back the memory a burst of huge frames took, and Redis
holds the valid writes and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import socket
import struct
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from nsfleet.domain import validation
from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import SUCCESS, Command, decode, encode
from tests.support.workers import WorkerProcess, request

pytestmark = pytest.mark.redis

SEED = 39
SECONDS = 4.0  # of random input per test
TOPIC = "BadInputTopic"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
LINE_LIMIT = 4096
DEPTH_ERROR = "invalid JSON: nested deeper than 100 levels"
SYSTEM_ERROR = 1


class Worker:
    """The worker under attack: its ports, its log from a mark on, its namespace in Redis."""

    def __init__(self, process: WorkerProcess, client: redis.Redis, prefix: str) -> None:
        self.process = process
        self.client = client
        self.prefix = prefix
        self.mark = 0

    @property
    def url(self) -> str:
        return self.process.url

    def log_mark(self) -> None:
        self.mark = self.process.log_path.stat().st_size

    def new_log_lines(self) -> list[bytes]:
        """Lines written since the mark, less the counts that close an earlier test's folding
        window (``repeated=N``: they stand for lines written before the mark)."""
        with self.process.log_path.open("rb") as f:
            f.seek(self.mark)
            return [line for line in f.read().splitlines() if b"repeated=" not in line]

    def rss(self) -> int:
        assert self.process.process is not None
        return int(psutil.Process(self.process.process.pid).memory_info().rss)


@pytest.fixture(scope="module")
def worker(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Worker]:
    namespace = f"bad-{uuid.uuid4().hex[:10]}"
    log = Path(tmp_path_factory.mktemp("bad-input")) / "worker.log"
    process = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url,
                             "NSFLEET_NAMESPACE": namespace}, log).start()
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    status, _ = request("POST", f"{process.url}/v1/brokers/register", {
        "clusterName": "bad", "brokerAddr": "127.0.0.1:10911", "brokerName": "bad-b",
        "brokerId": 0, "topicConfigTable": {TOPIC: {}, f"{TOPIC}2": {}}})
    assert status == 200
    try:
        yield Worker(process, client, f"nsfleet:{{{namespace}}}")
    finally:
        process.stop()
        keys = list(client.scan_iter(match=f"nsfleet:{{{namespace}}}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.fixture
def attacked(worker: Worker) -> Iterator[Worker]:
    """The worker, checked after the test: still answering, and a log that took the input
    calmly (the test counts its own bad requests against the lines)."""
    worker.log_mark()
    yield worker
    assert_healthy(worker)
    lines = worker.new_log_lines()
    assert not [line for line in lines if b"Traceback" in line], lines[:20]
    assert max((len(line) for line in lines), default=0) <= LINE_LIMIT


# --- talking to the worker -----------------------------------------------------------------------


def http(worker: Worker, method: str, path: str, body: bytes | None = None,
         timeout: float = 10.0) -> tuple[int, bytes]:
    """One request on its own connection: (status, body)."""
    host, port = "127.0.0.1", worker.process.http_port
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body or b'')}\r\n\r\n")
    answer = raw(port, head.encode() + (body or b""), timeout)
    status = int(answer.split(b" ", 2)[1])
    return status, answer.partition(b"\r\n\r\n")[2]


def raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data``, read until the worker closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


PROBE_OPAQUE = 424242


def remoting(worker: Worker, data: bytes, timeout: float = 10.0) -> list[Command]:
    """Send frames on a new connection, then a route read: the answers before the route
    read's, or all of them until the worker closed the connection (a bad stream)."""
    probe = encode(Command(105, {"topic": TOPIC}, opaque=PROBE_OPAQUE))
    answers: list[Command] = []
    with socket.create_connection(("127.0.0.1", worker.process.remoting_port),
                                  timeout=timeout) as sock:
        sock.sendall(data + probe)
        buf = b""
        while chunk := sock.recv(65536):
            buf += chunk
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                (length,) = struct.unpack(">i", buf[:4])
                answer = decode(buf[4:4 + length])
                buf = buf[4 + length:]
                if answer.opaque == PROBE_OPAQUE:
                    assert answer.code == SUCCESS
                    return answers
                answers.append(answer)
    return answers


def remoting_call(worker: Worker, cmd: Command) -> Command:
    """One request on its own connection, and its answer."""
    with socket.create_connection(("127.0.0.1", worker.process.remoting_port),
                                  timeout=10) as sock:
        sock.sendall(encode(cmd))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "closed without an answer"
            buf += chunk
    return decode(buf[4:])


def assert_healthy(worker: Worker) -> None:
    assert request("GET", f"{worker.url}/readyz")[0] == 200
    assert remoting(worker, b"") == []  # the route read answered SUCCESS


def run_for(seconds: float, step: Callable[[random.Random], None]) -> int:
    """``step`` with one seeded generator until ``seconds`` pass: how many steps ran."""
    rng = random.Random(SEED)
    deadline = time.monotonic() + seconds
    steps = 0
    while time.monotonic() < deadline:
        step(rng)
        steps += 1
    return steps


# --- bad JSON over HTTP --------------------------------------------------------------------------

JSON_ENDPOINTS = [("POST", "/v1/brokers/register"), ("POST", "/v1/brokers/heartbeat"),
                  ("POST", "/v1/brokers/unregister"), ("POST", "/v1/brokers/query-data-version"),
                  ("PUT", "/v1/kv/bad-ns/k"), ("POST", "/v1/routes/watch"),
                  ("PUT", "/v1/namesrv-config"), ("PUT", f"/v1/topics/{TOPIC}-new"),
                  ("POST", "/v1/controller/broker-sets/bad-set/elect"),
                  ("POST", "/v1/controller/broker-sets/bad-set/clean")]


def nested(rng: random.Random) -> bytes:
    depth = rng.choice([101, 150, 999, 1001, 5000, 100_000])
    if rng.random() < 0.5:
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b"[" * depth + b"]" * depth


def bad_json(rng: random.Random) -> tuple[bytes, str | None]:
    """A body no endpoint may store, and the words its error must hold (None: any 4xx)."""
    kind = rng.randrange(7)
    if kind == 0:
        return nested(rng), DEPTH_ERROR
    if kind == 1:  # nested inside an otherwise valid registration
        deep = nested(rng).decode()
        return (f'{{"clusterName":"c","brokerAddr":"127.0.0.1:1","brokerName":"n","brokerId":0,'
                f'"topicConfigTable":{{"T":{{"attributes":{deep}}}}}}}').encode(), DEPTH_ERROR
    if kind == 2:  # cut short
        text = json.dumps({"clusterName": "c", "topicConfigTable": {"T": {"perm": 6}}})
        return text[:rng.randrange(1, len(text))].encode(), "malformed JSON"
    if kind == 3:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))), None
    if kind == 4:
        return rng.choice([b"[]", b"1", b'"s"', b"null", b"true"]), "JSON object"
    if kind == 5:
        return b'{"clusterName": "\xff\xfe"}', "malformed JSON"
    return json.dumps({"clusterName": 5, "brokerAddr": [], "value": {"x": 1},
                       "topics": "x" * rng.randrange(1, 300_000)}).encode(), None


def test_bad_json_on_every_http_endpoint_is_a_clear_400(attacked: Worker) -> None:
    before = dump(attacked)
    seen: dict[int, int] = {}

    def step(rng: random.Random) -> None:
        method, path = rng.choice(JSON_ENDPOINTS)
        body, words = bad_json(rng)
        status, answer = http(attacked, method, path, body)
        seen[status] = seen.get(status, 0) + 1
        assert 400 <= status < 500, (method, path, body[:80], status, answer[:200])
        error = json.loads(answer)["error"]
        # A registration is read into its fields: nesting in a field it does not read is
        # skipped (docs/compatibility.md), and what it lacks is the error.
        if words is not None and path != "/v1/brokers/register":
            assert words in error, (path, body[:80], error)
        assert len(error) < 1000

    steps = run_for(SECONDS, step)
    print(f"{steps} bad bodies, statuses {seen}")
    assert steps > 30
    assert len(attacked.new_log_lines()) == 0  # a refused body is no news for the log
    assert dump(attacked) == before


# --- malformed HTTP ------------------------------------------------------------------------------

MALFORMED = [b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
             b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
             b"GET /readyz HTTP/1.1\r\nHo st: x\r\n\r\n",
             b"POST /v1/brokers/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
             b"GET /readyz HTTP/1.1\r\nHost: x\r\nX: " + b"v" * 9000 + b"\r\n\r\n",
             b"POST /v1/kv/a/b HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked"
             b"\r\n\r\n"]


def test_malformed_http_is_answered_400_with_at_most_one_folded_line(attacked: Worker) -> None:
    sent = 0

    def step(rng: random.Random) -> None:
        nonlocal sent
        answer = raw(attacked.process.http_port, rng.choice(MALFORMED))
        sent += 1
        assert answer.split(b" ", 2)[1] == b"400", answer[:200]

    run_for(SECONDS / 2, step)
    lines = attacked.new_log_lines()
    assert sent > 30
    # Identical reports from many connections fold into one line and a count per window.
    assert len(lines) <= len(MALFORMED) * 2, lines
    assert all(b"malformed HTTP request" in line for line in lines), lines


# --- bad remoting frames -------------------------------------------------------------------------


def header(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def test_huge_header_values_are_refused_and_their_memory_given_back(attacked: Worker) -> None:
    """A string where extFields' object belongs: a header of 8 MiB is refused as soon as its
    length arrives, one of 900 KiB is decoded and refused with the value's start and length in
    the log line; the connection is closed either way, and the worker's memory comes back (the
    failed frame was once kept alive by the exception's traceback)."""
    start = attacked.rss()
    for _ in range(12):
        for size in (8 * 1024 * 1024, 900 * 1024):
            frame_bytes = frame(header({"code": 105, "extFields": "A" * size, "flag": 0,
                                        "language": "JAVA", "opaque": 1, "version": 453}))
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # refused early
                assert remoting(attacked, frame_bytes) == []  # closed without an answer
    time.sleep(0.5)
    assert attacked.rss() < start + 48 * 1024 * 1024, (start, attacked.rss())
    lines = attacked.new_log_lines()
    # The others fold into a count at the window's end.
    assert len(lines) == 2, lines
    assert b"exceeds the maximum of 1048576" in lines[0]
    assert b"(921600 chars)" in lines[1]


def bad_frame(rng: random.Random) -> bytes:
    kind = rng.randrange(6)
    if kind == 0:  # nested past the limit
        return frame(nested(rng))
    if kind == 1:  # non-standard JSON past what is read leniently
        return frame(b"{'code':105,'extFields':{'topic':'" + b"x" * 70_000 + b"'},}")
    if kind == 2:
        return frame(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))))
    if kind == 3:  # a header length past the frame
        return struct.pack(">ii", 8, 1000) + b"{}{}"
    if kind == 4:  # nesting in a body (QUERY_DATA_VERSION's DataVersion)
        return frame(header({"code": 322, "flag": 0, "opaque": 1, "version": 453,
                             "extFields": {"clusterName": "c", "brokerAddr": "127.0.0.1:1",
                                           "brokerName": "b", "brokerId": "0"}}), nested(rng))
    return frame(header({"code": 105, "flag": 0, "opaque": 1, "version": 453,
                         "extFields": {"topic": "T" * rng.randrange(1, 200_000)}}))


def test_bad_remoting_frames_close_or_answer_quickly(attacked: Worker) -> None:
    before = dump(attacked)
    sent = 0

    def step(rng: random.Random) -> None:
        nonlocal sent
        started = time.monotonic()
        for answer in remoting(attacked, bad_frame(rng)):
            assert answer.code != SUCCESS or answer.opaque == 1
        sent += 1
        assert time.monotonic() - started < 5

    run_for(SECONDS, step)
    assert sent > 30
    assert len(attacked.new_log_lines()) <= sent
    assert dump(attacked) == before


# --- KV names and values -------------------------------------------------------------------------

NAME_PARTS = ["a", "ns", "key", "é", "-", "%", ":", " ", "\x00", "\n", "\t", "\x1f", "\x7f"]


def kv_name(rng: random.Random) -> str:
    return "".join(rng.choice(NAME_PARTS) for _ in range(rng.randrange(0, 5)))


def test_kv_names_redis_cannot_carry_are_refused_over_both_protocols(attacked: Worker) -> None:
    stored: dict[tuple[str, str], str] = {}
    refused = 0

    def valid(name: str) -> bool:
        return validation.is_valid(validation.kv_part, name)

    def step(rng: random.Random) -> None:
        nonlocal refused
        namespace, key = f"bad-{kv_name(rng)}", kv_name(rng)
        value = f"v{rng.randrange(1000)}"
        ok = valid(namespace) and valid(key)
        if rng.random() < 0.5:
            path = (f"/v1/kv/{urllib.parse.quote(namespace, safe='')}/"
                    f"{urllib.parse.quote(key, safe='')}")
            status, answer = http(attacked, "PUT", path, json.dumps({"value": value}).encode())
            if key == "":  # no route has an empty path segment
                assert status in (404, 405), answer
                refused += 1
                return
            assert status == (200 if ok else 400), (namespace, key, answer)
        else:
            answer_cmd = remoting_call(attacked, Command(
                100, {"namespace": namespace, "key": key, "value": value}, opaque=1))
            assert answer_cmd.code == (SUCCESS if ok else SYSTEM_ERROR), (namespace, key)
            if not ok:
                assert "must not be empty" in (answer_cmd.remark or "") or (
                    "control character" in (answer_cmd.remark or ""))
        if ok:
            stored[(namespace, key)] = value
        else:
            refused += 1

    run_for(SECONDS, step)
    no_value = remoting_call(attacked, Command(100, {"namespace": "bad-nv", "key": "k"}, opaque=1))
    assert (no_value.code, no_value.remark) == (SYSTEM_ERROR, "the custom field <value> is null")
    assert refused > 10 and stored
    # Redis holds every accepted value and no name with a control character or an empty part.
    names = list(attacked.client.scan_iter(match=f"{attacked.prefix}:*", count=1000))
    assert not [n for n in names if CONTROL.search(n)]
    namespaces = attacked.client.smembers(f"{attacked.prefix}:idx:kvns")
    assert all(valid(ns) for ns in namespaces) and "bad-nv" not in namespaces
    for (namespace, key), value in stored.items():
        status, answer = request(
            "GET", f"{attacked.url}/v1/kv/{urllib.parse.quote(namespace, safe='')}/"
                   f"{urllib.parse.quote(key, safe='')}")
        assert (status, answer) == (200, {"value": value})
    # The audit trail has a line per accepted write; a refusal writes none.
    assert [line for line in attacked.new_log_lines() if b"audit=True" not in line] == []


def dump(worker: Worker) -> dict[str, Any]:
    """The namespace's keys with their contents (the registration's deadline score aside)."""
    out: dict[str, Any] = {}
    for key in sorted(worker.client.scan_iter(match=f"{worker.prefix}:*", count=1000)):
        kind = worker.client.type(key)
        if kind == "hash":
            out[key] = worker.client.hgetall(key)
        elif kind == "set":
            out[key] = sorted(worker.client.smembers(key))
        elif kind == "string":
            out[key] = worker.client.get(key)
        else:
            out[key] = kind
    return out
