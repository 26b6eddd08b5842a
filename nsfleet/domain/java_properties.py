"""``java.util.Properties`` text, read and written as Java does (UPDATE_NAMESRV_CONFIG's body,
GET_NAMESRV_CONFIG's answer)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

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
