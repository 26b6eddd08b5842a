"""How Java reads the values a NameServer receives: one place for every literal rule.

Header fields go through ``Long.parseLong`` / ``Integer.parseInt`` / ``Boolean.parseBoolean``
(RemotingCommand.decodeCommandCustomHeaderDirectly swallows a failure and leaves the field null);
JSON body values go through fastjson's coercion when it fills a Java ``int`` / ``boolean`` field.
Both protocols, and the HTTP API's JSON, use these functions.
"""

from __future__ import annotations

import re
from typing import Any, Final

from nsfleet.domain.errors import ValidationError

LONG_MIN: Final = -(1 << 63)
LONG_MAX: Final = (1 << 63) - 1
INT_MIN: Final = -(1 << 31)
INT_MAX: Final = (1 << 31) - 1
# An optional sign and ASCII digits, nothing else (Python's int() would also take whitespace and
# underscores).
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")


def parse_integer(raw: str | None, lo: int = LONG_MIN, hi: int = LONG_MAX) -> int | None:
    """``Long.parseLong`` (or ``Integer.parseInt`` with the int bounds): None when ``raw`` is
    missing, not a plain decimal literal, or out of range."""
    if raw is None or len(raw) > 40 or not _INTEGER.fullmatch(raw):
        return None
    value = int(raw)
    return value if lo <= value <= hi else None


def parse_int(raw: str | None) -> int | None:
    """``Integer.parseInt``."""
    return parse_integer(raw, INT_MIN, INT_MAX)


def parse_boolean(raw: str | None) -> bool:
    """``Boolean.parseBoolean``: only a case-insensitive "true", with no surrounding space."""
    return raw is not None and raw.lower() == "true"


def to_int(value: Any, field: str, default: int = 0) -> int:
    """A JSON value filling a Java ``int``/``long`` field, as fastjson converts it: a number with
    no fraction, a boolean, or a decimal string (surrounding blanks ignored); null is the default.
    Anything else is a ValidationError naming ``field``."""
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and (parsed := parse_integer(value.strip())) is not None:
        return parsed
    raise ValidationError(field, f"is not an integer: {value!r:.60}")


def to_bool(value: Any, field: str, default: bool = False) -> bool:
    """A JSON value filling a Java ``boolean`` field: true/false, a number (non-zero is true) or
    the strings "true"/"false" in any case; null is the default."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValidationError(field, f"is not a boolean: {value!r:.60}")


def to_object(value: Any, field: str) -> dict[str, Any]:
    """A JSON value filling a Java object or map field: null reads as empty."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(field, f"is not a JSON object: {value!r:.80}")
    return value
