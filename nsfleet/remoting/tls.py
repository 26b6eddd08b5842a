"""TLS on the remoting port: the Java NameServer's TlsModeHandler, for asyncio (and uvloop).

Order on a new connection, as in NettyRemotingServer: an optional PROXY header, then the TLS
decision on the first byte after it (0x16, a TLS handshake record, means TLS), then frames.

* ``permissive``: TLS and plaintext on one port. A plaintext connection is handed, with the bytes
  read so far, to the ordinary :class:`~nsfleet.remoting.server.RemotingProtocol`
  (``transport.set_protocol``), so it costs nothing once decided.
* ``enforcing``: a plaintext connection is closed (Java closes it without an answer).
* ``disabled`` does not use this module (the frame decoder refuses a TLS hello as a bad frame).

The TLS itself runs in memory (``ssl.MemoryBIO`` + ``SSLObject``) because the bytes that decided
were already read: ``loop.start_tls`` would lose them. :class:`TlsGate` decrypts into the
RemotingProtocol and hands it a :class:`TlsTransport` that encrypts its writes.

The certificate, key and CA files are polled; when they change a new context is built for new
connections (open ones keep theirs). A file that does not load keeps the previous context.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog

from nsfleet.proxy_protocol import ProxyProtocolError, ProxyState, parse_proxy_header

if TYPE_CHECKING:
    from nsfleet.metrics import Metrics
    from nsfleet.remoting.server import RemotingProtocol

log = structlog.get_logger(__name__)

HANDSHAKE_RECORD: Final = 0x16  # TlsModeHandler.HANDSHAKE_MAGIC_CODE
READ_SIZE: Final = 64 * 1024
FIRST_BYTE_TIMEOUT: Final = 120.0  # serverChannelMaxIdleTimeSeconds, before a connection decides


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


CLIENT_AUTH: Final = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                      "require": ssl.CERT_REQUIRED}  # tls.server.need.client.auth


class TlsConfigError(Exception):
    """The TLS files or settings cannot make a server context (the message says which)."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert_file: str
    key_file: str
    ca_file: str = ""  # trusted CAs for client certificates
    client_auth: str = "none"

    def paths(self) -> list[str]:
        return [p for p in (self.cert_file, self.key_file, self.ca_file) if p]


def build_server_context(files: TlsFiles) -> ssl.SSLContext:
    """A server context from the files; TlsConfigError naming the file when one is unusable."""
    if files.client_auth not in CLIENT_AUTH:
        raise TlsConfigError(f"tls-client-auth: {files.client_auth!r} is not none, optional "
                             "or require")
    if files.client_auth != "none" and not files.ca_file:
        raise TlsConfigError(f"tls-client-auth {files.client_auth} needs tls-ca-file (the CAs "
                             "that sign client certificates)")
    for setting, path in (("tls-cert-file", files.cert_file), ("tls-key-file", files.key_file),
                          ("tls-ca-file", files.ca_file)):
        if path and not os.access(path, os.R_OK):
            raise TlsConfigError(f"{setting}: cannot read {path}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_RENEGOTIATION  # writes never have to wait for a handshake
    try:
        ctx.load_cert_chain(files.cert_file, files.key_file)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise TlsConfigError(f"tls-cert-file/tls-key-file: {files.cert_file} with "
                             f"{files.key_file} is not a PEM certificate and its private key "
                             f"({exc})") from None
    if files.ca_file:
        try:
            ctx.load_verify_locations(cafile=files.ca_file)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise TlsConfigError(f"tls-ca-file: {files.ca_file} holds no PEM CA certificate "
                                 f"({exc})") from None
    ctx.verify_mode = CLIENT_AUTH[files.client_auth]
    return ctx


def _stamp(paths: list[str]) -> tuple[tuple[int, int, int] | None, ...]:
    out: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)  # follows symlinks: a Kubernetes Secret swaps its ..data link
        except OSError:
            out.append(None)
        else:
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)


class ReloadingContext:
    """The current server context, rebuilt when one of its files changes (see :meth:`poll`)."""

    def __init__(self, files: TlsFiles, metrics: Metrics | None = None) -> None:
        self.files = files
        self.metrics = metrics
        self._loaded = _stamp(files.paths())
        self.context = build_server_context(files)
        self._tried = self._loaded

    def poll(self) -> bool:
        """Rebuild if a file changed since the last attempt; True when a new context is in use.
        A change that does not load is logged once and retried at the next change."""
        stamp = _stamp(self.files.paths())
        if stamp in (self._loaded, self._tried):
            return False
        self._tried = stamp
        try:
            context = build_server_context(self.files)
        except TlsConfigError as exc:
            log.error("TLS files changed but do not load; new connections keep the previous "
                      "certificate", error=str(exc))
            if self.metrics is not None:
                self.metrics.tls_reloads.labels("failed").inc()
            return False
        self.context, self._loaded = context, stamp
        log.info("TLS certificate reloaded", cert_file=self.files.cert_file)
        if self.metrics is not None:
            self.metrics.tls_reloads.labels("ok").inc()
        return True

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.to_thread(self.poll)
            except Exception as exc:  # keep polling whatever one round hit
                log.warning("TLS reload check failed", error=repr(exc))


class TlsAcceptor:
    """Wraps each new RemotingProtocol in a :class:`TlsGate` (``permissive``/``enforcing``)."""

    def __init__(self, mode: TlsMode, context: ReloadingContext, metrics: Metrics) -> None:
        assert mode is not TlsMode.DISABLED
        self.mode = mode
        self.context = context
        self.metrics = metrics

    def wrap(self, inner: RemotingProtocol) -> asyncio.Protocol:
        return TlsGate(self, inner)


class TlsGate(asyncio.Protocol):
    """The transport's protocol until a connection has decided; for TLS, for good."""

    def __init__(self, acceptor: TlsAcceptor, inner: RemotingProtocol) -> None:
        self.acceptor = acceptor
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.head = bytearray()  # bytes read before the decision
        self.peer = "?"
        self.timer: asyncio.TimerHandle | None = None
        self.inner_connected = False
        self.ssl: ssl.SSLObject | None = None
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.handshaken = False
        self.failed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.timer = asyncio.get_running_loop().call_later(FIRST_BYTE_TIMEOUT, transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.ssl is not None and not self.handshaken and not self.failed:
            # The client gave up (a client that rejects our certificate just closes).
            self._handshake_failed("closed by the client during the handshake")
        if self.inner_connected:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner_connected:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner_connected:
            self.inner.resume_writing()

    def data_received(self, data: bytes) -> None:
        if self.ssl is not None:
            self._feed(data)
            return
        assert self.transport is not None
        self.head += data
        try:
            result = parse_proxy_header(self.head)
        except ProxyProtocolError as exc:
            log.warning("closing remoting connection: bad PROXY header", peer=self.peer,
                        error=str(exc))
            self.transport.close()
            return
        if result.state is ProxyState.NEED_MORE:
            return
        start = result.consumed if result.state is ProxyState.PARSED else 0
        if len(self.head) <= start:
            return  # the PROXY header alone so far: the next byte decides
        if self.timer is not None:
            self.timer.cancel()
        if self.head[start] == HANDSHAKE_RECORD:
            self._start_tls(start)
        elif self.acceptor.mode is TlsMode.ENFORCING:
            self.acceptor.metrics.remoting_tls_failures.labels("plaintext_refused").inc()
            log.warning("closing a plaintext remoting connection: TLS mode is enforcing",
                        peer=result.client_address or self.peer)
            self.transport.close()
        else:
            self.acceptor.metrics.remoting_transport.labels("plaintext").inc()
            self.transport.set_protocol(self.inner)
            self.inner.connection_made(self.transport)
            self.inner.data_received(bytes(self.head))

    def _start_tls(self, start: int) -> None:
        self.ssl = self.acceptor.context.context.wrap_bio(self.incoming, self.outgoing,
                                                          server_side=True)
        # Connected now, so the server's idle check also bounds a stalled handshake.
        self.inner.connection_made(TlsTransport(self))
        self.inner_connected = True
        if start:
            self.inner.data_received(bytes(self.head[:start]))  # the PROXY header
        self.inner.proxy_pending = None  # a PROXY header inside TLS is not one (Java: neither)
        data, self.head = bytes(self.head[start:]), bytearray()
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        assert self.ssl is not None and self.transport is not None
        self.incoming.write(data)
        if not self.handshaken:
            try:
                self.ssl.do_handshake()
            except ssl.SSLWantReadError:
                self._flush()
                return
            except ssl.SSLError as exc:  # a certificate verify failure included
                self._handshake_failed(exc.reason or str(exc))
                self._flush()  # the alert, so the client learns why
                self.transport.close()
                return
            self.handshaken = True
            self.acceptor.metrics.remoting_transport.labels("tls").inc()
        while not self.transport.is_closing():
            try:
                chunk = self.ssl.read(READ_SIZE)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLError as exc:
                log.warning("closing remoting connection: bad TLS record",
                            peer=self.inner.conn.peer, error=exc.reason or str(exc))
                self.transport.close()
                return
            if not chunk:  # the client's close_notify: answer it and close
                self.close()
                return
            self.inner.data_received(chunk)
        self._flush()

    def _handshake_failed(self, why: str) -> None:
        self.failed = True
        self.acceptor.metrics.remoting_tls_failures.labels("handshake").inc()
        log.warning("TLS handshake failed", peer=self.inner.conn.peer, error=why)

    def _flush(self) -> None:
        assert self.transport is not None
        if self.outgoing.pending and not self.transport.is_closing():
            self.transport.write(self.outgoing.read())

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert self.ssl is not None and self.transport is not None
        if self.transport.is_closing():
            return
        view = memoryview(data)
        try:
            while view:
                view = view[self.ssl.write(view):]
        except ssl.SSLError as exc:
            log.warning("closing remoting connection: TLS write failed",
                        peer=self.inner.conn.peer, error=str(exc))
            self.transport.close()
            return
        self._flush()

    def close(self) -> None:
        assert self.transport is not None
        if self.transport.is_closing():
            return
        if self.ssl is not None and self.handshaken:
            with contextlib.suppress(ssl.SSLError):
                self.ssl.unwrap()  # queues our close_notify; the client's is not awaited
            self._flush()
        self.transport.close()


class TlsTransport(asyncio.Transport):
    """What the RemotingProtocol of a TLS connection writes to: encrypts into the socket."""

    def __init__(self, gate: TlsGate) -> None:
        super().__init__()
        self._gate = gate
        assert gate.transport is not None
        self._raw: asyncio.Transport = gate.transport

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._gate.write(data)

    def close(self) -> None:
        self._gate.close()

    def abort(self) -> None:
        self._raw.abort()

    def is_closing(self) -> bool:
        return self._raw.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        ssl_object = self._gate.ssl
        extra: dict[str, Callable[[], Any]] = {
            "ssl_object": lambda: ssl_object,
            "peercert": lambda: ssl_object.getpeercert() if ssl_object else None,
            "cipher": lambda: ssl_object.cipher() if ssl_object else None,
            "sslcontext": lambda: ssl_object.context if ssl_object else None,
        }
        if name in extra:
            return extra[name]()
        return self._raw.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._raw.pause_reading()

    def resume_reading(self) -> None:
        self._raw.resume_reading()

    def is_reading(self) -> bool:
        return self._raw.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._raw.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._raw.set_write_buffer_limits(high, low)

    def can_write_eof(self) -> bool:
        return False


def tls_acceptor(mode: str, files: TlsFiles, metrics: Metrics) -> TlsAcceptor | None:
    """The remoting port's TLS for ``--tls-mode`` (None when disabled); TlsConfigError when the
    files are bad."""
    tls_mode = TlsMode(mode)
    if tls_mode is TlsMode.DISABLED:
        return None
    acceptor = TlsAcceptor(tls_mode, ReloadingContext(files, metrics), metrics)
    log.info("TLS on the remoting port", mode=tls_mode.value, cert_file=files.cert_file,
             client_auth=files.client_auth)
    return acceptor
