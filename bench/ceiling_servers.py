"""The ceilings bench/hotpath.py compares nsfleet's cached route reads with: the least a Python
server on the same loop (uvloop) can do to answer the same bytes.

    python bench/ceiling_servers.py http PORT BODY_FILE
        aiohttp, one handler on /v1/routes/{topic} returning BODY_FILE's bytes as JSON.
    python bench/ceiling_servers.py remoting PORT BODY_FILE
        asyncio.Protocol framed TCP: per frame, parse the JSON header (msgspec, the parser
        nsfleet's codec uses) and answer a RocketMQ response frame carrying BODY_FILE's bytes
        and the request's opaque.
"""

from __future__ import annotations

import asyncio
import struct
import sys
from pathlib import Path

import msgspec
import uvloop
from aiohttp import web

_INT = struct.Struct(">i")


def http_app(body: bytes) -> web.Application:
    async def route(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/v1/routes/{topic}", route)
    return app


class FramedProtocol(asyncio.Protocol):
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, out = 0, len(buf), []
        while end - pos >= 8:
            (length,) = _INT.unpack_from(buf, pos)
            if end - pos - 4 < length:
                break
            header_len = _INT.unpack_from(buf, pos + 4)[0] & 0xFFFFFF
            header = msgspec.json.decode(buf[pos + 8:pos + 8 + header_len])
            reply = (b'{"code":0,"flag":1,"language":"JAVA","opaque":%d,'
                     b'"serializeTypeCurrentRPC":"JSON","version":479}' % header["opaque"])
            out.append(_INT.pack(4 + len(reply) + len(self.body)) + _INT.pack(len(reply))
                       + reply + self.body)
            pos += 4 + length
        del buf[:pos]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def serve(kind: str, port: int, body: bytes) -> None:
    if kind == "http":
        runner = web.AppRunner(http_app(body), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
    else:
        loop = asyncio.get_running_loop()
        await loop.create_server(lambda: FramedProtocol(body), "127.0.0.1", port, backlog=1024)
    await asyncio.Event().wait()  # until the bench terminates the process


if __name__ == "__main__":
    uvloop.run(serve(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]).read_bytes()))
