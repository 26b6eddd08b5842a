"""The remoting hot path's shortcuts give exactly what the generic code gives: the typed JSON
header decode, the plain response header, the cached route answer encoded as bytes, and the
server writing the answers given inline once per received batch."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from nsfleet.domain.errors import NotReady, TopicRouteNotFound
from nsfleet.domain.model import BrokerData, QueueData, TopicRouteData
from nsfleet.metrics import Metrics
from nsfleet.remoting.handlers import _route_response, get_route_cached
from nsfleet.remoting.server import ENDPOINTS, RemotingProtocol
from nsfleet.service.route_reads import RouteAnswer
from nsfleet.wire import codec
from nsfleet.wire.codec import (
    FrameDecoder,
    HeaderDecodeError,
    RemotingCommand,
    SerializeType,
    decode_json_header,
    encode_frame,
    encode_json_header,
    encode_plain_response,
    make_response,
)
from nsfleet.wire.headers import GetRouteInfoHeader

HEADERS = [
    b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}',
    b'{"code":105,"language":"GO","opaque":-1,"version":0}',
    b'{"code":105,"language":"KLINGON","flag":2}',
    b'{"code":105,"language":3}',  # a language by number: the generic reader's rule
    b'{"code":"105","opaque":" 12 "}',  # numbers as strings
    b'{"code":105.0,"flag":true}',
    b'{"code":2147483648}',  # past int32: undecodable either way
    b'{"code":105,"extFields":{"a":1,"b":null,"c":true,"d":{"x":1}}}',
    b'{"code":105,"extFields":null,"remark":5}',
    b'{"code":105,"remark":"r","unknown":[1,2],"code":106}',
    b'{code:105,extFields:{topic:"T"}}',  # fastjson only
    b'\xef\xbb\xbf{"code":105}',
    b'{"code":105,"extFields":{"topic":"T\xff"}}',  # invalid UTF-8
    b'[1]', b"{", b'{"extFields":[]}',
]


class _Refuse:
    def decode(self, data: Any) -> Any:
        raise ValueError("refused")


def _decode(data: bytes) -> object:
    try:
        return decode_json_header(data)
    except HeaderDecodeError as exc:
        return ("error", type(exc))


@pytest.mark.parametrize("header", HEADERS)
def test_the_typed_header_decode_reads_what_the_generic_one_reads(
        header: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _decode(header)
    monkeypatch.setattr(codec, "_plain_header", _Refuse())
    assert fast == _decode(header)


def _slow_header(cmd: RemotingCommand) -> bytes:
    """The generic encoder's output: force it past the plain shortcut with a language detour."""
    parts = json.loads(encode_json_header(RemotingCommand(
        code=cmd.code, language="GO", version=cmd.version, opaque=cmd.opaque, flag=cmd.flag,
        serialize_type=cmd.serialize_type)))
    parts["language"] = "JAVA"
    return json.dumps(parts, separators=(",", ":")).encode()


@pytest.mark.parametrize("cmd", [
    RemotingCommand(code=0, version=479, opaque=7, flag=1),
    RemotingCommand(code=17, version=0, opaque=-(1 << 31), flag=3,
                    serialize_type=SerializeType.ROCKETMQ),
    RemotingCommand(code=1, version=401, opaque=(1 << 31) - 1, flag=0),
])
def test_the_plain_header_is_the_generic_encoders_text(cmd: RemotingCommand) -> None:
    assert encode_json_header(cmd) == _slow_header(cmd)


@pytest.mark.parametrize("opaque", [0, 1, -5, (1 << 31) - 1])
@pytest.mark.parametrize("code", [0, 17])
def test_a_plain_response_frame_is_the_generic_frame(opaque: int, code: int) -> None:
    request = RemotingCommand(code=105, language="GO", version=401, opaque=opaque)
    body = b'{"brokerDatas":[]}'
    assert encode_plain_response(request, code, body) == encode_frame(
        make_response(request, code, body=body))


ROUTE = TopicRouteData(
    [QueueData("b\u00e9", 4, 4, 6)],
    [BrokerData("c", "b\u00e9", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}, zone_name="z1"),
     BrokerData("c", "x", {0: "10.0.0.3:10911"}, zone_name="z2")])


class _StubNameServer:
    """What get_route_cached asks of the NameServer: cached_route."""

    def __init__(self, answer: RouteAnswer | None = None, error: Exception | None = None):
        self.answer, self.error = answer, error
        self.metrics = Metrics()

    def cached_route(self, topic: str | None) -> RouteAnswer | None:
        if self.error is not None:
            raise self.error
        return self.answer


def _answer() -> RouteAnswer:
    return RouteAnswer(ROUTE, time.monotonic() + 60, {})


@pytest.mark.parametrize("version", [479, 401, 400, 0])
@pytest.mark.parametrize("ext", [
    {"topic": "T"},
    {"topic": "T", "acceptStandardJsonOnly": "true"},
    {"topic": "T", "__ZONE_MODE": "true", "__ZONE_NAME": "z1"},
    {"topic": "T", "__ZONE_MODE": "false", "__ZONE_NAME": "z1"},
])
@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_cached_route_answer_is_the_generic_response(
        version: int, ext: dict[str, str], serialize_type: SerializeType) -> None:
    cmd = RemotingCommand(code=105, version=version, opaque=42, ext_fields=ext,
                          serialize_type=serialize_type)
    answered = get_route_cached(_StubNameServer(_answer()), cmd)  # type: ignore[arg-type]
    expected = _route_response(cmd, GetRouteInfoHeader.decode(ext), _answer())
    assert answered == (0, encode_frame(expected))


@pytest.mark.parametrize("error", [TopicRouteNotFound("T"), NotReady()])
def test_a_refused_route_request_is_answered_inline(error: Exception) -> None:
    cmd = RemotingCommand(code=105, version=479, opaque=9, ext_fields={"topic": "T"})
    code, frame = get_route_cached(_StubNameServer(error=error), cmd)  # type: ignore[arg-type]
    [decoded] = FrameDecoder().feed(frame)
    assert code == decoded.code == error.code  # type: ignore[attr-defined]
    assert decoded.opaque == 9 and decoded.is_response


def test_a_cache_miss_is_left_to_the_task_path() -> None:
    cmd = RemotingCommand(code=105, version=479, ext_fields={"topic": "T"})
    assert get_route_cached(_StubNameServer(None), cmd) is None  # type: ignore[arg-type]


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def writelines(self, parts: list[bytes]) -> None:
        """One send of several frames (uvloop: one writev)."""
        self.writes.append(b"".join(parts))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5000) if name == "peername" else None


class _StubServer:
    max_frame_size = 1 << 20
    guard = None  # access control off
    trusted_proxies = None
    endpoints = ENDPOINTS

    def __init__(self, ns: _StubNameServer) -> None:
        self.ns = ns
        self.connections: set[RemotingProtocol] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.in_flight = 0

    def next_connection_id(self) -> str:
        return "w:1"

    def route_answers(self, code: int) -> Any:
        metrics = self.ns.metrics
        return metrics.tally(metrics.remoting_requests, "105", str(code))

    def spawn(self, coro: Any) -> None:
        coro.close()
        raise AssertionError("a cached route must not need a task")


@pytest.fixture
def protocol() -> Iterator[tuple[RemotingProtocol, _Transport]]:
    proto = RemotingProtocol(_StubServer(_StubNameServer(_answer())))  # type: ignore[arg-type]
    transport = _Transport()
    proto.connection_made(transport)  # type: ignore[arg-type]
    proto.proxy_pending = None
    yield proto, transport


def _route_request(opaque: int, *, oneway: bool = False) -> bytes:
    return encode_frame(RemotingCommand(code=105, version=479, opaque=opaque,
                                        flag=2 if oneway else 0, ext_fields={"topic": "T"}))


def test_answers_given_inline_go_out_in_one_write_per_batch(
        protocol: tuple[RemotingProtocol, _Transport]) -> None:
    proto, transport = protocol
    proto.data_received(b"".join(_route_request(i) for i in range(1, 6)))
    assert len(transport.writes) == 1
    answers = FrameDecoder().feed(transport.writes[0])
    assert [a.opaque for a in answers] == [1, 2, 3, 4, 5]
    proto.data_received(_route_request(6, oneway=True))  # a oneway request gets no answer
    assert len(transport.writes) == 1
    sample = proto.server.ns.metrics.registry.get_sample_value(
        "nsfleet_remoting_requests_total", {"code": "105", "response": "0"})
    assert sample == 6  # the oneway request was served too, only not answered


def test_a_reply_outside_data_received_is_written_at_once(
        protocol: tuple[RemotingProtocol, _Transport]) -> None:
    proto, transport = protocol
    request = RemotingCommand(code=103, opaque=3)
    proto.reply(request, make_response(request, 0))
    assert len(transport.writes) == 1
    assert FrameDecoder().feed(transport.writes[0])[0].opaque == 3


def test_a_bad_frame_after_good_ones_answers_them_then_closes(
        protocol: tuple[RemotingProtocol, _Transport]) -> None:
    proto, transport = protocol
    proto.data_received(_route_request(1) + b"\x00\x00\x00\x01")
    assert [a.opaque for a in FrameDecoder().feed(transport.writes[0])] == [1]
    assert transport.closed
