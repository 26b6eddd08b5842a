"""Connection behaviour of the remoting server: broker cleanup on close (fenced by registration
generation), handler errors, malformed and oversized frames, partial frames, pipelining and the
PROXY protocol prefix (Java: NettyRemotingAbstract.processRequestCommand, NettyDecoder and the
PROXY protocol detection of NettyRemotingServer, RouteInfoManager.onChannelDestroy)."""

from __future__ import annotations

import asyncio
import functools
import re
import socket
import struct
import threading
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from nsfleet.redis_server import RedisServer
from nsfleet.remoting import handlers
from nsfleet.remoting import server as server_module
from nsfleet.remoting.big_frames import BIG_FRAME_BYTES, READ_BYTES, SLOTS, BigFrameSlots
from tests.support.remoting_client import (
    JSON,
    REQUEST_CODE_NOT_SUPPORTED,
    ROCKETMQ,
    SUCCESS,
    SYSTEM_ERROR,
    TOPIC_NOT_EXIST,
    Broker,
    Command,
    RemotingClient,
    TopicConf,
    Worker,
    encode,
    running_worker,
)

pytestmark = pytest.mark.redis

MAX_FRAME = 4096
MASTER = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                [TopicConf("T1", 4, 4), TopicConf("T2", 8, 8)])


@pytest.fixture
async def worker(redis_server: RedisServer) -> AsyncIterator[Worker]:
    async with running_worker(redis_server.url, max_frame_size=MAX_FRAME) as w:
        yield w


@pytest.fixture
async def healthy(worker: Worker) -> AsyncIterator[RemotingClient]:
    """A long-lived connection that must keep being served whatever the others do."""
    c = await worker.connect()
    yield c
    await c.close()


async def route_code(client: RemotingClient, topic: str = "T1") -> int:
    return (await client.request(105, {"topic": topic})).code


async def open_connections(worker: Worker) -> int:
    async with aiohttp.ClientSession() as http, http.get(f"{worker.http_url}/metrics") as resp:
        text = await resp.text()
    m = re.search(r"^nsfleet_remoting_connections (\S+)$", text, re.M)
    assert m, "no connection gauge"
    return int(float(m.group(1)))


async def wait_connections(worker: Worker, n: int) -> None:
    for _ in range(250):
        if await open_connections(worker) == n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never {n} open connections")


async def still_there(client: RemotingClient, seconds: float = 0.3) -> bool:
    """The route survives for a while (the close-time unregister is one short script call)."""
    end = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < end:
        if await route_code(client) != SUCCESS:
            return False
        await asyncio.sleep(0.03)
    return True


async def gone_soon(client: RemotingClient, seconds: float = 5.0) -> bool:
    end = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < end:
        if await route_code(client) == TOPIC_NOT_EXIST:
            return True
        await asyncio.sleep(0.02)
    return False


# --- broker cleanup when its connection closes ---------------------------------------------------


async def test_closing_a_broker_connection_unregisters_it(worker: Worker,
                                                          healthy: RemotingClient) -> None:
    a = await worker.connect()
    for _ in range(3):  # periodic re-registration on one connection: the newest one counts
        assert (await a.call(MASTER.register_5x())).code == SUCCESS
    assert await route_code(healthy) == SUCCESS
    await a.close()
    assert await gone_soon(healthy)
    resp = await healthy.request(106)
    assert resp.body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'


async def test_close_is_fenced_by_a_newer_registration(worker: Worker,
                                                       healthy: RemotingClient) -> None:
    a, b = await worker.connect(), await worker.connect()
    assert (await a.call(MASTER.register_5x())).code == SUCCESS
    assert (await b.call(MASTER.register_5x())).code == SUCCESS  # a newer generation
    await a.close()
    await wait_connections(worker, 2)  # healthy and b
    assert await still_there(healthy)
    await b.close()
    assert await gone_soon(healthy)


async def test_close_is_fenced_by_a_registration_over_http(worker: Worker,
                                                           healthy: RemotingClient) -> None:
    a = await worker.connect()
    assert (await a.call(MASTER.register_5x())).code == SUCCESS
    body = {"clusterName": "c1", "brokerAddr": MASTER.addr, "brokerName": "broker-a",
            "brokerId": 0, "dataVersion": {"counter": 1, "timestamp": 1, "stateVersion": 0},
            "topicConfigTable": {"T1": {}, "T2": {}}}
    async with aiohttp.ClientSession() as http, \
            http.post(f"{worker.http_url}/v1/brokers/register", json=body) as resp:
        assert resp.status == 200
    await a.close()
    await wait_connections(worker, 1)
    assert await still_there(healthy)


async def test_client_connections_and_unregistered_brokers_leave_routes_alone(
        worker: Worker, healthy: RemotingClient) -> None:
    assert (await healthy.call(MASTER.register_5x())).code == SUCCESS
    reader = await worker.connect()
    assert await route_code(reader) == SUCCESS
    await reader.close()  # a client, not a broker
    other = await worker.connect()
    assert (await other.call(MASTER.unregister())).code == SUCCESS
    assert (await other.call(MASTER.register_5x())).code == SUCCESS
    assert (await other.call(MASTER.unregister())).code == SUCCESS  # forgets it
    assert (await healthy.call(MASTER.register_5x())).code == SUCCESS
    await other.close()
    await wait_connections(worker, 1)
    assert await still_there(healthy)


# --- handler errors ------------------------------------------------------------------------------


async def test_handler_errors_answer_system_error_and_the_connection_goes_on(
        worker: Worker, healthy: RemotingClient) -> None:
    before = await worker.snapshot()
    bad = MASTER.register_5x()
    assert bad.ext_fields is not None
    bad.ext_fields["brokerAddr"] = "not-an-addr"
    resp = await healthy.call(bad)
    assert (resp.code, resp.remark) == (SYSTEM_ERROR, "brokerAddr: 'not-an-addr' is not host:port")
    for field, value in (("brokerId", "abc"), ("clusterName", "bad:name"), ("brokerName", "")):
        bad = MASTER.register_5x()
        assert bad.ext_fields is not None
        bad.ext_fields[field] = value
        resp = await healthy.call(bad)
        assert resp.code == SYSTEM_ERROR and resp.remark and resp.remark.startswith(field)
    resp = await healthy.call(Command(103, MASTER.identity(), b"\x01not a body"))
    assert resp.code == SYSTEM_ERROR and resp.remark and "RegisterBrokerBody" in resp.remark
    bad_qd = b'{"queueDatas":[{"brokerName":"broker-a","readQueueNums":"four"}]}'
    resp = await healthy.request(217, {"topic": "T1"}, bad_qd)
    assert resp.code == SYSTEM_ERROR and resp.remark and resp.remark.startswith(
        "queueDatas[0].readQueueNums")
    assert await worker.snapshot() == before  # nothing written for the invalid requests
    assert (await healthy.call(MASTER.register_5x())).code == SUCCESS
    assert await route_code(healthy) == SUCCESS


# --- malformed frames ----------------------------------------------------------------------------


def _json_frame(header: bytes, body: bytes = b"", stype: int = JSON) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) \
        + header + body


GARBAGE = {
    "short length": b"\x00\x00\x00\x02\xff\xff",
    "negative length": b"\xff\xff\xff\xf0" + b"\x00" * 12,
    "header longer than frame": struct.pack(">iI", 8, 200) + b"{}{}",
    "not json": _json_frame(b"{not json"),
    "json array": _json_frame(b"[1,2]"),
    "unknown serialize type": _json_frame(b'{"code":105}', stype=7),
    "truncated binary header": _json_frame(b"\x00\x69\x00", stype=ROCKETMQ),
    "http": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "tls client hello": bytes.fromhex("16030100a5010000a10303") + b"\x00" * 40,
}


@pytest.mark.parametrize("garbage", list(GARBAGE.values()), ids=list(GARBAGE))
async def test_garbage_closes_only_its_connection(worker: Worker, healthy: RemotingClient,
                                                  garbage: bytes) -> None:
    bad = await worker.connect()
    bad.send_raw(garbage)
    assert await bad.wait_closed_by_peer()
    assert bad.unexpected == []
    await bad.close()
    assert (await healthy.request(106)).code == SUCCESS


async def test_frames_before_garbage_in_the_same_packet_are_processed(
        worker: Worker, healthy: RemotingClient) -> None:
    """As with Netty, frames decoded before the bad one are dispatched; the connection is closed
    at once, so their answers are lost, but their effects are not."""
    bad = await worker.connect()
    put = Command(100, {"namespace": "n", "key": "k", "value": "v"}, None, opaque=11)
    bad.send_raw(encode(put) + GARBAGE["not json"])
    assert await bad.wait_closed_by_peer()
    await bad.close()
    for _ in range(100):
        resp = await healthy.request(101, {"namespace": "n", "key": "k"})
        if resp.code == SUCCESS:
            break
        await asyncio.sleep(0.01)
    assert resp.ext_fields == {"value": "v"}


async def test_frame_size_limit(worker: Worker, healthy: RemotingClient) -> None:
    base = Command(105, {"topic": "T1"}, None, opaque=99)
    empty = len(encode(base))
    fits = await worker.connect()
    base.body = b"x" * (MAX_FRAME - empty)  # exactly the limit, length prefix included
    assert len(encode(base)) == MAX_FRAME
    assert (await fits.call(base)).code == TOPIC_NOT_EXIST
    await fits.close()
    over = await worker.connect()
    base.body = b"x" * (MAX_FRAME - empty + 1)
    over.send_raw(encode(base)[:12])  # rejected on the length prefix alone
    assert await over.wait_closed_by_peer()
    assert over.unexpected == []
    await over.close()
    assert (await healthy.request(106)).code == SUCCESS


async def test_partial_frames_wait_for_the_rest(worker: Worker) -> None:
    client = await worker.connect()
    frame = encode(Command(106, None, None, opaque=21))
    client.send_raw(frame[:3])  # not even the whole length prefix
    await asyncio.sleep(0.1)
    client.send_raw(frame[3:len(frame) // 2])
    await asyncio.sleep(0.2)
    assert client.unexpected == []
    client.send_raw(frame[len(frame) // 2:])
    for _ in range(100):
        if client.unexpected:
            break
        await asyncio.sleep(0.01)
    assert [c.opaque for c in client.unexpected] == [21]
    # Byte by byte.
    frame = encode(Command(106, None, None, opaque=22, serialize_type=ROCKETMQ))
    for i in range(len(frame)):
        client.send_raw(frame[i:i + 1])
        await client.writer.drain()
        await asyncio.sleep(0.001)
    for _ in range(100):
        if len(client.unexpected) == 2:
            break
        await asyncio.sleep(0.01)
    assert [c.opaque for c in client.unexpected] == [21, 22]
    assert not client.closed.is_set()
    await client.close()


async def test_pipelined_requests(worker: Worker) -> None:
    client = await worker.connect()
    cmds = [Command(106 if i % 2 else 101, {"namespace": "n", "key": str(i)}, None,
                    opaque=1000 + i, serialize_type=i % 2) for i in range(300)]
    client.send_raw(b"".join(encode(c) for c in cmds))
    for _ in range(300):
        if len(client.unexpected) == len(cmds):
            break
        await asyncio.sleep(0.01)
    got = {c.opaque: c for c in client.unexpected}
    assert sorted(got) == [c.opaque for c in cmds]
    assert all(got[c.opaque].serialize_type == c.serialize_type for c in cmds)
    assert all(got[c.opaque].code == (SUCCESS if c.code == 106 else 22) for c in cmds)
    await client.close()


# --- PROXY protocol ------------------------------------------------------------------------------


def proxy_v2(src: str = "203.0.113.7", dst: str = "10.0.0.5", sport: int = 51000,
             dport: int = 9876) -> bytes:
    addrs = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(">HH", sport, dport)
    return (b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack(">H", len(addrs))
            + addrs)


PROXY_PREFIXES = {
    "v1 tcp4": b"PROXY TCP4 203.0.113.7 10.0.0.5 51000 9876\r\n",
    "v1 tcp6": b"PROXY TCP6 2001:db8::1 2001:db8::2 51000 9876\r\n",
    "v1 unknown": b"PROXY UNKNOWN\r\n",
    "v2 tcp4": proxy_v2(),
    "v2 local": b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x20, 0x00]) + b"\x00\x00",
}


@pytest.mark.parametrize("prefix", list(PROXY_PREFIXES.values()), ids=list(PROXY_PREFIXES))
@pytest.mark.parametrize("split", [False, True], ids=["one-write", "split"])
async def test_proxy_protocol_prefix(worker: Worker, prefix: bytes, split: bool) -> None:
    client = await worker.connect()
    if split:  # the prefix dribbles in
        for i in range(0, len(prefix), 5):
            client.send_raw(prefix[i:i + 5])
            await client.writer.drain()
            await asyncio.sleep(0.002)
    else:
        client.send_raw(prefix)
    for stype in (JSON, ROCKETMQ):
        resp = await client.request(106, serialize_type=stype)
        assert (resp.code, resp.serialize_type) == (SUCCESS, stype)
    assert (await client.call(MASTER.register_5x())).code == SUCCESS
    await client.close()


@pytest.mark.parametrize("prefix", [b"PROXY TCP4 nonsense\r\n", b"PROXY TCP4 1.2.3.4\n",
                                    b"\r\n\r\n\x00\r\nQUIT\n\x31\x11\x00\x0c" + b"\x00" * 12])
async def test_bad_proxy_header_closes_the_connection(worker: Worker, healthy: RemotingClient,
                                                      prefix: bytes) -> None:
    bad = await worker.connect(prefix=prefix)
    assert await bad.wait_closed_by_peer()
    await bad.close()
    assert (await healthy.request(106)).code == SUCCESS


# --- overload ------------------------------------------------------------------------------------


async def test_overload_answers_system_busy(worker: Worker, healthy: RemotingClient,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A full executor queue in Java; here the worker's bound on in-flight requests."""
    monkeypatch.setattr("nsfleet.remoting.server.MAX_IN_FLIGHT", 0)
    for stype in (JSON, ROCKETMQ):
        resp = await healthy.request(106, serialize_type=stype)
        assert (resp.code, resp.remark, resp.serialize_type) == (
            2, "[OVERLOAD]system busy, start flow control for a while", stype)
    await healthy.oneway(Command(106))  # oneway: still no answer
    monkeypatch.undo()
    assert (await healthy.request(106)).code == SUCCESS
    assert healthy.unexpected == []


def recorded_slot_tables(monkeypatch: pytest.MonkeyPatch) -> list[BigFrameSlots]:
    """The BigFrameSlots the worker makes from now on (slices of 60 s: none ends in a test)."""
    slot_tables: list[BigFrameSlots] = []

    def recorded() -> BigFrameSlots:
        slot_tables.append(BigFrameSlots(slice_s=60.0))
        return slot_tables[-1]

    monkeypatch.setattr(server_module, "BigFrameSlots", recorded)
    return slot_tables


def held_decoding(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """A big body's decoding (the table thread's) held until the event returned is set."""
    read = threading.Event()
    decode = handlers._digest_and_decode

    def held(*args: Any) -> Any:
        read.wait(10.0)
        return decode(*args)

    monkeypatch.setattr(handlers, "_digest_and_decode", held)
    return read


# A REGISTER_BROKER header for a big body that is not a table (answered with a decode error).
BIG_REGISTER_HEADER = {"clusterName": "c1", "brokerAddr": "10.0.0.1:10911", "brokerName": "b",
                       "brokerId": "0", "haServerAddr": "", "compressed": "false",
                       "bodyCrc32": "0"}


async def test_big_frames_wait_their_turn_and_a_stalled_one_gives_way(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Big frames are received by SLOTS connections at a time (nsfleet.remoting.big_frames):
    connections whose senders stop half-way give way after their slice, so the next big frame is
    answered; small requests are answered throughout, and the stalled frames once complete."""
    monkeypatch.setattr(server_module, "BigFrameSlots",
                        functools.partial(BigFrameSlots, slice_s=0.2))
    async with running_worker(redis_server.url) as w:
        stalled = [await w.connect() for _ in range(SLOTS)]
        big, small = await w.connect(), await w.connect()
        body = b"x" * (2 * BIG_FRAME_BYTES)
        frames, answers = [], []
        for client in stalled:  # every slot taken by a frame that stops half-way
            opaque = RemotingClient.next_opaque()
            frames.append(encode(Command(9999, None, body, opaque=opaque)))
            answers.append(asyncio.get_running_loop().create_future())
            client.pending[opaque] = answers[-1]
            client.send_raw(frames[-1][:len(frames[-1]) // 2])
            await client.writer.drain()
        assert (await big.request(9999, None, body)).code == REQUEST_CODE_NOT_SUPPORTED
        assert await route_code(small) == TOPIC_NOT_EXIST
        assert not any(answer.done() for answer in answers)
        for client, frame in zip(stalled, frames, strict=True):
            client.send_raw(frame[len(frame) // 2:])
            await client.writer.drain()
        for answer in answers:
            assert (await asyncio.wait_for(answer, 5.0)).code == REQUEST_CODE_NOT_SUPPORTED
        for client in (*stalled, big, small):
            await client.close()


async def test_a_connection_waiting_for_a_big_frame_slot_holds_one_read_of_it(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection is paused once its frame's prefix shows a big frame and no slot is free:
    what it read by then is one read of READ_BYTES, not what the event loop would read at once
    (256 KiB), so a storm's tables starting together move little before they wait their turn.
    Once the slots free, each waiting frame is received whole and answered."""
    slot_tables = recorded_slot_tables(monkeypatch)
    async with running_worker(redis_server.url) as w:
        stalled = [await w.connect() for _ in range(SLOTS)]
        waiting = [await w.connect() for _ in range(3)]
        body = b"x" * (4 * BIG_FRAME_BYTES)
        halves, answers = [], []
        for client in stalled:  # every slot taken by a frame that stops half-way
            frame = encode(Command(9999, None, body, opaque=RemotingClient.next_opaque()))
            halves.append(frame[len(frame) // 2:])
            client.send_raw(frame[:len(frame) // 2])
            await client.writer.drain()
        for client in waiting:  # whole frames, which the kernel holds while they wait
            opaque = RemotingClient.next_opaque()
            answers.append(asyncio.get_running_loop().create_future())
            client.pending[opaque] = answers[-1]
            client.send_raw(encode(Command(9999, None, body, opaque=opaque)))
        (slots,) = slot_tables
        for _ in range(500):
            if len(slots.waiting) == len(waiting):
                break
            await asyncio.sleep(0.01)
        assert len(slots.waiting) == len(waiting)
        assert all(0 < conn.decoder.buffered <= READ_BYTES  # type: ignore[attr-defined]
                   for conn in slots.waiting)
        for client, half in zip(stalled, halves, strict=True):
            client.send_raw(half)
        for answer in answers:
            assert (await asyncio.wait_for(answer, 10.0)).code == REQUEST_CODE_NOT_SUPPORTED
        for client in (*stalled, *waiting):
            await client.close()


async def test_a_big_body_keeps_its_slot_until_its_handler_has_read_it(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A storm's tables arrive faster than a worker decodes them: a received body keeps its
    slot until REGISTER_BROKER has read it, so the next big frame waits in the kernel, not in
    the worker's memory (~250 MB of a storm's bodies at 150 tables a worker)."""
    slot_tables = recorded_slot_tables(monkeypatch)
    read = held_decoding(monkeypatch)
    body = b"x" * (2 * BIG_FRAME_BYTES)
    async with running_worker(redis_server.url) as w:
        clients = [await w.connect() for _ in range(SLOTS + 1)]
        calls = [asyncio.ensure_future(c.request(103, BIG_REGISTER_HEADER, body, wait=15.0))
                 for c in clients[:SLOTS]]
        (slots,) = slot_tables
        for _ in range(500):  # every slot's frame received, its body not read
            if all(conn.decoder.buffered == 0  # type: ignore[attr-defined]
                   for conn in slots.holders) and len(slots.holders) == SLOTS:
                break
            await asyncio.sleep(0.01)
        calls.append(asyncio.ensure_future(
            clients[-1].request(103, BIG_REGISTER_HEADER, body, wait=15.0)))
        for _ in range(100):
            if slots.waiting:
                break
            await asyncio.sleep(0.01)
        assert len(slots.holders) == SLOTS and len(slots.waiting) == 1
        read.set()
        for call in calls:  # not a table: each answered with a decode error, in turn
            assert (await call).code == SYSTEM_ERROR
        assert not slots.holders and not slots.waiting
        for client in clients:
            await client.close()


async def test_a_worker_handles_at_most_big_handlers_big_requests_at_once(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A storm's tables are handled BIG_HANDLERS at a time (nsfleet.remoting.big_frames): a
    received big request past them waits, its body unread and its slot kept, until one is
    answered; small requests are answered meanwhile."""
    slot_tables = recorded_slot_tables(monkeypatch)
    read = held_decoding(monkeypatch)
    handling, most = 0, 0
    handle = server_module.RemotingProtocol._handle

    async def counted(self: Any, cmd: Any) -> None:
        nonlocal handling, most
        if cmd.code == 103:
            handling += 1
            most = max(most, handling)
        try:
            await handle(self, cmd)
        finally:
            if cmd.code == 103:
                handling -= 1

    monkeypatch.setattr(server_module, "BIG_HANDLERS", 1)
    monkeypatch.setattr(server_module.RemotingProtocol, "_handle", counted)
    body = b"x" * (2 * BIG_FRAME_BYTES)
    async with running_worker(redis_server.url) as w:
        clients = [await w.connect() for _ in range(SLOTS)]
        small = await w.connect()
        calls = [asyncio.ensure_future(c.request(103, BIG_REGISTER_HEADER, body, wait=15.0))
                 for c in clients]
        (slots,) = slot_tables
        for _ in range(500):  # both frames received, one of them in hand (held decoding)
            if (handling == 1 and len(slots.holders) == SLOTS
                    and all(conn.decoder.buffered == 0  # type: ignore[attr-defined]
                            for conn in slots.holders)):
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # time for the second to be taken in hand, were it let
        assert handling == 1 and len(slots.holders) == SLOTS
        assert await route_code(small) == TOPIC_NOT_EXIST
        read.set()
        for call in calls:  # not a table: each answered with a decode error, in turn
            assert (await call).code == SYSTEM_ERROR
        assert most == 1 and not slots.holders
        for client in (*clients, small):
            await client.close()
