"""The RocketMQ remoting TCP server (port 9876) of a worker.

One ``asyncio.BufferedProtocol`` per connection (its reads sized by
nsfleet.remoting.big_frames): an optional PROXY protocol prefix, then frames decoded
incrementally; each request is handled in its own task and answered in the request's serialize
type (oneway requests never are). A malformed stream closes only its own connection. When a
connection that registered brokers closes (or idles out), each of those brokers is unregistered
unless another connection it registered over, on any worker, is still open. When the sweep expires
a broker anywhere in the fleet, its connections here are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import structlog

from nsfleet.domain.audit import client_account, client_address
from nsfleet.domain.errors import (
    ControllerRefused,
    NameServerError,
    StoreFailed,
    StoreUnavailable,
)
from nsfleet.metrics import Tally
from nsfleet.proxy_protocol import ProxyProtocolError, ProxyState, parse_proxy_header
from nsfleet.remoting.big_frames import BIG_FRAME_BYTES, BIG_HANDLERS, BigFrameSlots, ReadBuffers
from nsfleet.remoting.controller_handlers import CONTROLLER_HANDLERS
from nsfleet.remoting.handlers import (
    HANDLERS,
    Connection,
    Endpoint,
    error_response,
    get_route_cached,
)
from nsfleet.service.nameserver import NameServer
from nsfleet.wire.codec import (
    ONEWAY,
    RESPONSE,
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_frame,
    make_response,
)

if TYPE_CHECKING:
    from nsfleet.security.addresses import AddressRules
    from nsfleet.security.policy import RemotingGuard

log = structlog.get_logger(__name__)
IDLE_SECONDS = 120.0  # serverChannelMaxIdleTimeSeconds
MAX_IN_FLIGHT = 10_000  # per worker; beyond it requests get SYSTEM_BUSY, like a full executor
OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
_ROUTE_CODE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
# The NameServer's codes and the controller's, on one port (a BROKER_HEARTBEAT is either's,
# by its fields: controller_handlers.heartbeat).
ENDPOINTS = {**HANDLERS, **CONTROLLER_HANDLERS}


class RemotingProtocol(asyncio.BufferedProtocol):
    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.max_frame_size)
        self.transport: asyncio.Transport | None = None
        self.conn = Connection(peer="?")
        self.proxy_pending: bytearray | None = bytearray()  # None once past the PROXY check
        self.last_active = time.monotonic()
        self.batch: list[bytes] | None = None  # see data_received
        self.big_slot = False  # receiving a big frame (nsfleet.remoting.big_frames)
        # The big bodies received in this connection's slot and not yet read by their handler
        # (by id): the slot is kept until they are (``body_read``). An id reused by a later
        # body while an earlier handler runs at worst gives the slot back early.
        self._unread_big: set[int] = set()
        self.conn.body_read = self.body_read
        self._reading: memoryview | None = None  # the buffer of the read under way

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = self.transport.get_extra_info("peername")
        self.conn.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.conn.id = self.server.next_connection_id()
        self.server.connections.add(self)
        self.server.ns.metrics.remoting_connections.inc()

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.closed = True
        self.server.big_frames.release(self)
        self.server.connections.discard(self)
        self.server.ns.metrics.remoting_connections.dec()
        if self.conn.registrations:
            self.server.spawn(self._unregister_on_close(dict(self.conn.registrations)))
            self.conn.registrations.clear()
        if self.conn.controller_replicas:
            self.server.spawn(self._controller_connection_closed(
                sorted(self.conn.controller_replicas)))
            self.conn.controller_replicas.clear()

    async def _controller_connection_closed(self, replicas: list[tuple[str, int]]) -> None:
        try:
            await self.server.ns.controller.connection_closed(replicas, self.conn.id)
        except Exception as exc:  # the replicas' deadlines still expire them
            log.warning("controller: handling a closed connection failed", error=str(exc))

    async def _unregister_on_close(self, regs: dict[tuple[str, str], str]) -> None:
        client_address.set(self.conn.peer)
        # Every broker registered over this connection (Java removes only the first it finds).
        for (cluster, addr), name in regs.items():
            try:
                removed = await self.server.ns.connection_closed(cluster, addr, name,
                                                                 self.conn.id)
                log.info("broker connection closed", cluster=cluster, broker_addr=addr,
                         unregistered=removed)
            except Exception as exc:  # the deadline will still expire it
                log.warning("unregister on close failed", broker_addr=addr, error=str(exc))

    def get_buffer(self, sizehint: int) -> memoryview:
        self._reading = self.server.read_buffers.get(self.big_slot)
        return self._reading

    def buffer_updated(self, nbytes: int) -> None:
        reading, self._reading = self._reading, None
        assert reading is not None  # the transport asks for a buffer before every read
        self.data_received(reading[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        """``data`` is only read during the call (it may be a shared read buffer's)."""
        self.last_active = time.monotonic()
        if self.proxy_pending is not None:
            self.proxy_pending += data
            try:
                result = parse_proxy_header(self.proxy_pending)
            except ProxyProtocolError as exc:
                self._abort("bad PROXY header", str(exc))
                return
            if result.state is ProxyState.NEED_MORE:
                return
            data = bytes(self.proxy_pending[result.consumed:])
            if result.state is ProxyState.PARSED and result.client_address:
                trusted = self.server.trusted_proxies
                if trusted is not None and not trusted.match(self.conn.peer):
                    self._abort("PROXY header from an untrusted peer",
                                f"{self.conn.peer} is not a trusted proxy")
                    return
                self.conn.peer = result.client_address
            self.proxy_pending = None
        # Answers given inline while this data is handled go out in one write (one syscall per
        # pipelined batch, not per frame).
        self.batch = []
        bad: str | None = None  # not the exception: its traceback would hold this frame
        try:
            try:
                commands = self.decoder.feed(data)
            except ProtocolError as exc:
                commands, bad = exc.decoded, str(exc)
            for cmd in commands:
                self._dispatch(cmd)
        finally:
            self._flush()
        if bad is not None:
            self._abort("bad frame", bad)
        elif self.decoder.pending_frame_size > BIG_FRAME_BYTES:
            self.server.big_frames.admit(self)
        else:
            self._slot_done()

    def body_read(self, body: bytes) -> None:
        """``body``'s handler has read it."""
        self._big_body_done(id(body))

    def _big_body_done(self, body_id: int) -> None:
        """A big body received in this connection's slot is read, or its handler done."""
        self._unread_big.discard(body_id)
        self._slot_done()

    def _slot_done(self) -> None:
        """Once no big frame is under way and every big body received in the slot is read,
        the slot goes to the next. One that gave way after its slice meanwhile stays queued, to
        take a slot for nothing later: letting it leave made a 300 x 10k storm ~6 % longer
        (more registrations in Redis at once)."""
        if (self.big_slot and not self._unread_big
                and self.decoder.pending_frame_size <= BIG_FRAME_BYTES):
            self.server.big_frames.release(self)

    def pause(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def _flush(self) -> None:
        batch, self.batch = self.batch, None
        if batch and self.transport is not None and not self.transport.is_closing():
            # uvloop sends a list in one writev, without copying the frames into one buffer.
            self.transport.writelines(batch)

    def _abort(self, what: str, error: str) -> None:
        log.warning(f"closing remoting connection: {what}", peer=self.conn.peer, error=error)
        if self.transport is not None:
            self.transport.close()

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if cmd.flag & RESPONSE:
            return  # the NameServer sends no requests of its own, so no response is awaited
        if self.server.guard is not None:  # access control on: docs/security.md
            account, denied = self.server.guard.check(cmd.code, cmd.ext_fields, cmd.body,
                                                      cmd.version, self.conn.peer)
            if denied is not None:
                self.reply(cmd, make_response(cmd, ResponseCode.NO_PERMISSION, remark=denied))
                return
            client_account.set(account)  # copied into the request's task by spawn
        if cmd.code == _ROUTE_CODE and _ROUTE_CODE in self.server.endpoints:
            answered = get_route_cached(self.server.ns, cmd)  # a cache hit: answered inline
            if answered is not None:
                code, frame = answered
                self.server.route_answers(code).inc()
                self.reply_frame(cmd, frame)
                return
        if self.server.in_flight >= MAX_IN_FLIGHT:
            self.reply(cmd, make_response(cmd, ResponseCode.SYSTEM_BUSY, remark=OVERLOAD))
            return
        if self.big_slot and cmd.body is not None and len(cmd.body) > BIG_FRAME_BYTES:
            # Received in the slot: a body waiting to be read takes memory as a frame being
            # received does, so the slot is kept until the handler has read it.
            self._unread_big.add(id(cmd.body))
            self.server.spawn(self._handle_big(cmd, id(cmd.body)))
            return
        self.server.spawn(self._handle(cmd))

    async def _handle_big(self, cmd: RemotingCommand, body_id: int) -> None:
        # By id: holding the body here would keep it until the answer, which handlers that
        # drop it once read (REGISTER_BROKER) do not.
        try:
            async with self.server.big_handlers:
                await self._handle(cmd)
        finally:
            self._big_body_done(body_id)

    async def _handle(self, cmd: RemotingCommand) -> None:
        ns = self.server.ns
        started = time.perf_counter()
        endpoint = self.server.endpoints.get(cmd.code)
        client_address.set(self.conn.peer)  # the audit trail's "remote", for this task only
        try:
            if endpoint is None:
                response = make_response(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                         remark=f" request type {cmd.code} not supported")
            else:
                header = endpoint.header.decode(cmd.ext_fields)
                response = await endpoint.handle(ns, header, cmd, self.conn)
        except NameServerError as exc:
            if isinstance(exc, StoreUnavailable | StoreFailed):
                ns.metrics.redis_errors.labels(str(cmd.code)).inc()
                log.warning("remoting request failed", code=cmd.code, error=exc.remark)
            elif isinstance(exc, ControllerRefused):  # as Java's controller logs each one
                log.info("controller request refused", code=cmd.code, response=int(exc.code),
                         remark=exc.remark)
            response = error_response(cmd, exc, endpoint is not None and endpoint.response_header)
        except Exception as exc:  # a bug: answered like UtilAll.exceptionSimpleDesc
            log.warning("remoting handler failed", code=cmd.code, error=repr(exc))
            response = make_response(cmd, ResponseCode.SYSTEM_ERROR,
                                     remark=f"{type(exc).__name__}: {exc}")
        metrics = ns.metrics
        metrics.tally(metrics.remoting_requests, str(cmd.code), str(response.code)).inc()
        metrics.child(metrics.remoting_latency, str(cmd.code)).observe(
            time.perf_counter() - started)
        self.reply(cmd, response)

    def reply(self, request: RemotingCommand, response: RemotingCommand) -> None:
        self.reply_frame(request, encode_frame(response))

    def reply_frame(self, request: RemotingCommand, frame: bytes) -> None:
        """Send an encoded response (never to a oneway request): with the batch while
        ``data_received`` runs, else at once."""
        if request.flag & ONEWAY or self.transport is None or self.transport.is_closing():
            return
        self.last_active = time.monotonic()
        if self.batch is not None:
            self.batch.append(frame)
        else:
            self.transport.write(frame)


class RemotingServer:
    def __init__(self, ns: NameServer, *, max_frame_size: int = 16 * 1024 * 1024,
                 idle_seconds: float = IDLE_SECONDS,
                 wrap: Callable[[RemotingProtocol], asyncio.Protocol] | None = None,
                 guard: RemotingGuard | None = None,
                 trusted_proxies: AddressRules | None = None,
                 endpoints: dict[int, Endpoint] | None = None) -> None:
        """``endpoints``: the request codes served (default: the NameServer's and the
        controller's; a controller port serves the controller's only)."""
        self.ns = ns
        self.endpoints = ENDPOINTS if endpoints is None else endpoints
        self.wrap = wrap  # puts each connection behind TLS (nsfleet.remoting.tls)
        self.guard = guard
        # None: a PROXY header is believed from anyone (Java); else only from these peers.
        self.trusted_proxies = trusted_proxies
        self.max_frame_size = max_frame_size
        self.idle_seconds = idle_seconds
        self.connections: set[RemotingProtocol] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._connections_made = 0
        self._route_tallies: dict[int, Tally] = {}
        self.big_frames = BigFrameSlots()
        self.big_handlers = asyncio.Semaphore(BIG_HANDLERS)
        self.read_buffers = ReadBuffers()
        ns.on_broker_expired(self._close_expired)

    def route_answers(self, code: int) -> Tally:
        """The tally of route requests answered inline with ``code`` (looked up once)."""
        found = self._route_tallies.get(code)
        if found is None:
            metrics = self.ns.metrics
            found = self._route_tallies[code] = metrics.tally(metrics.remoting_requests, "105",
                                                              str(code))
        return found

    def next_connection_id(self) -> str:
        self._connections_made += 1
        return self.ns.connection_id(self._connections_made)

    def _close_expired(self, cluster: str, addr: str) -> None:
        """The sweep expired a broker: close its connections here, as scanNotActiveBroker
        closes the channel (it is dead, or it reconnects and registers again)."""
        for proto in list(self.connections):
            if (cluster, addr) in proto.conn.registrations and proto.transport is not None:
                proto.conn.registrations.pop((cluster, addr))
                log.info("closing an expired broker's connection", cluster=cluster,
                         broker_addr=addr, peer=proto.conn.peer)
                proto.transport.close()

    @property
    def in_flight(self) -> int:
        return len(self.tasks)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def spawn(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[arg-type]
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> None:
        """Listen on host:port; ``reuse_port``: with SO_REUSEPORT, beside the other processes
        of ``serve --processes``."""
        loop = asyncio.get_running_loop()
        wrap = self.wrap or (lambda proto: proto)
        self._server = await loop.create_server(lambda: wrap(RemotingProtocol(self)), host, port,
                                                backlog=1024, reuse_address=True,
                                                reuse_port=reuse_port or None)
        self._idle_task = asyncio.create_task(self._close_idle())

    async def _close_idle(self) -> None:
        """Close connections with no traffic for idle_seconds (Java's idle channel handling);
        its brokers are then treated as for any closed connection."""
        while True:
            await asyncio.sleep(min(10.0, self.idle_seconds / 2))
            cutoff = time.monotonic() - self.idle_seconds
            for proto in list(self.connections):
                if proto.last_active < cutoff and proto.transport is not None:
                    proto.transport.close()

    async def close(self) -> None:
        """Stop accepting, let in-flight requests finish, then close every connection. Brokers'
        registrations are not unregistered on a worker shutdown: they reconnect elsewhere."""
        if self._idle_task is not None:
            self._idle_task.cancel()
        if self._server is not None:
            self._server.close()
        if self.tasks:
            await asyncio.wait(set(self.tasks))
        for proto in list(self.connections):
            proto.conn.registrations.clear()
            proto.conn.controller_replicas.clear()  # the brokers move to another worker
            if proto.transport is not None:
                proto.transport.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
