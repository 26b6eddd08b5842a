"""JSON the way fastjson 1.2.x (as used by Java RocketMQ) writes and reads it.

The Java NameServer needs two writers (RemotingSerializable.encode, and the one
ClientRequestProcessor.getRouteInfoByTopic uses for newer clients):

* :func:`dumps_standard` is fastjson with ``BrowserCompatible, QuoteFieldNames,
  SkipTransientField, MapSortField``. That is the encoding GET_ROUTEINFO_BY_TOPIC uses for
  requests with version >= 401 or ``acceptStandardJsonOnly=true``: standard JSON, numeric map keys
  quoted, non-ASCII and ``/`` escaped.
* :func:`dumps_legacy` is fastjson's default feature set, used for everything else (cluster info,
  member groups, route answers to old clients, headers). Numeric map keys are written bare
  (``{0:"10.0.0.1:10911"}``), which is not JSON, and non-ASCII is written as raw UTF-8.

Python values stand for Java values like this:

* ``dict`` is a Java bean or a map. ``str`` keys are sorted alphabetically (bean fields are always
  sorted by fastjson; for maps this is ``MapSortField``, or a deterministic stand-in for
  ``HashMap`` order in the legacy writer). ``int`` keys are Java ``Long``/``Integer`` map keys:
  sorted numerically, which is also ``HashMap`` iteration order for the small non-negative broker
  ids and queue ids that occur in practice.
* Entries whose value is ``None`` are omitted: fastjson skips null bean fields and, without
  ``WriteMapNullValue``, null map values. ``None`` inside a list is written as ``null``.
* ``list``/``tuple`` are arrays; ``set``/``frozenset`` are arrays with sorted elements (Java
  ``HashSet`` order is arbitrary anyway; sorting keeps the output deterministic).
* ``bytes`` become a base64 string (fastjson's ``byte[]`` encoding); a non-int, non-str ``Enum``
  is written by name (fastjson's ``WriteEnumUsingName`` default).
* Floats use Python's shortest repr (Java's ``Double.toString`` differs for exponents; no
  NameServer object carries a float). NaN and infinities become ``null`` as in fastjson.

:func:`loads_lenient` reads what fastjson reads: standard JSON plus unquoted keys (notably the bare
numeric ``currIdMap`` keys that Java brokers put in REGISTER_BROKER bodies), single-quoted strings,
trailing commas and raw control characters inside strings.
"""

from __future__ import annotations

import base64
import enum
import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from json.decoder import scanstring
from typing import Any, Final

import msgspec

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonTooDeep",
    "depth_checked",
    "dumps_legacy",
    "dumps_standard",
    "dumps_standard_in_order",
    "loads_lenient",
    "loads_standard",
    "quote_legacy",
    "quote_standard",
    "strict_loads",
]

# fastjson's BrowserCompatible writer quotes Java longs outside +-(2^53 - 1) so that JavaScript
# readers keep their precision (SerializeWriter.writeLong).
_MAX_SAFE_LONG: Final = 9007199254740991

# --- string literals -----------------------------------------------------------------------------

# fastjson default (IOUtils.specicalFlags_doubleQuotes plus the U+2028/U+2029 special case):
# \b \t \n \f \r " \ get short escapes; the other C0 controls, DEL..U+009F and the two JavaScript
# line separators become \uXXXX with upper-case hex. Everything else is written raw.
_LEGACY_SPECIAL: Final = re.compile("[\x00-\x1f\"\\\\\x7f-\x9f\u2028\u2029]")
_LEGACY_SHORT: Final = {
    '"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r",
}
_LEGACY_TABLE: Final[dict[str, str]] = {
    chr(c): _LEGACY_SHORT.get(chr(c), f"\\u{c:04X}")
    for c in [*range(0x20), 0x22, 0x5C, *range(0x7F, 0xA0), 0x2028, 0x2029]
}

# BrowserCompatible: \b \f \n \r \t " / \ get short escapes (yes, "/" becomes "\/"), other C0
# controls and every char >= DEL become \uXXXX (UTF-16 units, so astral chars give a surrogate
# pair), upper-case hex. The output is pure ASCII.
_STANDARD_SPECIAL: Final = re.compile("[\x00-\x1f\"/\\\\\x7f-\U0010ffff]")
_STANDARD_SHORT: Final = {**_LEGACY_SHORT, "/": "\\/"}


def _legacy_repl(m: re.Match[str]) -> str:
    return _LEGACY_TABLE[m.group()]


def _standard_repl(m: re.Match[str]) -> str:
    ch = m.group()
    short = _STANDARD_SHORT.get(ch)
    if short is not None:
        return short
    cp = ord(ch)
    if cp > 0xFFFF:
        cp -= 0x10000
        return f"\\u{0xD800 | (cp >> 10):04X}\\u{0xDC00 | (cp & 0x3FF):04X}"
    return f"\\u{cp:04X}"


def quote_legacy(s: str) -> str:
    """``s`` as a double-quoted JSON string literal, escaped the way fastjson's defaults do."""
    return '"' + _LEGACY_SPECIAL.sub(_legacy_repl, s) + '"'


def quote_standard(s: str) -> str:
    """``s`` as a double-quoted, pure-ASCII string literal, escaped like ``BrowserCompatible``."""
    return '"' + _STANDARD_SPECIAL.sub(_standard_repl, s) + '"'


# --- writers -------------------------------------------------------------------------------------


def _float_text(f: float) -> str:
    if math.isnan(f) or math.isinf(f):
        return "null"
    return repr(f)


def _mixed_key(key: Any) -> tuple[bool, Any]:
    # Java maps never mix key types; if a Python dict does, numbers go first.
    return (isinstance(key, str), key)


def _scalar_key(key: Any) -> str:
    """The text of a non-string map key (Java Long/Integer/Boolean), before any quoting."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float_text(key)
    raise TypeError(f"unsupported JSON map key type: {type(key).__name__}")


def _make_writer(standard: bool) -> Callable[[Any, list[str]], None]:
    """Build the recursive writer for one feature set.

    Route and cluster bodies are encoded on the request path, so map values that are exact
    ``str``, ``int`` or ``bool`` are written inline instead of recursing, and map keys (a small,
    repeating vocabulary of field names) are quoted through a cache.
    """
    quote = quote_standard if standard else quote_legacy
    quote_key = functools.lru_cache(maxsize=8192)(lambda key: quote(key) + ":")
    lo, hi = -_MAX_SAFE_LONG, _MAX_SAFE_LONG

    def write(obj: Any, out: list[str]) -> None:
        t = type(obj)
        if t is str:
            out.append(quote(obj))
        elif isinstance(obj, dict):
            try:
                keys = sorted(obj)
            except TypeError:
                keys = sorted(obj, key=_mixed_key)
            append = out.append
            append("{")
            sep = ""
            for key in keys:
                value = obj[key]
                if value is None:
                    continue
                if type(key) is str:
                    append(sep + quote_key(key))
                elif isinstance(key, str):
                    append(sep + quote(key) + ":")
                elif standard:
                    append(sep + '"' + _scalar_key(key) + '":')
                else:
                    append(sep + _scalar_key(key) + ":")
                sep = ","
                vt = type(value)
                if vt is str:
                    append(quote(value))
                elif vt is bool:
                    append("true" if value else "false")
                elif vt is int and (not standard or lo <= value <= hi):
                    append(int.__repr__(value))
                else:
                    write(value, out)
            append("}")
        elif isinstance(obj, list | tuple | set | frozenset):
            seq: Any = obj
            if isinstance(obj, set | frozenset):
                try:
                    seq = sorted(obj)
                except TypeError:
                    seq = list(obj)
            out.append("[")
            sep = ""
            for value in seq:
                if sep:
                    out.append(sep)
                sep = ","
                write(value, out)
            out.append("]")
        elif isinstance(obj, Mapping):
            write(dict(obj), out)
        else:
            out.append(_scalar_text(obj, standard, quote))

    return write


def _scalar_text(obj: Any, standard: bool, quote: Callable[[str], str]) -> str:
    """A value that is no container, as one feature set writes it."""
    if obj is None:
        return "null"
    if isinstance(obj, str):
        return quote(obj)
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, int):
        text = int.__repr__(obj)
        return '"' + text + '"' if standard and abs(obj) > _MAX_SAFE_LONG else text
    if isinstance(obj, float):
        return _float_text(obj)
    if isinstance(obj, bytes | bytearray | memoryview):
        return '"' + base64.b64encode(bytes(obj)).decode("ascii") + '"'
    if isinstance(obj, enum.Enum):
        return quote(obj.name)
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


_write_standard: Final = _make_writer(True)
_write_legacy: Final = _make_writer(False)


def dumps_standard(obj: Any) -> bytes:
    """Standard JSON (fastjson ``BrowserCompatible|MapSortField``): pure ASCII, keys quoted."""
    out: list[str] = []
    _write_standard(obj, out)
    return "".join(out).encode("ascii")


_encode_in_order: Final = msgspec.json.Encoder().encode


def dumps_standard_in_order(obj: Any) -> bytes:
    """:func:`dumps_standard` of a value that already is as fastjson writes it: every dict holds
    its keys in the order fastjson sorts them (``str`` keys, or ``int`` keys ascending) and no
    ``None`` value, every ``int`` within +-(2^53 - 1), no set, float, bytes or enum.
    ``TopicRouteData.to_dict`` without static-topic mappings is such a value: a route missing the
    cache is encoded on the request path, and msgspec's encoder writes it ~50x faster than the
    Python writer (a route of 300 groups: milliseconds). msgspec writes '/' unescaped, which is
    fixed (a '/' only occurs inside strings); output holding any other escape, a non-ASCII
    character or DEL, where the two writers differ, is written by :func:`dumps_standard`."""
    fast = _encode_in_order(obj)
    if fast.isascii() and b"\\" not in fast and b"\x7f" not in fast:
        return fast.replace(b"/", b"\\/")
    return dumps_standard(obj)


def dumps_legacy(obj: Any) -> bytes:
    """fastjson's default output: ``int`` map keys bare, non-ASCII as raw UTF-8.

    Lone surrogates (which a Java ``String`` can hold) are written as ``?``, as Java's UTF-8
    encoder does.
    """
    out: list[str] = []
    _write_legacy(obj, out)
    return "".join(out).encode("utf-8", "replace")


# --- reader --------------------------------------------------------------------------------------

# fastjson's lexer treats \b and \f as whitespace too.
_WS: Final = re.compile(r"[ \t\n\r\f\b]*")
_NUMBER: Final = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_WORD: Final = re.compile(r"[A-Za-z_$][\w$]*")
# An unquoted object key: an identifier or a number (fastjson reads bare numeric map keys).
_BARE_KEY: Final = re.compile(r"[\w$.+\-]+")
# A single-quoted string's content up to its closing quote; escapes kept as they are.
_SQ_BODY: Final = re.compile(r"[^'\\]*(?:\\.[^'\\]*)*", re.DOTALL)
# What differs in a double-quoted literal: \' is a plain quote, a bare " needs its escape.
_SQ_REQUOTE: Final = re.compile(r"\\(.)|\"", re.DOTALL)


def _requote(m: re.Match[str]) -> str:
    escaped = m.group(1)
    if escaped is None:
        return '\\"'
    return "'" if escaped == "'" else m.group()
_LITERALS: Final[dict[str, Any]] = {"true": True, "false": False, "null": None}


def _skip_ws(s: str, i: int) -> int:
    m = _WS.match(s, i)
    return m.end() if m else i


class _LenientParser:
    """Recursive-descent reader for the non-standard JSON fastjson accepts.

    Only used when the strict parsers have already rejected the text, so clarity beats speed here.
    """

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def error(self, msg: str, i: int) -> ValueError:
        return ValueError(f"invalid JSON at offset {i}: {msg} (near {self.s[i:i + 24]!r})")

    def parse(self) -> Any:
        value, i = self.value(0, 0)
        i = _skip_ws(self.s, i)
        if i != len(self.s):
            raise self.error("unexpected data after the JSON value", i)
        return value

    def value(self, i: int, depth: int) -> tuple[Any, int]:
        s = self.s
        i = _skip_ws(s, i)
        c = s[i:i + 1]
        if c == "{":
            return self.object(i + 1, depth + 1)
        if c == "[":
            return self.array(i + 1, depth + 1)
        if c == '"':
            return scanstring(s, i + 1, False)
        if c == "'":
            return self.single_quoted(i + 1)
        if not c:
            raise self.error("unexpected end of input", i)
        m = _NUMBER.match(s, i)
        if m:
            text = m.group()
            number: Any = float(text) if any(x in text for x in ".eE") else int(text)
            return number, m.end()
        m = _WORD.match(s, i)
        if m and m.group() in _LITERALS:
            return _LITERALS[m.group()], m.end()
        raise self.error("unexpected character", i)

    def single_quoted(self, i: int) -> tuple[str, int]:
        s = self.s
        body = _SQ_BODY.match(s, i)
        assert body is not None  # the pattern matches the empty string
        end = body.end()
        if s[end:end + 1] != "'":
            raise self.error("unterminated string", i - 1)
        # Re-express the content as a double-quoted literal and let the stdlib decode the
        # escapes (\n, \uXXXX, ...) exactly as it would in a standard string. Whole-string
        # regular expressions: a character at a time, an 8 MB header held the loop for 1.2 s.
        literal = _SQ_REQUOTE.sub(_requote, body.group())
        text, _ = scanstring(literal + '"', 0, False)
        return text, end + 1

    def key(self, i: int) -> tuple[str, int]:
        s = self.s
        c = s[i:i + 1]
        if c == '"':
            return scanstring(s, i + 1, False)
        if c == "'":
            return self.single_quoted(i + 1)
        m = _BARE_KEY.match(s, i)
        if not m:
            raise self.error("expected an object key", i)
        return m.group(), m.end()

    def object(self, i: int, depth: int) -> tuple[dict[str, Any], int]:
        if depth > MAX_JSON_DEPTH:
            raise JsonTooDeep
        s = self.s
        result: dict[str, Any] = {}
        i = _skip_ws(s, i)
        if s[i:i + 1] == "}":
            return result, i + 1
        while True:
            k, i = self.key(_skip_ws(s, i))
            i = _skip_ws(s, i)
            if s[i:i + 1] != ":":
                raise self.error("expected ':' after an object key", i)
            result[k], i = self.value(i + 1, depth)
            done, i = self.after_member(i, "}", "an object")
            if done:
                return result, i

    def array(self, i: int, depth: int) -> tuple[list[Any], int]:
        if depth > MAX_JSON_DEPTH:
            raise JsonTooDeep
        s = self.s
        result: list[Any] = []
        i = _skip_ws(s, i)
        if s[i:i + 1] == "]":
            return result, i + 1
        while True:
            value, i = self.value(i, depth)
            result.append(value)
            done, i = self.after_member(i, "]", "an array")
            if done:
                return result, i

    def after_member(self, i: int, close: str, where: str) -> tuple[bool, int]:
        """After a member of an object or array: (True, past ``close``) at its end, a trailing
        comma allowed; else (False, where the next member starts)."""
        s = self.s
        i = _skip_ws(s, i)
        c = s[i:i + 1]
        if c == close:
            return True, i + 1
        if c != ",":
            raise self.error(f"expected ',' or '{close}' in {where}", i)
        i = _skip_ws(s, i + 1)
        if s[i:i + 1] == close:  # trailing comma
            return True, i + 1
        return False, i


# Strict standard JSON, tried before anything else. msgspec accepts a subset of what json.loads
# accepts and answers it identically (exact big ints, last duplicate key wins); whatever it
# rejects (a BOM, NaN, lone surrogates, invalid UTF-8, fastjson's extensions) takes the slower
# paths below. orjson is about as fast but turns integers past 64 bits into floats.
strict_loads: Callable[[Any], Any] = msgspec.json.decode

# The deepest nesting any reader here accepts. A NameServer body nests at most six levels (a
# registration's topic attributes); the parsers' own guard is the interpreter's recursion limit,
# which depends on the caller's stack and costs a traceback of ~1,000 frames when it trips.
MAX_JSON_DEPTH: Final = 100


class JsonTooDeep(ValueError):
    """JSON nested deeper than :data:`MAX_JSON_DEPTH` levels."""

    def __init__(self) -> None:
        super().__init__(f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels")


def depth_checked(value: Any, data: bytes | bytearray | memoryview | str) -> Any:
    """``value`` (parsed from ``data``) when it nests at most :data:`MAX_JSON_DEPTH` levels;
    JsonTooDeep otherwise. Text with fewer brackets than the limit cannot nest deeper, so most
    bodies are never walked."""
    if not isinstance(value, dict | list):
        return value
    if isinstance(data, memoryview):
        data = bytes(data)
    opens = data.count("{" if isinstance(data, str) else b"{") + data.count(
        "[" if isinstance(data, str) else b"[")
    if opens <= MAX_JSON_DEPTH:
        return value
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                if depth >= MAX_JSON_DEPTH:
                    raise JsonTooDeep
                stack.append((child, depth + 1))
    return value


def loads_standard(data: bytes | str) -> Any:
    """:func:`json.loads`, nesting bounded to :data:`MAX_JSON_DEPTH` (JsonTooDeep)."""
    try:
        return depth_checked(json.loads(data), data)
    except RecursionError:
        raise JsonTooDeep from None


_UNREAD: Final = object()


def _read_bounded(read: Callable[[Any], Any], data: Any) -> Any:
    """``read(data)``, nesting bounded; :data:`_UNREAD` for text ``read`` does not take."""
    try:
        return depth_checked(read(data), data)
    except RecursionError:
        raise JsonTooDeep from None
    except JsonTooDeep:
        raise
    except ValueError:  # msgspec.DecodeError, JSONDecodeError, UnicodeDecodeError
        return _UNREAD


def loads_lenient(data: bytes | bytearray | memoryview | str,
                  lenient_max: int | None = None) -> Any:
    """Parse JSON the way fastjson accepts it; return plain Python objects.

    Standard JSON goes straight through :data:`strict_loads`, then :func:`json.loads` (the fast
    paths for every well-formed body). Only when both fail does a slower lenient reader run,
    accepting unquoted keys (``{0:"a"}``, ``{topic:"t"}``), single-quoted strings, trailing
    commas and raw control characters in strings.

    Object keys always come back as ``str``: a bare ``{0:...}`` and a quoted ``{"0":...}`` give the
    same ``{"0": ...}``, so callers see one shape whichever encoder the sender used. Bytes are
    decoded as UTF-8 with invalid sequences replaced (U+FFFD), as Java's ``new String(bytes,
    UTF_8)`` does. Raises :class:`ValueError` with the offset and a snippet on anything else,
    :class:`JsonTooDeep` (one) for nesting deeper than :data:`MAX_JSON_DEPTH`, whichever reader
    finds it. With ``lenient_max``, text longer than that which only the lenient reader could
    read is refused instead (that reader runs at Python speed).
    """
    if not isinstance(data, bytes | bytearray | memoryview | str):
        raise TypeError(f"JSON input must be bytes or str, not {type(data).__name__}")
    value = _read_bounded(strict_loads, data)
    if value is not _UNREAD:
        return value
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    value = _read_bounded(json.loads, text)
    if value is not _UNREAD:
        return value
    if lenient_max is not None and len(text) > lenient_max:
        raise ValueError(f"invalid JSON: {len(text)} characters of non-standard JSON (read "
                         f"leniently up to {lenient_max})")
    try:
        return _LenientParser(text).parse()
    except RecursionError:
        raise JsonTooDeep from None
    except JsonTooDeep:
        raise
    except ValueError as exc:
        raise ValueError(str(exc) if str(exc).startswith("invalid JSON") else
                         f"invalid JSON: {exc}") from None
