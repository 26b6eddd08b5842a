"""Loads the Lua scripts of ``lua/`` and resolves their ``--- @include "name"`` lines.

The scripts ship inside the wheel as ``nsfleet/lua``; in a source checkout they are read from the
top-level ``lua/`` directory. A script ``<name>.lua`` and an include ``includes/<name>.lua`` may
both carry ``--- @include "other"`` lines (an include lists them at its top); they are resolved
depth-first, so every include is inlined exactly once per script, after everything it includes
and before whatever includes it.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

INCLUDE_RE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)
SCRIPT_NAMES = (
    "register_broker", "unregister_broker", "heartbeat", "sweep", "route", "cluster_info",
    "delete_topic", "register_topic", "write_perm", "topic_list", "kv_put", "kv_delete",
    "register_topics", "register_commit", "drain_cleanup", "clear_write_perm", "topic_overview",
    "register_data_version",
)
# Writes acknowledged to a client, which wait for replicas with --min-replica-acks. Reads are
# not; nor are heartbeats, the sweep and the drains, whose loss in a failover the next
# heartbeat or sweep repairs.
ACKED_WRITES = frozenset({
    "register_broker", "register_topics", "register_commit", "unregister_broker",
    "delete_topic", "register_topic", "write_perm", "kv_put", "kv_delete",
})


class IncludeError(Exception):
    """An ``--- @include`` that cannot be resolved: a missing include file or an include cycle."""


def lua_dir() -> Path:
    package = Path(__file__).resolve().parent.parent  # nsfleet/
    packaged = package / "lua"
    if packaged.is_dir():
        return packaged
    return package.parent / "lua"


@cache
def source(name: str, base: Path | None = None) -> str:
    """The script's text with every include inlined, recursively (each include once).

    ``base`` is the directory holding the scripts and ``includes/`` (default: ``lua_dir()``;
    tests point it at a fake one). Raises IncludeError on a missing include or an include cycle.
    """
    base = lua_dir() if base is None else base
    done: set[str] = set()

    def expand(text: str, stack: tuple[str, ...]) -> str:
        def inline(match: re.Match[str]) -> str:
            inc = match.group(1)
            if inc in stack:
                cycle = " -> ".join((*stack[stack.index(inc):], inc))
                raise IncludeError(f"{name}.lua: include cycle {cycle}")
            if inc in done:
                return ""
            path = base / "includes" / f"{inc}.lua"
            try:
                inc_text = path.read_text()
            except FileNotFoundError:
                where = f"includes/{stack[-1]}.lua" if stack else f"{name}.lua"
                raise IncludeError(
                    f"{name}.lua: missing include {inc!r} ({path}), included by {where}") from None
            expanded = expand(inc_text, (*stack, inc))
            done.add(inc)
            return expanded

        return INCLUDE_RE.sub(inline, text)

    return expand((base / f"{name}.lua").read_text(), ())
