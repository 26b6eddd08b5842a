"""RemotingBrokerAgent: what a RocketMQ broker sends its NameServers, over the remoting protocol.

The frames a broker's BrokerOuterAPI sends, so that the fleet (or a Java NameServer) sees a real
broker: REGISTER_BROKER (103) with a TopicConfigSerializeWrapper JSON body and its CRC32 at start,
then every ``interval`` seconds QUERY_DATA_VERSION (322) and a full REGISTER_BROKER when the
NameServer answers ``changed`` (BrokerController.needRegister, forceRegister=false), and
UNREGISTER_BROKER (104) on close. Like a broker it keeps its connection open: a NameServer drops
a broker whose connection closes (Java's onChannelDestroy), so the registration lasts as long as
the agent. The loop is the one every agent shares (``nsfleet.client.broker_loop``). A request
goes to one address and fails over to the next when it does not answer, as
the HTTP BrokerAgent does; unlike a broker, which registers with every NameServer, one answer is
enough here: the workers share Redis. Optionally over TLS, and signed with an ACL account as a
broker with ``aclEnable`` signs (AclClientRPCHook).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import ssl
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from nsfleet.client.broker_loop import BrokerIdentity, BrokerLoop, topic_config_json
from nsfleet.client.remoting import RemotingError, RemotingUnavailable, parse_addrs
from nsfleet.domain.model import DataVersion, TopicConfig
from nsfleet.wire import signature
from nsfleet.wire.codec import (
    CURRENT_VERSION,
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    SerializeType,
    encode_frame,
)

_opaque = itertools.count(1)


class _Channel:
    """One long-lived connection to one NameServer address; one request at a time."""

    def __init__(self, addr: str, timeout: float, tls: ssl.SSLContext | None) -> None:
        self.addr = addr
        self.timeout = timeout
        self.tls = tls
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._decoder = FrameDecoder()

    async def call(self, code: int, ext: dict[str, str], body: bytes | None) -> RemotingCommand:
        request = RemotingCommand(code=code, language="JAVA", version=CURRENT_VERSION,
                                  opaque=next(_opaque), ext_fields=ext, body=body,
                                  serialize_type=SerializeType.JSON)
        try:
            async with asyncio.timeout(self.timeout):
                if self._streams is None:
                    host, _, port = self.addr.rpartition(":")
                    host = host.strip("[]")
                    self._streams = await asyncio.open_connection(
                        host, int(port), ssl=self.tls,
                        server_hostname=host if self.tls else None)
                    self._decoder = FrameDecoder()
                reader, writer = self._streams
                writer.write(encode_frame(request))
                await writer.drain()
                while True:
                    data = await reader.read(65536)
                    if not data:
                        raise EOFError("the connection closed before an answer")
                    for cmd in self._decoder.feed(data):
                        if cmd.is_response and cmd.opaque == request.opaque:
                            return cmd
        except (OSError, TimeoutError, ProtocolError, EOFError) as exc:
            await self.close()
            raise RemotingUnavailable([(self.addr, str(exc) or type(exc).__name__)]) from None
        except BaseException:  # cancelled mid-request: the stream's position is unknown
            await self.close()
            raise

    async def close(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def _crc32(body: bytes) -> int:
    """UtilAll.crc32: java.util.zip.CRC32 masked to a positive int (the header's bodyCrc32)."""
    return zlib.crc32(body) & 0x7FFFFFFF


class RemotingBrokerAgent(BrokerLoop):
    def __init__(self, addrs: str | Sequence[str], identity: BrokerIdentity,
                 topics: Iterable[TopicConfig] = (), *, heartbeat_interval: float = 30.0,
                 initial_delay: float | None = None, request_timeout: float = 5.0,
                 shuffle: bool = False, tls: ssl.SSLContext | None = None,
                 credentials: tuple[str, str] | None = None) -> None:
        super().__init__(identity, topics, interval=heartbeat_interval,
                         initial_delay=initial_delay)
        listed = parse_addrs(addrs) if isinstance(addrs, str) else list(addrs)
        if not listed:
            raise ValueError("no NameServer address")
        self.channels = [_Channel(a, request_timeout, tls) for a in listed]
        self.credentials = credentials  # (accessKey, secretKey)
        self._current = random.randrange(len(listed)) if shuffle else 0
        self.failovers = 0

    def _key(self) -> dict[str, str]:
        ident = self.identity
        return {"brokerName": ident.broker_name, "brokerAddr": ident.broker_addr,
                "clusterName": ident.cluster, "brokerId": str(ident.broker_id)}

    async def _call(self, code: int, ext: dict[str, str],
                    body: bytes | None = None) -> RemotingCommand:
        errors: list[tuple[str, str]] = []
        if self.credentials is not None:
            ext = signature.sign(dict(ext), body, *self.credentials)
        for i in range(len(self.channels)):
            channel = self.channels[(self._current + i) % len(self.channels)]
            try:
                resp = await channel.call(code, ext, body)
            except RemotingUnavailable as exc:
                errors.extend(exc.errors)
                continue
            if i:
                self._current = (self._current + i) % len(self.channels)
                self.failovers += 1
            if resp.code != 0:
                raise RemotingError(resp.code, resp.remark)
            return resp
        raise RemotingUnavailable(errors)

    async def _send_registration(self, dv: DataVersion) -> dict[str, Any]:
        ident = self.identity
        wrapper = {"topicConfigTable": {n: topic_config_json(t) for n, t in self._topics.items()},
                   "dataVersion": dv.to_dict()}
        body = json.dumps({"topicConfigSerializeWrapper": wrapper,
                           "filterServerList": []}).encode()
        ext = {**self._key(), "haServerAddr": ident.ha_server_addr or "",
               "compressed": "false", "bodyCrc32": str(_crc32(body))}
        if ident.heartbeat_timeout_millis is not None:
            ext["heartbeatTimeoutMillis"] = str(ident.heartbeat_timeout_millis)
        resp = await self._call(RequestCode.REGISTER_BROKER, ext, body)
        header = resp.ext_fields or {}
        return {"masterAddr": header.get("masterAddr") or None,
                "haServerAddr": header.get("haServerAddr") or None}

    async def _data_version_changed(self, dv: DataVersion) -> bool:
        body = json.dumps(dv.to_dict()).encode()
        resp = await self._call(RequestCode.QUERY_DATA_VERSION, self._key(), body)
        return (resp.ext_fields or {}).get("changed", "false").lower() == "true"

    async def _send_unregister(self) -> None:
        await self._call(RequestCode.UNREGISTER_BROKER, self._key())

    async def _close_transport(self) -> None:
        for channel in self.channels:
            await channel.close()
