"""Input rules applied before anything is written. Each failure names the offending field.

Two kinds of rule. What users create through nsfleet's own HTTP API and admin codes follows
RocketMQ's TopicValidator (``topic``). What a broker registers is never held to stricter rules
than the Java NameServer holds it (it checks nothing): ``registered_topic`` refuses only what
cannot be stored, and then only that one topic is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from nsfleet.domain.errors import ValidationError
from nsfleet.domain.excerpt import excerpt

TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")  # RocketMQ TopicValidator.VALID_PATTERN_STR
TOPIC_MAX_LEN = 127
# Cluster and broker names are key components: no ':' (the separator before the last component)
# and no control characters. Anything else a broker may call itself (a host name) is fine.
NAME_RE = re.compile(r"^[^:\x00-\x1f\x7f]+$")
NAME_MAX_LEN = 255
# A registered topic is stored as sent unless it cannot be: longer than this, a control character,
# or what the change feed uses as its syntax (',' between topics, '*' and a leading '@').
REGISTERED_TOPIC_MAX_LEN = 4096
_UNSTORABLE_TOPIC_RE = re.compile(r"[,\x00-\x1f\x7f]")
JAVA_INT_MIN, JAVA_INT_MAX = -(1 << 31), (1 << 31) - 1
JAVA_LONG_MIN, JAVA_LONG_MAX = -(1 << 63), (1 << 63) - 1
ADDR_RE = re.compile(r"^([^\s{}]+):(\d{1,5})$")
ADDR_MAX_LEN = 255
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
MAX_QUEUE_NUMS = 1024


def topic(value: object, field: str = "topic") -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required")
    if len(value) > TOPIC_MAX_LEN:
        raise ValidationError(field, f"longer than {TOPIC_MAX_LEN} characters")
    if not TOPIC_RE.match(value):
        raise ValidationError(field, f"{value!r} does not match {TOPIC_RE.pattern}")
    return value


def name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required")
    if len(value) > NAME_MAX_LEN or not NAME_RE.match(value):
        raise ValidationError(field, f"{value!r} must have no ':' or control character, "
                                     f"at most {NAME_MAX_LEN} characters")
    return value


def registered_topic(value: str) -> str | None:
    """Why a topic a broker registered cannot be stored, or None when it can."""
    if not value:
        return "an empty topic name"
    if len(value) > REGISTERED_TOPIC_MAX_LEN:
        return f"a topic name longer than {REGISTERED_TOPIC_MAX_LEN} characters"
    if unstorable_character(value) or value == "*" or value.startswith("@"):
        return "a topic name with ',', a control character, a leading '@' or only '*'"
    return None


def unstorable_character(text: str) -> bool:
    """Whether ``text`` holds a character no stored topic name may hold."""
    return _UNSTORABLE_TOPIC_RE.search(text) is not None


def addr(value: object, field: str = "brokerAddr") -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required")
    m = ADDR_RE.match(value)
    if len(value) > ADDR_MAX_LEN or not m or int(m.group(2)) > 65535:
        raise ValidationError(field, f"{value!r} is not host:port")
    return value


def optional_addr(value: object, field: str) -> str:
    return "" if value in (None, "") else addr(value, field)


def stored_text(value: object, field: str, max_len: int = NAME_MAX_LEN) -> str:
    """A free-form value stored but never part of a key (haServerAddr, zoneName, a filter
    server address): any printable text up to ``max_len`` characters."""
    if not isinstance(value, str) or len(value) > max_len or not value.isprintable():
        raise ValidationError(field, f"must be printable text, at most {max_len} characters")
    return value


def integer(value: object, field: str, lo: int, hi: int | None = None) -> int:
    if value is None:
        raise ValidationError(field, "is required")
    if isinstance(value, bool):
        raise ValidationError(field, "must be an integer")
    try:
        n = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ValidationError(field, f"{value!r} is not an integer") from None
    if isinstance(value, float) and value != n:
        raise ValidationError(field, f"{value!r} is not an integer")
    if n < lo or (hi is not None and n > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
        raise ValidationError(field, f"{n} must be {bound}")
    return n


def broker_id(value: object, field: str = "brokerId") -> int:
    return integer(value, field, 0)


def perm(value: object, field: str = "perm") -> int:
    return integer(value, field, 0, 15)  # PermName: PRIORITY, READ, WRITE, INHERIT


def queue_nums(value: object, field: str) -> int:
    return integer(value, field, 0, MAX_QUEUE_NUMS)


def namespace(value: object, field: str = "namespace") -> str:
    if not isinstance(value, str) or not NAMESPACE_RE.match(value):
        raise ValidationError(field, f"{value!r} must match {NAMESPACE_RE.pattern}")
    return value


KV_PART_MAX_LEN = 32_768


def kv_part(value: object, field: str) -> str:
    """A KV namespace or key: any text that can be part of a Redis key name, which is stricter
    than KVConfigManager (docs/compatibility.md): not empty, no control character (the rule
    stored topic names follow), and no length that no real configuration needs."""
    if not isinstance(value, str):
        raise ValidationError(field, "is required")
    if not value:
        raise ValidationError(field, "must not be empty")
    if len(value) > KV_PART_MAX_LEN:
        raise ValidationError(field, f"longer than {KV_PART_MAX_LEN} characters")
    if _CONTROL_RE.search(value):
        raise ValidationError(field, f"{excerpt(value)} has a control character")
    return value


def routable(value: object) -> bool:
    """A topic name that can have a route: any name a broker's registration can store. Asked
    about any other name, Java finds no route: TOPIC_NOT_EXIST, not a validation error."""
    return isinstance(value, str) and registered_topic(value) is None


def route_topic(value: object, field: str = "topic") -> str:
    """A topic asked for by name (a route, a long-poll): any name that can have a route."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required")
    reason = registered_topic(value)
    if reason is not None:
        raise ValidationError(field, f"{value[:200]!r} is {reason}")
    return value


def is_valid(rule: Callable[..., object], value: object, field: str = "value") -> bool:
    """Whether ``value`` passes ``rule``: a lookup by a name that no write would accept can
    only find nothing, which is what Java answers for an unknown name."""
    try:
        rule(value, field)
    except ValidationError:
        return False
    return True
