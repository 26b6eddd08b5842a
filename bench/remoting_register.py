"""A 60,000-topic REGISTER_BROKER over remoting, as real brokers send it, against one worker.

Three bodies, each encoded the way the Java broker encodes it (tests/support/register_bodies.py):
a 5.x broker with compressedRegister (``compressed=true``, deflate), a 5.x broker's JSON
RegisterBrokerBody and a 4.9.x broker's JSON. For each: the first registration, the unchanged
re-registration (same DataVersion and table: the steady state every 30 s) and a changed one (new
DataVersion), as round-trip time on one connection (the worker's wall time plus loopback; the
connection reuses its last decoded body when the bytes are the same, and a worker decodes each
distinct table once, nsfleet/domain/topic_tables.py), the unchanged table in other body bytes
(a trailing blank, another deflate level: the table's own bytes are the same, so it is not
decoded again) and in new table bytes each time (a blank inside the table: decoded in full, as
by a restarted worker). Then the body decode alone, in process, with each JSON parser candidate
on the same bodies.

Starts its own redis-server and `nsfleet serve`; bounded by --rounds. Writes
bench/results/remoting_register.json.

    .venv/bin/python bench/remoting_register.py [--topics 60000] [--rounds 7] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

import msgspec
from benchlib import new_results, start_worker, write_results

from nsfleet.domain.model import DataVersion, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.wire import bodies, fastjson
from nsfleet.wire.bodies import RegisterBody, crc32, decode_register_body
from tests.support.register_bodies import encode_register_body
from tests.support.remoting_client import V4_9_8, V5_3_3, Command, encode

FORMS = {  # name -> (header "compressed", request version, compressed body)
    "5x_compressed": (True, V5_3_3, True),
    "5x_json": (False, V5_3_3, False),
    "49x_json": (False, V4_9_8, False),
}


def body_for(topics: int, counter: int, version: int, compressed: bool) -> bytes:
    table = {f"Topic-{i:05d}": TopicConfig(f"Topic-{i:05d}", 8, 8, 6) for i in range(topics)}
    return encode_register_body(
        RegisterBody(DataVersion(counter, 1_700_000_000_000 + counter, 0), table, []),
        compressed=compressed, version=version)


def restyled(body: bytes, compressed: bool, blanks: int) -> bytes:
    """The same registration with ``blanks`` blanks inside its topic table: bytes this worker
    has not seen, decoding to the same table (JSON whitespace; a compressed topic line's
    trailing blanks, which TopicConfig.decode drops)."""
    if not compressed:
        token = b'"topicConfigTable":{'
        assert token in body
        return body.replace(token, token + b" " * blanks, 1)
    data = zlib.decompress(body)
    (dv_len,) = struct.unpack_from(">i", data, 0)
    at = 4 + dv_len + 4  # past the DataVersion block and the topic count: the first line
    (line_len,) = struct.unpack_from(">i", data, at)
    line = data[at + 4:at + 4 + line_len] + b" " * blanks
    patched = data[:at] + struct.pack(">i", len(line)) + line + data[at + 4 + line_len:]
    return zlib.compress(patched, 9)


def register_frame(broker: int, body: bytes, label: bool, version: int, opaque: int) -> bytes:
    addr = f"10.3.0.{broker}:10911"
    ext = {"brokerAddr": addr, "brokerId": "0", "brokerName": f"big-{broker}",
           "clusterName": "bench", "haServerAddr": addr, "enableActingMaster": "false",
           "compressed": "true" if label else "false", "bodyCrc32": str(crc32(body))}
    return encode(Command(103, ext, body, version, opaque))


async def call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
               frame: bytes) -> float:
    """Send one frame, read one answer; the round trip in ms (the answer must be SUCCESS)."""
    started = time.perf_counter()
    writer.write(frame)
    (length,) = struct.unpack(">i", await reader.readexactly(4))
    data = await reader.readexactly(length)
    elapsed = (time.perf_counter() - started) * 1000
    header = json.loads(data[4:4 + (struct.unpack_from(">I", data)[0] & 0xFFFFFF)])
    if header["code"] != 0:
        raise RuntimeError(f"register failed: {header}")
    return elapsed


async def over_remoting(port: int, topics: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for n, (name, (label, version, compressed)) in enumerate(FORMS.items()):
            broker = n + 1
            same = body_for(topics, 1, version, compressed)
            row: dict[str, Any] = {"body_bytes": len(same)}
            row["first_ms"] = round(await call(reader, writer, register_frame(
                broker, same, label, version, 1)), 1)
            unchanged = [await call(reader, writer, register_frame(broker, same, label, version,
                                                                   2 + i))
                         for i in range(rounds)]
            row["unchanged_ms_p50"] = round(statistics.median(unchanged), 1)
            row["unchanged_ms_max"] = round(max(unchanged), 1)
            # The same table in other body bytes (JSON with a trailing blank, deflate at another
            # level): not the connection's last body, but a table this worker has decoded.
            other = (zlib.compress(zlib.decompress(same), 6) if compressed else same + b" ")
            warm = [await call(reader, writer, register_frame(
                broker, other if i % 2 == 0 else same, label, version, 50 + i))
                for i in range(2 * (rounds // 2) + 1)]
            row["unchanged_other_bytes_ms_p50"] = round(statistics.median(warm), 1)
            # New table bytes every time: the whole decode, still an unchanged table.
            cold = [await call(reader, writer, register_frame(
                broker, restyled(same, compressed, 1 + i), label, version, 70 + i))
                for i in range(rounds)]
            row["unchanged_full_decode_ms_p50"] = round(statistics.median(cold), 1)
            changed = []
            for i in range(max(2, rounds // 3)):
                body = body_for(topics, 2 + i, version, compressed)
                changed.append(await call(reader, writer, register_frame(
                    broker, body, label, version, 100 + i)))
            row["changed_ms_p50"] = round(statistics.median(changed), 1)
            out[name] = row
    finally:
        writer.close()
    return out


def _stdlib(data: Any) -> Any:
    return json.loads(data)


def _tolerant(data: bytes) -> Any:
    return fastjson._LenientParser(data.decode("utf-8", "replace")).parse()


def strict_parsers() -> dict[str, Callable[[Any], Any]]:
    """Strict parsers that could stand in front of the tolerant one (each falls back to it)."""
    found: dict[str, Callable[[Any], Any]] = {"msgspec": msgspec.json.decode,
                                              "stdlib_json": _stdlib}
    try:
        import orjson  # not a dependency: compared only where it is installed
        found["orjson"] = orjson.loads
    except ImportError:
        pass
    return found


def _median_ms(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def parser_table(topics: int, rounds: int) -> dict[str, Any]:
    """In process, on the same bodies: the whole body decode (inflate, parse, TopicConfigs) the
    way the worker does it (msgspec straight into typed shapes) and through the generic path with
    each strict parser; and for the JSON bodies the parse alone, the tolerant parser included."""
    out: dict[str, Any] = {}
    typed, strict = bodies._typed_json_form, fastjson.strict_loads
    for form, (label, version, compressed) in FORMS.items():
        body = body_for(topics, 1, version, compressed)
        decode = functools.partial(decode_register_body, body, label, version)
        row: dict[str, Any] = {"decode_ms_as_served": _median_ms(decode, rounds)}
        if not compressed:
            try:
                bodies._typed_json_form = lambda _body: None
                for name, parse in strict_parsers().items():
                    fastjson.strict_loads = parse
                    row[f"decode_ms_generic_{name}"] = _median_ms(decode, rounds)
            finally:
                bodies._typed_json_form, fastjson.strict_loads = typed, strict
            for name, parse in strict_parsers().items():
                row[f"parse_only_ms_{name}"] = _median_ms(functools.partial(parse, body), rounds)
            row["parse_only_ms_msgspec_typed"] = _median_ms(
                functools.partial(bodies._body_decoder.decode, body), rounds)
            row["parse_only_ms_tolerant"] = _median_ms(functools.partial(_tolerant, body), 1)
        out[form] = row
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topics", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="10,000 topics, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.topics, args.rounds = 10_000, 3
    results = new_results(args)
    results["decode_in_process"] = parser_table(args.topics, args.rounds)
    with tempfile.TemporaryDirectory() as tmp, \
            RedisServer(data_dir=Path(tmp) / "redis", appendonly=False) as server:
        proc, _, remoting_port = start_worker(server.url, Path(tmp) / "w.log",
                                              NSFLEET_NAMESPACE="bench")
        try:
            results["over_remoting"] = await over_remoting(remoting_port, args.topics,
                                                           args.rounds)
        finally:
            proc.terminate()
            proc.wait(20)
    write_results("remoting_register", results)


if __name__ == "__main__":
    asyncio.run(main())
