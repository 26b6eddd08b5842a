"""Input rules applied before anything is written. Each failure names the offending field."""

from __future__ import annotations

import re
from collections.abc import Callable

from nsfleet.domain.errors import ValidationError

TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")  # RocketMQ TopicValidator.VALID_PATTERN_STR
TOPIC_MAX_LEN = 127
# Cluster and broker names are key components: no ':' (separator), whitespace or braces.
NAME_RE = re.compile(r"^[A-Za-z0-9_.%|-]+$")
NAME_MAX_LEN = 255
ADDR_RE = re.compile(r"^([^\s{}]+):(\d{1,5})$")
ADDR_MAX_LEN = 255
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
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
        raise ValidationError(field, f"{value!r} must match {NAME_RE.pattern}, "
                                     f"at most {NAME_MAX_LEN} characters")
    return value


def addr(value: object, field: str = "brokerAddr") -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required")
    m = ADDR_RE.match(value)
    if len(value) > ADDR_MAX_LEN or not m or int(m.group(2)) > 65535:
        raise ValidationError(field, f"{value!r} is not host:port")
    return value


def optional_addr(value: object, field: str) -> str:
    return "" if value in (None, "") else addr(value, field)


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
    return integer(value, field, 0, 7)


def queue_nums(value: object, field: str) -> int:
    return integer(value, field, 0, MAX_QUEUE_NUMS)


def namespace(value: object, field: str = "namespace") -> str:
    if not isinstance(value, str) or not NAMESPACE_RE.match(value):
        raise ValidationError(field, f"{value!r} must match {NAMESPACE_RE.pattern}")
    return value


def kv_part(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(field, "is required")
    if len(value) > 1024:
        raise ValidationError(field, "longer than 1024 characters")
    return value


def routable(value: object) -> bool:
    """A topic name that can have a route. Asked about any other name, Java finds no route:
    TOPIC_NOT_EXIST, not a validation error."""
    return (isinstance(value, str) and 0 < len(value) <= TOPIC_MAX_LEN
            and TOPIC_RE.match(value) is not None)


def is_valid(rule: Callable[..., object], value: object, field: str = "value") -> bool:
    """Whether ``value`` passes ``rule``: a lookup by a name that no write would accept can
    only find nothing, which is what Java answers for an unknown name."""
    try:
        rule(value, field)
    except ValidationError:
        return False
    return True
