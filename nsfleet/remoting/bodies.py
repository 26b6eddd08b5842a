"""Request/response bodies that need more than plain JSON: REGISTER_BROKER and Java ``Properties``.

REGISTER_BROKER bodies come in three shapes (reference §1.4 step 2, §2.6):

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

import re
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from nsfleet.model import TopicConfig
from nsfleet.remoting.codec import CURRENT_VERSION, V3_0_11, V5_0_0
from nsfleet.remoting.fastjson import dumps_legacy, loads_lenient

__all__ = [
    "DEFAULT_MAX_INFLATED",
    "BodyDecodeError",
    "RegisterBody",
    "TopicConfig",
    "crc32",
    "decode_register_body",
    "decode_topic_config_line",
    "encode_register_body",
    "encode_topic_config_line",
    "format_properties",
    "is_zlib_stream",
    "new_data_version",
    "parse_properties",
]

# A 16 MiB frame could inflate to gigabytes; a real registration of 100k topics is ~10 MB.
DEFAULT_MAX_INFLATED: Final = 64 * 1024 * 1024

_INT: Final = struct.Struct(">i")
# Integer.parseInt: optional sign, ASCII digits, nothing else (Python's int() would also take
# whitespace and underscores).
_JAVA_INT: Final = re.compile(r"[+-]?[0-9]+")


def _parse_java_int(text: str) -> int | None:
    """``Long.parseLong`` strictness; None when ``text`` is not a decimal integer."""
    if len(text) > 20 or not _JAVA_INT.fullmatch(text):
        return None
    return int(text)


class BodyDecodeError(ValueError):
    """A request body that the Java NameServer could not decode either (SYSTEM_ERROR)."""


def new_data_version(
    counter: int = 0, timestamp: int = 0, state_version: int = 0
) -> dict[str, int]:
    """A DataVersion in its JSON shape."""
    return {"counter": counter, "timestamp": timestamp, "stateVersion": state_version}


@dataclass(slots=True)
class RegisterBody:
    """What a REGISTER_BROKER body carries, whichever encoding it came in.

    ``data_version`` has the JSON keys ``counter``, ``timestamp`` and ``stateVersion`` (missing ones
    read as 0; Java would default a missing timestamp to "now", which nothing depends on).
    ``filter_server_list`` is ``None`` when the body says ``null`` or is the pre-V3_0_11 bare
    wrapper (Java passes null then). ``topic_queue_mapping_info`` maps topic to the raw
    ``TopicQueueMappingInfo`` object as parsed (``currIdMap`` keys are strings).
    """

    data_version: dict[str, int] = field(default_factory=new_data_version)
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    filter_server_list: list[str] | None = field(default_factory=list)
    topic_queue_mapping_info: dict[str, dict[str, Any]] = field(default_factory=dict)


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


# --- value coercion (what fastjson does when it fills a Java field) -----------------------------


def _as_int(value: Any, what: str, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and (parsed := _parse_java_int(value.strip())) is not None:
        return parsed
    raise BodyDecodeError(f"{what} is not an integer: {value!r}")


def _as_bool(value: Any, what: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise BodyDecodeError(f"{what} is not a boolean: {value!r}")


def _as_object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BodyDecodeError(f"{what} is not a JSON object: {value!r:.80}")
    return value


def _load_json(data: bytes | str, what: str) -> Any:
    try:
        return loads_lenient(data)
    except ValueError as exc:
        raise BodyDecodeError(f"{what}: {exc}") from None


def _data_version(value: Any) -> dict[str, int]:
    obj = _as_object(value, "dataVersion")
    return new_data_version(
        _as_int(obj.get("counter"), "dataVersion.counter"),
        _as_int(obj.get("timestamp"), "dataVersion.timestamp"),
        _as_int(obj.get("stateVersion"), "dataVersion.stateVersion"),
    )


def _topic_config(key: str, value: Any) -> TopicConfig:
    obj = _as_object(value, f"topicConfigTable[{key!r}]")
    name = obj.get("topicName")
    what = f"topicConfigTable[{key!r}]"
    return TopicConfig(
        # Java keys the route by the TopicConfig's own topicName; fall back on the map key when a
        # hand-written body leaves it out rather than registering a null topic.
        topic_name=str(name) if name is not None else key,
        read_queue_nums=_as_int(obj.get("readQueueNums"), f"{what}.readQueueNums", 16),
        write_queue_nums=_as_int(obj.get("writeQueueNums"), f"{what}.writeQueueNums", 16),
        perm=_as_int(obj.get("perm"), f"{what}.perm", 6),
        topic_sys_flag=_as_int(obj.get("topicSysFlag"), f"{what}.topicSysFlag", 0),
        order=_as_bool(obj.get("order"), f"{what}.order"),
    )


def _topic_table(value: Any) -> dict[str, TopicConfig]:
    table: dict[str, TopicConfig] = {}
    for key, tc in _as_object(value, "topicConfigTable").items():
        if tc is None:  # a null entry carries nothing to register
            continue
        config = _topic_config(key, tc)
        table[config.topic_name] = config
    return table


def _filter_server_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise BodyDecodeError(f"filterServerList is not a list: {value!r:.80}")
    return [str(v) for v in value if v is not None]


def _mapping_table(value: Any) -> dict[str, dict[str, Any]]:
    return {str(k): _as_object(v, f"topicQueueMappingInfoMap[{k!r}]")
            for k, v in _as_object(value, "topicQueueMappingInfoMap").items() if v is not None}


# --- decoding ------------------------------------------------------------------------------------


def _decode_wrapper(obj: dict[str, Any]) -> RegisterBody:
    """A ``TopicConfigSerializeWrapper`` (or the AndMapping subclass) JSON object."""
    return RegisterBody(
        data_version=_data_version(obj.get("dataVersion")),
        topic_config_table=_topic_table(obj.get("topicConfigTable")),
        filter_server_list=None,
        topic_queue_mapping_info=_mapping_table(obj.get("topicQueueMappingInfoMap")),
    )


def _decode_json_form(body: bytes) -> RegisterBody:
    obj = _load_json(body, "RegisterBrokerBody is not JSON")
    if not isinstance(obj, dict):
        raise BodyDecodeError(f"RegisterBrokerBody is not a JSON object: {body[:80]!r}")
    result = _decode_wrapper(_as_object(obj.get("topicConfigSerializeWrapper"),
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
        value = _parse_java_int(part)
        if value is None:
            raise BodyDecodeError(f"bad {what} {part[:40]!r} in topic config entry {text[:80]!r}")
        nums.append(value)
    return TopicConfig(parts[0], nums[0], nums[1], nums[2])


def _decode_compressed_form(body: bytes, version: int, max_inflated: int) -> RegisterBody:
    reader = _Reader(_inflate(body, max_inflated))
    result = RegisterBody()
    result.data_version = _data_version(
        _load_json(reader.read_block("the DataVersion"), "compressed DataVersion"))
    count = reader.read_int("the topic count")
    if count < 0:
        raise BodyDecodeError(f"compressed body: negative topic count {count}")
    for _ in range(count):
        block = reader.read_block("a topic config")
        config = decode_topic_config_line(block.decode("utf-8", "replace"))
        result.topic_config_table[config.topic_name] = config
    filters = reader.read_block("the filter server list").decode("utf-8", "replace")
    try:
        result.filter_server_list = _filter_server_list(loads_lenient(filters))
    except ValueError:
        result.filter_server_list = []  # Java logs the parse failure and keeps an empty list
    # The mapping section exists only from V5_0_0 on (#5539). Leniently, a >= 5.0 body that ends
    # right after the filter list reads as having no mappings instead of failing.
    if version >= V5_0_0 and reader.remaining:
        count = reader.read_int("the mapping count")
        if count < 0:
            raise BodyDecodeError(f"compressed body: negative mapping count {count}")
        for _ in range(count):
            info = _load_json(reader.read_block("a TopicQueueMappingInfo"),
                              "compressed TopicQueueMappingInfo")
            info = _as_object(info, "TopicQueueMappingInfo")
            topic = info.get("topic")
            if topic is None:
                raise BodyDecodeError("TopicQueueMappingInfo without a topic")
            result.topic_queue_mapping_info[str(topic)] = info
    return result


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
    if not body:
        return RegisterBody(filter_server_list=[] if version >= V3_0_11 else None)
    body = bytes(body)
    if version < V3_0_11:
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


# --- encoding (what Java brokers send; for test clients and nsfleet's own tests) ----------------


def _data_version_json(dv: Mapping[str, int], version: int) -> dict[str, int]:
    out = {"counter": int(dv.get("counter", 0)), "timestamp": int(dv.get("timestamp", 0))}
    if version >= V5_0_0:  # stateVersion arrived with 5.0
        out["stateVersion"] = int(dv.get("stateVersion", 0))
    return out


def _topic_config_json(tc: TopicConfig, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "order": tc.order, "perm": tc.perm, "readQueueNums": tc.read_queue_nums,
        "topicFilterType": "SINGLE_TAG", "topicName": tc.topic_name,
        "topicSysFlag": tc.topic_sys_flag, "writeQueueNums": tc.write_queue_nums,
    }
    if version >= V5_0_0:  # attributes arrived with 5.0
        out["attributes"] = {}
    return out


def _mapping_for_java(info: Mapping[str, Any]) -> dict[str, Any]:
    """Turn numeric ``currIdMap`` keys back into ints so the legacy writer leaves them bare."""
    out = dict(info)
    ids = out.get("currIdMap")
    if isinstance(ids, Mapping):
        out["currIdMap"] = {
            (parsed if isinstance(k, str) and (parsed := _parse_java_int(k)) is not None else k): v
            for k, v in ids.items()}
    return out


def encode_topic_config_line(tc: TopicConfig, version: int = CURRENT_VERSION) -> str:
    """``TopicConfig.encode()``: 5 space-separated fields in 4.x, plus attributes JSON in 5.x."""
    line = f"{tc.topic_name} {tc.read_queue_nums} {tc.write_queue_nums} {tc.perm} SINGLE_TAG"
    return line + " {}" if version >= V5_0_0 else line


def encode_register_body(
    body: RegisterBody, *, compressed: bool = False, version: int = CURRENT_VERSION
) -> bytes:
    """Encode ``body`` as a Java broker of MQVersion ordinal ``version`` would.

    ``version < 37`` gives the bare wrapper JSON; otherwise RegisterBrokerBody as fastjson JSON or,
    with ``compressed``, the BEST_COMPRESSION deflate form. 4.x versions (< 413) leave out
    stateVersion, attributes and the static-topic mapping fields/section, as 4.9 brokers do.
    """
    dv = _data_version_json(body.data_version, version)
    table = {name: _topic_config_json(tc, version) for name, tc in body.topic_config_table.items()}
    if version < V3_0_11:
        return dumps_legacy({"dataVersion": dv, "topicConfigTable": table})
    mappings = {topic: _mapping_for_java(info)
                for topic, info in body.topic_queue_mapping_info.items()}
    if not compressed:
        wrapper: dict[str, Any] = {"dataVersion": dv, "topicConfigTable": table}
        if version >= V5_0_0:
            wrapper["mappingDataVersion"] = new_data_version()
            wrapper["topicQueueMappingDetailMap"] = {}
            wrapper["topicQueueMappingInfoMap"] = mappings
        return dumps_legacy({"filterServerList": body.filter_server_list,
                             "topicConfigSerializeWrapper": wrapper})

    def block(data: bytes) -> bytes:
        return _INT.pack(len(data)) + data

    parts = [block(dumps_legacy(dv)), _INT.pack(len(body.topic_config_table))]
    parts.extend(block(encode_topic_config_line(tc, version).encode("utf-8"))
                 for tc in body.topic_config_table.values())
    filters = body.filter_server_list
    parts.append(block(dumps_legacy(filters) if filters is not None else b"null"))
    if version >= V5_0_0:
        parts.append(_INT.pack(len(mappings)))
        parts.extend(block(dumps_legacy(info)) for info in mappings.values())
    return zlib.compress(b"".join(parts), 9)


# --- java.util.Properties ------------------------------------------------------------------------

_PROP_WS: Final = " \t\f"
_PROP_ESCAPES: Final = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _logical_lines(text: str) -> Iterator[str]:
    """``Properties.LineReader``: natural lines joined on an odd trailing backslash, leading
    whitespace of each natural line dropped, blank and ``#``/``!`` comment lines skipped."""
    buf: list[str] = []
    skip_ws = True
    is_comment = False
    is_new_line = True
    appended_line_begin = False
    preceding_backslash = False
    skip_lf = False
    for c in text:
        if skip_lf:
            skip_lf = False
            if c == "\n":
                continue
        if skip_ws:
            if c in _PROP_WS:
                continue
            if not appended_line_begin and c in "\r\n":
                continue
            skip_ws = False
            appended_line_begin = False
        if is_new_line:
            is_new_line = False
            if c in "#!":
                is_comment = True
                continue
        if c not in "\r\n":
            if not is_comment:
                buf.append(c)
                preceding_backslash = not preceding_backslash if c == "\\" else False
            continue
        # end of a natural line
        if is_comment or not buf:
            is_comment = False
            is_new_line = True
            skip_ws = True
            preceding_backslash = False
            buf.clear()
            continue
        if preceding_backslash:  # continuation: drop the backslash, join the next line
            buf.pop()
            skip_ws = True
            appended_line_begin = True
            preceding_backslash = False
            skip_lf = c == "\r"
        else:
            yield "".join(buf)
            buf.clear()
            is_new_line = True
            skip_ws = True
    if buf and not is_comment:
        if preceding_backslash:
            buf.pop()
        yield "".join(buf)


def _load_convert(s: str) -> str:
    """``Properties.loadConvert``: backslash escapes, including ``\\uXXXX``."""
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) < 4 or not _HEX.issuperset(digits):
                raise ValueError(f"Malformed \\uxxxx encoding: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROP_ESCAPES.get(c, c))
    result = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in result):
        # \uD83D\uDE00 is one character in Java's UTF-16 strings; merge such pairs.
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return result


def _split_key_value(line: str) -> tuple[str, str]:
    """``Properties.load0``: the key ends at the first unescaped ``=``, ``:`` or whitespace; the
    value starts after whitespace, at most one ``=``/``:``, and more whitespace."""
    limit = len(line)
    key_len = 0
    value_start = limit
    has_sep = False
    preceding_backslash = False
    while key_len < limit:
        c = line[key_len]
        if c in "=:" and not preceding_backslash:
            value_start = key_len + 1
            has_sep = True
            break
        if c in _PROP_WS and not preceding_backslash:
            value_start = key_len + 1
            break
        preceding_backslash = not preceding_backslash if c == "\\" else False
        key_len += 1
    while value_start < limit:
        c = line[value_start]
        if c not in _PROP_WS:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return _load_convert(line[:key_len]), _load_convert(line[value_start:])


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``Properties`` text with ``Properties.load`` semantics; later keys win.

    Raises :class:`ValueError` on a malformed ``\\uXXXX`` escape (Java's
    ``IllegalArgumentException``, which UPDATE_NAMESRV_CONFIG answers with "string2Properties
    error"). Note that Java's ``MixAll.string2Properties`` feeds the UTF-8 bytes to
    ``load(InputStream)``, which reads them as ISO-8859-1; pass text decoded however the caller
    wants non-ASCII handled.
    """
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        result[key] = value
    return result


def format_properties(props: Mapping[str, Any]) -> str:
    """``MixAll.properties2String(props, true)``: ``key=value\\n`` lines sorted by key, no
    escaping; ``None`` values skipped; booleans written as Java prints them."""
    lines = []
    for key in sorted(props):
        value = props[key]
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        lines.append(f"{key}={value}\n")
    return "".join(lines)
