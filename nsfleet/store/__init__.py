"""The route store: the NameServer's tables in Redis, their key schema, the Lua scripts that change
them and the change feed. The only package that knows Redis keys or holds a Redis client."""

from nsfleet.store.departures import SweepResult
from nsfleet.store.route_store import RouteStore
from nsfleet.store.table_reads import RouteRead, ViewMarker

__all__ = ["RouteRead", "RouteStore", "SweepResult", "ViewMarker"]
