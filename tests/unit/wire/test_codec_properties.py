"""Property tests: any command survives encode_frame + FrameDecoder in any chunking; arbitrary input
only ever raises the documented error type of each decoder."""

from __future__ import annotations

import contextlib
import struct
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from nsfleet.domain.errors import BodyDecodeError
from nsfleet.domain.java_properties import parse_properties
from nsfleet.wire.bodies import decode_register_body
from nsfleet.wire.codec import (
    FrameDecoder,
    LanguageCode,
    ProtocolError,
    RemotingCommand,
    SerializeType,
    encode_frame,
)
from nsfleet.wire.fastjson import loads_lenient

# Lone surrogates cannot be UTF-8 encoded (Java writes them as "?"), so keep them out of the
# round-trip alphabet.
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    serialize_type = draw(st.sampled_from(SerializeType))
    small = INT16 if serialize_type == SerializeType.ROCKETMQ else INT32
    return RemotingCommand(
        code=draw(small),
        language=draw(st.sampled_from([m.name for m in LanguageCode])),
        version=draw(small),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(st.none() | TEXT),
        ext_fields=draw(st.none() | st.dictionaries(TEXT, TEXT, max_size=5)),
        body=draw(st.none() | st.binary(max_size=200)),
        serialize_type=serialize_type,
    )


def expected_after_wire(cmd: RemotingCommand) -> RemotingCommand:
    """What the peer sees: empty bodies vanish; the binary header also turns empty strings into
    nulls (the remark becomes None, entries with an empty key or value drop out) and sends an
    empty map as no map at all."""
    ext = cmd.ext_fields
    remark = cmd.remark
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        remark = remark or None
        ext = {k: v for k, v in ext.items() if k and v} if ext else None
    return RemotingCommand(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, remark, ext,
                           cmd.body or None, cmd.serialize_type)


def chunk(data: bytes, sizes: list[int]) -> list[bytes]:
    out, pos = [], 0
    for size in sizes:
        if pos >= len(data):
            break
        out.append(data[pos:pos + size])
        pos += size
    out.append(data[pos:])
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(commands(), min_size=1, max_size=5),
       st.lists(st.integers(1, 64), max_size=50))
def test_round_trip_in_random_chunks(cmds: list[RemotingCommand], sizes: list[int]) -> None:
    stream = b"".join(encode_frame(c) for c in cmds)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for piece in chunk(stream, sizes):
        out.extend(decoder.feed(piece))
    assert out == [expected_after_wire(c) for c in cmds]
    assert decoder.buffered == 0


@st.composite
def hostile_streams(draw: st.DrawFn) -> bytes:
    """Random bytes, or frames with plausible lengths and random headers, so decoding gets past
    the length checks into the header decoders."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        header = draw(st.binary(max_size=80) | st.just(b"{}") | st.builds(
            lambda b: b'{"code":1,"extFields":' + b + b"}", st.binary(max_size=20)))
        body = draw(st.binary(max_size=20))
        header_len = draw(st.sampled_from([len(header), len(header) + 1, 0xFFFFFF]))
        serialize_type = draw(st.sampled_from([0, 1, 2, 255]))
        parts.append(struct.pack(">ii", 4 + len(header) + len(body),
                                 (serialize_type << 24 | header_len) - (1 << 32 if
                                 serialize_type >= 128 else 0)) + header + body)
    return b"".join(parts)


@settings(max_examples=300, deadline=None)
@given(hostile_streams(), st.lists(st.integers(1, 32), max_size=20),
       st.sampled_from([64, 1024, 16 * 1024 * 1024]))
def test_garbage_only_raises_protocol_error(data: bytes, sizes: list[int], limit: int) -> None:
    decoder = FrameDecoder(max_frame_size=limit)
    try:
        for piece in chunk(data, sizes):
            decoder.feed(piece)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.builds(zlib.compress, st.binary(max_size=200)),
       st.booleans(), st.sampled_from([0, 37, 400, 413, 479]))
def test_register_body_garbage_only_raises_body_decode_error(
        data: bytes, compressed: bool, version: int) -> None:
    with contextlib.suppress(BodyDecodeError):
        decode_register_body(data, compressed, version)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="{}[]\"':,0123456789abc-. \\\n", max_size=60))
def test_lenient_json_garbage_only_raises_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        loads_lenient(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab=: \t\\u0#!\r\n", max_size=60))
def test_properties_garbage_only_raises_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_properties(text)
