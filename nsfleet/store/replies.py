"""What the scripts answer, decoded once. Every script returns a table led by a status word: "ok"
for the normal answer, the others as each script's header lists them
(tests/unit/store/test_scripts.py checks both agree). ``decode`` checks the status against the
script's and returns it as a ``Status``, so no caller compares strings (BullMQ keeps its error
codes as one enum likewise)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple


class Status(StrEnum):
    OK = "ok"
    FENCED = "fenced"  # register_broker: an older stateVersion, refused as Java does
    REJECTED = "rejected"  # register_broker: the single-topic guard
    FULL = "full"  # register_broker probe: send the table whole
    CHUNK = "chunk"  # register_broker probe: send the table in chunks
    HEAD = "head"  # register_broker: the head of a chunked registration is written
    DRAIN = "drain"  # register_broker: a removed group of the name is still draining
    STALE = "stale"  # register_topics: a newer registration (or removal) took over
    KEPT = "kept"  # unregister_broker: another connection keeps the broker
    UNKNOWN = "unknown"  # heartbeat: no live broker
    HELD = "held"  # sweep: the mass-expiry guard held the due brokers; layout_move: not begun
    LOST = "lost"  # layout_move: the caller's move is no longer the one under way
    NONE = "none"  # route: no route; controller_elect: no candidate, the master cleared
    # The controller's scripts (each header says which code of Java's each one is).
    UNREGISTERED = "unregistered"
    TAKEN = "taken"
    UNASSIGNED = "unassigned"
    STILL = "still"
    FAILED = "failed"
    SAME = "same"
    MASTER = "master"
    STRANGER = "stranger"
    DEAD = "dead"
    LEADERLESS = "leaderless"
    ALIVE = "alive"
    BEHIND = "behind"  # controller_import: the fleet's masterEpoch is newer
    CONFLICT = "conflict"  # controller_import: the same masterEpoch, another master
    # A queue-data script assembled for another layout than the store's (P:layout): called
    # again in the store's (store/script_calls.py).
    LAYOUT = "layout"


class ScriptReplyError(RuntimeError):
    """A script answered with something other than a table led by a status it may return."""


SCRIPT_STATUSES: dict[str, frozenset[Status]] = {
    "register_broker": frozenset({Status.OK, Status.FENCED, Status.REJECTED, Status.FULL,
                                  Status.CHUNK, Status.HEAD, Status.DRAIN}),
    "register_topics": frozenset({Status.OK, Status.STALE}),
    # The call's status; each chunk's, "ok" or "stale", is among the values.
    "register_topics_joint": frozenset({Status.OK}),
    "register_commit": frozenset({Status.OK}),
    "register_data_version": frozenset({Status.OK}),
    "drain_cleanup": frozenset({Status.OK}),
    "clear_write_perm": frozenset({Status.OK}),
    "unregister_broker": frozenset({Status.OK, Status.KEPT}),
    "heartbeat": frozenset({Status.OK, Status.UNKNOWN}),
    "sweep": frozenset({Status.OK, Status.HELD}),
    "route": frozenset({Status.OK, Status.NONE}),
    "cluster_info": frozenset({Status.OK}),
    "topic_list": frozenset({Status.OK}),
    "delete_topic": frozenset({Status.OK}),
    "register_topic": frozenset({Status.OK}),
    "write_perm": frozenset({Status.OK}),
    "kv_put": frozenset({Status.OK}),
    "kv_delete": frozenset({Status.OK}),
    "topic_summary": frozenset({Status.OK}),
    "controller_apply_id": frozenset({Status.OK, Status.UNREGISTERED, Status.TAKEN}),
    "controller_register": frozenset({Status.OK, Status.UNKNOWN, Status.UNASSIGNED}),
    "controller_heartbeat": frozenset({Status.OK}),
    "controller_elect": frozenset({Status.OK, Status.STILL, Status.UNKNOWN, Status.NONE,
                                   Status.FAILED, Status.FENCED}),
    "controller_inactive": frozenset({Status.OK, Status.KEPT}),
    "controller_alter_sync_state_set": frozenset({
        Status.OK, Status.UNKNOWN, Status.SAME, Status.MASTER, Status.FENCED, Status.STALE,
        Status.STRANGER, Status.DEAD, Status.LEADERLESS}),
    "controller_clean": frozenset({Status.OK, Status.MASTER, Status.ALIVE, Status.UNKNOWN}),
    "controller_scan": frozenset({Status.OK}),
    "controller_import": frozenset({Status.OK, Status.SAME, Status.BEHIND, Status.CONFLICT}),
    "layout_init": frozenset({Status.OK}),
    "layout_move": frozenset({Status.OK, Status.HELD, Status.LOST}),
}
# Every script that reads or writes queue data checks the layout it was assembled for.
for _name in ("register_broker", "register_topics", "register_topics_joint", "register_commit",
              "unregister_broker", "sweep", "drain_cleanup", "clear_write_perm", "route",
              "topic_summary", "topic_list", "register_topic", "delete_topic", "write_perm"):
    SCRIPT_STATUSES[_name] |= {Status.LAYOUT}
del _name


class Reply(NamedTuple):
    status: Status
    values: list[Any]  # what follows the status (see the script's header)


def decode(name: str, raw: Any) -> Reply:
    """Split a script's raw reply into its status and the values after it, checking the
    status against those the script may return."""
    allowed = SCRIPT_STATUSES.get(name)
    if allowed is None:
        raise ScriptReplyError(f"{name}: no reply statuses declared for this script")
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
        raise ScriptReplyError(f"{name}: expected a table led by a status string, got {raw!r:.200}")
    if raw[0] not in allowed:
        raise ScriptReplyError(f"{name}: unexpected status {raw[0]!r} (expected one of "
                               f"{', '.join(sorted(allowed))})")
    return Reply(Status(raw[0]), raw[1:])
