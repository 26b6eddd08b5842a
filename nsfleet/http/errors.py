"""Every HTTP error is JSON ``{"code", "error"}``, mapped generically from the domain's errors.

``code`` is RocketMQ's response code where the NameServer would answer one (17 TOPIC_NOT_EXIST,
22 QUERY_NOT_FOUND, 1 SYSTEM_ERROR, 16 NO_PERMISSION); for purely HTTP failures it repeats the
HTTP status (400, 404, 405, 413, 503).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from nsfleet.domain.audit import client_address
from nsfleet.domain.errors import NameServerError, ResponseCode, StoreFailed, StoreUnavailable
from nsfleet.domain.excerpt import clipped, excerpt
from nsfleet.metrics import Metrics

log = structlog.get_logger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, message: str, code: int | None = None) -> web.Response:
    return web.json_response({"code": status if code is None else code, "error": message},
                             status=status)


# Reads a worker may answer from its last coherent view while the store is away.
STALE_MARKED = ("/v1/routes", "/v1/cluster-info", "/v1/topics", "/v1/clusters/")


def mark_stale(response: web.StreamResponse, age: float) -> None:
    """Say the answer comes from a view ``age`` seconds old (docs/http-api.md)."""
    response.headers["Age"] = str(int(age))
    response.headers["Warning"] = '110 nsfleet "Response is Stale"'
    response.headers["X-Nsfleet-Stale"] = f"{age:.1f}"


def make_middleware(metrics: Metrics) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        client_address.set(request.remote or "-")  # the audit trail's "remote"
        route = request.match_info.route.resource
        name = route.canonical if route is not None else "unmatched"
        try:
            response = await handler(request)
        except NameServerError as exc:
            if isinstance(exc, StoreUnavailable | StoreFailed):
                metrics.redis_errors.labels(name).inc()
                log.warning("redis error", route=name, error=exc.remark)
            response = error_response(exc.http_status, exc.message, exc.body_code)
        except web.HTTPRequestEntityTooLarge as exc:
            response = error_response(413, f"request body over the limit: {exc.text}")
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = error_response(exc.status, exc.reason)
        except (HttpProcessingError, ConnectionError):
            raise  # a body cut short or unreadable: aiohttp answers and closes
        except Exception as exc:  # a bug: JSON like every other answer, the traceback once
            log.error("http handler failed", route=name, error=excerpt(exc), exc_info=True)
            response = error_response(500, f"{type(exc).__name__}: {clipped(str(exc))}",
                                      int(ResponseCode.SYSTEM_ERROR))
        if response.status < 400 and (age := metrics.stale_age()) is not None and (
                name.startswith(STALE_MARKED)):
            mark_stale(response, age)
        metrics.tally(metrics.http_requests, name, request.method, str(response.status)).inc()
        metrics.child(metrics.http_latency, name, request.method).observe(
            time.perf_counter() - started)
        return response

    return middleware
