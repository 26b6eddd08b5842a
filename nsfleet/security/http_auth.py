"""HTTP access control: bearer tokens with scopes, and the PROXY protocol on the HTTP port.

Scopes a request needs: none for the console's static files (/ui, /ui/static/*, the
browser's /favicon.ico), /openapi.json and the address server (/rocketmq/*); ``probe`` for
/livez, /readyz and /metrics, only when a probe token is
configured (open otherwise); ``read`` for GET/HEAD and ``POST /v1/routes/watch`` (a long-poll);
``write`` for every other POST, PUT and DELETE. A write token also reads and probes; a read token
also probes. No or an unknown token: 401; a token without the scope: 403 (both JSON errors; the
handler never runs, so nothing is written).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import structlog
from aiohttp import web

from nsfleet.domain.audit import client_account, client_address
from nsfleet.domain.errors import AccessDenied
from nsfleet.proxy_protocol import ProxyProtocolError, ProxyState, parse_proxy_header
from nsfleet.security.accounts import AccessConfig, Scope
from nsfleet.security.addresses import AddressRules, host_of
from nsfleet.security.policy import LogLimiter

log = structlog.get_logger("nsfleet.security")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PROBE_PATHS = frozenset({"/livez", "/readyz", "/metrics"})
OPEN_PATHS = frozenset({"/ui", "/openapi.json", "/favicon.ico"})
READ_POSTS = frozenset({"/v1/routes/watch"})
GRANTS = {Scope.WRITE: {Scope.WRITE, Scope.READ, Scope.PROBE},
          Scope.READ: {Scope.READ, Scope.PROBE}, Scope.PROBE: {Scope.PROBE}}


def required_scope(method: str, path: str) -> Scope | None:
    # The address server stays open: RocketMQ clients fetch it with no credentials.
    if path in OPEN_PATHS or path.startswith(("/ui/static/", "/rocketmq/")):
        return None
    if path in PROBE_PATHS:
        return Scope.PROBE
    if method in ("GET", "HEAD", "OPTIONS") or path in READ_POSTS:
        return Scope.READ
    return Scope.WRITE


def _bearer(request: web.Request) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def make_auth_middleware(config: Callable[[], AccessConfig], *, enforcing: bool,
                         on_denied: Callable[[str, str, bool], None]) -> Any:
    """``enforcing`` False (permissive): refusals are logged and counted, and served."""
    limiter = LogLimiter()

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        need = required_scope(request.method, request.path)
        snapshot = config()
        if need is Scope.PROBE and not any(t.scope is Scope.PROBE
                                           for t in snapshot.tokens.values()):
            need = None  # probes stay open until a probe token is configured
        if need is None:
            return await handler(request)
        presented = _bearer(request)
        token = snapshot.token(presented) if presented is not None else None
        denied: AccessDenied | None = None
        if token is None:
            denied = AccessDenied("a valid bearer token is required (Authorization: Bearer "
                                  "TOKEN)" if presented is None else "unknown bearer token",
                                  unauthenticated=True)
        elif need not in GRANTS[token.scope]:
            denied = AccessDenied(f"token {token.name!r} has scope {token.scope.value}; "
                                  f"this request needs {need.value}")
        if denied is not None:
            reason = "no_token" if presented is None else (
                "unknown_token" if token is None else "scope")
            on_denied("http", reason, not enforcing)
            if limiter.allow(host_of(client_address.get()), reason, request.path):
                log.warning("http request refused" if enforcing else
                            "http request would be refused (permissive)",
                            method=request.method, path=request.path,
                            peer=client_address.get(), reason=denied.remark)
            if enforcing:
                raise denied
        client_account.set(token.name if token is not None else "-")
        return await handler(request)

    return middleware


# --- the PROXY protocol on the HTTP port --------------------------------------------------------

class _PeerTransport:
    """The real transport, answering ``peername`` with the client the PROXY header named."""

    def __init__(self, transport: asyncio.Transport, peername: tuple[str, int]) -> None:
        self._transport = transport
        self._peername = peername

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peername
        return self._transport.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class ProxiedProtocol(asyncio.Protocol):
    """Wraps aiohttp's protocol: a connection from a trusted proxy may start with a PROXY v1/v2
    header, read before aiohttp sees a byte; from anyone else the bytes go to aiohttp untouched
    (a PROXY line is then just a bad HTTP request)."""

    def __init__(self, inner: asyncio.Protocol, trusted: AddressRules) -> None:
        self.inner = inner
        self.trusted = trusted
        self.transport: asyncio.Transport | None = None
        self.pending: bytearray | None = None  # None once past the PROXY check

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        host = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else ""
        if host and self.trusted.match(host):
            self.pending = bytearray()
        else:
            self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.pending is None:
            self.inner.data_received(data)
            return
        assert self.transport is not None
        self.pending += data
        try:
            result = parse_proxy_header(self.pending)
        except ProxyProtocolError as exc:
            log.warning("closing http connection: bad PROXY header", error=str(exc))
            self.transport.close()
            return
        if result.state is ProxyState.NEED_MORE:
            return
        rest = bytes(self.pending[result.consumed:])
        self.pending = None
        transport: asyncio.BaseTransport = self.transport
        if result.state is ProxyState.PARSED and result.client_address:
            host, _, port = result.client_address.rpartition(":")
            transport = cast(asyncio.Transport,
                             _PeerTransport(self.transport, (host.strip("[]"), int(port))))
        self.inner.connection_made(transport)
        if rest:
            self.inner.data_received(rest)

    def eof_received(self) -> bool | None:
        return None if self.pending is not None else self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.pending is None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class ProxiedTCPSite(web.TCPSite):
    """A TCPSite whose connections pass through :class:`ProxiedProtocol`."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int,
                 trusted: AddressRules, *, reuse_port: bool = False) -> None:
        super().__init__(runner, host, port, reuse_port=reuse_port or None)
        self._trusted = trusted

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with the runner
        server = self._runner.server
        assert server is not None
        trusted = self._trusted
        self._server = await asyncio.get_running_loop().create_server(
            lambda: ProxiedProtocol(server(), trusted), self._host, self._port,
            backlog=self._backlog, reuse_address=True, reuse_port=self._reuse_port)
