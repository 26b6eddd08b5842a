"""One nsfleet worker: HTTP API + remoting server + expiry sweep over one Redis.

Start-up: the HTTP listener comes up first; while Redis is unreachable /livez answers and /readyz
says why not (so Kubernetes does not crash-loop the pod); started from a terminal, the worker gives
up after TERMINAL_REDIS_WAIT seconds instead, naming the setting to check. Shutdown on
SIGTERM/SIGINT: readiness turns false at once, listeners stop accepting, in-flight requests (and
long-polls, which notice the drain) get ``drain_timeout`` seconds in all, then the scheduler, the
change-feed subscription and Redis connections close and the embedded Redis (if any) stops. Exit
code 0. The embedded Redis is restarted when it exits while the worker runs (nsfleet.embedded);
one that keeps exiting stops the worker with exit code 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import time
from typing import Any

import structlog
from aiohttp import web
from redis.exceptions import AuthenticationError, RedisClusterException, RedisError

from nsfleet.config import JAVA_WORKER_KEYS, Settings, read_namesrv_properties
from nsfleet.embedded import EmbeddedRedis, EmbeddedRedisDied
from nsfleet.http.app import STATE_KEY, HttpOptions, create_app, metrics_app
from nsfleet.http.cached_routes import answer_cached_routes_first
from nsfleet.metrics import Metrics
from nsfleet.process_group import ProcessGroup
from nsfleet.redis_conn import UnsuitableRedis, check_server, connect, redacted
from nsfleet.remoting.server import RemotingServer
from nsfleet.remoting.tls import ReloadingContext, TlsAcceptor, TlsFiles, TlsMode
from nsfleet.security.wiring import build as build_security
from nsfleet.service.address_server import AddressServer
from nsfleet.service.nameserver import NameServer
from nsfleet.service.namesrv_config import ALWAYS_BLACKLISTED, DEFAULTS, NamesrvConfig
from nsfleet.service.outage import StoreOutage
from nsfleet.service.presence import WorkerPresence, advertise_address
from nsfleet.service.route_cache import RouteCache
from nsfleet.service.sweeper import Sweeper
from nsfleet.store import RouteStore

log = structlog.get_logger(__name__)
CONFIG_REFRESH_SECONDS = 30.0  # safety net if a config change message is missed
SWEEP_STOP_SECONDS = 5.0  # how long a sweep in flight at shutdown may take to finish
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


async def _keep_embedded(embedded: EmbeddedRedis, stop: asyncio.Event,
                         died: list[EmbeddedRedisDied]) -> None:
    """Restart the embedded Redis when it exits (nsfleet.embedded); one that keeps exiting
    stops the worker. Ends on ``stop`` (never cancelled: a restart in flight finishes, so the
    worker's shutdown stops the server it started)."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EMBEDDED_POLL):
                await stop.wait()
        if stop.is_set():
            return
        due = embedded.restart_at is not None and time.monotonic() >= embedded.restart_at
        try:
            if due:  # waits for the server to answer: off the event loop
                await asyncio.to_thread(embedded.supervise)
            else:
                embedded.supervise()
        except EmbeddedRedisDied as exc:
            log.error("embedded redis keeps exiting: stopping the worker", error=str(exc))
            died.append(exc)
            stop.set()


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

    metrics = Metrics()
    reuse_port = group is not None
    if group is not None:
        await group.start(metrics.registry)
        metrics.exposition = lambda: group.exposition(metrics.registry)
    # First: bad TLS files or a bad accounts file stop the start at once (never half-protected).
    tls = _tls_acceptor(settings, metrics)
    security = build_security(settings, metrics.registry)
    embedded: EmbeddedRedis | None = None
    keeper: asyncio.Task[None] | None = None
    died: list[EmbeddedRedisDied] = []
    url = settings.redis_url
    if settings.embedded_redis:
        embedded = EmbeddedRedis(settings.effective_data_dir, repair_aof=repair_aof)
        url = await asyncio.to_thread(embedded.start)
        log.info("embedded redis started", url=url, data_dir=settings.effective_data_dir,
                 server=embedded.server.binary)
        keeper = asyncio.create_task(_keep_embedded(embedded, stop, died))
    client = connect(url, settings.redis_username, settings.redis_password)
    tasks: list[asyncio.Task[None]] = []
    sweep_runs: _SweepRuns | None = None
    runners: list[web.AppRunner] = []
    remoting: RemotingServer | None = None
    sweeper: Sweeper | None = None
    store = RouteStore(client, settings.namespace,
                       on_script=lambda name, secs: metrics.lua_latency.labels(name).observe(secs),
                       replica_acks=settings.min_replica_acks,
                       replica_ack_timeout_ms=int(settings.replica_ack_timeout * 1000))
    outage = StoreOutage(metrics, stale_serve_max=settings.stale_serve_max)
    cache = RouteCache(store, metrics, enabled=settings.route_cache, outage=outage)
    # The worker's own values: its sweep period is what scanNotActiveBrokerInterval means.
    config = NamesrvConfig(store, static={
        "listenPort": str(settings.remoting_port), "bindAddress": settings.host,
        "scanNotActiveBrokerInterval": str(round(settings.sweep_interval * 1000))})
    presence = WorkerPresence(store, advertise=advertise_address(
        settings.advertise_address, settings.host, settings.remoting_port))
    ns = NameServer(store, cache, config, metrics, broker_timeout=settings.broker_timeout,
                    worker_id=presence.worker_id)
    options = HttpOptions(max_body_size=settings.max_body_size,
                          long_poll_max=settings.long_poll_max, ui=settings.ui)
    app = create_app(ns, options=options, scripts_loaded=False,
                     addresses=AddressServer(store, ns.history))
    if group is not None:  # /readyz says which process answered
        app[STATE_KEY]["process"] = {"process": group.index, "pid": os.getpid()}
    if security.http_middleware is not None:
        app.middlewares.append(security.http_middleware)  # inside the error middleware
    if security.files is not None:
        tasks.append(asyncio.create_task(
            security.files.watch(settings.acl_reload_interval, stop)))
    try:
        # HTTP first, so /livez answers (and /readyz says why not) while Redis is unreachable.
        runner = web.AppRunner(app, handle_signals=False, access_log=None,
                               shutdown_timeout=settings.drain_timeout)
        await runner.setup()
        runners.append(runner)
        if security.http_middleware is None and runner.server is not None:
            answer_cached_routes_first(runner.server, ns)

        async def listen_http() -> None:
            await security.http_site(runner, settings.host, settings.http_port,
                                     reuse_port=reuse_port).start()
            if settings.metrics_port:
                mrunner = web.AppRunner(metrics_app(ns), handle_signals=False, access_log=None)
                await mrunner.setup()
                runners.append(mrunner)
                await web.TCPSite(mrunner, settings.host, settings.metrics_port,
                                  reuse_port=reuse_port or None).start()

        # A process of serve --processes binds its HTTP port once ready instead: the kernel
        # hands a bound process new connections at once, and its siblings answer meanwhile.
        if group is None:
            await listen_http()
        server_info = await _wait_for_redis(store, config, stop, where=redacted(url),
                                            embedded=embedded is not None,
                                            give_up_after=_redis_wait_bound())
        if server_info is None:
            return 0
        if settings.namesrv_config_file:
            await _apply_namesrv_file(settings.namesrv_config_file, config)
        await presence.start()
        await cache.start()
        config_changed = asyncio.Event()
        cache.on_config_change.append(config_changed)
        tasks.append(asyncio.create_task(_follow_config(config, config_changed, stop)))
        remoting = RemotingServer(ns, max_frame_size=settings.max_frame_size,
                                  wrap=tls.wrap if tls is not None else None,
                                  guard=security.guard,
                                  trusted_proxies=security.remoting_trusted)
        await remoting.start(settings.host, settings.remoting_port, reuse_port=reuse_port)
        if tls is not None:
            tasks.append(asyncio.create_task(
                tls.context.run(settings.tls_reload_interval)))
        # Ready once the remoting port accepts too: brokers and clients connect there first.
        app[STATE_KEY]["scripts_loaded"] = True
        if group is not None:
            await listen_http()
        metrics.store_up.set(1)
        metrics.ready.set(1)
        sweeper = Sweeper(store, metrics, interval=settings.sweep_interval,
                          guard_share=settings.expiry_guard_share,
                          guard_max_hold=settings.expiry_guard_max_hold,
                          outage=outage.clock)
        sweeper.start()
        sweep_runs = _SweepRuns(sweeper)
        # What start-up built (modules, the apps, their tables) lives as long as the worker: out
        # of the collector's generations, so no full collection scans it again and the pauses
        # stay as short as what requests create (Python's gc.freeze; measured: a third of a full
        # collection's pause on an idle worker).
        gc.collect()
        gc.freeze()
        log.info("nsfleet worker ready", http=f"{settings.host}:{settings.http_port}",
                 remoting=f"{settings.host}:{settings.remoting_port}", tls=settings.tls_mode,
                 namespace=settings.namespace, **server_info)
        await stop.wait()
    finally:
        app[STATE_KEY]["draining"] = True
        metrics.ready.set(0)
        log.info("draining", timeout=settings.drain_timeout)
        await presence.withdraw()  # the address server stops sending clients here at once
        if sweeper is not None:
            await _stop_sweeper(sweeper, sweep_runs)
        # One deadline for both listeners: each stops accepting, in-flight requests finish.
        closing = [r.cleanup() for r in runners]
        if remoting is not None:
            closing.append(remoting.close())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True),
                                   settings.drain_timeout)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=3.0)
        await presence.close()
        await cache.close()
        await client.aclose()
        if keeper is not None:
            stop.set()
            await keeper
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
        if group is not None:
            await group.close()
        log.info("nsfleet worker stopped")
    if died:
        raise died[0]
    return 0


class _SweepRuns:
    """The sweeper's jobs in flight, from the scheduler's events (``idle`` set when none)."""

    def __init__(self, sweeper: Sweeper) -> None:
        from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_SUBMITTED

        self.submitted = EVENT_JOB_SUBMITTED
        self.running = 0
        self.idle = asyncio.Event()
        self.idle.set()
        sweeper.scheduler.add_listener(self._seen, EVENT_JOB_SUBMITTED | EVENT_JOB_EXECUTED |
                                       EVENT_JOB_ERROR)

    def _seen(self, event: Any) -> None:
        self.running += 1 if event.code == self.submitted else -1
        if self.running > 0:
            self.idle.clear()
        else:
            self.idle.set()


async def _stop_sweeper(sweeper: Sweeper, runs: _SweepRuns | None) -> None:
    """Stop the expiry sweep without cancelling a sweep in flight: APScheduler's shutdown
    cancels a running job and logs the cancellation as the job's error, a CancelledError
    traceback through the Redis client (seen on SIGTERM under load). No new sweep starts; one
    running gets SWEEP_STOP_SECONDS (a sweep is a few bounded script calls), and if it is still
    running then, its cancellation is not logged (nsfleet.logs)."""
    if not sweeper.scheduler.running:
        return
    sweeper.scheduler.pause()
    if runs is not None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SWEEP_STOP_SECONDS):
                await runs.idle.wait()
    sweeper.stop()


def _tls_acceptor(settings: Settings, metrics: Metrics) -> TlsAcceptor | None:
    """The remoting port's TLS (None when disabled); TlsConfigError when the files are bad."""
    mode = TlsMode(settings.tls_mode)
    if mode is TlsMode.DISABLED:
        return None
    files = TlsFiles(settings.tls_cert_file, settings.tls_key_file, settings.tls_ca_file,
                     settings.tls_client_auth)
    acceptor = TlsAcceptor(mode, ReloadingContext(files, metrics), metrics)
    log.info("TLS on the remoting port", mode=mode.value, cert_file=files.cert_file,
             client_auth=files.client_auth)
    return acceptor


async def _apply_namesrv_file(path: str, config: NamesrvConfig) -> None:
    """A Java NameServer's -c file: its NamesrvConfig keys apply fleet-wide (as they configure
    a Java NameServer at start), the worker keys were read with the settings; name the rest."""
    props = read_namesrv_properties(path)
    local_only = ALWAYS_BLACKLISTED  # file paths and the blacklist: Java-process settings
    applied = await config.update({k: v for k, v in props.items()
                                   if k in DEFAULTS and k not in local_only})
    ignored = sorted(set(props) - set(applied) - set(JAVA_WORKER_KEYS))
    log.info("namesrv config file read", path=path, applied=applied,
             worker_settings=sorted(set(props) & set(JAVA_WORKER_KEYS)))
    if ignored:
        log.warning("namesrv config file keys ignored (not implemented, local to a Java "
                    "process, or not parsable)", path=path, keys=ignored)


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
