"""What an error message or a log line may show of a value someone sent: its start, and its
length when that is all it shows. A value is as long as its frame allows (16 MiB); quoted whole,
one bad request wrote 8 MB to the log and kept copies of it in memory."""

from __future__ import annotations

from typing import Final

SHOWN_CHARS: Final = 200


def excerpt(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters plus ``…(N chars)`` when longer. A long
    string is cut before ``repr`` runs, so the whole value is never copied."""
    if isinstance(value, str | bytes | bytearray) and len(value) > limit:
        return f"{value[:limit]!r}…({len(value)} {'chars' if isinstance(value, str) else 'bytes'})"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…({len(text)} chars)"


def clipped(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` itself (no quotes) when short, else its start and its length."""
    return text if len(text) <= limit else f"{text[:limit]}…({len(text)} chars)"
