"""Every HTTP error is JSON ``{"code", "error"}``.

``code`` is RocketMQ's response code where the NameServer would answer one (17 TOPIC_NOT_EXIST,
22 QUERY_NOT_FOUND, 1 SYSTEM_ERROR, 16 NO_PERMISSION); for purely HTTP failures it repeats the
HTTP status (400, 404, 405, 413, 503).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from nsfleet.metrics import Metrics
from nsfleet.nameserver import FeatureDisabled
from nsfleet.validation import ValidationError

log = structlog.get_logger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = status if code is None else code


def error_response(status: int, message: str, code: int | None = None) -> web.Response:
    return web.json_response({"code": status if code is None else code, "error": message},
                             status=status)


def make_middleware(metrics: Metrics) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        route = request.match_info.route.resource
        name = route.canonical if route is not None else "unmatched"
        try:
            response = await handler(request)
        except ApiError as exc:
            response = error_response(exc.status, str(exc), exc.code)
        except ValidationError as exc:
            response = error_response(400, str(exc))
        except FeatureDisabled:
            response = error_response(
                403, "disable: the topic list is turned off by the name server config", 1)
        except web.HTTPRequestEntityTooLarge as exc:
            response = error_response(413, f"request body over the limit: {exc.text}")
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = error_response(exc.status, exc.reason)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            metrics.redis_errors.labels(name).inc()
            log.warning("redis unavailable", route=name, error=str(exc))
            response = error_response(503, f"Redis unavailable: {exc}")
        except RedisError as exc:
            metrics.redis_errors.labels(name).inc()
            log.error("redis error", route=name, error=str(exc))
            response = error_response(500, f"Redis error: {exc}", 1)
        metrics.http_requests.labels(name, request.method, str(response.status)).inc()
        metrics.http_latency.labels(name, request.method).observe(time.perf_counter() - started)
        return response

    return middleware


async def json_body(request: web.Request) -> dict[str, object]:
    """The request's JSON object; 400 naming the problem otherwise (413 comes from aiohttp)."""
    raw = await request.read()
    if not raw:
        raise ApiError(400, "request body is empty: a JSON object is required")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body
