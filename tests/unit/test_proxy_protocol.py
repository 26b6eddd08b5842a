"""HAProxy PROXY protocol v1/v2 prefix detection, as Java's NettyRemotingServer does on the first
bytes of a connection before NettyDecoder reads frames."""

from __future__ import annotations

import ipaddress
import struct

import pytest

from nsfleet.proxy_protocol import (
    NEED_MORE,
    NOT_PROXY,
    V2_SIGNATURE,
    ProxyParseResult,
    ProxyProtocolError,
    ProxyState,
    format_hostport,
    parse_proxy_header,
)
from nsfleet.wire.codec import RemotingCommand, encode_frame


def v2(command: int, family: int, transport: int, payload: bytes) -> bytes:
    return (V2_SIGNATURE + bytes([0x20 | command, (family << 4) | transport])
            + struct.pack(">H", len(payload)) + payload)


def inet4(src: str, dst: str, sport: int, dport: int) -> bytes:
    return (ipaddress.IPv4Address(src).packed + ipaddress.IPv4Address(dst).packed
            + struct.pack(">HH", sport, dport))


def inet6(src: str, dst: str, sport: int, dport: int) -> bytes:
    return (ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed
            + struct.pack(">HH", sport, dport))


FRAME = encode_frame(RemotingCommand(code=105, ext_fields={"topic": "T"}))


def test_remoting_frame_is_not_proxy_from_the_first_byte() -> None:
    assert parse_proxy_header(FRAME) == NOT_PROXY
    assert parse_proxy_header(FRAME[:1]) == NOT_PROXY
    assert parse_proxy_header(b"\x16\x03\x01") == NOT_PROXY  # TLS ClientHello
    assert NOT_PROXY.consumed == 0


@pytest.mark.parametrize("prefix", [b"", b"P", b"PROX", b"PROXY", b"\r", b"\r\n\r\n\x00\r\nQUI"])
def test_partial_signatures_need_more(prefix: bytes) -> None:
    assert parse_proxy_header(prefix) == NEED_MORE


def test_v1_tcp4() -> None:
    header = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 9876\r\n"
    result = parse_proxy_header(header + FRAME)
    assert result == ProxyParseResult(ProxyState.PARSED, len(header), "192.168.0.1:56324", 1)


def test_v1_tcp6() -> None:
    header = b"PROXY TCP6 2001:db8::1 2001:db8::2 4000 9876\r\n"
    result = parse_proxy_header(header)
    assert (result.consumed, result.client_address) == (len(header), "[2001:db8::1]:4000")


def test_v1_unknown() -> None:
    header = b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"
    assert parse_proxy_header(header + FRAME) == ProxyParseResult(
        ProxyState.PARSED, len(header), None, 1)
    assert parse_proxy_header(b"PROXY UNKNOWN\r\n").consumed == 15


def test_v1_incremental() -> None:
    header = b"PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n"
    for i in range(len(header)):
        assert parse_proxy_header(header[:i]).state is ProxyState.NEED_MORE
    assert parse_proxy_header(header).state is ProxyState.PARSED


@pytest.mark.parametrize(
    "header",
    [
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
        b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 1.2.3.999 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 ::1 ::1 1 2\r\n",
        b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
        b"PROXY TCP4 1.2.3.4 \xff.6.7.8 1 2\r\n",
        b"PROXY " + b"A" * 110,
    ],
)
def test_v1_malformed(header: bytes) -> None:
    with pytest.raises(ProxyProtocolError):
        parse_proxy_header(header)
    assert issubclass(ProxyProtocolError, ValueError)


def test_v2_tcp4() -> None:
    header = v2(1, 1, 1, inet4("10.1.2.3", "10.0.0.1", 5555, 9876))
    assert parse_proxy_header(header + FRAME) == ProxyParseResult(
        ProxyState.PARSED, 28, "10.1.2.3:5555", 2)


def test_v2_tcp6_with_tlvs() -> None:
    tlv = bytes([0x04]) + struct.pack(">H", 3) + b"abc"
    header = v2(1, 2, 1, inet6("2001:db8::7", "::1", 443, 9876) + tlv)
    result = parse_proxy_header(header + FRAME)
    assert (result.consumed, result.client_address) == (len(header), "[2001:db8::7]:443")


def test_v2_local_and_unspec_and_unix() -> None:
    local = v2(0, 0, 0, b"")
    assert parse_proxy_header(local + FRAME) == ProxyParseResult(ProxyState.PARSED, 16, None, 2)
    local_with_addr = v2(0, 1, 1, inet4("1.1.1.1", "2.2.2.2", 1, 2))
    assert parse_proxy_header(local_with_addr).client_address is None
    assert parse_proxy_header(v2(1, 0, 0, b"")).client_address is None
    unix = v2(1, 3, 1, b"/tmp/a".ljust(108, b"\x00") + b"/tmp/b".ljust(108, b"\x00"))
    assert parse_proxy_header(unix) == ProxyParseResult(ProxyState.PARSED, 232, None, 2)


def test_v2_incremental() -> None:
    header = v2(1, 1, 1, inet4("10.1.2.3", "10.0.0.1", 5555, 9876))
    for i in range(len(header)):
        assert parse_proxy_header(header[:i]).state is ProxyState.NEED_MORE
    assert parse_proxy_header(bytearray(header)).client_address == "10.1.2.3:5555"
    assert parse_proxy_header(memoryview(header)).consumed == 28


@pytest.mark.parametrize(
    "header",
    [
        V2_SIGNATURE + bytes([0x11, 0x11]) + struct.pack(">H", 0),  # version 1
        V2_SIGNATURE + bytes([0x22, 0x11]) + struct.pack(">H", 0),  # command 2
        V2_SIGNATURE + bytes([0x21, 0x41]) + struct.pack(">H", 0),  # family 4
        V2_SIGNATURE + bytes([0x21, 0x13]) + struct.pack(">H", 0),  # transport 3
        v2(1, 1, 1, b"\x00" * 11),  # INET block too short
        v2(1, 2, 1, b"\x00" * 35),  # INET6 block too short
        v2(1, 3, 1, b"\x00" * 100),  # UNIX block too short
    ],
)
def test_v2_malformed(header: bytes) -> None:
    with pytest.raises(ProxyProtocolError):
        parse_proxy_header(header)


def test_format_hostport() -> None:
    assert format_hostport("1.2.3.4", 10911) == "1.2.3.4:10911"
    assert format_hostport("::1", 10911) == "[::1]:10911"
