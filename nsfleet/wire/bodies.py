"""REGISTER_BROKER bodies (DefaultRequestProcessor.registerBroker, RegisterBrokerBody.decode).

They come in three shapes:

* brokers older than V3_0_11 (version < 37): a bare ``TopicConfigSerializeWrapper`` JSON;
* newer brokers: ``RegisterBrokerBody`` as fastjson JSON (what 5.x brokers send by default);
* the same body in the deflate binary form when the header says ``compressed=true``.

A 5.x broker with ``compressedRegister=true`` deflates the body but still sets the header's
``compressed=false`` (``BrokerOuterAPI.registerBrokerAll``), so the Java NameServer would fail to
parse it. We deliberately accept that case: a body that starts with a zlib header is inflated
whatever the header flag says. JSON can never start with the zlib byte 0x78, so this guess is safe.
The mirror case (``compressed=true`` with a JSON body) is accepted as well.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from nsfleet.domain.errors import BodyDecodeError, ValidationError
from nsfleet.domain.java import parse_int, to_object
from nsfleet.domain.model import DataVersion, TopicConfig
from nsfleet.domain.topic_tables import DataVersionJson, fastjson_table, remembered
from nsfleet.wire.codec import V3_0_11, V5_0_0
from nsfleet.wire.fastjson import JsonTooDeep, loads_lenient

# A 16 MiB frame could inflate to gigabytes; a real registration of 100k topics is ~10 MB.
DEFAULT_MAX_INFLATED: Final = 64 * 1024 * 1024

_INT: Final = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBody:
    """What a REGISTER_BROKER body carries, whichever encoding it came in.

    ``filter_server_list`` is ``None`` when the body says ``null`` or is the pre-V3_0_11 bare
    wrapper (Java passes null then). ``topic_queue_mapping_info`` maps topic to the raw
    ``TopicQueueMappingInfo`` object as parsed (``currIdMap`` keys are strings).
    """

    data_version: DataVersion = field(default_factory=DataVersion)
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    filter_server_list: list[str] | None = field(default_factory=list)
    topic_queue_mapping_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    # topic_config_table's entries as a tuple, set by the decoder: one object per distinct table
    # (nsfleet.domain.topic_tables), which the store recognises. Derived, so not compared.
    topic_configs: tuple[TopicConfig, ...] = field(default=(), compare=False, repr=False)
    # Every number of the table proven within Java's int by the decoder (BrokerRegistration's
    # field of the same name). Derived, so not compared.
    numbers_checked: bool = field(default=False, compare=False, repr=False)
    # What is derived from this body's table and kept as long as the body is (a remoting
    # connection keeps its last): BrokerRegistration.table_memo. Not compared.
    table_memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)


def crc32(body: bytes | bytearray | memoryview | None) -> int:
    """``UtilAll.crc32``: CRC-32 masked to 31 bits so it is never negative; 0 for no body."""
    if not body:
        return 0
    return zlib.crc32(body) & 0x7FFFFFFF


def is_zlib_stream(body: bytes | bytearray | memoryview | None) -> bool:
    """True when ``body`` starts with the zlib header Java's ``Deflater`` writes.

    CMF 0x78 (deflate, 32 KiB window) and an FLG byte that makes the 16-bit header a multiple of
    31 with no preset dictionary: 0x01, 0x5E, 0x9C or 0xDA (BEST_COMPRESSION).
    """
    if body is None or len(body) < 2 or body[0] != 0x78:
        return False
    flg = body[1]
    return (0x7800 | flg) % 31 == 0 and not flg & 0x20


def _load_json(data: bytes | str, what: str) -> Any:
    try:
        return loads_lenient(data)
    except ValueError as exc:
        raise BodyDecodeError(f"{what}: {exc}") from None


def _topic_table(value: Any) -> dict[str, TopicConfig]:
    table: dict[str, TopicConfig] = {}
    for key, tc in to_object(value, "topicConfigTable").items():
        if tc is None:  # a null entry carries nothing to register
            continue
        config = TopicConfig.from_json(key, tc)
        table[config.topic_name] = config
    return table


def _filter_server_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise BodyDecodeError(f"filterServerList is not a list: {value!r:.80}")
    return [str(v) for v in value if v is not None]


def _mapping_table(value: Any) -> dict[str, dict[str, Any]]:
    return {str(k): to_object(v, f"topicQueueMappingInfoMap.{k}")
            for k, v in to_object(value, "topicQueueMappingInfoMap").items() if v is not None}


# --- the typed fast path -------------------------------------------------------------------------
# A 60,000-topic JSON body is ~10 MB: parsed into generic dicts and walked field by field it costs
# ~4x what msgspec costs decoding it straight into these shapes. They accept only what the generic
# path reads identically (exact types, null where Java's default applies, unknown fields
# skipped); anything else (a quoted number, a bare key, invalid UTF-8) is rejected and the body
# goes the generic way, which reads it exactly as before.


class _WrapperJson(msgspec.Struct):
    dataVersion: DataVersionJson | None = None
    # Left undecoded here: decoded once per distinct table (nsfleet.domain.topic_tables).
    topicConfigTable: msgspec.Raw = msgspec.Raw(b"null")
    topicQueueMappingInfoMap: dict[str, dict[str, Any] | None] | None = None


class _RegisterBodyJson(msgspec.Struct):
    topicConfigSerializeWrapper: _WrapperJson | None = None
    filterServerList: list[str | None] | msgspec.UnsetType | None = msgspec.UNSET


_wrapper_decoder: Final = msgspec.json.Decoder(_WrapperJson)
_body_decoder: Final = msgspec.json.Decoder(_RegisterBodyJson)


def _from_typed_wrapper(w: _WrapperJson | None) -> RegisterBody:
    """What ``_decode_wrapper`` gives for the same JSON (TopicConfig.from_json's defaults);
    ValueError when the table is not of the common shape."""
    if w is None:
        return RegisterBody(filter_server_list=None)
    table, configs, numbers_checked = fastjson_table(w.topicConfigTable)
    return RegisterBody(
        data_version=DataVersionJson.value(w.dataVersion),
        topic_config_table=table, topic_configs=configs, numbers_checked=numbers_checked,
        filter_server_list=None,
        topic_queue_mapping_info={k: v for k, v in (w.topicQueueMappingInfoMap or {}).items()
                                  if v is not None})


def _typed_json_form(body: bytes) -> RegisterBody | None:
    """The RegisterBrokerBody through the typed fast path; None when it must go the generic way."""
    try:
        parsed = _body_decoder.decode(body)
        result = _from_typed_wrapper(parsed.topicConfigSerializeWrapper)
    except RecursionError:  # the generic reader would refuse it too
        raise BodyDecodeError(f"RegisterBrokerBody: {JsonTooDeep()}") from None
    except ValueError:  # msgspec's errors, invalid UTF-8
        return None
    filters = parsed.filterServerList
    result.filter_server_list = ([] if filters is msgspec.UNSET else
                                 None if filters is None else [f for f in filters if f is not None])
    return result


# --- decoding ------------------------------------------------------------------------------------


def _decode_wrapper(obj: dict[str, Any]) -> RegisterBody:
    """A ``TopicConfigSerializeWrapper`` (or the AndMapping subclass) JSON object."""
    table = _topic_table(obj.get("topicConfigTable"))
    return RegisterBody(
        data_version=DataVersion.from_json(obj.get("dataVersion")),
        topic_config_table=table, topic_configs=tuple(table.values()),
        filter_server_list=None,
        topic_queue_mapping_info=_mapping_table(obj.get("topicQueueMappingInfoMap")),
    )


def _decode_json_form(body: bytes) -> RegisterBody:
    fast = _typed_json_form(body)
    if fast is not None:
        return fast
    obj = _load_json(body, "RegisterBrokerBody is not JSON")
    if not isinstance(obj, dict):
        raise BodyDecodeError(f"RegisterBrokerBody is not a JSON object: {body[:80]!r}")
    result = _decode_wrapper(to_object(obj.get("topicConfigSerializeWrapper"),
                                       "topicConfigSerializeWrapper"))
    result.filter_server_list = (_filter_server_list(obj["filterServerList"])
                                 if "filterServerList" in obj else [])
    return result


class _Reader:
    """Sequential reads over the inflated compressed body, with Java's length-prefixed fields."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def read_int(self, what: str) -> int:
        if self.remaining < 4:
            raise BodyDecodeError(f"compressed body truncated before {what}")
        (value,) = _INT.unpack_from(self.data, self.pos)
        self.pos += 4
        return value

    def read_block(self, what: str) -> bytes:
        length = self.read_int(f"the length of {what}")
        if length < 0 or length > self.remaining:
            raise BodyDecodeError(f"compressed body: bad length {length} for {what}")
        block = self.data[self.pos:self.pos + length]
        self.pos += length
        return block


def _inflate(body: bytes, max_inflated: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(body, max_inflated + 1)
    except zlib.error as exc:
        raise BodyDecodeError(f"compressed RegisterBrokerBody does not inflate: {exc}") from None
    if len(data) > max_inflated:
        raise BodyDecodeError(f"compressed RegisterBrokerBody inflates past {max_inflated} bytes")
    return data


def decode_topic_config_line(text: str) -> TopicConfig:
    """``TopicConfig.decode``: ``name readQueueNums writeQueueNums perm filterType [attrsJSON]``.

    topicSysFlag and order are not carried by this form, so they come back as 0/false, exactly as
    in Java. The filter type and attributes are read past (the NameServer does not use them).
    """
    parts = text.split(" ")
    while parts and parts[-1] == "":  # String.split drops trailing empty strings
        parts.pop()
    if len(parts) < 5:
        raise BodyDecodeError(f"bad compressed topic config entry: {text[:80]!r}")
    nums = []
    for part, what in zip(parts[1:4], ("readQueueNums", "writeQueueNums", "perm"), strict=True):
        value = parse_int(part)
        if value is None:
            raise BodyDecodeError(f"bad {what} {part[:40]!r} in topic config entry {text[:80]!r}")
        nums.append(value)
    return TopicConfig(parts[0], nums[0], nums[1], nums[2])


def _topic_lines(reader: _Reader, count: int) -> dict[str, TopicConfig]:
    """``count`` length-prefixed TopicConfig lines, as ``decode_topic_config_line`` reads them.

    The loop runs 60,000 times for a big broker, so the common line (plain ASCII numbers short
    enough for a Java int, more fields after them, no trailing blank) is read from its bytes: a
    space is never part of a UTF-8 sequence, so decoding the name alone gives what decoding the
    whole line gives. Any other line goes through ``decode_topic_config_line``."""
    table: dict[str, TopicConfig] = {}
    data, pos, end = reader.data, reader.pos, len(reader.data)
    unpack = _INT.unpack_from
    for _ in range(count):
        if end - pos < 4:
            raise BodyDecodeError("compressed body truncated before the length of a topic config")
        (length,) = unpack(data, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise BodyDecodeError(f"compressed body: bad length {length} for a topic config")
        line = data[pos:pos + length]
        pos += length
        parts = line.split(b" ", 4)
        if (len(parts) == 5 and parts[4][-1:] not in (b" ", b"")
                and parts[1].isdigit() and parts[2].isdigit() and parts[3].isdigit()
                and len(parts[1]) < 10 and len(parts[2]) < 10 and len(parts[3]) < 10):
            config = TopicConfig(parts[0].decode("utf-8", "replace"), int(parts[1]),
                                 int(parts[2]), int(parts[3]))
        else:
            config = decode_topic_config_line(line.decode("utf-8", "replace"))
        table[config.topic_name] = config
    reader.pos = pos
    return table


_CompressedRest = tuple[dict[str, TopicConfig], tuple[TopicConfig, ...], list[str] | None,
                        dict[str, dict[str, Any]]]


def _decode_compressed_form(body: bytes, version: int, max_inflated: int) -> RegisterBody:
    reader = _Reader(_inflate(body, max_inflated))
    dv = DataVersion.from_json(
        _load_json(reader.read_block("the DataVersion"), "compressed DataVersion"))
    # Everything after the DataVersion is decoded once per distinct content: a new DataVersion
    # alone (what changes most) finds the table decoded before.
    table, configs, filters, mappings = remembered(
        ("compressed", version >= V5_0_0), memoryview(reader.data)[reader.pos:],
        lambda: _compressed_rest(reader, version), lambda rest: len(rest[1]))
    return RegisterBody(data_version=dv, topic_config_table=table, topic_configs=configs,
                        filter_server_list=filters, topic_queue_mapping_info=mappings)


def _compressed_rest(reader: _Reader, version: int) -> _CompressedRest:
    """The compressed body after its DataVersion: topics, filter servers, static-topic
    mappings."""
    count = reader.read_int("the topic count")
    if count < 0:
        raise BodyDecodeError(f"compressed body: negative topic count {count}")
    table = _topic_lines(reader, count)
    text = reader.read_block("the filter server list").decode("utf-8", "replace")
    try:
        filters = _filter_server_list(loads_lenient(text))
    except ValueError:
        filters = []  # Java logs the parse failure and keeps an empty list
    mappings: dict[str, dict[str, Any]] = {}
    # The mapping section exists only from V5_0_0 on (#5539). Leniently, a >= 5.0 body that ends
    # right after the filter list reads as having no mappings instead of failing.
    if version >= V5_0_0 and reader.remaining:
        count = reader.read_int("the mapping count")
        if count < 0:
            raise BodyDecodeError(f"compressed body: negative mapping count {count}")
        for _ in range(count):
            info = _load_json(reader.read_block("a TopicQueueMappingInfo"),
                              "compressed TopicQueueMappingInfo")
            info = to_object(info, "TopicQueueMappingInfo")
            topic = info.get("topic")
            if topic is None:
                raise BodyDecodeError("TopicQueueMappingInfo without a topic")
            mappings[str(topic)] = info
    return table, tuple(table.values()), filters, mappings


def _looks_like_json(body: bytes) -> bool:
    stripped = body.lstrip(b" \t\r\n\xef\xbb\xbf")
    return stripped[:1] == b"{"


def decode_register_body(
    body: bytes | None,
    compressed: bool,
    version: int,
    *,
    max_inflated: int = DEFAULT_MAX_INFLATED,
) -> RegisterBody:
    """Decode a REGISTER_BROKER body as ``DefaultRequestProcessor.registerBroker`` does.

    ``version`` is the request's version (the broker's MQVersion ordinal), ``compressed`` the
    header's ``compressed`` field. No body gives an empty table and DataVersion {0, 0, 0}.
    Raises :class:`BodyDecodeError` for anything undecodable.
    """
    try:
        return _decode(body, compressed, version, max_inflated)
    except ValidationError as exc:  # a value fastjson could not have put into its field
        raise BodyDecodeError(exc.remark) from None


def _decode(body: bytes | None, compressed: bool, version: int,
            max_inflated: int) -> RegisterBody:
    if not body:
        return RegisterBody(filter_server_list=[] if version >= V3_0_11 else None)
    body = bytes(body)
    if version < V3_0_11:
        try:
            result = _from_typed_wrapper(_wrapper_decoder.decode(body))
            result.topic_queue_mapping_info = {}  # the pre-mapping wrapper class has none
            return result
        except RecursionError:
            raise BodyDecodeError(f"TopicConfigSerializeWrapper: {JsonTooDeep()}") from None
        except ValueError:  # not the common shape: the generic way below
            pass
        obj = _load_json(body, "TopicConfigSerializeWrapper is not JSON")
        if not isinstance(obj, dict):
            raise BodyDecodeError(
                f"TopicConfigSerializeWrapper is not a JSON object: {body[:80]!r}")
        result = _decode_wrapper(obj)
        result.topic_queue_mapping_info = {}  # the pre-mapping wrapper class has no such field
        return result
    if is_zlib_stream(body) or (compressed and not _looks_like_json(body)):
        return _decode_compressed_form(body, version, max_inflated)
    return _decode_json_form(body)
