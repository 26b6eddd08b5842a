"""The remoting TLS gate byte by byte (a recording transport, a client SSLObject), the server
context's errors, certificate reload, and the TLS settings' validation."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nsfleet import config
from nsfleet.domain.errors import ValidationError
from nsfleet.metrics import Metrics
from nsfleet.remoting.tls import (
    ReloadingContext,
    TlsAcceptor,
    TlsConfigError,
    TlsFiles,
    TlsGate,
    TlsMode,
    build_server_context,
)
from tests.support.certs import Authority, Issued

HEADER = b"PROXY TCP4 203.0.113.7 10.0.0.9 40001 9876\r\n"


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.protocol: asyncio.BaseProtocol | None = None

    def write(self, data: Any) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("192.0.2.1", 5555) if name == "peername" else default

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def take(self) -> bytes:
        out, self.written = bytes(self.written), bytearray()
        return out


class Inner(asyncio.Protocol):
    """Stands in for RemotingProtocol: what the gate hands over."""

    def __init__(self) -> None:
        self.transport: asyncio.BaseTransport | None = None
        self.received = bytearray()
        self.proxy_pending: bytearray | None = bytearray()
        self.conn = SimpleNamespace(peer="192.0.2.1:5555")
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received += data

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Authority, Issued]:
    ca = Authority(tmp_path_factory.mktemp("pki"), "unit")
    return ca, ca.issue("server", server=True)


def gate(pki: tuple[Authority, Issued], mode: TlsMode) -> tuple[TlsGate, Inner,
                                                               RecordingTransport, Metrics]:
    _, server = pki
    metrics = Metrics()
    context = ReloadingContext(TlsFiles(str(server.cert_file), str(server.key_file)), metrics)
    inner = Inner()
    g = TlsAcceptor(mode, context, metrics).wrap(inner)  # type: ignore[arg-type]
    assert isinstance(g, TlsGate)
    transport = RecordingTransport()
    g.connection_made(transport)
    return g, inner, transport, metrics


def feed_bytewise(g: TlsGate, data: bytes) -> None:
    for i in range(len(data)):
        g.data_received(data[i:i + 1])


def client(ca: Authority) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
    ctx = ssl.create_default_context(cafile=str(ca.cert_file))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    return ctx.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1"), incoming, outgoing


def handshake(g: TlsGate, transport: RecordingTransport, obj: ssl.SSLObject,
              incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO) -> None:
    for _ in range(10):
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        else:
            break
        feed_bytewise(g, outgoing.read())
        incoming.write(transport.take())
    else:
        raise AssertionError("no handshake")
    feed_bytewise(g, outgoing.read())  # the client's Finished


async def test_plaintext_after_a_split_proxy_header_is_handed_over(pki: Any) -> None:
    g, inner, transport, metrics = gate(pki, TlsMode.PERMISSIVE)
    frame = b"\x00\x00\x00\x08\x00\x00\x00\x04{}{}"
    feed_bytewise(g, HEADER)
    assert inner.transport is None  # the PROXY header alone decides nothing
    g.data_received(frame)
    assert transport.protocol is inner and inner.transport is transport
    assert bytes(inner.received) == HEADER + frame  # nothing lost, the header included
    assert metrics.remoting_transport.labels("plaintext")._value.get() == 1


async def test_enforcing_closes_plaintext_without_handing_over(pki: Any) -> None:
    g, inner, transport, _ = gate(pki, TlsMode.ENFORCING)
    g.data_received(HEADER + b"\x00\x00\x00\x08")
    assert transport.closed and inner.transport is None and transport.written == b""


async def test_tls_after_a_proxy_header_fed_byte_by_byte(pki: Any) -> None:
    ca, _ = pki
    g, inner, transport, _ = gate(pki, TlsMode.ENFORCING)
    obj, incoming, outgoing = client(ca)
    feed_bytewise(g, HEADER)
    handshake(g, transport, obj, incoming, outgoing)
    assert bytes(inner.received) == HEADER and inner.proxy_pending is None
    obj.write(b"ping" * 10_000)  # several records
    feed_bytewise(g, outgoing.read())
    assert bytes(inner.received) == HEADER + b"ping" * 10_000
    assert inner.transport is not None
    inner.transport.write(b"pong")  # type: ignore[attr-defined]
    incoming.write(transport.take())
    assert obj.read(100) == b"pong"
    with pytest.raises(ssl.SSLWantReadError):
        obj.unwrap()  # our close_notify; the gate answers with its own and closes
    g.data_received(outgoing.read())
    assert transport.closed
    incoming.write(transport.take())
    obj.unwrap()  # the gate's close_notify arrived
    g.connection_lost(None)
    assert inner.lost


async def test_garbage_after_the_handshake_byte_closes_and_counts(pki: Any) -> None:
    g, inner, transport, metrics = gate(pki, TlsMode.PERMISSIVE)
    g.data_received(b"\x16\x03\x01\x00\x05hello")
    assert transport.closed
    g.connection_lost(None)
    assert inner.lost
    assert metrics.remoting_tls_failures.labels("handshake")._value.get() == 1


def test_context_errors_name_the_file(tmp_path: Path, pki: Any) -> None:
    _, server = pki
    bad = tmp_path / "bad.pem"
    bad.write_text("junk")
    cases = [
        (TlsFiles(str(tmp_path / "none.pem"), str(server.key_file)), "tls-cert-file: cannot read"),
        (TlsFiles(str(bad), str(server.key_file)), "is not a PEM certificate"),
        (TlsFiles(str(server.cert_file), str(server.key_file), str(bad), "require"),
         "tls-ca-file: "),
        (TlsFiles(str(server.cert_file), str(server.key_file), "", "optional"),
         "needs tls-ca-file"),
    ]
    for files, message in cases:
        with pytest.raises(TlsConfigError, match=message):
            build_server_context(files)


def test_reload_takes_good_files_and_keeps_the_last_good_context(tmp_path: Path,
                                                                 pki: Any) -> None:
    ca, server = pki
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(server.cert_file.read_bytes())
    key.write_bytes(server.key_file.read_bytes())
    metrics = Metrics()
    reloading = ReloadingContext(TlsFiles(str(cert), str(key)), metrics)
    first = reloading.context
    assert not reloading.poll()
    other = ca.issue("other", server=True)
    cert.write_bytes(other.cert_file.read_bytes())  # the key does not match yet
    assert not reloading.poll() and reloading.context is first
    assert not reloading.poll()  # the same bad files: tried once
    key.write_bytes(other.key_file.read_bytes())
    assert reloading.poll() and reloading.context is not first
    assert metrics.tls_reloads.labels("failed")._value.get() == 1
    assert metrics.tls_reloads.labels("ok")._value.get() == 1


@pytest.mark.parametrize(("env", "field"), [
    ({"NSFLEET_TLS_MODE": "strict"}, "tls-mode"),
    ({"NSFLEET_TLS_MODE": "permissive"}, "tls-cert-file"),
    ({"NSFLEET_TLS_MODE": "enforcing", "NSFLEET_TLS_CERT_FILE": "c"}, "tls-key-file"),
    ({"NSFLEET_TLS_CLIENT_AUTH": "want"}, "tls-client-auth"),
    ({"NSFLEET_TLS_MODE": "enforcing", "NSFLEET_TLS_CERT_FILE": "c", "NSFLEET_TLS_KEY_FILE": "k",
      "NSFLEET_TLS_CLIENT_AUTH": "require"}, "tls-ca-file"),
    ({"NSFLEET_TLS_RELOAD_INTERVAL": "0"}, "tls-reload-interval"),
])
def test_bad_tls_settings_name_the_setting(env: dict[str, str], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        config.load(None, env)
    assert err.value.field == field
