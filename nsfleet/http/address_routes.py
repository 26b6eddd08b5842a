"""RocketMQ's address server on the HTTP port, and the API that changes its extra addresses.

``GET /rocketmq/{subgroup}`` answers ``host:port;host:port`` as text, what Java's
DefaultTopAddressing.fetchNSAddr parses (status 200, then the first line, trimmed). Every
subgroup form a client builds is answered with the same list: ``nsaddr`` (the default), another
``rocketmq.namesrv.domain.subgroup``, ``nsaddr-{unitName}?nofix=1`` and extra query parameters;
a fleet serves one RocketMQ deployment (its namespace).

The answer is short and goes out in one write with its headers (aiohttp joins a small body with
the headers), which the C++ 2.x client needs: it keeps as the body only the bytes that arrived
with the headers. Its HTTP/1.0 ``Connection: close`` request makes aiohttp close the connection
after the answer."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from nsfleet.domain.errors import ValidationError
from nsfleet.http import parse
from nsfleet.service.address_server import AddressServer

ADDRESSES_KEY = web.AppKey("address_server", AddressServer)
PREFIX = "/rocketmq/"


def _service(request: web.Request) -> AddressServer:
    return request.app[ADDRESSES_KEY]


async def fetch_nsaddr(request: web.Request) -> web.Response:
    current = await _service(request).current()
    if not current.workers and not current.extra:
        # Never an empty 200: a client keeps its last list on any other status.
        return web.Response(status=503, text="no live worker is advertised yet",
                            content_type="text/plain")
    return web.Response(text=current.nsaddr, content_type="text/plain")


async def show(request: web.Request) -> web.Response:
    current = await _service(request).current()
    return web.json_response({"workers": current.workers, "extra": current.extra,
                              "nsaddr": current.nsaddr})


def _addresses(body: dict[str, Any], field: str) -> list[str]:
    value = body.get(field, [])
    if isinstance(value, str):  # "host:port;host:port", as the address server answers
        value = [a.strip() for a in value.split(";") if a.strip()]
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ValidationError(field, "must be a list of host:port strings")
    return value


async def replace_extra(request: web.Request) -> web.Response:
    body = parse.json_object(await request.read())
    extra = await _service(request).change_extra(add=_addresses(body, "addresses"),
                                                 replace=True)
    return web.json_response({"extra": extra})


async def change_extra(request: web.Request) -> web.Response:
    body = parse.json_object(await request.read())
    extra = await _service(request).change_extra(add=_addresses(body, "add"),
                                                 remove=_addresses(body, "remove"))
    return web.json_response({"extra": extra})


def add_routes(app: web.Application, service: AddressServer) -> None:
    app[ADDRESSES_KEY] = service
    app.router.add_get(PREFIX + "{subgroup}", fetch_nsaddr)
    app.router.add_get("/v1/address-server", show)
    app.router.add_put("/v1/address-server/extra", replace_extra)
    app.router.add_post("/v1/address-server/extra", change_extra)
