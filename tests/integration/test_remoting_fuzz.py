"""Fuzzing the remoting port: random bytes, mutated valid frames, random JSON headers and random
requests (codes, ext fields, bodies, flags, versions, both serialize types) thrown at a running
worker for a bounded time.

Checked throughout: the worker never crashes (no error reaches its event loop's exception
handler, the serve task keeps running), a separate long-lived connection keeps being answered,
and nothing is written to Redis. Inputs that the server would decode into a valid write (a
well-formed PUT_KV_CONFIG, say) are filtered out with ``assume``; which inputs those are is
decided with nsfleet's own decoder and request rules, conservatively.

The worker runs in a thread with its own event loop so that the hypothesis test itself is plain
synchronous code (and can shrink a failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nsfleet.config import Settings
from nsfleet.domain import validation
from nsfleet.domain.errors import BodyDecodeError
from nsfleet.domain.java_properties import parse_properties
from nsfleet.proxy_protocol import ProxyState, parse_proxy_header
from nsfleet.redis_server import RedisServer, free_port
from nsfleet.service.namesrv_config import ALWAYS_BLACKLISTED, DEFAULTS
from nsfleet.wire.bodies import crc32, decode_register_body
from nsfleet.wire.codec import FrameDecoder, ProtocolError, RemotingCommand
from nsfleet.wire.fastjson import loads_lenient
from nsfleet.wire.headers import RegisterBrokerHeader
from nsfleet.worker import serve
from tests.support.remoting_client import (
    JSON,
    LANGUAGES,
    RESPONSE_FLAG,
    ROCKETMQ,
    SUCCESS,
    V4_9_8,
    V5_3_3,
    Broker,
    Command,
    TopicConf,
    decode,
    encode,
)

pytestmark = pytest.mark.redis

TIME_BUDGET = 12.0  # seconds of fuzzing; the whole test stays under 20 s
MAX_FRAME = 64 * 1024
READ_CODES = [101, 105, 106, 206, 219, 224, 304, 311, 312, 313, 319, 901]
WRITE_CODES = [100, 102, 103, 104, 205, 216, 217, 318, 322, 327, 904]
FIELDS = ["topic", "namespace", "key", "value", "clusterName", "brokerName", "brokerAddr",
          "brokerId", "cluster", "bodyCrc32", "compressed", "acceptStandardJsonOnly",
          "__ZONE_MODE", "__ZONE_NAME", "haServerAddr", "enableActingMaster",
          "heartbeatTimeoutMillis"]
BROKER = Broker("fc", "10.1.0.1:10911", "fz-broker", 0, "10.1.0.1:10912",
                [TopicConf("FT1", 4, 4), TopicConf("FT2", 2, 2, sys_flag=3)], zone="fz")


# --- the worker in a thread ----------------------------------------------------------------------


class ThreadWorker:
    def __init__(self, redis_url: str) -> None:
        self.settings = Settings(redis_url=redis_url, host="127.0.0.1", http_port=free_port(),
                                 remoting_port=free_port(), namespace=f"fz-{uuid.uuid4().hex[:12]}",
                                 drain_timeout=3.0, max_frame_size=MAX_FRAME)
        self.loop = asyncio.new_event_loop()
        self.loop_errors: list[dict[str, Any]] = []
        self.loop.set_exception_handler(lambda _loop, ctx: self.loop_errors.append(ctx))
        self.stop_event: asyncio.Event | None = None
        self.result: BaseException | int | None = None
        self.thread = threading.Thread(target=self._run, name="fuzz-worker", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> int:
            self.stop_event = asyncio.Event()
            return await serve(self.settings, self.stop_event)
        try:
            self.result = self.loop.run_until_complete(main())
        except BaseException as exc:
            self.result = exc
        finally:
            self.loop.close()

    @property
    def port(self) -> int:
        return self.settings.remoting_port

    @property
    def prefix(self) -> str:
        return f"nsfleet:{{{self.settings.namespace}}}"

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port),
                                                                         timeout=1):
                return
            assert self.thread.is_alive(), f"worker died: {self.result!r}"
            assert time.monotonic() < deadline, "worker did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.stop_event is not None and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(20)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def sync_call(sock: socket.socket, cmd: Command) -> Command:
    sock.sendall(encode(cmd))
    while True:
        (length,) = struct.unpack(">i", recv_exact(sock, 4))
        resp = decode(recv_exact(sock, length))
        if resp.opaque == cmd.opaque:
            return resp


class Prober(threading.Thread):
    """The long-lived connection: a route and a cluster-info query every few milliseconds."""

    def __init__(self, port: int) -> None:
        super().__init__(name="fuzz-prober", daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=3)
        self.done = threading.Event()
        self.answered = 0
        self.failures: list[str] = []
        self.slowest = 0.0

    def run(self) -> None:
        opaque = 1
        try:
            while not self.done.is_set():
                for cmd in (Command(105, {"topic": "FT1"}, None, V5_3_3),
                            Command(106, None, None, 121, serialize_type=ROCKETMQ)):
                    opaque += 1
                    cmd.opaque = opaque
                    t = time.monotonic()
                    resp = sync_call(self.sock, cmd)
                    self.slowest = max(self.slowest, time.monotonic() - t)
                    if resp.code != SUCCESS or resp.flag != RESPONSE_FLAG:
                        self.failures.append(f"{cmd.code}: {resp.code} {resp.remark}")
                    self.answered += 1
                self.done.wait(0.01)
        except Exception as exc:
            self.failures.append(repr(exc))
        finally:
            self.sock.close()


def snapshot(client: redis.Redis, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(client.scan_iter(match=prefix + ":*", count=1000)):
        kind = client.type(key)
        if kind == "string":
            out[key] = client.get(key)
        elif kind == "hash":
            out[key] = client.hgetall(key)
        elif kind == "set":
            out[key] = sorted(client.smembers(key))
        elif kind == "zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            out[key] = client.lrange(key, 0, -1)
    return out


@pytest.fixture
def fuzz_worker(redis_server: RedisServer) -> Iterator[tuple[ThreadWorker, redis.Redis]]:
    worker = ThreadWorker(redis_server.url)
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    worker.start()
    try:
        yield worker, client
    finally:
        worker.stop()
        keys = list(client.scan_iter(match=worker.prefix + ":*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


# --- which decoded requests would write ----------------------------------------------------------


def _writes(cmd: RemotingCommand) -> bool:
    """Conservatively: could this request, once dispatched, change the namespace?"""
    code = cmd.code
    if code not in WRITE_CODES:
        return False
    ext = cmd.ext_fields or {}
    if code in (100, 102):
        named = (validation.is_valid(validation.kv_part, ext.get("namespace"))
                 and validation.is_valid(validation.kv_part, ext.get("key")))
        return named and (code == 102 or "value" in ext)
    if code == 103:
        reg = RegisterBrokerHeader.decode(cmd.ext_fields)
        if reg.body_crc32 and crc32(cmd.body) != reg.body_crc32:
            return False
        try:
            decode_register_body(cmd.body, reg.compressed, cmd.version)
        except BodyDecodeError:
            return False
        return _identity_valid(ext)
    if code == 104:
        return _identity_valid(ext)
    if code in (205, 327):
        return validation.is_valid(validation.name, ext.get("brokerName"))
    if code == 216:
        return True
    if code == 217:
        if not cmd.body:
            return False
        try:
            route = loads_lenient(cmd.body)
        except ValueError:
            return False
        return not isinstance(route, dict) or bool(route.get("queueDatas"))
    if code == 318:
        if not cmd.body:
            return False
        try:
            props = parse_properties(cmd.body.decode("utf-8", errors="replace"))
        except ValueError:
            return False
        return not (set(props) & ALWAYS_BLACKLISTED) and bool(set(props) & set(DEFAULTS))
    return (validation.is_valid(validation.name, ext.get("clusterName"))  # 322, 904
            and validation.is_valid(validation.addr, ext.get("brokerAddr")))


def _identity_valid(ext: dict[str, str]) -> bool:
    return (validation.is_valid(validation.name, ext.get("clusterName"))
            and validation.is_valid(validation.addr, ext.get("brokerAddr"))
            and validation.is_valid(validation.name, ext.get("brokerName")))


def dispatched(data: bytes) -> list[RemotingCommand]:
    """The requests the server would hand to its handlers for a connection sending ``data``."""
    proxy = None
    with contextlib.suppress(ProtocolError):
        proxy = parse_proxy_header(data)
    if proxy is None or proxy.state is ProxyState.NEED_MORE:
        return []
    try:
        cmds = FrameDecoder(MAX_FRAME).feed(data[proxy.consumed:])
    except ProtocolError as exc:
        cmds = exc.decoded
    return [c for c in cmds if not c.is_response]


# --- strategies ----------------------------------------------------------------------------------

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
ext_values = st.one_of(
    st.text(max_size=24),
    st.sampled_from(["true", "false", "TRUE", "0", "-1", "2147483648", "FT1", "fc", "fz-broker",
                     "10.1.0.1:10911", "fz-ns", "k1", "ORDER_TOPIC_CONFIG", "z1"]),
    int32.map(str))
ext_maps = st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=12)),
                           ext_values, max_size=6)
bodies = st.one_of(
    st.none(), st.binary(max_size=300),
    st.sampled_from([b"{}", b"null", b"[]", b'{"queueDatas":[]}', b"configStorePath=/x",
                     b'{"counter":1}', b"x\x9c\x03\x00", b"\x78\xda" + b"\x00" * 10]))
requests = st.builds(
    Command,
    code=st.one_of(st.sampled_from(READ_CODES + WRITE_CODES), int16),
    ext_fields=st.one_of(st.none(), ext_maps),
    body=bodies,
    version=st.one_of(st.sampled_from([0, 36, 37, 121, 400, 401, 413, 479]), int16),
    opaque=int32,
    flag=st.one_of(st.sampled_from([0, 1, 2, 3]), int32),
    remark=st.one_of(st.none(), st.text(max_size=16)),
    language=st.sampled_from(LANGUAGES),
    serialize_type=st.sampled_from([JSON, ROCKETMQ]),
)


def json_containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # A named function: hypothesis reads a lambda's source to see that it recurses, and a
    # lambda over two lines reads as one that does not (a deprecation warning, an error here).
    return st.one_of(st.lists(inner, max_size=4),
                     st.dictionaries(st.text(max_size=8), inner, max_size=4))


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), int32, st.floats(allow_nan=False), st.text(max_size=12)),
    json_containers, max_leaves=12)
header_keys = st.sampled_from(["code", "extFields", "flag", "language", "opaque", "remark",
                               "serializeTypeCurrentRPC", "version"])
random_headers = st.dictionaries(st.one_of(header_keys, st.text(max_size=8)),
                                 st.one_of(json_values, ext_maps), max_size=8)


def frame(header: bytes, body: bytes = b"", stype: int = JSON) -> bytes:
    return (struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header))
            + header + body)


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    data = bytearray(b"".join(encode(c) for c in draw(st.lists(requests, min_size=1,
                                                              max_size=3))))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and data:
            del data[pos:pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


fuzz_inputs = st.one_of(
    st.binary(max_size=80),
    st.binary(max_size=200).map(lambda b: struct.pack(">i", len(b)) + b),
    st.tuples(int32, st.binary(max_size=120)).map(lambda t: struct.pack(">i", t[0]) + t[1]),
    st.tuples(random_headers, st.binary(max_size=40)).map(
        lambda t: frame(json.dumps(t[0]).encode(), t[1])),
    requests.map(encode),
    mutated_frames(),
    st.lists(requests, min_size=2, max_size=5).map(lambda cs: b"".join(map(encode, cs))),
)


# --- the test ------------------------------------------------------------------------------------


def exchange(port: int, data: bytes) -> list[Command]:
    """Send ``data`` on a fresh connection; collect whatever comes back until the server closes
    or goes quiet."""
    answers: list[Command] = []
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(data)
        sock.settimeout(0.03)
        buf = b""
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
        while len(buf) >= 4:
            (length,) = struct.unpack(">i", buf[:4])
            if len(buf) < 4 + length:
                break
            answers.append(decode(buf[4:4 + length]))
            buf = buf[4 + length:]
    return answers


def test_fuzz_the_remoting_port(fuzz_worker: tuple[ThreadWorker, redis.Redis]) -> None:
    worker, rclient = fuzz_worker
    with socket.create_connection(("127.0.0.1", worker.port), timeout=3) as setup:
        for cmd in (BROKER.register_5x(), Command(100, {"namespace": "fz-ns", "key": "k1",
                                                        "value": "v1"}),
                    Command(100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "FT1",
                                  "value": "fz-broker:4"})):
            cmd.opaque = 1
            assert sync_call(setup, cmd).code == SUCCESS
        # The registering connection stays open: closing it would unregister the broker.
        before = snapshot(rclient, worker.prefix)
        assert before, "the namespace has state to protect"
        prober = Prober(worker.port)
        prober.start()
        started = time.monotonic()
        counts = {"sent": 0, "answers": 0, "system_errors": 0}
        system_errors: dict[str, int] = {}

        @settings(max_examples=600, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(fuzz_inputs)
        def run(data: bytes) -> None:
            if time.monotonic() - started > TIME_BUDGET:
                return
            assume(not any(_writes(c) for c in dispatched(data)))
            counts["sent"] += 1
            for resp in exchange(worker.port, data):
                # The version a NameServer of the request's generation answers with.
                assert resp.flag == RESPONSE_FLAG and resp.version in (V5_3_3, V4_9_8)
                counts["answers"] += 1
                if resp.code == 1:
                    counts["system_errors"] += 1
                    kind = (resp.remark or "").split(":")[0][:40]
                    system_errors[kind] = system_errors.get(kind, 0) + 1
            assert worker.thread.is_alive(), f"worker died: {worker.result!r}"
            assert not worker.loop_errors, worker.loop_errors[:3]

        try:
            run()
        finally:
            prober.done.set()
            prober.join(5)
        print(f"fuzz: {counts}, system errors by remark: {system_errors}, "
              f"prober: {prober.answered} answers, slowest {prober.slowest:.3f}s")
        assert worker.thread.is_alive() and worker.result is None
        assert not worker.loop_errors, worker.loop_errors[:3]
        assert prober.failures == []
        assert prober.answered > 20
        assert counts["sent"] > 50
        after = snapshot(rclient, worker.prefix)
        assert after == before
        # Still serving new connections.
        check = Command(105, {"topic": "FT1"}, None, V5_3_3, opaque=5)
        with socket.create_connection(("127.0.0.1", worker.port), timeout=3) as sock:
            assert sync_call(sock, check).code == SUCCESS
