"""A small RocketMQ remoting client for NameServer admin requests (what mqadmin's ``-n`` does):
one request per connection, JSON headers, failing over through ``host:port;host:port``, in
plaintext or TLS. It works against nsfleet workers and Java NameServers alike."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
from collections.abc import Awaitable, Callable, Sequence

from nsfleet.client.http import ApiError
from nsfleet.domain.errors import ResponseCode
from nsfleet.wire import signature
from nsfleet.wire.codec import (
    CURRENT_VERSION,
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    SerializeType,
    encode_frame,
)

_opaque = itertools.count(1)
Credentials = tuple[str, str]  # access key, secret key


def client_request(code: int, ext_fields: dict[str, str] | None, body: bytes | None,
                   version: int, opaque: int, credentials: Credentials | None) -> RemotingCommand:
    """A request as this client sends it: JSON header, language PYTHON, signed as the Java
    client's AclClientRPCHook signs when ``credentials`` are given."""
    if credentials is not None:
        ext_fields = signature.sign(dict(ext_fields or {}), body, *credentials)
    return RemotingCommand(code=code, language="PYTHON", version=version, opaque=opaque,
                           ext_fields=ext_fields, body=body, serialize_type=SerializeType.JSON)


class RemotingUnavailable(Exception):
    """No NameServer address answered over the remoting protocol."""

    def __init__(self, errors: Sequence[tuple[str, str]]) -> None:
        tried = "; ".join(f"{addr}: {why}" for addr, why in errors)
        super().__init__(f"no NameServer answered over the RocketMQ remoting protocol ({tried}); "
                         "for an nsfleet worker's HTTP API use --server http://HOST:8080")
        self.errors = list(errors)


class RemotingError(ApiError):
    """The NameServer answered a response code other than SUCCESS."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(0, code, f"response code {code}: {remark or ''}".rstrip(": "))


async def call_ok(call: Callable[..., Awaitable[RemotingCommand]], code: int,
                  ext: dict[str, str] | None = None,
                  body: bytes | None = None) -> RemotingCommand:
    """``call(code, ext, body)``'s answer; RemotingError unless it is SUCCESS."""
    resp = await call(code, ext, body)
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError(resp.code, resp.remark)
    return resp


def parse_addrs(addrs: str) -> list[str]:
    """mqadmin's ``-n``: ``host:port`` entries separated by ``;`` (or ``,``)."""
    out = [a.strip() for a in addrs.replace(",", ";").split(";") if a.strip()]
    if not out:
        raise ValueError("no NameServer address given")
    for addr in out:
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{addr!r} is not host:port")
    return out


def client_tls_context(ca_file: str = "", cert_file: str = "", key_file: str = "", *,
                       verify: bool = True) -> ssl.SSLContext:
    """A client context: the server verified against ``ca_file`` (else the system CAs) and its
    host name unless ``verify`` is off (Java's tls.client.authServer=false); a client
    certificate when given. ValueError naming the file that does not load."""
    ctx = ssl.create_default_context(cafile=None)
    try:
        if ca_file:
            ctx.load_verify_locations(cafile=ca_file)
        if cert_file:
            ctx.load_cert_chain(cert_file, key_file or None)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"TLS files: {exc}") from None
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class NamesrvClient:
    def __init__(self, addrs: str, *, timeout: float = 5.0,
                 tls: ssl.SSLContext | None = None, access_key: str | None = None,
                 secret_key: str | None = None) -> None:
        self.addrs = parse_addrs(addrs)
        self.timeout = timeout
        self.tls = tls
        if (access_key is None) != (secret_key is None):
            raise ValueError("an access key needs its secret key, and the other way round")
        # Sign as the Java client's AclClientRPCHook does (workers with --acl-mode on).
        self.credentials = (access_key, secret_key) if access_key and secret_key else None

    async def call(self, code: int, ext_fields: dict[str, str] | None = None,
                   body: bytes | None = None, *,
                   version: int = CURRENT_VERSION) -> RemotingCommand:
        """The response to one request, sent as a client of ``version`` (MQVersion ordinal);
        RemotingUnavailable when no address answers."""
        errors: list[tuple[str, str]] = []
        for addr in self.addrs:
            request = client_request(code, ext_fields, body, version, next(_opaque),
                                     self.credentials)
            try:
                async with asyncio.timeout(self.timeout):
                    return await self._exchange(addr, request)
            except (OSError, TimeoutError, ProtocolError, EOFError) as exc:
                errors.append((addr, str(exc) or type(exc).__name__))
        raise RemotingUnavailable(errors)

    async def close(self) -> None:
        """Nothing to close: one connection per request (the same interface as the pipelined
        client's)."""

    async def _exchange(self, addr: str, request: RemotingCommand) -> RemotingCommand:
        host, _, port = addr.rpartition(":")
        host = host.strip("[]")
        reader, writer = await asyncio.open_connection(
            host, int(port), ssl=self.tls, server_hostname=host if self.tls else None)
        try:
            writer.write(encode_frame(request))
            await writer.drain()
            decoder = FrameDecoder()
            while True:
                data = await reader.read(65536)
                if not data:
                    raise EOFError("the connection closed before an answer (not a remoting "
                                   "port? one that wants TLS: --tls?)")
                for cmd in decoder.feed(data):
                    if cmd.is_response and cmd.opaque == request.opaque:
                        return cmd
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
