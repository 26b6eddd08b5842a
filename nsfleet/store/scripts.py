"""Loads the Lua scripts of ``lua/``, resolves their ``--- @include "name"`` lines and declares
their arguments.

The scripts ship inside the wheel as ``nsfleet/lua``; in a source checkout they are read from the
top-level ``lua/`` directory. A script ``<name>.lua`` and an include ``includes/<name>.lua`` may
both carry ``--- @include "other"`` lines (an include lists them at its top); they are resolved
depth-first, so every include is inlined exactly once per script, after everything it includes
and before whatever includes it.

Arguments go by name: each script's NamedTuple below lists them in ARGV order, and the loaded
script opens with a local per argument generated from it (``arg_cluster`` is ARGV[1] of
register_broker.lua), so Python and Lua share one list of positions. Locals, not a table of
them: a table would be one more allocation for Lua's collector in every call. A script's last
field may be a list (``REST``): its items follow the other arguments, and Lua sees them as one
table.

Run as a file (``python3 -P nsfleet/store/scripts.py DIR``, standard library only), it writes
every script as Redis loads it into DIR for luacheck (``.ci/run``).
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

INCLUDE_RE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)
TOP_LEVEL_LOCAL_RE = re.compile(r"^local (?:function )?([\w, ]+?)(?: =|\()", re.MULTILINE)
TOP_LEVEL_FUNCTION_RE = re.compile(r"^local function (\w+)\(")
NAME_RE = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
COMMENT_RE = re.compile(r"--\[\[.*?\]\]|^[ \t]*--[^\n]*", re.MULTILINE | re.DOTALL)
# Writes acknowledged to a client, which wait for replicas with --min-replica-acks. Reads are
# not; nor are heartbeats, the sweep and the drains, whose loss in a failover the next
# heartbeat or sweep repairs.
ACKED_WRITES = frozenset({
    "register_broker", "register_topics", "register_topics_joint", "register_commit",
    "unregister_broker", "delete_topic", "register_topic", "write_perm", "kv_put", "kv_delete",
    "controller_apply_id", "controller_register", "controller_elect", "controller_inactive",
    "controller_alter_sync_state_set", "controller_clean",
})


# --- the arguments of each script, in ARGV order (its header documents each) ---------------------


class RegisterBrokerArgs(NamedTuple):
    cluster: str
    addr: str
    name: str
    id: int
    ha_addr: str
    zone: str
    timeout_ms: int
    acting_master: str
    dv_counter: int
    dv_timestamp: int
    state_version: int
    filter_count: int
    topic_count: int
    delete_absent: str
    want_kv: str
    topics_sent: int
    connection: str
    mapping_count: int
    digest: str
    mode: str
    row_budget: int
    topics: bytes | str
    mappings: bytes | str
    filters: Sequence[str]


class RegisterTopicsArgs(NamedTuple):
    cluster: str
    addr: str
    name: str
    generation: str
    force: str
    clear_write: str
    topics: bytes | str
    mappings: bytes | str
    absent: bytes | str
    fresh: str
    absent_lists: bytes | str  # "": every list of the group


class RegisterTopicsJointArgs(NamedTuple):
    # per chunk: cluster, addr, name, generation, clear_write, topics (store/joint_chunks.py)
    chunks: Sequence[Any]


class RegisterCommitArgs(NamedTuple):
    cluster: str
    addr: str
    name: str
    id: int
    generation: str
    digest: str
    want_kv: str
    epoch: int
    synced: str
    added_epoch: int


class RegisterDataVersionArgs(NamedTuple):
    brokers: Sequence[Any]  # per broker: cluster, addr, generation, dv counter, dv timestamp


class UnregisterBrokerArgs(NamedTuple):
    cluster: str
    addr: str
    name: str
    connection: str
    row_budget: int


class HeartbeatArgs(NamedTuple):
    cluster: str
    addr: str
    compare: str
    dv_counter: int | str = ""
    dv_timestamp: int | str = ""
    state_version: int | str = ""


class SweepArgs(NamedTuple):
    now_ms: int | str
    batch: int
    guard_share: float
    guard_max_hold_ms: int
    row_budget: int


class RouteArgs(NamedTuple):
    topic: str
    order_conf: str


class ClusterInfoArgs(NamedTuple):
    pass


class DeleteTopicArgs(NamedTuple):
    topic: str
    cluster: str
    limit: int


class RegisterTopicArgs(NamedTuple):
    topic: str
    groups: Sequence[Any]  # per group: brokerName, readQueueNums, writeQueueNums, perm, flag


class WritePermArgs(NamedTuple):
    name: str
    op: str
    cursor: str
    count: int


class TopicListArgs(NamedTuple):
    mode: str
    cluster: str = ""


class KvPutArgs(NamedTuple):
    namespace: str
    key: str
    value: str
    order_topic: str


class KvDeleteArgs(NamedTuple):
    key: str
    order_topic: str


class DrainCleanupArgs(NamedTuple):
    name: str
    limit: int


class ClearWritePermArgs(NamedTuple):
    name: str
    count: int


class TopicSummaryArgs(NamedTuple):
    topics: Sequence[str]


# --- the controller's scripts (lua/controller_*.lua) ---------------------------------------------


class ControllerApplyIdArgs(NamedTuple):
    cluster: str
    name: str
    id: int
    check_code: str


class ControllerRegisterArgs(NamedTuple):
    name: str
    id: int
    addr: str


class ControllerHeartbeatArgs(NamedTuple):
    cluster: str
    name: str
    addr: str
    id: int
    epoch: int
    max_offset: int
    confirm_offset: int
    timeout_ms: int
    priority: int
    connection: str


class ControllerElectArgs(NamedTuple):
    name: str
    requester: int | str
    designate: str
    unclean: str
    expected_epoch: int | str


class ControllerInactiveArgs(NamedTuple):
    name: str
    id: int
    connection: str
    grace_ms: int
    unclean: str


class ControllerAlterSyncStateSetArgs(NamedTuple):
    name: str
    master_id: int
    master_epoch: int
    sss_epoch: int
    ids: Sequence[int]


class ControllerCleanArgs(NamedTuple):
    name: str
    living: str
    ids: Sequence[int]


class ControllerImportArgs(NamedTuple):
    cluster: str
    name: str
    master_id: int | str  # "" when the set has no master
    master_epoch: int
    sss: str
    sss_epoch: int
    grace_ms: int
    replicas: Sequence[str]  # "<id>;<address>;<1|0>"


class LayoutInitArgs(NamedTuple):
    old_workers: str


class LayoutMoveArgs(NamedTuple):
    op: str  # "begin", "renew", "copy" or "finish"
    owner: str
    lease_ms: int
    name: str = ""
    page: int | str = ""
    topics: Sequence[str] = ()


class ControllerScanArgs(NamedTuple):
    batch: int
    reelect: str


ARGS: dict[str, type[tuple[Any, ...]]] = {
    "register_broker": RegisterBrokerArgs, "unregister_broker": UnregisterBrokerArgs,
    "heartbeat": HeartbeatArgs, "sweep": SweepArgs, "route": RouteArgs,
    "cluster_info": ClusterInfoArgs, "delete_topic": DeleteTopicArgs,
    "register_topic": RegisterTopicArgs, "write_perm": WritePermArgs,
    "topic_list": TopicListArgs, "kv_put": KvPutArgs, "kv_delete": KvDeleteArgs,
    "register_topics": RegisterTopicsArgs, "register_topics_joint": RegisterTopicsJointArgs,
    "register_commit": RegisterCommitArgs, "drain_cleanup": DrainCleanupArgs,
    "clear_write_perm": ClearWritePermArgs,
    "topic_summary": TopicSummaryArgs, "register_data_version": RegisterDataVersionArgs,
    "controller_apply_id": ControllerApplyIdArgs, "controller_register": ControllerRegisterArgs,
    "controller_heartbeat": ControllerHeartbeatArgs, "controller_elect": ControllerElectArgs,
    "controller_inactive": ControllerInactiveArgs,
    "controller_alter_sync_state_set": ControllerAlterSyncStateSetArgs,
    "controller_clean": ControllerCleanArgs, "controller_scan": ControllerScanArgs,
    "controller_import": ControllerImportArgs, "layout_init": LayoutInitArgs,
    "layout_move": LayoutMoveArgs,
}
SCRIPT_NAMES = tuple(ARGS)
# Scripts whose last argument is a list of any length, sent as the last ARGV items.
REST = frozenset({"register_broker", "register_data_version", "register_topic",
                  "register_topics_joint",
                  "topic_summary", "controller_alter_sync_state_set", "controller_clean",
                  "controller_import", "layout_move"})


def argv(name: str, args: tuple[Any, ...]) -> list[Any]:
    """Script ``name``'s ARGV from ``args``, an instance of its NamedTuple (``ARGS``)."""
    if type(args) is not ARGS[name]:
        raise TypeError(f"{name}.lua takes {ARGS[name].__name__}, not {type(args).__name__}")
    if name in REST:
        return [*args[:-1], *args[-1]]
    return list(args)


def args_prelude(name: str) -> str:
    """The Lua that names script ``name``'s ARGV: a local ``arg_<field>`` per argument."""
    fields = ARGS[name]._fields  # type: ignore[attr-defined]
    if not fields:
        return ""
    rest = fields[-1] if name in REST else None
    named = fields[:-1] if rest else fields
    lines = [f"-- ARGV by name, generated from {ARGS[name].__name__} in nsfleet/store/scripts.py."]
    lines += [f"local arg_{field} = ARGV[{i}]" for i, field in enumerate(named, 1)]
    if rest:
        n = len(named)
        lines += [f"local arg_{rest} = {{}}",
                  f"for i = {n + 1}, #ARGV do arg_{rest}[i - {n}] = ARGV[i] end"]
    return "\n".join(lines) + "\n"


class IncludeError(Exception):
    """An ``--- @include`` that cannot be resolved: a missing include file or an include cycle."""


def lua_dir() -> Path:
    package = Path(__file__).resolve().parent.parent  # nsfleet/
    packaged = package / "lua"
    if packaged.is_dir():
        return packaged
    return package.parent / "lua"


# The queue data's layouts (docs/queue-data-layouts.md): "2", one hash per topic, what a new store
# holds; "1", one hash per (topic, group) row, what stores written before 2026-11-28 hold until
# they move. A script is assembled once per layout: an include is read from
# includes/<layout name>/ when it is there.
LAYOUTS = {"1": "rows", "2": "topics"}
LAYOUT_ROWS, LAYOUT_TOPICS = "1", "2"
# The scripts that read or write queue data: assembled for both layouts, fenced by P:layout.
LAYOUT_SCRIPTS = frozenset({
    "register_broker", "register_topics", "register_topics_joint", "unregister_broker", "sweep",
    "drain_cleanup",
    "clear_write_perm", "route", "topic_summary", "topic_list", "register_topic", "delete_topic",
    "write_perm", "register_commit", "heartbeat",
})
# Of those, the ones that only read queue data: they go on from layout 1's keys while the store
# moves to layout 2 (P:layout "moving"); the others wait for the move to end.
LAYOUT_READS = frozenset({"route", "topic_summary", "topic_list"})


@cache
def source(name: str, base: Path | None = None, layout: str = LAYOUT_TOPICS,
           prune: bool = True) -> str:
    """The script's text with every include inlined, recursively (each include once), for
    ``layout`` (an include ``includes/<LAYOUTS[layout]>/<name>.lua`` is taken before
    ``includes/<name>.lua``), less the includes' functions it does not use (``prune``:
    without_unused_functions).

    ``base`` is the directory holding the scripts and ``includes/`` (default: ``lua_dir()``;
    tests point it at a fake one). Raises IncludeError on a missing include or an include cycle.
    """
    base = lua_dir() if base is None else base
    done: set[str] = set()
    inlined: list[str] = []

    def expand(text: str, stack: tuple[str, ...]) -> str:
        def inline(match: re.Match[str]) -> str:
            inc = match.group(1)
            if inc in stack:
                cycle = " -> ".join((*stack[stack.index(inc):], inc))
                raise IncludeError(f"{name}.lua: include cycle {cycle}")
            if inc in done:
                return ""
            path = base / "includes" / LAYOUTS[layout] / f"{inc}.lua"
            if not path.is_file():
                path = base / "includes" / f"{inc}.lua"
            try:
                inc_text = path.read_text()
            except FileNotFoundError:
                where = f"includes/{stack[-1]}.lua" if stack else f"{name}.lua"
                raise IncludeError(
                    f"{name}.lua: missing include {inc!r} ({path}), included by {where}") from None
            expanded = expand(inc_text, (*stack, inc))
            done.add(inc)
            inlined.append(inc_text)
            return expanded

        return INCLUDE_RE.sub(inline, text)

    text = (base / f"{name}.lua").read_text()
    if name in ARGS:  # right after the script's header (every script has one)
        header, end, body = text.partition("]]\n")
        text = header + end + args_prelude(name) + body
    text = expand(text, ())
    if not prune:
        return text
    included = set().union(*(defined_names(t) for t in inlined))
    return without_unused_functions(text, included)


def without_unused_functions(text: str, droppable: set[str]) -> str:
    """``text`` less its top-level ``local function``s named in ``droppable`` that neither its
    other code nor a function that code calls (transitively) names. A script takes from an
    include the few functions it needs: every closure left in costs each call of the script
    its creation, and Lua's collector its garbage. A function's body runs from its
    ``local function`` line to the first ``end`` in column 0, or is that one line when the next
    is not indented. Names are found in the code less whole-line and block comments (a name in
    a string or a trailing comment keeps a function in: never one too few)."""
    lines = text.split("\n")
    pieces: list[tuple[str | None, str]] = []  # (the function's name, or None: other code)
    i = 0
    while i < len(lines):
        match = TOP_LEVEL_FUNCTION_RE.match(lines[i])
        if match is None or match.group(1) not in droppable:
            pieces.append((None, lines[i]))
            i += 1
            continue
        last = i
        if i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t"):
            last = lines.index("end", i + 1)
        pieces.append((match.group(1), "\n".join(lines[i:last + 1])))
        i = last + 1

    def names(code: str) -> set[str]:
        return set(NAME_RE.findall(COMMENT_RE.sub("", code)))

    calls = {fn: names(code) for fn, code in pieces if fn is not None}
    todo = list(names("\n".join(code for fn, code in pieces if fn is None)) & calls.keys())
    used: set[str] = set()
    while todo:
        fn = todo.pop()
        if fn not in used:
            used.add(fn)
            todo.extend((calls[fn] - used) & calls.keys())
    return "\n".join(code for fn, code in pieces if fn is None or fn in used)


def defined_names(text: str) -> set[str]:
    """The top-level locals a Lua file defines (an include's interface)."""
    names: set[str] = set()
    for match in TOP_LEVEL_LOCAL_RE.finditer(text):
        names.update(n.strip() for n in match.group(1).split(","))
    return names


def write_for_luacheck(dest: Path) -> None:
    """Every script as Redis loads it, into ``dest``, for luacheck: an include's top-level
    locals are its interface, which a script uses in part, and an argument may be there for
    SLOWLOG readers only (register_broker.lua's topic count), so those are exempt from W211
    (unused variable); everything else an assembled script defines must be used."""
    exported = set().union(*(defined_names(path.read_text())
                             for path in (lua_dir() / "includes").glob("**/*.lua")))
    codes = " ".join(["211/arg_.*", *(f"211/{n}" for n in sorted(exported))])
    ignore = "".join(f"{line}\n" for line in textwrap.wrap(
        codes, 100, initial_indent="-- luacheck: ignore ", subsequent_indent="-- luacheck: ignore ",
        break_on_hyphens=False))
    dest.mkdir(parents=True, exist_ok=True)
    for name in SCRIPT_NAMES:
        (dest / f"{name}.lua").write_text(ignore + source(name))
        if name in LAYOUT_SCRIPTS:
            (dest / f"{name}.rows.lua").write_text(ignore + source(name, layout=LAYOUT_ROWS))


if __name__ == "__main__":
    write_for_luacheck(Path(sys.argv[1]))
