"""Cached route reads answered before aiohttp's router and middlewares.

A plain ``GET /v1/routes/{topic}`` (no query, no If-None-Match) whose answer the worker's route
cache holds is the HTTP API's hot path. Routing through ~35 routes, the error/metrics middleware
and the per-request latency histogram cost about a third of such a read, so the server's request
handler answers it first and hands every other request, unchanged, to the application. Only
installed when no HTTP access control is configured (a token check must see every request).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from nsfleet.domain.errors import NameServerError
from nsfleet.service.nameserver import NameServer
from nsfleet.service.route_reads import standard_route_json

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
PREFIX = "/v1/routes/"
ROUTE_NAME = "/v1/routes/{topic}"  # the route's canonical name in the metrics


def answer_cached_routes_first(server: web.Server, ns: NameServer) -> None:
    """Wrap ``server``'s request handler (the application) with the cached-route shortcut."""
    app_handler: Handler = server.request_handler  # type: ignore[assignment]
    served = ns.metrics.tally(ns.metrics.http_requests, ROUTE_NAME, "GET", "200")

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        if (request.method == "GET" and request.path.startswith(PREFIX)
                and not request.query_string and "If-None-Match" not in request.headers):
            topic = request.path[len(PREFIX):]
            if topic and "/" not in topic:
                try:
                    answer = ns.cached_route(topic)
                except NameServerError:  # the application answers it, with its error
                    answer = None
                if answer is not None and ns.stale_age() is None:  # stale: marked there
                    served.inc()
                    return web.Response(
                        body=answer.encoded("standard-json", standard_route_json),
                        content_type="application/json", headers={"ETag": f'"{answer.etag}"'})
        return await app_handler(request)

    server.request_handler = handle  # type: ignore[assignment]
