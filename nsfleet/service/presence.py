"""This worker's presence in Redis, so other workers can tell its connections from a dead
worker's: a broker registered over a connection of a worker that died without closing it (kill
-9, a lost node) must not be kept registered by that connection. The same refresh advertises the
remoting address clients should use for this worker, which the address server lists."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import uuid

import structlog

from nsfleet.domain.errors import NameServerError
from nsfleet.store import RouteStore
from nsfleet.store.address_tables import AddressTables

log = structlog.get_logger(__name__)
INTERVAL = 5.0  # seconds between refreshes
TTL_MS = 20_000  # a worker silent this long counts as dead (and leaves the address server)


def primary_address() -> str:
    """The address this host's default route leaves from (a UDP connect sends nothing), else
    what its host name resolves to, else loopback."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: never answered, only routed
        return str(s.getsockname()[0])
    with contextlib.suppress(OSError):
        return socket.gethostbyname(socket.gethostname())
    return "127.0.0.1"


def advertise_address(configured: str, bind_host: str, remoting_port: int) -> str:
    """The remoting address clients should use for this worker: ``configured`` (``host`` or
    ``host:port``; the remoting port when it has none), else the bind address, or the host's
    primary address when binding every interface."""
    host = configured.strip()
    if not host:
        host = bind_host
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(bind_host.strip("[]")).is_unspecified:
                host = primary_address()
    if host.count(":") == 1 or (host.startswith("[") and "]:" in host):
        return host  # already host:port
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # a bare IPv6 address
    return f"{host}:{remoting_port}"


class WorkerPresence:
    def __init__(self, store: RouteStore, worker_id: str | None = None, *,
                 advertise: str = "") -> None:
        """``advertise``: the remoting address the address server lists for this worker
        (empty: presence only, not listed)."""
        self.store = store
        self.addresses = AddressTables.of(store)
        self.worker_id = worker_id or uuid.uuid4().hex[:16]
        self.advertise = advertise
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._withdrawn = False

    async def _mark(self) -> None:
        if self.advertise and not self._withdrawn:
            await self.addresses.mark_alive(self.worker_id, TTL_MS, self.advertise)
        else:
            await self.store.mark_worker_alive(self.worker_id, TTL_MS)

    async def start(self) -> None:
        await self._mark()
        self._task = asyncio.create_task(self._refresh(), name="worker-presence")

    async def _refresh(self) -> None:
        while not self._closing:
            await asyncio.sleep(INTERVAL)
            try:
                await self._mark()
            except NameServerError as exc:  # Redis hiccup: try again next round
                if self._withdrawn:
                    # Leaving: Redis may be gone for good (a dead embedded Redis stops the
                    # worker), and a warning after that fatal line would read as a new problem.
                    log.debug("presence refresh failed", error=exc.remark)
                else:
                    log.warning("presence refresh failed", error=exc.remark)

    async def withdraw(self) -> None:
        """Stop advertising (a draining worker): clients asking the address server from now on
        are not sent here. The presence itself goes on until ``close``. Best effort: a Redis
        that does not answer within a second leaves the entry to expire with the presence."""
        self._withdrawn = True
        if self.advertise and self._task is not None:
            with contextlib.suppress(NameServerError, TimeoutError):
                async with asyncio.timeout(1.0):
                    await self.addresses.withdraw(self.worker_id)

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            # redis-py may swallow a cancellation inside a call; the flag ends the loop then.
            await asyncio.wait({self._task}, timeout=3.0)
            await self.withdraw()  # again: a refresh racing the first may have re-added it
