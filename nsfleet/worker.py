"""One nsfleet worker: HTTP API + remoting server + expiry sweep over one Redis.

``serve`` runs a ``Worker`` through its phases (assemble, start, ready, drain, stop), each a
method whose order and reasons are stated once, in the class's docstring. Exit code 0; the
embedded Redis is restarted when it exits while the worker runs (nsfleet.embedded), and one that
keeps exiting stops the worker with exit code 1. A worker that joined another worker's embedded
Redis (same data directory) uses it as a --redis-url: it neither restarts nor stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import time

import structlog
from aiohttp import web
from redis.exceptions import AuthenticationError, RedisClusterException, RedisError

from nsfleet.config import JAVA_WORKER_KEYS, Settings, read_namesrv_properties
from nsfleet.embedded import EmbeddedRedis, EmbeddedRedisDied, keep_running
from nsfleet.http.app import STATE_KEY, HttpOptions, create_app, metrics_app
from nsfleet.http.cached_routes import answer_cached_routes_first
from nsfleet.metrics import Metrics
from nsfleet.process_group import ProcessGroup
from nsfleet.redis_conn import (
    UnsuitableRedis,
    check_server,
    connect,
    open_connections,
    redacted,
)
from nsfleet.remoting.controller_handlers import CONTROLLER_HANDLERS
from nsfleet.remoting.role_notifier import RoleNotifier
from nsfleet.remoting.server import RemotingServer
from nsfleet.remoting.tls import TlsFiles, tls_acceptor
from nsfleet.security.wiring import build as build_security
from nsfleet.service.address_server import AddressServer
from nsfleet.service.nameserver import NameServer
from nsfleet.service.namesrv_config import NamesrvConfig, apply_java_file
from nsfleet.service.outage import StoreOutage
from nsfleet.service.presence import WorkerPresence, advertise_address
from nsfleet.service.route_cache import RouteCache
from nsfleet.service.sweeper import Sweeper
from nsfleet.store import RouteStore

log = structlog.get_logger(__name__)
CONFIG_REFRESH_SECONDS = 30.0  # safety net if a config change message is missed
TERMINAL_REDIS_WAIT = 15.0  # seconds a worker started from a terminal waits for Redis
EMBEDDED_POLL = 0.2  # seconds between looks at the embedded Redis process


class RedisUnreachable(RuntimeError):
    """Started from a terminal, the worker gave up waiting for Redis."""


async def _follow_config(config: NamesrvConfig, changed: asyncio.Event,
                         stop: asyncio.Event) -> None:
    # Ends on ``stop``, not only on cancellation: redis-py may swallow a cancellation that
    # arrives inside a call.
    while not stop.is_set():
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the cancel that stops us.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CONFIG_REFRESH_SECONDS):
                await changed.wait()
        changed.clear()
        try:
            await config.refresh()
        except Exception as exc:  # Redis hiccup: keep the last known config
            log.warning("config refresh failed", error=str(exc))


async def serve(settings: Settings, stop: asyncio.Event | None = None,
                group: ProcessGroup | None = None, repair_aof: bool = False) -> int:
    """Run one worker until ``stop`` (or SIGTERM/SIGINT). ``group``: this is one of the
    processes of ``serve --processes N`` (nsfleet.supervisor): the ports are bound with
    SO_REUSEPORT and /metrics answers for every process of the group. ``repair_aof``: repair
    the embedded Redis's append-only file before starting it (``serve --repair-aof``)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    worker = Worker(settings, stop, group)
    await worker.assemble(repair_aof)
    try:
        if await worker.start():
            await worker.ready()
            await stop.wait()
    finally:
        await worker.drain()
        await worker.stop()
    if worker.embedded_died:
        raise worker.embedded_died[0]
    return 0


class Worker:
    """One worker's life, in phases that ``serve`` runs in this order:

    1. ``assemble``: the parts, nothing listening yet. Bad TLS or accounts files, an embedded
       Redis that does not start: the start ends here, with nothing to drain.
    2. ``start``: HTTP first, so /livez answers (and /readyz says why not) while Redis is
       unreachable (a process of ``--processes`` binds later, in ``ready``: the kernel hands a
       bound process new connections at once, and its siblings answer meanwhile); then Redis
       (retried; from a terminal, given up after TERMINAL_REDIS_WAIT seconds), the namesrv
       file, presence, the change feed and config, the remoting port. False when stopped while
       waiting for Redis.
    3. ``ready``: ready once the remoting port accepts too (brokers and clients connect there
       first); the expiry sweep starts.
    4. ``drain`` (SIGTERM/SIGINT): readiness turns false at once, the address server stops
       listing this worker, the sweep stops (one in flight finishes), the listeners stop
       accepting and in-flight requests (and long-polls, which notice the drain) get
       ``drain_timeout`` seconds in all.
    5. ``stop``: background tasks, presence, the change feed, the Redis connections, the
       embedded Redis (if this worker owns one), the process group.
    """

    def __init__(self, settings: Settings, stop: asyncio.Event,
                 group: ProcessGroup | None) -> None:
        self.settings = settings
        self.stop_event = stop
        self.group = group
        self.metrics = Metrics()
        self.embedded: EmbeddedRedis | None = None
        self.embedded_died: list[EmbeddedRedisDied] = []
        self._keeper: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._runners: list[web.AppRunner] = []
        self._remoting: RemotingServer | None = None
        self._controller_port: RemotingServer | None = None
        self._sweeper: Sweeper | None = None

    async def assemble(self, repair_aof: bool) -> None:
        settings, metrics, group = self.settings, self.metrics, self.group
        if group is not None:
            await group.start(metrics.registry)
            metrics.exposition = lambda: group.exposition(metrics.registry)
        # First: bad TLS files or a bad accounts file stop the start at once (never
        # half-protected).
        self._tls = tls_acceptor(settings.tls_mode, TlsFiles(
            settings.tls_cert_file, settings.tls_key_file, settings.tls_ca_file,
            settings.tls_client_auth), metrics)
        self._security = build_security(settings, metrics.registry)
        self.url = settings.redis_url
        if settings.embedded_redis:
            self.embedded = EmbeddedRedis(settings.effective_data_dir, repair_aof=repair_aof)
            self.url = await asyncio.to_thread(self.embedded.start)
            if self.embedded.joined is None:  # a server joined is its owner's to supervise
                self._keeper = asyncio.create_task(keep_running(
                    self.embedded, self.stop_event, self.embedded_died, EMBEDDED_POLL))
        self._client = connect(self.url, settings.redis_username, settings.redis_password)
        store = self._store = RouteStore(
            self._client, settings.namespace,
            on_script=lambda name, secs: metrics.lua_latency.labels(name).observe(secs),
            replica_acks=settings.min_replica_acks,
            replica_ack_timeout_ms=int(settings.replica_ack_timeout * 1000))
        self._outage = StoreOutage(metrics, stale_serve_max=settings.stale_serve_max)
        self._cache = RouteCache(store, metrics, enabled=settings.route_cache,
                                 outage=self._outage)
        # The worker's own values: its sweep period is what scanNotActiveBrokerInterval means.
        self._config = NamesrvConfig(store, static={
            "listenPort": str(settings.remoting_port), "bindAddress": settings.host,
            "scanNotActiveBrokerInterval": str(round(settings.sweep_interval * 1000))})
        self._presence = WorkerPresence(store, advertise=advertise_address(
            settings.advertise_address, settings.host, settings.remoting_port))
        ns = self._ns = NameServer(store, self._cache, self._config, metrics,
                                   broker_timeout=settings.broker_timeout,
                                   worker_id=self._presence.worker_id)
        # The controller: brokers in controller mode send it requests on the remoting port, so
        # this worker names itself their leader; it notifies brokers of elections it makes.
        ns.controller.options.leader_address = (
            advertise_address(settings.advertise_address.rpartition(":")[0]
                              if settings.advertise_address.count(":") == 1
                              else settings.advertise_address,
                              settings.host, settings.controller_port)
            if settings.controller_port else self._presence.advertise)
        ns.controller.options.leader_id = self._presence.worker_id
        ns.controller.options.unclean = settings.controller_elect_unclean
        ns.controller.options.default_unclean = settings.controller_elect_unclean
        ns.controller.on_elected.append(RoleNotifier())
        options = HttpOptions(max_body_size=settings.max_body_size,
                              long_poll_max=settings.long_poll_max, ui=settings.ui)
        app = self._app = create_app(ns, options=options, scripts_loaded=False,
                                     addresses=AddressServer(store, ns.history))
        if group is not None:  # /readyz says which process answered
            app[STATE_KEY]["process"] = {"process": group.index, "pid": os.getpid()}
        if self._security.http_middleware is not None:
            app.middlewares.append(self._security.http_middleware)  # inside the error one
        if self._security.files is not None:
            self._tasks.append(asyncio.create_task(
                self._security.files.watch(settings.acl_reload_interval, self.stop_event)))

    async def start(self) -> bool:
        settings = self.settings
        runner = web.AppRunner(self._app, handle_signals=False, access_log=None,
                               shutdown_timeout=settings.drain_timeout)
        await runner.setup()
        self._runners.append(runner)
        if self._security.http_middleware is None and runner.server is not None:
            answer_cached_routes_first(runner.server, self._ns)
        if self.group is None:
            await self._listen_http(runner)
        self._server_info = await _wait_for_redis(
            self._store, self._config, self.stop_event, where=redacted(self.url),
            embedded=self.embedded is not None, give_up_after=_redis_wait_bound())
        if self._server_info is None:
            return False
        if settings.namesrv_config_file:
            path = settings.namesrv_config_file
            await apply_java_file(self._config, path, read_namesrv_properties(path),
                                  JAVA_WORKER_KEYS)
        await self._presence.start()
        await self._cache.start()
        config_changed = asyncio.Event()
        self._cache.on_config_change.append(config_changed)
        self._tasks.append(asyncio.create_task(
            _follow_config(self._config, config_changed, self.stop_event)))
        tls = self._tls
        self._remoting = RemotingServer(self._ns, max_frame_size=settings.max_frame_size,
                                        wrap=tls.wrap if tls is not None else None,
                                        guard=self._security.guard,
                                        trusted_proxies=self._security.remoting_trusted)
        await self._remoting.start(settings.host, settings.remoting_port,
                                   reuse_port=self.group is not None)
        if settings.controller_port:
            self._controller_port = RemotingServer(
                self._ns, max_frame_size=settings.max_frame_size,
                wrap=tls.wrap if tls is not None else None, guard=self._security.guard,
                trusted_proxies=self._security.remoting_trusted, endpoints=CONTROLLER_HANDLERS)
            await self._controller_port.start(settings.host, settings.controller_port,
                                              reuse_port=self.group is not None)
        if tls is not None:
            self._tasks.append(asyncio.create_task(
                tls.context.run(settings.tls_reload_interval)))
        return True

    async def _listen_http(self, runner: web.AppRunner) -> None:
        settings, reuse_port = self.settings, self.group is not None
        await self._security.http_site(runner, settings.host, settings.http_port,
                                       reuse_port=reuse_port).start()
        if settings.metrics_port:
            mrunner = web.AppRunner(metrics_app(self._ns), handle_signals=False,
                                    access_log=None)
            await mrunner.setup()
            self._runners.append(mrunner)
            await web.TCPSite(mrunner, settings.host, settings.metrics_port,
                              reuse_port=reuse_port or None).start()

    async def ready(self) -> None:
        settings, metrics = self.settings, self.metrics
        self._app[STATE_KEY]["scripts_loaded"] = True
        if self.group is not None:
            await self._listen_http(self._runners[0])
        metrics.store_up.set(1)
        metrics.ready.set(1)
        self._sweeper = Sweeper(self._store, metrics, interval=settings.sweep_interval,
                                guard_share=settings.expiry_guard_share,
                                guard_max_hold=settings.expiry_guard_max_hold,
                                outage=self._outage.clock,
                                worker_id=self._presence.worker_id,
                                layout_move=settings.layout_move)
        self._sweeper.start()
        self._ns.controller.start()
        # What start-up built (modules, the apps, their tables) lives as long as the worker:
        # out of the collector's generations, so no full collection scans it again and the
        # pauses stay as short as what requests create (Python's gc.freeze; measured: a third
        # of a full collection's pause on an idle worker).
        gc.collect()
        gc.freeze()
        log.info("nsfleet worker ready", http=f"{settings.host}:{settings.http_port}",
                 remoting=f"{settings.host}:{settings.remoting_port}", tls=settings.tls_mode,
                 namespace=settings.namespace, **self._server_info)

    async def drain(self) -> None:
        self._app[STATE_KEY]["draining"] = True
        self.metrics.ready.set(0)
        log.info("draining", timeout=self.settings.drain_timeout)
        await self._presence.withdraw()  # the address server stops sending clients here
        if self._sweeper is not None:
            await self._sweeper.stop_gracefully()
        await self._ns.controller.stop()
        # One deadline for both listeners: each stops accepting, in-flight requests finish.
        closing = [r.cleanup() for r in self._runners]
        if self._remoting is not None:
            closing.append(self._remoting.close())
        if self._controller_port is not None:
            closing.append(self._controller_port.close())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True),
                                   self.settings.drain_timeout)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=3.0)
        await self._presence.close()
        await self._cache.close()
        await self._client.aclose()
        if self._keeper is not None:
            self.stop_event.set()
            await self._keeper
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)
        if self.group is not None:
            await self.group.close()
        log.info("nsfleet worker stopped")


def _redis_wait_bound() -> float | None:
    """Started from a terminal, someone is watching: a wrong --redis-url ends the start with an
    error soon. Elsewhere (Kubernetes, systemd) Redis may simply come up later: wait for it."""
    return TERMINAL_REDIS_WAIT if sys.stdin.isatty() and sys.stderr.isatty() else None


def _setting_to_check(exc: Exception, embedded: bool) -> str:
    if embedded:
        return "the embedded Redis (--data-dir / NSFLEET_DATA_DIR, and its log there)"
    if isinstance(exc, AuthenticationError) or "WRONGPASS" in str(exc) or "NOAUTH" in str(exc):
        return ("--redis-username / NSFLEET_REDIS_USERNAME and --redis-password / "
                "NSFLEET_REDIS_PASSWORD (or the URL's user:password)")
    return "--redis-url / NSFLEET_REDIS_URL"


async def _wait_for_redis(store: RouteStore, config: NamesrvConfig, stop: asyncio.Event, *,
                          where: str, embedded: bool = False,
                          give_up_after: float | None = None) -> dict[str, str] | None:
    """Check the server and load the scripts, retrying while Redis is unreachable; None when
    asked to stop first. An unsuitable Redis (too old, evicting) is not retried. With
    ``give_up_after`` (seconds), RedisUnreachable once that has passed without an answer."""
    delay = 0.5
    deadline = None if give_up_after is None else time.monotonic() + give_up_after
    while not stop.is_set():
        try:
            info = await check_server(store.redis)
            await open_connections(store.redis)
            await store.load_scripts()
            await config.refresh()
            return info
        except UnsuitableRedis:
            raise
        except (RedisError, RedisClusterException, OSError) as exc:
            check = _setting_to_check(exc, embedded)
            if deadline is not None and time.monotonic() >= deadline:
                raise RedisUnreachable(
                    f"no answer from Redis at {where} within {give_up_after:g} s ({exc}); "
                    f"check {check}") from None
            log.warning("waiting for redis", redis=where, error=str(exc), check=check,
                        retry_in=delay)
        wait = delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic()))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await stop.wait()
        delay = min(delay * 2, 10.0)
    return None
