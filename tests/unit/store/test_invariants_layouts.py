"""tests/support/invariants.py in both queue data layouts (docs/queue-data-layouts.md): small
snapshots, as ``dump`` returns them, of a consistent store in layout 1, layout 2 and while moving,
then each with one problem injected, which ``check`` must report exactly. No Redis."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from nsfleet.store.keys import Keys, live_member
from tests.support.invariants import check, group_route

K = Keys("inv")
P = K.prefix
Snap = dict[str, Any]

# brokerName -> (cluster, addr); (topic, brokerName) -> the row's four numbers.
GROUPS = {"a": ("c1", "10.0.0.1:1"), "b": ("c1", "10.0.0.2:1")}
ROWS = {("T", "a"): ("4", "4", "6", "0"), ("T", "b"): ("8", "8", "6", "0"),
        ("U", "a"): ("4", "4", "6", "0"), ("x:y", "b"): ("1", "1", "4", "0")}
NUMBERS = {"a": "-1", "b": "-2"}


def shared(groups: dict[str, tuple[str, str]]) -> Snap:
    """Everything but the queue data: groups, members, clusters, live brokers, KV, a mapping."""
    snap: Snap = {}
    for n, (c, addr) in groups.items():
        row = {"cluster": c, "brokerName": n, "enableActingMaster": "false", "zoneName": "",
               "topicsEpoch": "3"}
        snap[K.group(n)] = row
        snap[K.members(n)] = {"0": addr}
        snap.setdefault(K.cluster(c), set()).add(n)
        snap.setdefault(K.route_groups, {})[n] = group_route(row, {"0": addr}, {})
        snap[K.broker(c, addr)] = {"cluster": c, "brokerAddr": addr, "brokerName": n}
        snap[K.reg(c, addr)] = {"brokerName": n, "brokerId": "0", "generation": "1"}
        snap.setdefault(K.deadlines, {})[live_member(c, addr)] = 1e12
    snap[K.clusters] = {c for c, _ in groups.values()}
    snap[K.seq], snap[K.rev] = "7", "12"
    snap[K.kv_namespaces] = {"ns"}
    snap[K.kv_table("ns")] = {"k": "v"}
    snap[K.kv("ns", "k")] = {"namespace": "ns", "key": "k", "value": "v"}
    snap[K.mappings("T")] = {"a": "{}"}
    return snap


def layout1(rows: dict[tuple[str, str], tuple[str, ...]] = ROWS,
            groups: dict[str, tuple[str, str]] = GROUPS) -> Snap:
    snap = shared(groups)
    for (t, n), (rq, wq, perm, flag) in rows.items():
        snap[K.queue(t, n)] = {"topic": t, "brokerName": n, "readQueueNums": rq,
                               "writeQueueNums": wq, "perm": perm, "topicSysFlag": flag}
        snap.setdefault(K.topic(t), set()).add(NUMBERS[n])
        snap.setdefault(K.broker_topics(n), set()).add(t)
        snap.setdefault(K.topics, set()).add(t)
    snap[K.group_ids] = dict(NUMBERS)
    snap[K.group_names] = {v: k for k, v in NUMBERS.items()}
    snap[K.group_seq] = "2"
    return snap


def layout2(rows: dict[tuple[str, str], tuple[str, ...]] = ROWS,
            groups: dict[str, tuple[str, str]] = GROUPS) -> Snap:
    snap = shared(groups)
    snap[K.layout] = "2"
    for (t, n), values in rows.items():
        snap.setdefault(K.topic_routes(t), {})[n] = "\t".join(values)
        lists = snap.setdefault(K.group_topics(n), {"1": ""})
        lists["1"] = "\n".join([*lists["1"].split("\n"), t]).strip("\n")
        snap.setdefault(K.topics, set()).add(t)
    return snap


def draining(snap: Snap, name: str) -> Snap:
    """Group ``name`` removed with its rows left to drain: its topics (layout 1's set, layout 2's
    lists) renamed to its cleanup record."""
    c, addr = GROUPS[name]
    for key in (K.group(name), K.members(name), K.broker(c, addr), K.reg(c, addr)):
        del snap[key]
    del snap[K.deadlines][live_member(c, addr)]
    del snap[K.route_groups][name]
    snap[K.cluster(c)].discard(name)
    if K.group_topics(name) in snap:
        snap[K.cleanup_topics(name)] = snap.pop(K.group_topics(name))
    else:
        snap[K.cleanup(name)] = snap.pop(K.broker_topics(name))
    snap[K.cleanups] = {name}
    return snap


def test_consistent_stores_of_either_layout() -> None:
    assert check(layout1(), K) == []
    assert check({**layout1(), K.layout: "1"}, K) == []
    assert check(layout2(), K) == []
    assert check(draining(layout2(), "b"), K) == []


def test_layout_2_lists_are_a_superset_of_rows() -> None:
    """A listed topic without a row, a topic listed twice, lists in several fields, a counter
    "#" (not a list): fine."""
    snap = layout2()
    snap[K.group_topics("a")] = {"1": "T\nGone", "2": "U\nT", "m3": "Gone", "#": "5"}
    snap[K.group_topics("b")]["#"] = "-1"
    assert check(snap, K) == []
    # A group with no row left keeps its lists while its group row exists.
    snap[K.group_topics("a")]["4"] = "V"
    snap[K.group_topics("b")] = {"1": "T\nx:y\nW", "#": "0"}
    assert check(snap, K) == []


def mutated(base: Callable[[], Snap], change: Callable[[Snap], None]) -> Snap:
    snap = copy.deepcopy(base())
    change(snap)
    return snap


def drop_topic_from_index(s: Snap) -> None:
    s[K.topics].discard("U")


def remove_topic(s: Snap) -> None:
    """Topic U deleted whole (its mapping too); group a's lists still name it."""
    del s[K.topic_routes("U")]
    s[K.topics].discard("U")


LAYOUT_2_PROBLEMS: list[tuple[str, Callable[[Snap], None], list[str]]] = [
    ("topic hash not in idx:topics", drop_topic_from_index,
     ["topic:U exists but U is not in idx:topics"]),
    ("idx:topics without a topic hash",
     lambda s: s[K.topics].add("V"),
     ["topic V listed in idx:topics without queue data"]),
    ("a topic removed, still listed", remove_topic, []),
    ("a row of three numbers",
     lambda s: s[K.topic_routes("T")].update(b="8\t8\t6"),
     ["topic:T row of b is '8\\t8\\t6', not four integers"]),
    ("a row that is not numbers",
     lambda s: s[K.topic_routes("T")].update(b="8\t8\tx\t0"),
     ["topic:T row of b is '8\\t8\\tx\\t0', not four integers"]),
    ("a row of a group that does not exist",
     lambda s: s[K.topic_routes("T")].update(z="1\t1\t6\t0"),
     ["queue row T/z without group z", "queue row T/z missing from idx:group-topics:z"]),
    ("a row not listed",
     lambda s: s[K.group_topics("a")].update({"1": "T"}),
     ["queue row U/a missing from idx:group-topics:a"]),
    ("a group's rows without its lists",
     lambda s: s.pop(K.group_topics("b")),
     ["queue row T/b missing from idx:group-topics:b",
      "queue row x:y/b missing from idx:group-topics:b"]),
    ("lists of a group without its group row",
     lambda s: s.update({K.group_topics("z"): {"1": "T"}}),
     ["idx:group-topics:z without group row"]),
    ("a list that names no topic",
     lambda s: s[K.group_topics("a")].update({"2": ""}),
     ["idx:group-topics:a field 2 lists no topic: ''"]),
    ("a list of newlines only",
     lambda s: s[K.group_topics("a")].update({"m1": "\n"}),
     ["idx:group-topics:a field m1 lists no topic: '\\n'"]),
    ("a counter that is not an integer",
     lambda s: s[K.group_topics("a")].update({"#": "x"}),
     ["idx:group-topics:a counter # is 'x', not an integer"]),
    ("a counter of a cleanup record that is not an integer",
     lambda s: s.update({K.cleanups: {"y"}, K.cleanup_topics("y"): {"#": "", "1": "T"}}),
     ["idx:cleanup-topics:y counter # is '', not an integer"]),
    ("a mapping without its row",
     lambda s: s[K.mappings("T")].update(z="{}"),
     ["idx:mappings:T maps z without its queue row"]),
    ("a mapping of a topic the group has no row of",
     lambda s: s.update({K.mappings("U"): {"b": "{}"}}),
     ["idx:mappings:U maps b without its queue row"]),
    ("an empty topic hash",
     lambda s: s.update({K.topic_routes("T"): {}}),
     [f"empty container {P}:topic:T", "idx:mappings:T maps a without its queue row"]),
    ("a cleanup name without its record",
     lambda s: s.update({K.cleanups: {"y"}}),
     ["idx:cleanups lists y without idx:cleanup-topics:y"]),
    ("the move's record after the move",
     lambda s: s.update({K.layout_move: {"owner": "w1"}}),
     [f"the move's record {P}:layout-move in layout 2"]),
    ("an unknown key",
     lambda s: s.update({f"{P}:idx:nothing": "1"}),
     [f"unknown key {P}:idx:nothing"]),
]


@pytest.mark.parametrize(("change", "expected"), [(c, e) for _, c, e in LAYOUT_2_PROBLEMS],
                         ids=[i for i, _, _ in LAYOUT_2_PROBLEMS])
def test_layout_2_problems(change: Callable[[Snap], None], expected: list[str]) -> None:
    assert sorted(check(mutated(layout2, change), K)) == sorted(expected)


def add_cleanup_of_a(s: Snap) -> None:
    s[K.cleanups].add("a")
    s[K.cleanup_topics("a")] = {"1": "T"}


DRAINING_PROBLEMS: list[tuple[str, Callable[[Snap], None], list[str]]] = [
    ("the record not listed in idx:cleanups: its rows are orphans",
     lambda s: s.pop(K.cleanups),
     ["idx:cleanup-topics:b not listed in idx:cleanups",
      "queue row T/b without group b", "queue row T/b missing from idx:group-topics:b",
      "queue row x:y/b without group b", "queue row x:y/b missing from idx:group-topics:b"]),
    ("a draining group's lists not renamed",
     lambda s: s.update({K.group_topics("b"): {"1": "T"}}),
     ["idx:group-topics:b without group row"]),
    ("a draining row not in the cleanup record",
     lambda s: s[K.cleanup_topics("b")].update({"1": "T"}),
     ["queue row x:y/b without group b", "queue row x:y/b missing from idx:group-topics:b"]),
    ("another name in idx:cleanups, registered",
     lambda s: s[K.cleanups].discard("b") or s[K.cleanups].add("a"),
     ["idx:cleanups lists a without idx:cleanup-topics:a",
      "idx:cleanup-topics:b not listed in idx:cleanups",
      "group a registered while its old rows are still draining",
      "queue row T/b without group b", "queue row T/b missing from idx:group-topics:b",
      "queue row x:y/b without group b", "queue row x:y/b missing from idx:group-topics:b"]),
    ("a group registered while draining", add_cleanup_of_a,
     ["group a registered while its old rows are still draining"]),
    ("an empty cleanup list",
     lambda s: s[K.cleanup_topics("b")].update({"2": ""}),
     ["idx:cleanup-topics:b field 2 lists no topic: ''"]),
]


@pytest.mark.parametrize(("change", "expected"), [(c, e) for _, c, e in DRAINING_PROBLEMS],
                         ids=[i for i, _, _ in DRAINING_PROBLEMS])
def test_layout_2_draining_problems(change: Callable[[Snap], None], expected: list[str]) -> None:
    snap = mutated(lambda: draining(layout2(), "b"), change)
    assert sorted(check(snap, K)) == sorted(expected)


def test_the_drained_record_leaves_the_rows_orphans() -> None:
    """Rows of a removed group that no cleanup record names: without group, unlisted."""
    snap = draining(layout2(), "b")
    del snap[K.cleanup_topics("b")]
    del snap[K.cleanups]
    assert sorted(check(snap, K)) == [
        "queue row T/b missing from idx:group-topics:b", "queue row T/b without group b",
        "queue row x:y/b missing from idx:group-topics:b", "queue row x:y/b without group b"]


LAYOUT_1_KEYS = [
    (K.queue("T", "a"), {"topic": "T", "brokerName": "a", "readQueueNums": "4",
                         "writeQueueNums": "4", "perm": "6", "topicSysFlag": "0"}),
    (K.topic("T"), {"-1"}),
    (K.broker_topics("a"), {"T"}),
    (K.cleanup("a"), {"T"}),
]


@pytest.mark.parametrize(("key", "value"), LAYOUT_1_KEYS, ids=[k for k, _ in LAYOUT_1_KEYS])
def test_a_layout_1_key_left_in_layout_2(key: str, value: Any) -> None:
    snap = layout2()
    snap[key] = value
    assert check(snap, K) == [f"a layout 1 key left in layout 2: {key}"]


def test_group_numbers_tolerated_in_layout_2() -> None:
    """A store moved from layout 1 may keep its group numbers until the move deletes them."""
    snap = layout2()
    snap[K.group_ids] = dict(NUMBERS)
    snap[K.group_names] = {v: k for k, v in NUMBERS.items()}
    snap[K.group_seq] = "2"
    assert check(snap, K) == []
    snap[K.group_ids] = {}
    assert check(snap, K) == [f"empty container {K.group_ids}"]


LAYOUT_2_KEYS = [(K.topic_routes("T"), {"a": "4\t4\t6\t0"}),
                 (K.group_topics("a"), {"1": "T"}),
                 (K.cleanup_topics("a"), {"1": "T"})]


@pytest.mark.parametrize(("key", "value"), LAYOUT_2_KEYS, ids=[k for k, _ in LAYOUT_2_KEYS])
@pytest.mark.parametrize("layout", [None, "1"])
def test_a_layout_2_key_in_layout_1(key: str, value: Any, layout: str | None) -> None:
    snap = layout1()
    if layout:
        snap[K.layout] = layout
    snap[key] = value
    assert check(snap, K) == [f"a layout 2 key left in layout 1: {key}"]


def test_layout_1_problems_as_before() -> None:
    snap = layout1()
    snap[K.broker_topics("a")].discard("U")
    snap[K.layout_move] = {"owner": "w1"}
    snap[K.group_names]["-3"] = "c"
    assert sorted(check(snap, K)) == sorted([
        "queue row U/a missing from idx:broker-topics:a",
        f"the move's record {P}:layout-move in layout 1",
        "idx:group-ids and idx:group-names are not each other's inverse"])
    snap = draining(layout1(), "b")
    assert check(snap, K) == []
    del snap[K.cleanups]
    assert check(snap, K) == ["idx:cleanup:b not listed in idx:cleanups"]


def moving() -> Snap:
    """Layout 1's keys whole, layout 2's partly written (a topic hash of some groups, lists of
    one group, a topic not in idx:topics), the move's record."""
    snap = layout1()
    snap[K.layout] = "moving"
    snap[K.layout_move] = {"owner": "w1", "began": "1700000000000"}
    snap[K.topic_routes("T")] = {"a": "4\t4\t6\t0"}
    snap[K.topic_routes("Other")] = {"z": "1\t1\t6\t0"}
    snap[K.group_topics("a")] = {"m1": "T"}
    snap[K.group_topics("z")] = {"m1": "Other\nT"}
    return snap


def test_moving() -> None:
    assert check(moving(), K) == []
    snap = moving()
    snap[K.topic_routes("T")]["b"] = "8\t8"
    assert check(snap, K) == ["topic:T row of b is '8\\t8', not four integers"]
    snap = moving()  # layout 1's invariants still hold
    del snap[K.queue("U", "a")]
    assert sorted(check(snap, K)) == sorted([
        "idx:topic:U lists a without its queue row",
        "idx:broker-topics:a lists U without its queue row"])


def test_a_layout_value_not_known() -> None:
    snap = layout2()
    snap[K.layout] = "3"
    assert check(snap, K) == ["P:layout is '3', not a layout: its queue data is not checked"]


def test_a_member_without_a_deadline() -> None:
    """route.lua lists a group's members without reading them while no deadline has passed:
    a member whose broker has no deadline (under the cluster it registered with) is a problem."""
    for snap in (layout1(), layout2()):
        del snap[K.deadlines][live_member("c1", "10.0.0.2:1")]
        assert "member 10.0.0.2:1 of b without a deadline under c1" in check(snap, K)
        snap[K.member_clusters("b")] = {"10.0.0.2:1": "c2"}
        snap[K.deadlines][live_member("c1", "10.0.0.2:1")] = 1e12
        assert "member 10.0.0.2:1 of b without a deadline under c2" in check(snap, K)
