"""Prometheus metrics of one worker (one registry per worker, so tests can run several)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Tally:
    """Increments of one counter child kept as a plain int and added to it when the registry is
    collected. ``Counter.inc`` (checks and a lock) cost ~10 % of a cached route read; counts
    are only ever read through a collection, and every increment comes from the event loop."""

    __slots__ = ("child", "pending")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.pending = 0

    def inc(self) -> None:
        self.pending += 1

    def flush(self) -> None:
        if self.pending:
            pending, self.pending = self.pending, 0
            self.child.inc(pending)


class _FlushTallies(Collector):
    """Registered first, so every collection adds the pending tallies before the counters are
    read."""

    def __init__(self, tallies: dict[tuple[object, tuple[str, ...]], Tally]) -> None:
        self.tallies = tallies

    def collect(self) -> Iterable[Metric]:
        for tally in list(self.tallies.values()):
            tally.flush()
        return []

    def describe(self) -> Iterable[Metric]:
        return []


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._tallies: dict[tuple[object, tuple[str, ...]], Tally] = {}
        r.register(_FlushTallies(self._tallies))
        # The standard process_*, python_info and python_gc_* series, in this worker's registry.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.http_requests = Counter("nsfleet_http_requests", "HTTP requests by route and status",
                                     ["route", "method", "status"], registry=r)
        self.http_latency = Histogram("nsfleet_http_request_seconds", "HTTP request latency",
                                      ["route", "method"], buckets=LATENCY_BUCKETS, registry=r)
        self.remoting_requests = Counter("nsfleet_remoting_requests",
                                         "Remoting requests by request code and response code",
                                         ["code", "response"], registry=r)
        self.remoting_latency = Histogram("nsfleet_remoting_request_seconds",
                                          "Remoting request latency", ["code"],
                                          buckets=LATENCY_BUCKETS, registry=r)
        self.remoting_connections = Gauge("nsfleet_remoting_connections",
                                          "Open remoting connections", registry=r)
        self.remoting_transport = Counter("nsfleet_remoting_connections_by_transport",
                                          "Remoting connections accepted, by transport (tls, "
                                          "plaintext; TLS modes only)", ["transport"], registry=r)
        self.remoting_tls_failures = Counter("nsfleet_remoting_tls_failures",
                                             "Remoting connections closed by TLS: handshake, "
                                             "plaintext_refused", ["reason"], registry=r)
        self.tls_reloads = Counter("nsfleet_tls_reloads", "TLS certificate reloads by result",
                                   ["result"], registry=r)
        self.lua_latency = Histogram("nsfleet_lua_call_seconds", "Lua script call latency",
                                     ["script"], buckets=LATENCY_BUCKETS, registry=r)
        self.brokers_alive = Gauge("nsfleet_brokers_alive",
                                   "Brokers before their deadline at the last sweep", registry=r)
        self.cluster_brokers_alive = Gauge(
            "nsfleet_cluster_brokers_alive", "Brokers before their deadline at the last sweep, "
            "by cluster (0 for a cluster seen since the worker started that has none left)",
            ["cluster"], registry=r)
        self.store_up = Gauge("nsfleet_store_up", "1 when Redis answered the last sweep or "
                              "readiness check of this worker, else 0", registry=r)
        self.ready = Gauge("nsfleet_ready", "1 while the worker is ready (what /readyz last "
                           "answered), else 0", registry=r)
        self.sweep_removals = Counter("nsfleet_sweep_removals", "Brokers expired by the sweep",
                                      registry=r)
        self.sweep_held = Counter("nsfleet_sweep_held",
                                  "Sweeps held by the mass-expiry guard", registry=r)
        self.layout = Gauge("nsfleet_queue_data_layout", "The queue data's layout of the store "
                            "as this worker last saw it: 1 (one hash per row) or 2 (one hash "
                            "per topic; docs/table-shape.md)", registry=r)
        self.old_workers = Gauge("nsfleet_old_workers", "Live workers of a build before layout "
                                 "2, seen after the store moved to it (they read no queue "
                                 "data); at the last check", registry=r)
        self._controller_metrics(r)
        self.redis_errors = Counter("nsfleet_redis_errors", "Redis errors by operation",
                                    ["operation"], registry=r)
        self.topics_dropped = Counter("nsfleet_registered_topics_dropped",
                                      "Topics of broker registrations that could not be stored",
                                      registry=r)
        self.registrations_from_memo = Counter(
            "nsfleet_registrations_from_memo",
            "Registrations answered from the worker's memo of registrations proven unchanged "
            "(the rest of a 5.x split round), with no Redis call", registry=r)
        self.route_cache = Counter("nsfleet_route_cache", "Route cache lookups", ["result"],
                                   registry=r)
        self.stale_answers = Counter("nsfleet_stale_answers",
                                     "Reads answered from the worker's last coherent view while "
                                     "the store was away, by what was read (route, cluster_info, "
                                     "topic_list)", ["read"], registry=r)
        self.stale_view_age = Gauge("nsfleet_stale_view_age_seconds",
                                    "Age of the view this worker serves stale while the store "
                                    "is away (0: its view is coherent)", registry=r)
        self.stale_view_age.set_function(lambda: self.stale_age() or 0.0)
        # Set by the route cache: seconds its view has been stale, or None.
        self.stale_age: Callable[[], float | None] = lambda: None
        self.replayed = Counter("nsfleet_outage_replays",
                                "Registrations and heartbeats a broker sent during a store outage, "
                                "replayed when the store returned, by result (applied, "
                                "superseded, failed)", ["result"], registry=r)
        self._children: dict[tuple[object, tuple[str, ...]], Any] = {}
        # /metrics's body when not this registry's alone (serve --processes: every process's).
        self.exposition: Callable[[], Awaitable[bytes]] | None = None

    def _controller_metrics(self, r: CollectorRegistry) -> None:
        """The controller's (docs/controller.md)."""
        self.controller_elections = Counter(
            "nsfleet_controller_elections", "Controller elections this worker made, by outcome "
            "(elected: a new master; none: the master lost and no replica could take over)",
            ["outcome"], registry=r)
        self.controller_sets_without_master = Gauge(
            "nsfleet_controller_sets_without_master", "Controller broker sets with no live "
            "master, as this worker's last scan saw them (the fleet's: every worker scans)",
            registry=r)
        self.controller_sync_state_set_size = Gauge(
            "nsfleet_controller_sync_state_set_size", "In-sync replicas of each controller "
            "broker set (SyncStateSet), as this worker's last scan saw them", ["broker_name"],
            registry=r)

    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once per label values: ``labels()`` takes a
        lock and validates on every call, a cost the hot read paths pay per request."""
        key = (metric, labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def tally(self, counter: Counter, *labels: str) -> Tally:
        """The hot paths' way to count: ``counter.labels(*labels).inc()``, added at collection."""
        key = (counter, labels)
        found = self._tallies.get(key)
        if found is None:
            found = self._tallies[key] = Tally(counter.labels(*labels))
        return found
