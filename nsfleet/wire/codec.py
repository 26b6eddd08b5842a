"""RocketMQ remoting commands on the wire: framing, JSON headers and ROCKETMQ binary headers.

Frame layout (NettyEncoder / NettyDecoder, RemotingCommand.encodeHeader, big-endian)::

    int32 length = 4 + H + B | int32 (serializeType << 24) | H | header (H bytes) | body (B bytes)

Encoders write exactly what the Java 5.x server writes (fastjson header with sorted keys, nulls
omitted, ``serializeTypeCurrentRPC`` included). Decoders are as lenient as the Java server: unknown
header keys are ignored, missing ones take Java's defaults, an unknown language becomes ``OTHER``.
Everything that Java would answer by closing the channel raises a :class:`ProtocolError`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Annotated, Any, Final

import msgspec

from nsfleet.domain.errors import ResponseCode
from nsfleet.domain.excerpt import clipped, excerpt
from nsfleet.wire.fastjson import JsonTooDeep, dumps_legacy, loads_lenient, quote_legacy

__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_MAX_FRAME_SIZE",
    "MAX_HEADER_SIZE",
    "ONEWAY",
    "RESPONSE",
    "V3_0_11",
    "V4_9_4",
    "V4_9_8_SERVER",
    "V5_0_0",
    "BadFrameLengthError",
    "BadHeaderLengthError",
    "FrameDecoder",
    "FrameTooLargeError",
    "HeaderDecodeError",
    "HeaderTooLargeError",
    "LanguageCode",
    "ProtocolError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "UnknownSerializeTypeError",
    "answer_version",
    "decode_frame",
    "decode_json_header",
    "decode_rocketmq_header",
    "encode_frame",
    "encode_header",
    "encode_json_header",
    "encode_plain_response",
    "encode_rocketmq_header",
    "make_response",
    "mark_protocol_type",
]

# MQVersion ordinals that change NameServer behaviour (MQVersion.Version).
V3_0_11: Final = 37  # REGISTER_BROKER body becomes RegisterBrokerBody
V4_9_4: Final = 401  # route answers in standard JSON
V5_0_0: Final = 413  # compressed register body carries static-topic mappings
CURRENT_VERSION: Final = 479  # V5_3_3, what a 5.3.3 NameServer puts in its responses
# A Java NameServer answers with its own version (the remoting version property its start-up
# sets): a client older than 5.0 gets what the last 4.x NameServer, 4.9.8, sends.
V4_9_8_SERVER: Final = 409  # V4_9_8's ordinal in 4.9.8's own MQVersion (5.x renumbered it)


def answer_version(request_version: int) -> int:
    """The header version of an answer: that of a NameServer of the client's generation."""
    return CURRENT_VERSION if request_version >= V5_0_0 else V4_9_8_SERVER

# Netty's frameMaxLength default; it bounds the whole frame including the length prefix.
DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024
# The largest header a frame may carry. Java bounds only the frame (16 MiB, the header length
# field's 24 bits allow as much); its clients write headers of a few hundred bytes, a KV value
# the longest. An 8 MiB header cost the event loop ~40 ms to receive and decode, and one worker
# serves every reader from that loop: a header over this is refused as soon as its length arrives.
MAX_HEADER_SIZE: Final = 1024 * 1024

# Flag bits (RemotingCommand.RPC_TYPE / RPC_ONEWAY).
RESPONSE: Final = 1
ONEWAY: Final = 2


class SerializeType(IntEnum):
    """High byte of the second frame int: how the header is encoded."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(IntEnum):
    """The sender's client language; names travel in JSON headers, codes in binary ones."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class RequestCode(IntEnum):
    """Request codes handled by (or, for 905, sent by) the NameServer (RequestCode)."""

    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901
    BROKER_HEARTBEAT = 904
    NOTIFY_MIN_BROKER_ID_CHANGE = 905
    # The controller's (RocketMQ 5 controller mode; 1008 is sent to brokers).
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013


# --- errors --------------------------------------------------------------------------------------


class ProtocolError(Exception):
    """The byte stream is not valid RocketMQ remoting; Java closes the channel on these.

    ``decoded`` holds the commands that :meth:`FrameDecoder.feed` had already decoded from the
    same call before it hit the bad frame, so a server can still serve them (Netty would have
    dispatched them) before closing.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.decoded: list[RemotingCommand] = []


class FrameTooLargeError(ProtocolError):
    """Frame over the configured maximum (Netty ``TooLongFrameException``)."""


class HeaderTooLargeError(ProtocolError):
    """Header over :data:`MAX_HEADER_SIZE` (nsfleet's bound; Java has none below the frame's)."""


class BadFrameLengthError(ProtocolError):
    """Length prefix negative or too small to hold the header-length int."""


class BadHeaderLengthError(ProtocolError):
    """Header length larger than the frame ("decode error, bad header length")."""


class UnknownSerializeTypeError(ProtocolError):
    """Serialize type byte other than 0 (JSON) or 1 (ROCKETMQ)."""


class HeaderDecodeError(ProtocolError):
    """The header bytes do not decode (bad JSON, truncated binary header, bad lengths)."""


# --- the command ---------------------------------------------------------------------------------

_LANGUAGE_NAMES: Final = frozenset(LanguageCode.__members__)
_LANGUAGE_BY_CODE: Final = {m.value: m.name for m in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    """One request or response. ``language`` is the Java enum name, e.g. ``"JAVA"``.

    ``ext_fields`` is ``None`` when the header has no ``extFields`` at all and ``{}`` when it has
    an empty one (Java writes ``"extFields":{}`` for a response header class whose fields are all
    null). ``body`` of ``b""`` is sent like ``None`` and decodes as ``None``, as in Java.
    """

    code: int
    language: str = "JAVA"
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY)


def make_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
    version: int | None = None,
) -> RemotingCommand:
    """The answer to ``request``: same opaque, response flag set, same serialize type.

    Mirroring the request's serialize type is what 4.9.x did; 5.x answers in its server-wide type
    (JSON by default). Clients read the type byte of every frame, so mirroring is the safe choice
    (RemotingCommand.getSerializeTypeCurrentRPC). The language is always ``JAVA``: that is what
    the Java server says about itself. The version is ``answer_version``'s unless given.
    """
    return RemotingCommand(
        code=int(code),
        language="JAVA",
        version=answer_version(request.version) if version is None else version,
        opaque=request.opaque,
        flag=RESPONSE,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
        serialize_type=request.serialize_type,
    )


# --- JSON header (type 0) ------------------------------------------------------------------------

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_DECIMAL: Final = re.compile(r"[+-]?[0-9]+")


_TWO_UINTS: Final = struct.Struct(">II")  # a frame's length and its header's length
_PLAIN_HEADER: Final = (b'{"code":%d,"flag":%d,"language":"JAVA","opaque":%d,'
                       b'"serializeTypeCurrentRPC":"%s","version":%d}')
_SERIALIZE_NAMES: Final = {t.value: t.name.encode() for t in SerializeType}


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The fastjson header the Java server writes: keys sorted, nulls omitted, compact.

    Key order is the getter order fastjson's ``SortField`` gives: code, extFields, flag, language,
    opaque, remark, serializeTypeCurrentRPC, version. ``extFields`` keys are sorted too (Java
    writes its ``HashMap`` order, which no client depends on); entries with a ``None`` key or value
    are skipped, as fastjson skips null map values.
    """
    if cmd.ext_fields is None and cmd.remark is None and cmd.language == "JAVA":
        # Most answers (every route) have nothing to quote or sort.
        return _PLAIN_HEADER % (cmd.code, cmd.flag, cmd.opaque,
                                _SERIALIZE_NAMES[cmd.serialize_type], cmd.version)
    parts = ['{"code":', str(int(cmd.code))]
    ext = cmd.ext_fields
    if ext is not None:
        parts.append(',"extFields":{')
        first = True
        for key in sorted(k for k in ext if k is not None):
            value = ext[key]
            if value is None:
                continue
            if not first:
                parts.append(",")
            first = False
            parts.append(quote_legacy(key))
            parts.append(":")
            parts.append(quote_legacy(str(value)))
        parts.append("}")
    parts.append(',"flag":')
    parts.append(str(int(cmd.flag)))
    parts.append(',"language":')
    parts.append(quote_legacy(cmd.language))
    parts.append(',"opaque":')
    parts.append(str(int(cmd.opaque)))
    if cmd.remark is not None:
        parts.append(',"remark":')
        parts.append(quote_legacy(cmd.remark))
    parts.append(',"serializeTypeCurrentRPC":"')
    parts.append(SerializeType(cmd.serialize_type).name)
    parts.append('","version":')
    parts.append(str(int(cmd.version)))
    parts.append("}")
    return "".join(parts).encode("utf-8", "replace")


def _header_int(obj: dict[str, Any], key: str) -> int:
    """A Java ``int`` header field: missing or null is 0; numbers and decimal strings accepted
    (fastjson converts those), anything else or a value outside int32 is undecodable."""
    value = obj.get(key)
    if value is None:
        return 0
    acceptable = (
        isinstance(value, int)
        or (isinstance(value, float) and value.is_integer())
        or (isinstance(value, str) and len(value) < 40
            and _DECIMAL.fullmatch(value.strip()) is not None)
    )
    if not acceptable:
        raise HeaderDecodeError(f"header field {key!r} is not an integer: {value!r:.60}")
    result = int(value)
    if not _INT32_MIN <= result <= _INT32_MAX:
        raise HeaderDecodeError(f"header field {key!r} is out of the int32 range: {result}")
    return result


def _language_from_json(value: Any) -> str:
    if value is None:
        return "JAVA"  # RemotingCommand's field initialiser
    if isinstance(value, str):
        return value if value in _LANGUAGE_NAMES else "OTHER"
    if isinstance(value, int) and not isinstance(value, bool):
        # fastjson also maps an enum given as a number.
        return _LANGUAGE_BY_CODE.get(value, "OTHER")
    return "OTHER"


def _ext_value(value: Any) -> str | None:
    """fastjson's coercion of a JSON value into a ``HashMap<String,String>`` value."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return dumps_legacy(value).decode("utf-8")


_Int32 = Annotated[int, msgspec.Meta(ge=_INT32_MIN, le=_INT32_MAX)]


class _PlainHeader(msgspec.Struct):
    """The JSON header as Java clients write it: int fields, string extFields and remark. Only
    a header whose every field has exactly these types decodes into it (unknown keys skipped,
    the last of a repeated key wins, as in the generic reader)."""

    code: _Int32 | None = None
    language: str | None = None
    version: _Int32 | None = None
    opaque: _Int32 | None = None
    flag: _Int32 | None = None
    remark: str | None = None
    extFields: dict[str, str] | None = None


_plain_header: Final = msgspec.json.Decoder(_PlainHeader)
# Java clients write standard JSON headers of a few hundred bytes; the lenient reader that takes
# fastjson's extensions runs at Python speed, on the event loop, so it reads this much at most.
LENIENT_HEADER_MAX: Final = 64 * 1024


def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode a JSON header leniently (RemotingSerializable.decode): unknown keys ignored,
    missing fields defaulted.

    ``serializeTypeCurrentRPC`` is ignored (Java overwrites it from the type byte). The result's
    ``body`` is ``None`` and ``serialize_type`` is JSON. Every request passes here, so the common
    header is decoded straight into typed fields; any other goes the generic way below, which
    reads the same header identically.
    """
    try:
        h = _plain_header.decode(data)
    except RecursionError:
        raise HeaderDecodeError(f"undecodable JSON header: {JsonTooDeep()}") from None
    except ValueError:  # msgspec's errors, invalid UTF-8
        pass
    else:
        language = h.language
        # Positional arguments: keywords cost half of this whole decode.
        return RemotingCommand(
            h.code or 0,
            ("JAVA" if language is None else language if language in _LANGUAGE_NAMES
             else "OTHER"),
            h.version or 0, h.opaque or 0, h.flag or 0, h.remark, h.extFields, None,
            SerializeType.JSON)
    try:
        obj = loads_lenient(data, lenient_max=LENIENT_HEADER_MAX)
    except ValueError as exc:
        raise HeaderDecodeError(f"undecodable JSON header: {clipped(str(exc))}") from None
    if not isinstance(obj, dict):
        raise HeaderDecodeError(f"JSON header is not an object but {type(obj).__name__}")
    ext_raw = obj.get("extFields")
    ext: dict[str, str] | None
    if ext_raw is None:
        ext = None
    elif isinstance(ext_raw, dict):
        ext = {}
        for key, raw in ext_raw.items():
            value = _ext_value(raw)
            if value is not None:  # a null value reads exactly like a missing one
                ext[key] = value
    else:
        raise HeaderDecodeError(f"extFields is not an object: {excerpt(ext_raw)}")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = _ext_value(remark)
    return RemotingCommand(
        code=_header_int(obj, "code"),
        language=_language_from_json(obj.get("language")),
        version=_header_int(obj, "version"),
        opaque=_header_int(obj, "opaque"),
        flag=_header_int(obj, "flag"),
        remark=remark,
        ext_fields=ext,
        body=None,
        serialize_type=SerializeType.JSON,
    )


# --- ROCKETMQ binary header (type 1) -------------------------------------------------------------

# code int16 | language int8 | version int16 | opaque int32 | flag int32 | remark length int32
_FIXED: Final = struct.Struct(">hbhiii")
_FIXED_ENCODE: Final = struct.Struct(">HBHIII")
_INT: Final = struct.Struct(">i")
_SHORT: Final = struct.Struct(">h")
_UINT: Final = struct.Struct(">I")


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    """The ``RocketMQSerializable`` header (RocketMQSerializable.rocketMQProtocolEncode).

    Code and version are written as Java ``(short)`` casts, so values past 16 bits wrap; an empty
    remark is written as length 0 (and reads back as ``None``); extFields entries with a ``None``
    key or value are skipped.
    """
    remark = cmd.remark.encode("utf-8", "replace") if cmd.remark else b""
    ext_parts: list[bytes] = []
    if cmd.ext_fields:
        for key, value in cmd.ext_fields.items():
            if key is None or value is None:
                continue
            kb = key.encode("utf-8", "replace")
            vb = str(value).encode("utf-8", "replace")
            if len(kb) > 0x7FFF:
                raise ValueError(f"extFields key longer than 32767 bytes: {key[:40]!r}...")
            ext_parts.append(_SHORT.pack(len(kb)))
            ext_parts.append(kb)
            ext_parts.append(_INT.pack(len(vb)))
            ext_parts.append(vb)
    ext = b"".join(ext_parts)
    language = LanguageCode.__members__.get(cmd.language, LanguageCode.OTHER)
    return b"".join((
        _FIXED_ENCODE.pack(
            cmd.code & 0xFFFF,
            int(language),
            cmd.version & 0xFFFF,
            cmd.opaque & 0xFFFFFFFF,
            cmd.flag & 0xFFFFFFFF,
            len(remark),
        ),
        remark,
        _INT.pack(len(ext)),
        ext,
    ))


def decode_rocketmq_header(
    data: bytes | bytearray | memoryview, offset: int = 0, length: int | None = None
) -> RemotingCommand:
    """Decode a ``RocketMQSerializable`` header of ``length`` bytes at ``offset`` in ``data``.

    As in Java, a zero-length remark or value decodes as null (here: the remark is ``None`` and the
    extFields entry is dropped, which handlers cannot tell from a missing one), an extFields length
    of 0 or less means no extFields at all, and an unknown language code becomes ``OTHER``.
    Stricter than Java, every string must lie inside the header (Java only compares each length
    with the header length and could read into the body); bytes left after the extFields are
    ignored.
    """
    if length is None:
        length = len(data) - offset
    end = offset + length
    if length < _FIXED.size + 4:
        raise HeaderDecodeError(f"ROCKETMQ header too short: {length} bytes")
    code, lang, version, opaque, flag, remark_len = _FIXED.unpack_from(data, offset)
    pos = offset + _FIXED.size
    remark: str | None = None
    if remark_len != 0:
        if remark_len < 0 or remark_len > length or pos + remark_len + 4 > end:
            raise HeaderDecodeError(f"bad remark length {remark_len} in a {length}-byte header")
        remark = bytes(data[pos:pos + remark_len]).decode("utf-8", "replace")
        pos += remark_len
    (ext_len,) = _INT.unpack_from(data, pos)
    pos += 4
    ext: dict[str, str] | None = None
    if ext_len > 0:
        ext_end = pos + ext_len
        if ext_len > length or ext_end > end:
            raise HeaderDecodeError(f"bad extFields length {ext_len} in a {length}-byte header")
        ext = {}
        while pos < ext_end:
            if pos + 2 > ext_end:
                raise HeaderDecodeError("truncated extFields key length")
            (key_len,) = _SHORT.unpack_from(data, pos)
            pos += 2
            if key_len < 0 or pos + key_len + 4 > ext_end:
                raise HeaderDecodeError(f"bad extFields key length {key_len}")
            key = bytes(data[pos:pos + key_len]).decode("utf-8", "replace") if key_len else None
            pos += key_len
            (value_len,) = _INT.unpack_from(data, pos)
            pos += 4
            if value_len < 0 or pos + value_len > ext_end:
                raise HeaderDecodeError(f"bad extFields value length {value_len}")
            value = bytes(data[pos:pos + value_len]).decode("utf-8", "replace")
            pos += value_len
            if key is not None and value_len:
                ext[key] = value
            elif key is not None:
                ext.pop(key, None)  # Java's put(key, null) replaces an earlier value
    return RemotingCommand(
        code=code,
        language=_LANGUAGE_BY_CODE.get(lang, "OTHER"),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=None,
        serialize_type=SerializeType.ROCKETMQ,
    )


# --- framing -------------------------------------------------------------------------------------


def encode_header(cmd: RemotingCommand) -> bytes:
    """The header bytes in ``cmd.serialize_type``."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return encode_rocketmq_header(cmd)
    return encode_json_header(cmd)


def mark_protocol_type(header_len: int, serialize_type: int) -> bytes:
    """The second frame int: ``(type << 24) | (header_len & 0xFFFFFF)``, big-endian."""
    return _UINT.pack(((int(serialize_type) & 0xFF) << 24) | (header_len & 0xFFFFFF))


def encode_frame(cmd: RemotingCommand) -> bytes:
    """The full frame for ``cmd``, length prefix included."""
    header = encode_header(cmd)
    if len(header) > 0xFFFFFF:
        raise ValueError(f"header of {len(header)} bytes does not fit the 24-bit length")
    body = cmd.body or b""
    return b"".join((
        _UINT.pack(4 + len(header) + len(body)),
        mark_protocol_type(len(header), cmd.serialize_type),
        header,
        body,
    ))


def encode_plain_response(request: RemotingCommand, code: int, body: bytes) -> bytes:
    """``encode_frame(make_response(request, code, body=body))`` for a JSON request, in one
    step: the frame of every cached route answer."""
    version = CURRENT_VERSION if request.version >= V5_0_0 else V4_9_8_SERVER  # answer_version
    header = _PLAIN_HEADER % (code, RESPONSE, request.opaque, b"JSON", version)
    return b"".join((_TWO_UINTS.pack(4 + len(header) + len(body), len(header)), header, body))


def _decode_frame_at(view: memoryview, start: int, length: int) -> RemotingCommand:
    """Decode the frame whose content (after the length prefix) is view[start:start+length]."""
    (header_word,) = _UINT.unpack_from(view, start)
    header_len = header_word & 0xFFFFFF
    if header_len > length - 4:
        raise BadHeaderLengthError(
            f"decode error, bad header length: {header_len} (frame content is {length} bytes)")
    serialize_type = header_word >> 24
    header_start = start + 4
    if serialize_type == SerializeType.JSON:
        cmd = decode_json_header(view[header_start:header_start + header_len].tobytes())
    elif serialize_type == SerializeType.ROCKETMQ:
        cmd = decode_rocketmq_header(view, header_start, header_len)
    else:
        raise UnknownSerializeTypeError(f"unknown serialize type {serialize_type}")
    body_start = header_start + header_len
    body_end = start + length
    if body_end > body_start:
        cmd.body = view[body_start:body_end].tobytes()
    return cmd


def decode_frame(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one complete frame (length prefix included, nothing after it)."""
    view = memoryview(frame)
    if len(view) < 4:
        raise BadFrameLengthError(f"frame of {len(view)} bytes has no length prefix")
    (length,) = _INT.unpack_from(view, 0)
    if length < 4 or length != len(view) - 4:
        raise BadFrameLengthError(
            f"length prefix {length} does not match a frame of {len(view)} bytes")
    return _decode_frame_at(view, 4, length)


class FrameDecoder:
    """Incremental frame decoder for one connection (Netty's LengthFieldBasedFrameDecoder plus
    ``RemotingCommand.decode``).

    :meth:`feed` returns every complete command and keeps a partial frame buffered. Decoding reads
    the shared buffer in place (``struct.unpack_from`` and memoryview slices); consumed bytes are
    dropped once per call, which CPython does without moving the rest for a ``bytearray`` prefix.

    ``max_frame_size`` bounds the whole frame, length prefix included, as Netty's ``maxFrameLength``
    does; an oversized frame is rejected as soon as its length prefix arrives. After a
    :class:`ProtocolError` the stream is unusable: close the connection (further calls raise again).
    """

    __slots__ = ("_buf", "_error", "_max")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 8:
            raise ValueError("max_frame_size must allow at least the 8 bytes of framing")
        self._buf = bytearray()
        self._max = max_frame_size
        # What failed, without the exception: its traceback holds the frames that held the
        # buffer and the connection, a cycle that kept 16 MiB frames alive until a full GC.
        self._error: tuple[type[ProtocolError], str] | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    @property
    def pending_frame_size(self) -> int:
        """The whole size (length prefix included) of the frame being received, as its prefix
        declares it; 0 while fewer than 4 bytes of it have come."""
        if len(self._buf) < 4:
            return 0
        return _INT.unpack_from(self._buf, 0)[0] + 4

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        if self._error is not None:
            kind, message = self._error
            raise kind(f"decoder already failed: {message}")
        buf = self._buf
        buf += data
        out: list[RemotingCommand] = []
        end = len(buf)
        if end < 4:
            return out
        pos = 0
        view = memoryview(buf)
        try:
            while end - pos >= 4:
                (length,) = _INT.unpack_from(view, pos)
                if length < 4:
                    raise BadFrameLengthError(f"bad frame length {length}")
                if length + 4 > self._max:
                    raise FrameTooLargeError(
                        f"frame of {length + 4} bytes exceeds the maximum of {self._max}")
                if end - pos >= 8:
                    header_len = _UINT.unpack_from(view, pos + 4)[0] & 0xFFFFFF
                    if header_len > MAX_HEADER_SIZE:
                        raise HeaderTooLargeError(f"header of {header_len} bytes exceeds the "
                                                  f"maximum of {MAX_HEADER_SIZE}")
                if end - pos - 4 < length:
                    break
                out.append(_decode_frame_at(view, pos + 4, length))
                pos += 4 + length
        except ProtocolError as exc:
            exc.decoded = out
            self._error = (type(exc), str(exc))
            raise
        except Exception as exc:  # a decoder bug must still look like a bad stream to callers
            err = HeaderDecodeError(f"undecodable frame: {excerpt(exc)}")
            err.decoded = out
            self._error = (type(err), str(err))
            raise err from exc
        finally:
            view.release()
            if self._error is not None:
                buf.clear()  # the stream is dead: what it sent is never read
            elif pos:
                del buf[:pos]
        return out
