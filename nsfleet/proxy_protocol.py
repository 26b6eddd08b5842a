"""The optional HAProxy PROXY protocol prefix (v1 text, v2 binary) at the start of a connection,
on both ports: the remoting server and the HTTP listener (security/http_auth.py) read it, so it
belongs to neither front end and imports nothing of nsfleet.

The Java NameServer sniffs every new connection for a PROXY header (Netty's
``HAProxyMessageDecoder.detectProtocol`` in ``NettyRemotingServer.HandshakeHandler``) and, when
there is one, records the real client address from it (NettyRemotingServer.HAProxyMessageHandler,
5.1.4 on). This module is the pure, buffer-fed half of that: the server hands it whatever bytes
have arrived and learns whether they start with a PROXY header, whether more bytes are needed,
or how many bytes the header took.

Unlike Netty, which waits for 12 bytes before deciding, we answer "not PROXY" as soon as the bytes
seen cannot begin either signature. A RocketMQ frame never can: its first byte would make the
frame length at least 218 MB ("\\r") or 1.3 GB ("P"), far over the 16 MiB frame limit.

The PyPI ``proxy-protocol`` package was considered and not used: its ``unpack`` wants the caller
to have split off exactly the header (v1 needs the line already cut, and it cannot report how
many bytes a header took or that a short prefix is definitely not PROXY), it has no v1 line-length
bound, it raises assorted exception types (``ValueError``, ``struct.error``, its own) on malformed
input, and it parses TLVs eagerly. Wrapping all that would be longer than this module.
"""

from __future__ import annotations

import enum
import ipaddress
import struct
from dataclasses import dataclass
from typing import Final

__all__ = [
    "NEED_MORE",
    "NOT_PROXY",
    "V1_MAX_LENGTH",
    "V1_PREFIX",
    "V2_SIGNATURE",
    "ProxyParseResult",
    "ProxyProtocolError",
    "ProxyState",
    "format_hostport",
    "parse_proxy_header",
]

V1_PREFIX: Final = b"PROXY "
V2_SIGNATURE: Final = b"\r\n\r\n\x00\r\nQUIT\n"
# The spec's longest v1 line is 107 bytes with CRLF; Netty allows 108 (V1_MAX_LENGTH), so do we.
V1_MAX_LENGTH: Final = 108
_V2_FIXED: Final = 16
_V2_LEN: Final = struct.Struct(">H")


class ProxyProtocolError(ValueError):
    """A connection that starts like a PROXY header but is not a valid one."""


class ProxyState(enum.Enum):
    NOT_PROXY = "not_proxy"  # no PROXY header: consume nothing, decode frames from byte 0
    NEED_MORE = "need_more"  # could still be (or is) a PROXY header: wait for more bytes
    PARSED = "parsed"  # a complete header of ``consumed`` bytes


@dataclass(frozen=True, slots=True)
class ProxyParseResult:
    """Outcome of :func:`parse_proxy_header`.

    ``client_address`` is the source ``"ip:port"`` (IPv6 in brackets) for a proxied TCP
    connection, and ``None`` for v1 ``UNKNOWN``, v2 ``LOCAL`` (health checks from the proxy
    itself), an unspecified family or AF_UNIX: the peer address of the socket then stands.
    """

    state: ProxyState
    consumed: int = 0
    client_address: str | None = None
    version: int = 0


NOT_PROXY: Final = ProxyParseResult(ProxyState.NOT_PROXY)
NEED_MORE: Final = ProxyParseResult(ProxyState.NEED_MORE)


def format_hostport(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets so the port stays unambiguous."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _v1_port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 5 or int(text) > 65535:
        raise ProxyProtocolError(f"PROXY v1: bad port {text!r}")
    return int(text)


def _parse_v1(data: bytes | bytearray | memoryview) -> ProxyParseResult:
    window = bytes(data[:V1_MAX_LENGTH])
    end = window.find(b"\r\n")
    if end < 0:
        if b"\n" in window:
            raise ProxyProtocolError("PROXY v1: line not terminated by CRLF")
        if len(window) >= V1_MAX_LENGTH:
            raise ProxyProtocolError(f"PROXY v1: no CRLF within {V1_MAX_LENGTH} bytes")
        return NEED_MORE
    try:
        line = window[len(V1_PREFIX):end].decode("ascii")
    except UnicodeDecodeError:
        raise ProxyProtocolError("PROXY v1: non-ASCII header line") from None
    parts = line.split(" ")
    consumed = end + 2
    if parts[0] == "UNKNOWN":  # the rest of the line is to be ignored
        return ProxyParseResult(ProxyState.PARSED, consumed, None, 1)
    if parts[0] not in ("TCP4", "TCP6") or len(parts) != 5:
        raise ProxyProtocolError(f"PROXY v1: bad header line {line!r}")
    try:
        cls = ipaddress.IPv4Address if parts[0] == "TCP4" else ipaddress.IPv6Address
        source = cls(parts[1])
        cls(parts[2])
    except ValueError:
        raise ProxyProtocolError(f"PROXY v1: bad address in {line!r}") from None
    port = _v1_port(parts[3])
    _v1_port(parts[4])
    return ProxyParseResult(ProxyState.PARSED, consumed, format_hostport(str(source), port), 1)


def _parse_v2(data: bytes | bytearray | memoryview) -> ProxyParseResult:
    if len(data) < _V2_FIXED:
        return NEED_MORE
    version_command = data[12]
    if version_command >> 4 != 2:
        raise ProxyProtocolError(f"PROXY v2: bad version {version_command >> 4}")
    command = version_command & 0x0F
    if command > 1:
        raise ProxyProtocolError(f"PROXY v2: bad command {command}")
    family, transport = data[13] >> 4, data[13] & 0x0F
    if family > 3 or transport > 2:
        raise ProxyProtocolError(f"PROXY v2: bad address family/transport byte {data[13]:#04x}")
    (length,) = _V2_LEN.unpack_from(data, 14)
    total = _V2_FIXED + length
    if len(data) < total:
        return NEED_MORE
    if command == 0 or family in (0, 3):  # LOCAL, AF_UNSPEC or AF_UNIX: no TCP client address
        if family == 3 and length < 216 and command == 1:
            raise ProxyProtocolError(f"PROXY v2: AF_UNIX address block of {length} bytes")
        return ProxyParseResult(ProxyState.PARSED, total, None, 2)
    addr_len, port_at = (4, 24) if family == 1 else (16, 48)
    if length < port_at + 4 - _V2_FIXED:
        raise ProxyProtocolError(f"PROXY v2: address block of {length} bytes is too short")
    raw = bytes(data[_V2_FIXED:_V2_FIXED + addr_len])
    source = ipaddress.IPv4Address(raw) if family == 1 else ipaddress.IPv6Address(raw)
    (port,) = _V2_LEN.unpack_from(data, port_at)
    return ProxyParseResult(ProxyState.PARSED, total, format_hostport(str(source), port), 2)


def parse_proxy_header(data: bytes | bytearray | memoryview) -> ProxyParseResult:
    """Look for a PROXY header at the start of ``data`` (the first bytes of a connection).

    Returns :data:`NOT_PROXY`, :data:`NEED_MORE`, or a ``PARSED`` result with the header's length
    in ``consumed`` (the remoting frames start right after it). Raises
    :class:`ProxyProtocolError` (a ValueError) for a malformed header. TLS detection (first
    byte 0x16) is the caller's business.
    """
    n = len(data)
    if n == 0:
        return NEED_MORE
    head = bytes(data[:12])
    if V2_SIGNATURE.startswith(head[: len(V2_SIGNATURE)]):
        return _parse_v2(data) if n >= len(V2_SIGNATURE) else NEED_MORE
    if head.startswith(V1_PREFIX):
        return _parse_v1(data)
    if V1_PREFIX.startswith(head[: len(V1_PREFIX)]):
        return NEED_MORE
    return NOT_PROXY
