"""A small RocketMQ remoting client for tests, written from the Java remoting protocol
(RemotingCommand, NettyEncoder / NettyDecoder) and the requests of BrokerController and
BrokerOuterAPI, not from nsfleet's own codec, so wire tests do not check nsfleet against itself.

* frames: ``int32 length | int32 (type << 24 | headerLen) | header | body`` (NettyEncoder and
  NettyDecoder);
* JSON headers the way a Java client's fastjson writes them (sorted keys, nulls omitted,
  ``serializeTypeCurrentRPC`` included, as RemotingSerializable does) and ROCKETMQ binary headers
  (RocketMQSerializable);
* the bodies Java brokers send to REGISTER_BROKER (RegisterBrokerBody.encode): a 4.9 broker's
  RegisterBrokerBody JSON, a 5.x broker's (stateVersion, attributes, mapping fields), the
  deflate form, and the bare TopicConfigSerializeWrapper of pre-V3_0_11 brokers;
* a reader for fastjson's legacy JSON (bare numeric map keys).

It also starts an in-process nsfleet worker (:func:`running_worker`) on loopback ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = 0
ROCKETMQ = 1
RESPONSE_FLAG = 1
ONEWAY_FLAG = 2
LANGUAGES = ["JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP",
             "GO", "PHP", "OMS", "RUST", "NODE_JS"]

# MQVersion.Version ordinals.
V3_0_11 = 37
V4_9_4 = 401
V4_9_8 = 409  # what a 4.9.8 client and NameServer send (4.9.8's own MQVersion)
V5_0_0 = 413
V5_3_3 = 479


def answer_version(request_version: int) -> int:
    """A Java NameServer's header version is its own: nsfleet answers a client older than 5.0
    as 4.9.8 (the last 4.x) does, a newer one as 5.3.3 does."""
    return V5_3_3 if request_version >= V5_0_0 else V4_9_8


def as_4x(body: bytes) -> bytes:
    """A route or cluster-info body as a 4.x NameServer writes it: BrokerData without 5.0's
    enableActingMaster."""
    return body.replace(b',"enableActingMaster":false', b"").replace(
        b',"enableActingMaster":true', b"")

# Response codes (ResponseCode).
SUCCESS, SYSTEM_ERROR, REQUEST_CODE_NOT_SUPPORTED = 0, 1, 3
NO_PERMISSION, TOPIC_NOT_EXIST, QUERY_NOT_FOUND = 16, 17, 22

FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
FAQ_4X = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."  # 4.9.8's


# --- commands and frames -------------------------------------------------------------------------


@dataclass
class Command:
    code: int
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    version: int = V5_3_3
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    language: str = "JAVA"
    serialize_type: int = JSON
    # Decoded responses only: the header bytes, and for JSON headers the parsed object.
    header: bytes = b""
    header_json: dict[str, Any] | None = None

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    def body_json(self) -> Any:
        assert self.body is not None, "no body"
        return loads_fastjson(self.body)


def _jstr(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def encode_json_header(cmd: Command) -> bytes:
    """What fastjson writes for a Java RemotingCommand: getter order (alphabetical), no nulls."""
    parts = [f'"code":{cmd.code}']
    if cmd.ext_fields is not None:
        ext = ",".join(f"{_jstr(k)}:{_jstr(v)}" for k, v in sorted(cmd.ext_fields.items()))
        parts.append(f'"extFields":{{{ext}}}')
    parts.append(f'"flag":{cmd.flag}')
    parts.append(f'"language":{_jstr(cmd.language)}')
    parts.append(f'"opaque":{cmd.opaque}')
    if cmd.remark is not None:
        parts.append(f'"remark":{_jstr(cmd.remark)}')
    parts.append('"serializeTypeCurrentRPC":' + ('"JSON"' if cmd.serialize_type == JSON
                                                 else '"ROCKETMQ"'))
    parts.append(f'"version":{cmd.version}')
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def encode_rocketmq_header(cmd: Command) -> bytes:
    """RocketMQSerializable: code i16, language i8, version i16, opaque i32, flag i32,
    remark (i32 length + UTF-8), ext (i32 length + entries of i16 key length, key, i32 value
    length, value)."""
    remark = (cmd.remark or "").encode()
    ext = b""
    for k, v in (cmd.ext_fields or {}).items():
        kb, vb = k.encode(), v.encode()
        ext += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    return (struct.pack(">hbhii", cmd.code, LANGUAGES.index(cmd.language), cmd.version,
                        cmd.opaque, cmd.flag)
            + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext)) + ext)


def encode(cmd: Command) -> bytes:
    header = encode_json_header(cmd) if cmd.serialize_type == JSON else encode_rocketmq_header(cmd)
    body = cmd.body or b""
    return (struct.pack(">i", 4 + len(header) + len(body))
            + struct.pack(">I", (cmd.serialize_type << 24) | len(header)) + header + body)


def _decode_rocketmq_header(h: bytes) -> Command:
    code, lang, version, opaque, flag = struct.unpack_from(">hbhii", h, 0)
    pos = 13
    (rlen,) = struct.unpack_from(">i", h, pos)
    pos += 4
    remark = h[pos:pos + rlen].decode() if rlen > 0 else None
    pos += max(rlen, 0)
    (elen,) = struct.unpack_from(">i", h, pos)
    pos += 4
    ext: dict[str, str] | None = None
    if elen > 0:
        ext = {}
        end = pos + elen
        while pos < end:
            (klen,) = struct.unpack_from(">h", h, pos)
            key = h[pos + 2:pos + 2 + klen].decode()
            pos += 2 + klen
            (vlen,) = struct.unpack_from(">i", h, pos)
            ext[key] = h[pos + 4:pos + 4 + vlen].decode()
            pos += 4 + vlen
    return Command(code, ext, None, version, opaque, flag, remark, LANGUAGES[lang], ROCKETMQ)


def decode(frame: bytes) -> Command:
    """One frame without its length prefix."""
    (word,) = struct.unpack_from(">I", frame, 0)
    stype, hlen = word >> 24, word & 0xFFFFFF
    header = frame[4:4 + hlen]
    body = frame[4 + hlen:] or None
    if stype == JSON:
        obj = json.loads(header)
        cmd = Command(obj["code"], obj.get("extFields"), body, obj["version"], obj["opaque"],
                      obj["flag"], obj.get("remark"), obj["language"], JSON)
        cmd.header_json = obj
    else:
        assert stype == ROCKETMQ, f"serialize type {stype}"
        cmd = _decode_rocketmq_header(header)
        cmd.body = body
    cmd.header = header
    return cmd


# --- fastjson's legacy JSON ----------------------------------------------------------------------


def loads_fastjson(data: bytes | str) -> Any:
    """Parse JSON that may have bare numeric map keys (``{0:"a"}``), as fastjson writes Long and
    Integer keys by default: quote them outside string literals, then parse."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    out: list[str] = []
    i, n, in_str = 0, len(text), False
    while i < n:
        c = text[i]
        out.append(c)
        i += 1
        if in_str:
            if c == "\\":
                out.append(text[i])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "{,":
            j = i
            while j < n and (text[j].isdigit() or text[j] == "-"):
                j += 1
            if j > i and j < n and text[j] == ":":
                out.append(f'"{text[i:j]}"')
                i = j
    return json.loads("".join(out))


def dumps_fastjson(obj: Any) -> bytes:
    """fastjson defaults as a Java broker writes them: keys sorted, int map keys bare."""
    if isinstance(obj, dict):
        items = []
        for k in sorted(obj, key=lambda k: (isinstance(k, str), k)):
            if obj[k] is None:
                continue
            key = str(k) if isinstance(k, int) else _jstr(k)
            items.append(key + ":" + dumps_fastjson(obj[k]).decode())
        return ("{" + ",".join(items) + "}").encode()
    if isinstance(obj, list | tuple):
        return ("[" + ",".join(dumps_fastjson(v).decode() for v in obj) + "]").encode()
    return json.dumps(obj, ensure_ascii=False).encode()


# --- broker bodies (RegisterBrokerBody) ----------------------------------------------------------


@dataclass
class TopicConf:
    name: str
    read: int = 8
    write: int = 8
    perm: int = 6
    sys_flag: int = 0
    order: bool = False

    def java_json(self, five: bool) -> dict[str, Any]:
        d: dict[str, Any] = {"order": self.order, "perm": self.perm, "readQueueNums": self.read,
                             "topicFilterType": "SINGLE_TAG", "topicName": self.name,
                             "topicSysFlag": self.sys_flag, "writeQueueNums": self.write}
        if five:
            d["attributes"] = {}
        return d

    def encode_line(self, five: bool) -> str:
        """TopicConfig.encode(): 5 fields in 4.x, plus the attributes JSON in 5.x."""
        line = f"{self.name} {self.read} {self.write} {self.perm} SINGLE_TAG"
        return line + " {}" if five else line


def java_crc32(body: bytes | None) -> int:
    """UtilAll.crc32: java.util.zip.CRC32 masked with 0x7FFFFFFF."""
    return zlib.crc32(body) & 0x7FFFFFFF if body else 0


def data_version(counter: int, timestamp: int, state: int | None) -> dict[str, int]:
    dv = {"counter": counter, "timestamp": timestamp}
    if state is not None:
        dv["stateVersion"] = state
    return dv


def register_body_json(topics: list[TopicConf], dv: dict[str, int], *, five: bool,
                       filter_servers: list[str] | None = None,
                       mappings: dict[str, dict[str, Any]] | None = None) -> bytes:
    wrapper: dict[str, Any] = {
        "dataVersion": dv,
        "topicConfigTable": {t.name: t.java_json(five) for t in topics}}
    if five:
        wrapper["mappingDataVersion"] = {"counter": 0, "stateVersion": 0, "timestamp": 0}
        wrapper["topicQueueMappingDetailMap"] = {}
        wrapper["topicQueueMappingInfoMap"] = mappings or {}
    return dumps_fastjson({"filterServerList": filter_servers or [],
                           "topicConfigSerializeWrapper": wrapper})


def register_body_compressed(topics: list[TopicConf], dv: dict[str, int], *, five: bool,
                             filter_servers: list[str] | None = None,
                             mappings: dict[str, dict[str, Any]] | None = None) -> bytes:
    """RegisterBrokerBody.encode(true): deflate (zlib-wrapped, BEST_COMPRESSION) of the
    DataVersion, the topic lines, the filter list and (5.x) the mapping infos."""
    def block(b: bytes) -> bytes:
        return struct.pack(">i", len(b)) + b
    raw = block(dumps_fastjson(dv)) + struct.pack(">i", len(topics))
    for t in topics:
        raw += block(t.encode_line(five).encode())
    raw += block(dumps_fastjson(filter_servers or []))
    if five:
        infos = list((mappings or {}).values())
        raw += struct.pack(">i", len(infos)) + b"".join(block(dumps_fastjson(i)) for i in infos)
    return zlib.compress(raw, 9)


def wrapper_body_pre37(topics: list[TopicConf], dv: dict[str, int]) -> bytes:
    """A broker older than V3_0_11 sends only the TopicConfigSerializeWrapper."""
    return dumps_fastjson({"dataVersion": dv,
                           "topicConfigTable": {t.name: t.java_json(False) for t in topics}})


@dataclass
class Broker:
    """One broker's identity and the requests it sends to a name server."""

    cluster: str
    addr: str
    name: str
    broker_id: int = 0
    ha_addr: str | None = None
    topics: list[TopicConf] = field(default_factory=list)
    counter: int = 1
    timestamp: int = 1_700_000_000_000
    state_version: int = 0
    zone: str | None = None
    filter_servers: list[str] = field(default_factory=list)

    def identity(self) -> dict[str, str]:
        return {"brokerAddr": self.addr, "brokerId": str(self.broker_id),
                "brokerName": self.name, "clusterName": self.cluster}

    def dv(self, five: bool) -> dict[str, int]:
        return data_version(self.counter, self.timestamp, self.state_version if five else None)

    def register_49(self, *, compressed: bool = False, version: int = V4_9_8) -> Command:
        """BrokerOuterAPI.registerBroker of 4.9.8: the compressed header is truthful."""
        five = False
        fs = self.filter_servers
        body = (register_body_compressed(self.topics, self.dv(five), five=five, filter_servers=fs)
                if compressed else
                register_body_json(self.topics, self.dv(five), five=five, filter_servers=fs))
        ext = {**self.identity(), "haServerAddr": self.ha_addr or self.addr,
               "compressed": str(compressed).lower(), "bodyCrc32": str(java_crc32(body))}
        return Command(103, ext, body, version)

    def register_5x(self, *, acting_master: bool = False, compressed_body: bool = False,
                    label_compressed: bool = False, timeout_ms: int | None = None,
                    mappings: dict[str, dict[str, Any]] | None = None,
                    version: int = V5_3_3) -> Command:
        """BrokerOuterAPI.registerBrokerAll of 5.x: compressed=false in the header whatever the
        body (``label_compressed`` sends the truthful label instead)."""
        five = True
        fs = self.filter_servers
        body = (register_body_compressed(self.topics, self.dv(five), five=five, filter_servers=fs,
                                         mappings=mappings)
                if compressed_body else
                register_body_json(self.topics, self.dv(five), five=five, filter_servers=fs,
                                   mappings=mappings))
        ext = {**self.identity(), "haServerAddr": self.ha_addr or self.addr,
               "enableActingMaster": str(acting_master).lower(),
               "compressed": "true" if label_compressed else "false",
               "bodyCrc32": str(java_crc32(body))}
        if timeout_ms is not None:
            ext["heartbeatTimeoutMillis"] = str(timeout_ms)
        if self.zone is not None:
            ext["__ZONE_NAME"] = self.zone
        return Command(103, ext, body, version)

    def heartbeat(self) -> Command:
        """BROKER_HEARTBEAT, sent oneway by acting-master brokers every second."""
        ext = {"brokerAddr": self.addr, "brokerName": self.name, "clusterName": self.cluster}
        return Command(904, ext, None, V5_3_3, flag=ONEWAY_FLAG)

    def query_data_version(self, *, oneway: bool = False, five: bool = True) -> Command:
        return Command(322, self.identity(), dumps_fastjson(self.dv(five)), V5_3_3,
                       flag=ONEWAY_FLAG if oneway else 0)

    def unregister(self) -> Command:
        return Command(104, self.identity(), None, V5_3_3)


# --- the client ----------------------------------------------------------------------------------


class RemotingClient:
    """One TCP connection. Responses are matched to requests by opaque; anything else that
    arrives (answers to oneway requests, say) lands in ``unexpected``."""

    _opaque = 0

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.pending: dict[int, asyncio.Future[Command]] = {}
        self.unexpected: list[Command] = []
        self.closed = asyncio.Event()
        self._task = asyncio.create_task(self._read_loop())

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1",
                      prefix: bytes = b"") -> RemotingClient:
        reader, writer = await asyncio.open_connection(host, port)
        if prefix:
            writer.write(prefix)
        return cls(reader, writer)

    @classmethod
    def next_opaque(cls) -> int:
        cls._opaque += 1
        return cls._opaque

    async def _read_loop(self) -> None:
        try:
            while True:
                (length,) = struct.unpack(">i", await self.reader.readexactly(4))
                cmd = decode(await self.reader.readexactly(length))
                fut = self.pending.pop(cmd.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
                else:
                    self.unexpected.append(cmd)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.closed.set()
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection closed"))

    def send(self, cmd: Command) -> None:
        self.writer.write(encode(cmd))

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def call(self, cmd: Command, wait: float = 5.0) -> Command:
        """Send ``cmd`` (a fresh opaque unless it has one) and wait for its response."""
        if not cmd.opaque:
            cmd.opaque = self.next_opaque()
        fut: asyncio.Future[Command] = asyncio.get_running_loop().create_future()
        self.pending[cmd.opaque] = fut
        self.send(cmd)
        await self.writer.drain()
        return await asyncio.wait_for(fut, wait)

    async def request(self, code: int, ext: Mapping[str, str] | None = None,
                      body: bytes | None = None, *, version: int = V5_3_3,
                      serialize_type: int = JSON, wait: float = 5.0) -> Command:
        return await self.call(Command(code, dict(ext) if ext is not None else None, body,
                                       version, serialize_type=serialize_type), wait)

    async def oneway(self, cmd: Command) -> None:
        cmd.flag |= ONEWAY_FLAG
        if not cmd.opaque:
            cmd.opaque = self.next_opaque()
        self.send(cmd)
        await self.writer.drain()

    async def wait_closed_by_peer(self, wait: float = 5.0) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.closed.wait(), wait)
        return self.closed.is_set()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.closed.wait(), 2.0)
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


# --- an in-process worker ------------------------------------------------------------------------


@dataclass
class Worker:
    settings: Any  # nsfleet.config.Settings
    task: asyncio.Task[int]
    redis: Any  # redis.asyncio.Redis on the same server, for inspecting the namespace

    @property
    def port(self) -> int:
        return int(self.settings.remoting_port)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.http_port}"

    @property
    def prefix(self) -> str:
        return f"nsfleet:{{{self.settings.namespace}}}"

    async def connect(self, prefix: bytes = b"") -> RemotingClient:
        return await RemotingClient.connect(self.port, prefix=prefix)

    async def keys(self) -> set[str]:
        return {k async for k in self.redis.scan_iter(match=self.prefix + ":*", count=1000)}

    async def snapshot(self) -> dict[str, Any]:
        """Every key of the namespace with its value (for 'nothing was written' checks)."""
        out: dict[str, Any] = {}
        for key in sorted(await self.keys()):
            kind = await self.redis.type(key)
            if kind == "string":
                out[key] = await self.redis.get(key)
            elif kind == "hash":
                out[key] = await self.redis.hgetall(key)
            elif kind == "set":
                out[key] = sorted(await self.redis.smembers(key))
            elif kind == "zset":
                out[key] = await self.redis.zrange(key, 0, -1, withscores=True)
            elif kind == "list":
                out[key] = await self.redis.lrange(key, 0, -1)
        return out


async def wait_for_port(port: int, wait: float = 15.0,
                        alive: Callable[[], bool] = lambda: True) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline or not alive():
                raise
            await asyncio.sleep(0.02)
            continue
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        return


@contextlib.asynccontextmanager
async def running_worker(redis_url: str, **overrides: Any) -> AsyncIterator[Worker]:
    """``nsfleet.worker.serve`` as a task on loopback ports, in a namespace of its own (deleted
    afterwards)."""
    import redis.asyncio as aioredis

    from nsfleet.config import Settings
    from nsfleet.redis_server import free_port
    from nsfleet.worker import serve

    values: dict[str, Any] = {
        "redis_url": redis_url, "host": "127.0.0.1", "http_port": free_port(),
        "remoting_port": free_port(), "namespace": f"rt-{uuid.uuid4().hex[:16]}",
        "drain_timeout": 3.0, "route_cache": False}
    values.update(overrides)
    settings = Settings(**values)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    worker = Worker(settings, task, client)
    try:
        await wait_for_port(settings.remoting_port, alive=lambda: not task.done())
        yield worker
    finally:
        if await client.exists(worker.prefix + ":config"):
            # A config change announced just before the stop can make the worker's config
            # follower swallow its cancellation (Python 3.11's wait_for returns the finished
            # inner result instead of raising) and then wait 30 s for the next change: let the
            # announcement land first.
            await asyncio.sleep(0.2)
        stop.set()
        try:
            await asyncio.wait_for(task, 15.0)
        finally:
            keys = await worker.keys()
            if keys:
                await client.delete(*keys)
            await client.aclose()
