"""The queue data's interface (docs/queue-data-layouts.md) is kept by both layouts: the same
scenarios run against lua/includes/rows/queue_data.lua (layout 1) and
lua/includes/topics/queue_data.lua (layout 2) on one real redis-server, each in its own namespace,
and every answer, every topicsEpoch and what the interface reads back must agree. Each function
is called through a small harness script (assembled per layout by ``scripts.source``, as the
product's scripts are) that dispatches ARGV[1] to it and answers with arrays; the topics the call
touched (changes.lua) come back with each answer. Layout 2's own promises (lists that follow
rows, not chunks; the cleanup record's fields; its page sizes) are checked on its keys as
well."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import WatchError

from nsfleet.domain.model import TopicConfig
from nsfleet.store import scripts
from nsfleet.store.keys import Keys
from nsfleet.store.script_calls import table_chunks

HARNESS = r"""--[[
  Test harness (tests/unit/store/test_queue_data_layouts.py): ARGV[1] names a function of
  includes/<layout>/queue_data.lua, the other ARGV[i] are its arguments; answers
  {result, touched topics, "1" when every route was announced as changed}.
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "queue_data"

local op, a = ARGV[1], {}
for i = 2, #ARGV do a[i - 1] = ARGV[i] end

local function flag(b) return b and 1 or 0 end
local function sorted_keys(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return out
end

local result
if op == 'fence' then
  result = qd_fence(a[1] == '1') or {}
elseif op == 'write_queues' then
  result = {write_queues(a[1], a[2], cjson.decode(a[3]), a[4] == '1', a[5] == '1',
    a[6] == '1')}
elseif op == 'table_topics' then
  result = sorted_keys(table_topics(a[1]))
elseif op == 'drop_absent' then
  result = {qd_drop_absent(a[1], cjson.decode(a[2]), a[3] and cjson.decode(a[3]) or nil)}
elseif op == 'drop_queue' then
  drop_queue(a[1], a[2])
  result = {}
elseif op == 'set_perm' then
  result = {flag(qd_set_perm(a[1], a[2], a[3]))}
elseif op == 'put_row' then
  qd_put_row(a[1], a[2], a[3], a[4], a[5], a[6])
  result = {}
elseif op == 'defer_cleanup' then
  qd_defer_cleanup(a[1])
  result = {}
elseif op == 'drain' then
  result = {qd_drain(a[1], tonumber(a[2]))}
elseif op == 'forget_group' then
  qd_forget_group(a[1])
  result = {}
elseif op == 'touch_group' then
  touch_group(a[1])
  result = {}
elseif op == 'has_rows' then
  result = {flag(qd_group_has_rows(a[1]))}
elseif op == 'topic_count' then
  result = {qd_group_topic_count(a[1])}
elseif op == 'row_count' then
  result = {qd_group_row_count(a[1])}
elseif op == 'group_topics' then
  result = qd_group_topics(a[1])
elseif op == 'page' then
  local cursor, topics = qd_group_page(a[1], a[2], tonumber(a[3]))
  result = {cursor, topics}
elseif op == 'topic_names' then
  result = qd_topic_names(a[1])
elseif op == 'topic_rows' then
  local names, values = qd_topic_rows(a[1])
  result = {names, values}
elseif op == 'row' then
  result = {qd_row(a[1], a[2])}
elseif op == 'has_row' then
  result = {flag(qd_has_row(a[1], a[2]))}
else
  return redis.error_reply('unknown op ' .. op)
end
return {result, {unpack(changed_topics, 1, changed_count)}, changed_all and '1' or '0'}
"""

# The field of layout 2's lists that numbers them (no list).
COUNTER = "#"
ROWS_INCLUDE = scripts.lua_dir() / "includes" / scripts.LAYOUTS["1"] / "queue_data.lua"
# Layout 1's include is written beside this one: until it is there, layout 2 runs alone.
LAYOUTS = [scripts.LAYOUT_TOPICS] + ([scripts.LAYOUT_ROWS] if ROWS_INCLUDE.is_file() else [])


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The harness as Redis runs it, per layout."""
    base = tmp_path_factory.mktemp("harness")
    (base / "includes").symlink_to(scripts.lua_dir() / "includes")
    (base / "harness.lua").write_text(HARNESS)
    return {layout: scripts.source("harness", base, layout) for layout in LAYOUTS}


def table(*rows: tuple[str, int, int, int, int]) -> str:
    return b"".join(table_chunks([TopicConfig(*row) for row in rows], 250)).decode()


def topics(prefix: str, n: int, start: int = 0) -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(start, start + n)]


def rows_of(names: list[str], perm: int = 6, rq: int = 4) -> str:
    return table(*[(t, rq, rq, perm, 0) for t in names])


class Twin:
    """The same calls against every layout under test, each in its own namespace."""

    def __init__(self, redis: aioredis.Redis, sources: dict[str, str]) -> None:
        self.redis = redis
        self.sources = sources
        self.keys = {layout: Keys(f"qd{layout}") for layout in sources}

    async def setup(self, *groups: str) -> None:
        for layout, k in self.keys.items():
            await self.redis.set(k.layout, layout)
            for name in groups:
                await self.redis.hset(k.group(name), mapping={"cluster": "c", "brokerName": name})

    async def each(self, op: str, *args: Any) -> dict[str, list[Any]]:
        """op's full answer ({result, touched, all}) per layout."""
        out = {}
        for layout, src in self.sources.items():
            reply = await self.redis.eval(src, 1, self.keys[layout].prefix, op,
                                          *map(str, args))
            out[layout] = reply
        return out

    async def same(self, op: str, *args: Any, touched: bool = True,
                   unordered: bool = False) -> Any:
        """op's result, the same in every layout (as a sorted list when ``unordered``); with
        ``touched``, the topics it touched (as a set) and the "*" flag agree too."""
        replies = await self.each(op, *args)
        results = {layout: sorted(r[0]) if unordered else r[0] for layout, r in replies.items()}
        assert len({json.dumps(v) for v in results.values()}) == 1, (op, args, results)
        if touched:
            touches = {layout: (sorted(set(r[1])), r[2]) for layout, r in replies.items()}
            assert len({json.dumps(v) for v in touches.values()}) == 1, (op, args, touches)
        return results[scripts.LAYOUT_TOPICS]

    async def epochs(self, *groups: str) -> dict[str, int]:
        """The groups' topicsEpoch, the same in every layout."""
        seen = {}
        for layout, k in self.keys.items():
            seen[layout] = [int(await self.redis.hget(k.group(g), "topicsEpoch") or 0)
                            for g in groups]
        assert len({tuple(v) for v in seen.values()}) == 1, seen
        return dict(zip(groups, seen[scripts.LAYOUT_TOPICS], strict=True))

    async def state(self, *groups: str) -> dict[str, Any]:
        """Everything the interface shows of the queue data, the same in every layout: every
        topic's rows and mappings, each group's topics with a row, its row count, its epoch."""
        seen = {}
        for layout, k in self.keys.items():
            r = self.redis
            all_topics = sorted(await r.smembers(k.topics))
            mapping_keys = sorted(await r.keys(k.mappings("*")))
            one: dict[str, Any] = {"topics": all_topics, "rows": {}, "groups": {}}
            for t in all_topics:
                one["rows"][t] = (await self._one(layout, "topic_rows", t))[0]
            one["mappings"] = {key.rsplit(":", 1)[1]: await r.hgetall(key) for key in mapping_keys}
            for g in groups:
                listed = set((await self._one(layout, "group_topics", g))[0])
                with_row = {t for t in all_topics if g in one["rows"][t][0]}
                # The lists are a superset of the group's rows (exact in layout 1).
                assert with_row <= listed, (layout, g, with_row - listed)
                count = (await self._one(layout, "row_count", g))[0][0]
                epoch = await r.hget(k.group(g), "topicsEpoch")
                one["groups"][g] = (sorted(with_row), count, epoch)
            seen[layout] = one
        assert len({json.dumps(v, sort_keys=True) for v in seen.values()}) == 1, seen
        return seen[scripts.LAYOUT_TOPICS]

    async def _one(self, layout: str, op: str, *args: Any) -> list[Any]:
        reply: list[Any] = await self.redis.eval(self.sources[layout], 1,
                                                 self.keys[layout].prefix, op, *map(str, args))
        return reply

    # Layout 2's own keys.
    @property
    def k2(self) -> Keys:
        return self.keys[scripts.LAYOUT_TOPICS]

    async def lists(self, name: str) -> dict[str, list[str]]:
        """Group ``name``'s lists in layout 2, field -> topics (without the counter)."""
        raw = await self.redis.hgetall(self.k2.group_topics(name))
        return {f: v.split("\n") for f, v in raw.items() if f != COUNTER}

    async def counter(self, name: str) -> int | None:
        """The number of group ``name``'s last list in layout 2."""
        n = await self.redis.hget(self.k2.group_topics(name), COUNTER)
        return None if n is None else int(n)

    async def writes(self, key: str, op: str, *args: Any) -> tuple[bool, dict[str, list[Any]]]:
        """Whether op (run in every layout) wrote ``key`` at all, even a value it held (a WATCH
        of the key fails), and op's full answer per layout."""
        async with self.redis.pipeline(transaction=True) as pipe:
            await pipe.watch(key)
            replies = await self.each(op, *args)
            pipe.multi()
            pipe.exists(key)
            try:
                await pipe.execute()
            except WatchError:
                return True, replies
        return False, replies

    async def listed_once(self, name: str) -> list[str]:
        """Layout 2's listed topics of ``name``, asserting none is listed twice."""
        every = [t for ts in (await self.lists(name)).values() for t in ts]
        assert len(every) == len(set(every)), sorted(every)
        return sorted(every)


@pytest.fixture
def twin(real_redis: aioredis.Redis, harness: dict[str, str]) -> Iterator[Twin]:
    yield Twin(real_redis, harness)


def test_layout_1_runs_beside_layout_2_once_its_include_exists() -> None:
    assert scripts.LAYOUT_TOPICS in LAYOUTS
    if not ROWS_INCLUDE.is_file():  # pragma: no cover - only while it is being written
        pytest.skip(f"{ROWS_INCLUDE} not written yet: layout 2 runs alone")
    assert LAYOUTS == [scripts.LAYOUT_TOPICS, scripts.LAYOUT_ROWS]


# --- fence -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("stored", "reads", "writes"), [
    (None, {"1": [], "2": ["layout", "1"]}, {"1": [], "2": ["layout", "1"]}),
    ("1", {"1": [], "2": ["layout", "1"]}, {"1": [], "2": ["layout", "1"]}),
    ("moving", {"1": [], "2": ["layout", "moving"]},
     {"1": ["layout", "moving"], "2": ["layout", "moving"]}),
    ("2", {"1": ["layout", "2"], "2": []}, {"1": ["layout", "2"], "2": []}),
])
async def test_fence_passes_only_the_assembly_of_the_stored_layout(
        twin: Twin, stored: str | None, reads: dict[str, list[str]],
        writes: dict[str, list[str]]) -> None:
    for k in twin.keys.values():
        if stored is not None:
            await twin.redis.set(k.layout, stored)
    for writing, expected in (("0", reads), ("1", writes)):
        answers = await twin.each("fence", writing)
        assert {layout: r[0] for layout, r in answers.items()} == {
            layout: expected[layout] for layout in answers}


# --- write_queues ------------------------------------------------------------------------------


async def test_a_fresh_write_adds_every_row_clears_write_perms_and_writes_mappings(
        twin: Twin) -> None:
    await twin.setup("A")
    text = table(("T1", 4, 4, 6, 0), ("T2", 8, 8, 7, 1), ("T3", 2, 2, 4, 0), ("T4", 1, 1, -1, 0))
    mappings = [["T1", "A", '{"bname":"A"}']]
    added = await twin.same("write_queues", "A", text, json.dumps(mappings), "1", "1", "1")
    assert added == [4]
    state = await twin.state("A")
    assert state["topics"] == ["T1", "T2", "T3", "T4"]
    # PERM_WRITE (2) cleared: 6 -> 4, 7 -> 5, 4 stays, -1 (every bit) -> -3.
    assert state["rows"] == {
        "T1": [["A"], [["4", "4", "4", "0"]]], "T2": [["A"], [["8", "8", "5", "1"]]],
        "T3": [["A"], [["2", "2", "4", "0"]]], "T4": [["A"], [["1", "1", "-3", "0"]]]}
    assert state["mappings"] == {"T1": {"A": '{"bname":"A"}'}}
    # Four rows added and one mapping written.
    assert state["groups"]["A"] == (["T1", "T2", "T3", "T4"], 4, "5")
    assert await twin.same("has_rows", "A") == [1]
    assert await twin.same("row", "T2", "A") == ["8", "8", "5", "1"]
    assert await twin.same("row", "T2", "B") == []
    assert await twin.same("has_row", "T3", "A") == [1]
    assert await twin.same("has_row", "T3", "B") == [0]
    assert await twin.same("table_topics", text) == ["T1", "T2", "T3", "T4"]
    assert await twin.listed_once("A") == ["T1", "T2", "T3", "T4"]


async def test_without_force_only_missing_rows_are_written(twin: Twin) -> None:
    await twin.setup("A")
    await twin.same("write_queues", "A", rows_of(["T1", "T2"]), "[]", "1", "0", "1")
    before = (await twin.epochs("A"))["A"]
    changed = rows_of(["T1", "T2", "T3"], perm=2, rq=16)
    assert await twin.same("write_queues", "A", changed, "[]", "0", "0", "0") == [1]
    state = await twin.state("A")
    assert state["rows"]["T1"] == [["A"], [["4", "4", "6", "0"]]]
    assert state["rows"]["T3"] == [["A"], [["16", "16", "2", "0"]]]
    assert (await twin.epochs("A"))["A"] == before + 1
    # The same table again: nothing to write, nothing counted, nothing touched.
    assert await twin.same("write_queues", "A", changed, "[]", "0", "0", "0") == [0]
    assert (await twin.epochs("A"))["A"] == before + 1
    assert (await twin.each("write_queues", "A", changed, "[]", "0", "0", "0", "1"))[
        scripts.LAYOUT_TOPICS][1:] == [[], "0"]


async def test_a_forced_write_rewrites_what_differs_and_counts_each_change(twin: Twin) -> None:
    await twin.setup("A", "B")
    await twin.same("write_queues", "A", rows_of(["T1", "T2", "T3"]), "[]", "1", "0", "1")
    await twin.same("write_queues", "B", rows_of(["T1"]), "[]", "1", "0", "1")
    before = await twin.epochs("A", "B")
    text = table(("T1", 4, 4, 6, 0), ("T2", 4, 4, 2, 0), ("T3", 8, 4, 6, 0), ("T4", 1, 1, 6, 0))
    mappings = [["T2", "A", "m1"], ["T9", "A", "m9"]]
    assert await twin.same("write_queues", "A", text, json.dumps(mappings), "1", "0", "0") == [1]
    # T2 and T3 changed, T4 added, two mappings written; B untouched.
    after = await twin.epochs("A", "B")
    assert after == {"A": before["A"] + 5, "B": before["B"]}
    state = await twin.state("A", "B")
    assert state["rows"]["T2"] == [["A"], [["4", "4", "2", "0"]]]
    assert state["rows"]["T1"] == [["A", "B"], [["4", "4", "6", "0"], ["4", "4", "6", "0"]]]
    assert state["mappings"] == {"T2": {"A": "m1"}, "T9": {"A": "m9"}}
    # The same mappings again change nothing.
    await twin.same("write_queues", "A", text, json.dumps(mappings), "1", "0", "0")
    assert await twin.epochs("A", "B") == after


async def test_a_forced_write_of_a_prime_slave_clears_the_write_perm(twin: Twin) -> None:
    await twin.setup("A")
    await twin.same("write_queues", "A", rows_of(["T1", "T2"]), "[]", "1", "0", "1")
    epoch = (await twin.epochs("A"))["A"]
    await twin.same("write_queues", "A", rows_of(["T1", "T2"]), "[]", "1", "1", "0")
    assert (await twin.state("A"))["rows"]["T2"] == [["A"], [["4", "4", "4", "0"]]]
    assert (await twin.epochs("A"))["A"] == epoch + 2


# --- chunks --------------------------------------------------------------------------------------


async def write_chunked(twin: Twin, name: str, chunks: list[list[str]], *, fresh: bool = False,
                        force: bool = False) -> None:
    for chunk in chunks:
        await twin.same("write_queues", name, rows_of(chunk), "[]", "1" if force else "0", "0",
                        "1" if fresh else "0")


async def test_lists_follow_rows_not_chunks(twin: Twin) -> None:
    await twin.setup("A")
    table_ = topics("T", 12)
    await write_chunked(twin, "A", [table_[0:4], table_[4:8], table_[8:12]], fresh=True,
                        force=True)
    first = {"1": table_[0:4], "2": table_[4:8], "3": table_[8:12]}
    assert await twin.lists("A") == first
    # A topic inserted at the front moves every chunk boundary: only the new row is listed, in
    # a field of its own.
    grown = ["S000", *table_]
    await write_chunked(twin, "A", [grown[0:4], grown[4:8], grown[8:12], grown[12:]])
    assert await twin.lists("A") == {**first, "4": ["S000"]}
    assert await twin.listed_once("A") == sorted(grown)
    # The broker stops sending two topics (no deleteTopicWithBrokerRegistration): their rows
    # stay, and so do the lists.
    shrunk = [t for t in grown if t not in ("T001", "T006")]
    await write_chunked(twin, "A", [shrunk[0:4], shrunk[4:8], shrunk[8:]])
    assert await twin.lists("A") == {**first, "4": ["S000"]}
    state = await twin.state("A")
    assert state["groups"]["A"][0] == sorted(grown)


async def test_split_slices_registered_alternately_write_only_their_own_rows(
        twin: Twin) -> None:
    """A 5.x split registration: the broker sends its table as separate registrations (slices),
    each a whole table in one call with a new DataVersion (so forced). Each slice changed in
    turn rewrites, counts and touches its own rows only and writes no list at all (the lists of
    the other slice's topics included); every row stays listed once. A topic added to a slice
    later is listed in a new field, the others' fields as they were."""
    await twin.setup("A")
    one, two = topics("T", 5), topics("U", 5)
    lkey = twin.k2.group_topics("A")
    await twin.same("write_queues", "A", rows_of(one), "[]", "1", "0", "1")
    await twin.same("write_queues", "A", rows_of(two), "[]", "1", "0", "0")
    lists = await twin.lists("A")
    assert lists == {"1": one, "2": two}
    for rq in (3, 5):
        for slice_ in (one, two):
            before = (await twin.epochs("A"))["A"]
            text = table(*((t, rq, rq, 6, 0) for t in slice_))
            wrote, replies = await twin.writes(lkey, "write_queues", "A", text, "[]", "1", "0",
                                               "0")
            assert not wrote
            for reply in replies.values():
                assert reply[0] == [0] and sorted(reply[1]) == slice_ and reply[2] == "0"
            assert (await twin.epochs("A"))["A"] == before + len(slice_)
            rows = (await twin.state("A"))["rows"]
            assert {rows[t][1][0][0] for t in slice_} == {str(rq)}
            assert await twin.lists("A") == lists
            assert await twin.listed_once("A") == sorted([*one, *two])
    grown = [*two, "U005"]
    wrote, _ = await twin.writes(lkey, "write_queues", "A", rows_of(grown, rq=5), "[]", "1", "0",
                                 "0")
    assert wrote
    assert await twin.lists("A") == {"1": one, "2": two, "3": ["U005"]}
    assert await twin.counter("A") == 3
    assert (await twin.state("A"))["groups"]["A"][0] == sorted([*one, *grown])
    assert await twin.listed_once("A") == sorted([*one, *grown])
    # The first slice again, unchanged: nothing written.
    wrote, _ = await twin.writes(lkey, "write_queues", "A", rows_of(one, rq=5), "[]", "1", "0",
                                 "0")
    assert not wrote


async def test_lists_are_numbered_by_a_counter_and_read_in_number_order(twin: Twin) -> None:
    await twin.setup("A")
    added = topics("P", 11)
    for t in added:
        await twin.same("put_row", t, "A", "1", "1", "6", "0")
    assert await twin.lists("A") == {str(i + 1): [t] for i, t in enumerate(added)}
    # Pages follow the fields' numbers ("10" and "11" after "9"), so a list appended during a
    # walk comes last.
    seen, cursor = [], "0"
    while True:
        (cursor, page), _, _ = await twin._one(scripts.LAYOUT_TOPICS, "page", "A", cursor, 4)
        seen += page
        if cursor == "0":
            break
    assert seen == added
    # An emptied list goes; its number is not given again.
    assert await twin.same("drop_absent", "A", json.dumps(["P010", "P009"])) == [2]
    assert set(await twin.lists("A")) == {str(i) for i in range(1, 10)}
    await twin.same("put_row", "Q", "A", "1", "1", "6", "0")
    assert (await twin.lists("A"))["12"] == ["Q"]
    assert await twin.counter("A") == 12
    # Every row gone by deleteTopicWithBrokerRegistration: the key goes, counter and all.
    assert await twin.same("drop_absent", "A", json.dumps([*added, "Q"])) == [10]
    assert await twin.same("has_rows", "A") == [0]
    assert await twin.redis.exists(twin.k2.group_topics("A")) == 0
    await twin.same("put_row", "R", "A", "1", "1", "6", "0")
    assert await twin.lists("A") == {"1": ["R"]}


async def test_a_table_sent_whole_after_chunks_keeps_the_lists(twin: Twin) -> None:
    await twin.setup("A")
    table_ = topics("T", 9)
    await write_chunked(twin, "A", [table_[0:3], table_[3:6], table_[6:9]], fresh=True,
                        force=True)
    # Whole in one call, without T004 (no deleteTopicWithBrokerRegistration): its row stays.
    one = [t for t in table_ if t != "T004"]
    await write_chunked(twin, "A", [one])
    assert await twin.lists("A") == {"1": table_[0:3], "2": table_[3:6], "3": table_[6:9]}
    assert (await twin.state("A"))["groups"]["A"][0] == table_
    assert await twin.same("topic_count", "A") == [9]
    assert await twin.same("row_count", "A") == [9]


async def test_an_interrupted_registration_keeps_every_row_listed(twin: Twin) -> None:
    await twin.setup("A")
    table_ = topics("T", 6)
    await write_chunked(twin, "A", [table_[0:3], table_[3:6]], fresh=True, force=True)
    # Chunk 1 of a new table, then nothing more (no commit, no trim).
    await twin.same("write_queues", "A", rows_of(["T000", "T004"]), "[]", "0", "0", "0")
    listed = {t for ts in (await twin.lists("A")).values() for t in ts}
    assert listed >= set(table_)
    await twin.state("A")
    # The next registration settles the lists.
    await write_chunked(twin, "A", [table_[0:2], table_[2:6]])
    assert await twin.listed_once("A") == table_


async def test_the_moves_fields_are_read_as_lists(twin: Twin) -> None:
    await twin.setup("A")
    await twin.same("write_queues", "A", rows_of(["T1", "T2", "T3"]), "[]", "1", "0", "1")
    # What the move from layout 1 writes: the group's topics in fields "m<n>".
    await twin.redis.hset(twin.k2.group_topics("A"), mapping={"m1": "T1\nT2", "m2": "T3\nT9"})
    # Layout 2 counts what the lists name (an upper bound), layout 1 its rows.
    counts = await twin.each("topic_count", "A")
    assert counts[scripts.LAYOUT_TOPICS][0] == [7]
    assert await twin.same("row_count", "A") == [3]
    assert await twin.lists("A") == {"1": ["T1", "T2", "T3"], "m1": ["T1", "T2"],
                                     "m2": ["T3", "T9"]}
    # The move's lists come first in a walk (they are the store's oldest).
    (cursor, page), _, _ = await twin._one(scripts.LAYOUT_TOPICS, "page", "A", "0", 10)
    assert (cursor, page) == ("0", ["T1", "T2", "T3", "T9", "T1", "T2", "T3"])


async def test_rows_written_outside_any_chunk_are_listed(twin: Twin) -> None:
    await twin.setup("A")
    await twin.same("write_queues", "A", rows_of(["T1"]), "[]", "0", "0", "1")
    assert await twin.lists("A") == {"1": ["T1"]}
    assert (await twin.state("A"))["groups"]["A"][0] == ["T1"]


# --- removals -------------------------------------------------------------------------------------


async def test_drop_absent_removes_only_rows_the_group_has(twin: Twin) -> None:
    await twin.setup("A", "B")
    await twin.same("write_queues", "A", rows_of(["T1", "T2", "T3"]), "[]", "1", "0", "1")
    await twin.same("write_queues", "B", rows_of(["T2"]), "[]", "1", "0", "1")
    await twin.same("put_row", "T4", "A", "1", "1", "6", "0")
    before = await twin.epochs("A", "B")
    gone = await twin.same("drop_absent", "A", json.dumps(["T2", "T4", "T5", "T4"]))
    assert gone == [2]
    assert await twin.epochs("A", "B") == {"A": before["A"] + 2, "B": before["B"]}
    state = await twin.state("A", "B")
    assert state["topics"] == ["T1", "T2", "T3"]
    assert state["rows"]["T2"][0] == ["B"]
    listed = {t for ts in (await twin.lists("A")).values() for t in ts}
    assert "T4" not in listed and "T2" not in listed  # the lists lost the rows removed
    assert await twin.same("drop_absent", "A", json.dumps([])) == [0]


async def test_drop_absent_named_the_lists_rewrites_only_those(twin: Twin) -> None:
    """A registration in chunks names, with each chunk of topics to drop, the lists that name
    them (it read the group's lists first): only those are read and rewritten, so a call's work
    does not grow with the group. A topic listed in a list not named stays listed (the lists are
    a superset of the rows), and the key still goes with its last list."""
    await twin.setup("A")
    await twin.same("write_queues", "A", rows_of(["T1", "T2"]), "[]", "1", "0", "1")
    await twin.same("write_queues", "A", rows_of(["U1", "U2"]), "[]", "1", "0", "0")
    assert await twin.lists("A") == {"1": ["T1", "T2"], "2": ["U1", "U2"]}
    assert await twin.same("drop_absent", "A", json.dumps(["T1", "U1"]), json.dumps(["1"])) == [2]
    assert await twin.lists("A") == {"1": ["T2"], "2": ["U1", "U2"]}
    state = await twin.state("A")
    assert state["groups"]["A"][0] == ["T2", "U2"]
    # Named lists that are gone, or the counter, are no lists: nothing read for them.
    assert await twin.same("drop_absent", "A", json.dumps(["T2"]),
                           json.dumps(["1", "9", "#"])) == [1]
    assert await twin.lists("A") == {"2": ["U1", "U2"]}
    # Every list named and emptied: the key goes, counter and all.
    await twin.setup("B")
    await twin.same("write_queues", "B", rows_of(["V1"]), "[]", "1", "0", "1")
    await twin.same("write_queues", "B", rows_of(["W1"]), "[]", "1", "0", "0")
    assert await twin.same("drop_absent", "B", json.dumps(["V1", "W1"]),
                           json.dumps(["2", "1"])) == [2]
    assert await twin.same("has_rows", "B") == [0]
    assert await twin.redis.exists(twin.k2.group_topics("B")) == 0


async def test_drop_queue_removes_the_row_its_mapping_and_an_emptied_topic(twin: Twin) -> None:
    await twin.setup("A", "B")
    mappings = [["T1", "A", "ma"], ["T1", "B", "mb"], ["T2", "A", "m2"]]
    await twin.same("write_queues", "A", rows_of(["T1", "T2"]), json.dumps(mappings), "1", "0",
                    "1")
    await twin.same("write_queues", "B", rows_of(["T1"]), "[]", "1", "0", "1")
    before = await twin.epochs("A", "B")
    await twin.same("drop_queue", "T1", "A")
    await twin.same("drop_queue", "T2", "A")
    assert await twin.epochs("A", "B") == {"A": before["A"] + 2, "B": before["B"]}
    state = await twin.state("A", "B")
    assert state["topics"] == ["T1"]
    assert state["mappings"] == {"T1": {"B": "mb"}}
    assert await twin.same("topic_rows", "T2") == [[], []]
    assert await twin.same("topic_names", "T2") == []
    # A row the group does not have: nothing counted.
    await twin.same("drop_queue", "T2", "A", touched=False)
    assert await twin.epochs("A", "B") == {"A": before["A"] + 2, "B": before["B"]}
    # Without the group row (a removed group's drain), nothing is counted and none is created.
    for k in twin.keys.values():
        await twin.redis.delete(k.group("B"))
    await twin.same("drop_queue", "T1", "B")
    for k in twin.keys.values():
        assert await twin.redis.exists(k.group("B")) == 0
        assert await twin.redis.smembers(k.topics) == set()


async def test_a_removed_group_is_drained_to_the_end(twin: Twin) -> None:
    await twin.setup("A", "B")
    table_ = topics("T", 11)
    await write_chunked(twin, "A", [table_[0:4], table_[4:8], table_[8:]], fresh=True,
                        force=True)
    await twin.same("put_row", "X", "A", "1", "1", "6", "0")
    await twin.same("write_queues", "B", rows_of(["T000", "X"]), "[]", "1", "0", "1")
    assert await twin.same("topic_count", "A") == [12]
    for k in twin.keys.values():
        await twin.redis.delete(k.group("A"))
    await twin.same("defer_cleanup", "A")
    await twin.same("forget_group", "A")
    for k in twin.keys.values():
        assert await twin.redis.smembers(k.cleanups) == {"A"}
    assert await twin.same("has_rows", "A") == [0]
    # Layout 1 pops topics at random: the rows removed agree call by call, and whether any are
    # left (layout 2 counts a list it did not read as one), the topics once drained.
    steps, touched = [], {layout: set[str]() for layout in twin.sources}
    while True:
        replies = await twin.each("drain", "A", 5)
        assert len({(r[0][0], r[0][1] == 0) for r in replies.values()}) == 1, replies
        for layout, reply in replies.items():
            touched[layout] |= set(reply[1])
        removed, left = replies[scripts.LAYOUT_ROWS][0]
        steps.append((removed, left))
        if left == 0:
            break
    assert steps == [(5, 7), (5, 2), (2, 0)]
    assert all(t == {*table_, "X"} for t in touched.values()), touched
    # A drain limited to nothing removes nothing.
    assert await twin.same("drain", "A", 0) == [0, 0]
    state = await twin.state("A", "B")
    assert state["topics"] == ["T000", "X"]
    assert state["rows"]["X"][0] == ["B"]
    assert state["groups"]["A"] == ([], 0, None)
    assert await twin.redis.exists(twin.k2.cleanup_topics("A")) == 0
    assert await twin.same("drain", "A", 5) == [0, 0]


async def test_a_second_cleanup_record_of_a_name_adds_to_the_first(twin: Twin) -> None:
    # Layout 2 only: the scripts never let a name come back before its drain ends (layout 1's
    # RENAME would replace the first record), but its rows must not be lost if one did.
    await twin.setup("A")
    await twin.each("write_queues", "A", rows_of(["T1", "T2"]), "[]", "1", "0", "1", "1")
    await twin.each("defer_cleanup", "A")
    await twin.each("write_queues", "A", rows_of(["T3"]), "[]", "1", "0", "1", "1")
    await twin.each("defer_cleanup", "A")
    assert await twin.redis.hgetall(twin.k2.cleanup_topics("A")) == {"1": "T1\nT2\nT3"}
    assert (await twin.each("drain", "A", 10))[scripts.LAYOUT_TOPICS][0] == [3, 0]


# --- perms and REGISTER_TOPIC ------------------------------------------------------------------


async def test_set_perm_changes_a_row_and_counts_it(twin: Twin) -> None:
    await twin.setup("A")
    await twin.same("write_queues", "A", table(("T1", 8, 4, 6, 3)), "[]", "1", "0", "1")
    before = (await twin.epochs("A"))["A"]
    assert await twin.same("set_perm", "T1", "A", "4") == [1]
    assert await twin.same("row", "T1", "A") == ["8", "4", "4", "3"]
    assert await twin.same("set_perm", "T2", "A", "4", touched=False) == [0]
    assert (await twin.epochs("A"))["A"] == before + 1


async def test_put_row_lists_a_new_topic_and_counts_every_write(twin: Twin) -> None:
    await twin.setup("A")
    await twin.same("put_row", "T1", "A", "8", "8", "6", "0")
    await twin.same("put_row", "T1", "A", "8", "8", "6", "0")
    await twin.same("put_row", "T2", "A", "1", "2", "4", "1")
    state = await twin.state("A")
    assert state["groups"]["A"] == (["T1", "T2"], 2, "3")
    assert await twin.lists("A") == {"1": ["T1"], "2": ["T2"]}
    # A registration that names them adds no row, and no list.
    await twin.same("write_queues", "A", rows_of(["T1", "T2"]), "[]", "0", "0", "0")
    assert await twin.lists("A") == {"1": ["T1"], "2": ["T2"]}


# --- reads -------------------------------------------------------------------------------------


async def test_topic_rows_are_sorted_by_group(twin: Twin) -> None:
    await twin.setup("b", "C", "a")
    for name, rq in (("b", 2), ("C", 3), ("a", 1)):
        await twin.same("write_queues", name, table(("T", rq, rq, 6, 0)), "[]", "1", "0", "1")
    assert await twin.same("topic_rows", "T") == [
        ["C", "a", "b"], [["3", "3", "6", "0"], ["1", "1", "6", "0"], ["2", "2", "6", "0"]]]
    assert await twin.same("topic_names", "T", unordered=True) == ["C", "a", "b"]


async def test_group_pages_visit_every_topic(twin: Twin) -> None:
    await twin.setup("A")
    table_ = topics("T", 23)
    await write_chunked(twin, "A", [table_[0:10], table_[10:20], table_[20:]], fresh=True,
                        force=True)
    await twin.same("put_row", "X", "A", "1", "1", "6", "0")
    for layout in twin.sources:
        seen: list[str] = []
        cursor, sizes = "0", []
        while True:
            (cursor, page), _, _ = await twin._one(layout, "page", "A", cursor, 7)
            seen += page
            sizes.append(len(page))
            if cursor == "0":
                break
        assert sorted(set(seen)) == sorted([*table_, "X"]), layout
        if layout == scripts.LAYOUT_TOPICS:
            # Fields in sorted order ("1", "2", "3", then X's "4"), the cursor a count of topics.
            assert seen == [*table_, "X"]
            assert sizes == [7, 7, 7, 3]
    assert await twin.same("row_count", "A") == [24]
    assert await twin.same("group_topics", "A", unordered=True) == sorted([*table_, "X"])


async def test_touch_group_names_a_small_groups_topics_and_a_big_one_as_any(
        twin: Twin) -> None:
    await twin.setup("A", "B")
    await twin.same("write_queues", "A", rows_of(["T1", "T2"]), "[]", "1", "0", "1")
    answers = await twin.each("touch_group", "A")
    for reply in answers.values():
        assert sorted(reply[1]) == ["T1", "T2"] and reply[2] == "0"
    big = topics("T", 501)
    await twin.same("write_queues", "B", rows_of(big), "[]", "1", "0", "1")
    answers = await twin.each("touch_group", "B")
    for reply in answers.values():
        assert reply[1:] == [[], "1"]
    # A store in another layout: every route may have changed.
    for k in twin.keys.values():
        await twin.redis.set(k.layout, "moving")
    answers = await twin.each("touch_group", "A")
    assert answers[scripts.LAYOUT_TOPICS][1:] == [[], "1"]


async def test_a_group_without_queue_data(twin: Twin) -> None:
    await twin.setup("A")
    assert await twin.same("has_rows", "A") == [0]
    assert await twin.same("topic_count", "A") == [0]
    assert await twin.same("row_count", "A") == [0]
    assert await twin.same("group_topics", "A") == []
    assert await twin.same("page", "A", "0", 10) == ["0", []]
    assert await twin.same("write_queues", "A", "", "[]", "1", "0", "1") == [0]
    assert await twin.same("has_rows", "A") == [0]
