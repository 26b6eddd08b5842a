"""Loads the Lua scripts of ``lua/`` and resolves their ``--- @include "name"`` lines.

The scripts ship inside the wheel as ``nsfleet/lua``; in a source checkout they are read from the
top-level ``lua/`` directory.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

INCLUDE_RE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)
# Scripts that change tables (and publish on the change feed); the rest only read.
WRITE_SCRIPTS = frozenset({
    "register_broker", "unregister_broker", "sweep", "delete_topic", "register_topic",
    "write_perm", "kv_put", "kv_delete",
})
SCRIPT_NAMES = (
    "register_broker", "unregister_broker", "heartbeat", "sweep", "route", "cluster_info",
    "delete_topic", "register_topic", "write_perm", "topic_list", "kv_put", "kv_delete",
)


def lua_dir() -> Path:
    packaged = Path(__file__).parent / "lua"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "lua"


@cache
def source(name: str) -> str:
    """The script's text with every include inlined (each include once)."""
    base = lua_dir()
    text = (base / f"{name}.lua").read_text()
    included: set[str] = set()

    def inline(match: re.Match[str]) -> str:
        inc = match.group(1)
        if inc in included:
            return ""
        included.add(inc)
        return (base / "includes" / f"{inc}.lua").read_text()

    return INCLUDE_RE.sub(inline, text)
