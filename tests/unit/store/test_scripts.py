"""nsfleet/scripts.py resolves ``--- @include`` lines recursively (each include once, dependencies
first, clear errors on cycles and missing files), and every script answers with a table led by a
status that RouteStore's one decoding helper (``replies.decode``) accepts."""

from __future__ import annotations

import importlib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from nsfleet.domain.controller import BrokerSet, ControllerHeartbeat, Replica
from nsfleet.domain.errors import RegistrationRejected
from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.store import RouteStore, scripts
from nsfleet.store.controller_tables import SetHealth
from nsfleet.store.keys import Keys
from nsfleet.store.replies import SCRIPT_STATUSES, ScriptReplyError, decode

# --- the include resolver, on a fake lua dir ---------------------------------------------------


def make_lua(base: Path, scripts_: dict[str, str], includes: dict[str, str]) -> Path:
    """A lua dir: ``includes`` by path under includes/ ("cascade", "rows/queue_data")."""
    for sub in ("", *scripts.LAYOUTS.values()):
        (base / "includes" / sub).mkdir(parents=True, exist_ok=True)
    for name, text in scripts_.items():
        (base / f"{name}.lua").write_text(text)
    for name, text in includes.items():
        (base / "includes" / f"{name}.lua").write_text(text)
    return base


def body_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_includes_resolve_recursively_each_once_dependencies_first(tmp_path: Path) -> None:
    # A diamond: main needs c and b; c needs b and a; b needs a.
    base = make_lua(tmp_path, {
        "main": '-- main header\n--- @include "c"\n--- @include "b"\nMAIN\n',
    }, {
        "a": "A\n",
        "b": '--- @include "a"\nB\n',
        "c": '--- @include "b"\n--- @include "a"\nC\n',
    })
    text = scripts.source("main", base)
    assert "--- @include" not in text
    assert body_lines(text) == ["-- main header", "A", "B", "C", "MAIN"]


def test_an_include_already_inlined_by_another_is_skipped(tmp_path: Path) -> None:
    # The script lists "keys" itself too: it still appears once, where it was first needed.
    base = make_lua(tmp_path, {
        "main": '--- @include "cascade"\n--- @include "keys"\n--- @include "changes"\nMAIN\n',
    }, {
        "keys": "KEYS\n",
        "changes": '--- @include "keys"\nCHANGES\n',
        "cascade": '--- @include "keys"\n--- @include "changes"\nCASCADE\n',
    })
    assert body_lines(scripts.source("main", base)) == ["KEYS", "CHANGES", "CASCADE", "MAIN"]


def test_include_cycle_is_an_error(tmp_path: Path) -> None:
    base = make_lua(tmp_path, {"main": '--- @include "a"\nMAIN\n'}, {
        "a": '--- @include "b"\nA\n',
        "b": '--- @include "c"\nB\n',
        "c": '--- @include "a"\nC\n',
    })
    with pytest.raises(scripts.IncludeError, match=r"main\.lua: include cycle a -> b -> c -> a"):
        scripts.source("main", base)


def test_an_include_that_includes_itself_is_a_cycle(tmp_path: Path) -> None:
    base = make_lua(tmp_path, {"main": '--- @include "a"\n'}, {"a": '--- @include "a"\nA\n'})
    with pytest.raises(scripts.IncludeError, match=r"include cycle a -> a"):
        scripts.source("main", base)


def test_missing_include_is_an_error(tmp_path: Path) -> None:
    base = make_lua(tmp_path, {"main": '--- @include "a"\nMAIN\n', "top": '--- @include "nope"\n'},
                    {"a": '--- @include "gone"\nA\n'})
    with pytest.raises(scripts.IncludeError,
                       match=r"main\.lua: missing include 'gone' .* included by includes/a\.lua"):
        scripts.source("main", base)
    with pytest.raises(scripts.IncludeError,
                       match=r"top\.lua: missing include 'nope' .* included by top\.lua"):
        scripts.source("top", base)


# --- the real lua/ tree ------------------------------------------------------------------------

def lua_code(text: str) -> str:
    """``text`` without its comments."""
    return re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", text, flags=re.DOTALL)


def include_texts() -> dict[str, str]:
    """Every include by its path under includes/ ("cascade", "rows/queue_data")."""
    base = scripts.lua_dir() / "includes"
    return {str(path.relative_to(base).with_suffix("")): path.read_text()
            for path in base.glob("**/*.lua")}


def include_names() -> dict[str, set[str]]:
    """Each include's top-level names by the name scripts include it by (an include written
    once per layout: the names of every version)."""
    names: dict[str, set[str]] = {}
    for path, text in include_texts().items():
        names.setdefault(Path(path).name, set()).update(scripts.defined_names(text))
    return names


@pytest.mark.parametrize("name", [*scripts.SCRIPT_NAMES, *(f"includes/{n}" for n in
                                                           sorted(include_texts()))])
def test_every_file_includes_what_it_uses_and_no_more(name: str) -> None:
    """A script or include lists, as ``--- @include`` lines at its top, exactly the includes
    whose top-level names its own code uses: nothing reaches it by chance through another."""
    text = (scripts.lua_dir() / f"{name}.lua").read_text()
    declared = scripts.INCLUDE_RE.findall(text)
    code = lua_code(text)
    used = {inc for inc, names in include_names().items()
            if Path(name).name != inc and any(
                re.search(rf"(?<![\w.]){re.escape(n)}\b", code) for n in names)}
    assert sorted(declared) == sorted(used), name
    assert len(set(declared)) == len(declared), name
    # An include's include lines come first, a script's right after its header.
    lines = "".join(f'--- @include "{d}"\n' for d in declared)
    if name.startswith("includes/"):
        assert text.startswith(lines + "--[["), name
    else:
        assert text.startswith("--[[") and text.partition("]]\n")[2].startswith(lines), name


def test_every_name_an_include_defines_is_used() -> None:
    """luacheck lets an include's top-level names go unused in a script that needs only some
    (``scripts.write_for_luacheck``); each is still used by some file, or by its own code."""
    files = {name: lua_code((scripts.lua_dir() / f"{name}.lua").read_text())
             for name in scripts.SCRIPT_NAMES}
    files |= {f"includes/{n}": lua_code(text) for n, text in include_texts().items()}
    for inc, text in include_texts().items():
        # Another layout's version of the same include defines the same names: not a use.
        versions = {f"includes/{p}" for p in include_texts()
                    if Path(p).name == Path(inc).name and p != inc}
        for defined in scripts.defined_names(text):
            word = rf"(?<![\w.]){re.escape(defined)}\b"
            uses = sum(len(re.findall(word, code)) for f, code in files.items()
                       if f not in versions)
            assert uses > 1, (inc, defined)  # the definition itself is one


@pytest.mark.parametrize("name", scripts.SCRIPT_NAMES)
def test_every_script_inlines_each_include_once_in_dependency_order(name: str) -> None:
    text = scripts.source(name, prune=False)  # every function of every include, in place
    markers = {  # one definition each include owns
        "rcall": "local rcall = ",
        "keys": "local function k_broker(",
        "changes": "local function publish_changes(",
        "cascade": "local function remove_broker(",
    }
    at = {inc: text.find(m) for inc, m in markers.items() if text.count(m) == 1}
    for inc, m in markers.items():
        assert text.count(m) <= 1, (name, inc)
    assert "rcall" in at and "keys" in at
    assert list(at) == sorted(at, key=at.__getitem__), (name, at)
    if "cascade" in at:
        assert "changes" in at


def test_unused_include_functions_are_left_out_transitively(tmp_path: Path) -> None:
    """A script keeps the include functions its code calls and those they call, in place, and
    none other; its own functions, and an include's other top-level code, stay whatever uses
    them."""
    base = make_lua(tmp_path, {"main": (
        '--[[ header: b_unused is only named here ]]\n--- @include "b"\n'
        "local function own() return 1 end\n"
        "-- a_unused: only in a comment\n"
        "return {b_used(), 'a_kept_by_string'}\n")}, {
        "a": ("local STATE = {}\n"
              "local function a_used(x) return x end\n"
              "local function a_unused(x)\n  return a_used(x)\nend\n"
              "local function a_kept_by_string() return 2 end\n"),
        "b": ('--- @include "a"\n'
              "local function b_used()\n  -- a comment line naming b_unused\n"
              "  return a_used(STATE)\nend\n"
              "local function b_unused() return a_unused(1) end\n"),
    })
    text = scripts.source("main", base)
    functions = re.findall(r"^local function (\w+)", text, re.MULTILINE)
    assert functions == ["a_used", "a_kept_by_string", "b_used", "own"]
    assert "local STATE = {}" in text
    assert "local function a_unused" in scripts.source("main", base, prune=False)


def test_every_script_keeps_every_function_it_calls() -> None:
    """What pruning leaves is what the script runs: each include function still named in the
    code is still defined (luacheck checks the same as undefined globals, in .ci/run)."""
    included = set().union(*(scripts.defined_names(t) for t in include_texts().values()))
    for name in scripts.SCRIPT_NAMES:
        for layout in scripts.LAYOUTS:
            text = scripts.source(name, layout=layout)
            code = scripts.COMMENT_RE.sub("", text)
            defined = scripts.defined_names(text)
            named = set(scripts.NAME_RE.findall(code)) & included
            assert named <= defined, (name, layout, named - defined)
            assert len(defined & included) < len(
                scripts.defined_names(scripts.source(name, layout=layout, prune=False))
                & included), name


def test_a_script_including_only_cascade_gets_keys_and_changes(tmp_path: Path) -> None:
    # A script that includes only "cascade" gets keys and changes through it.
    base = make_lua(tmp_path, {"u": '--[[ header ]]\n--- @include "cascade"\nreturn {"ok"}\n'},
                    include_texts())
    text = scripts.source("u", base, prune=False)
    assert text == scripts.source("u", base, prune=False)  # cached per (name, base)
    for m in ("local function k_broker(", "local function publish_changes(",
              "local function remove_broker("):
        assert text.count(m) == 1


def resolves(dotted: str) -> bool:
    """``dotted`` names a module, or an attribute of one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_script_comments_name_what_exists_and_leave_figures_to_bench() -> None:
    """Paths and Python names in the scripts' comments exist; measured figures (which go stale)
    live in bench/results and docs/performance.md, not here."""
    lua = scripts.lua_dir()
    root = lua.parent
    for path in [*lua.glob("*.lua"), *lua.glob("includes/**/*.lua")]:
        text = path.read_text()
        for ref in re.findall(r"\b(?:nsfleet|docs|bench)/[\w./-]+\.(?:py|md)", text):
            assert (root / ref).is_file(), (path.name, ref)
        for ref in re.findall(r"(?<![\w/])((?:includes/)?[a-z_]+\.lua)\b", text):
            assert any((lua / d / ref).is_file() for d in (
                ".", "includes", *(f"includes/{sub}" for sub in scripts.LAYOUTS.values()))), (
                path.name, ref)
        for ref in re.findall(r"\bnsfleet(?:\.[a-z_]+)+", text):
            assert resolves(ref), (path.name, ref)
        figure = re.search(r"~ ?\d|\d ?(?:us|µs|ns)\b|\d ?%|\d(?:\.\d+)?x\b", text)
        assert figure is None, (path.name, figure and figure.group())


def test_luacheck_reads_every_script_as_loaded(tmp_path: Path) -> None:
    """What .ci/run lints: each script as Redis loads it, under lines exempting only the
    arguments and the includes' top-level names from luacheck's unused-variable warning."""
    scripts.write_for_luacheck(tmp_path)
    exempt = set().union(*(scripts.defined_names(text) for text in include_texts().values()))
    for name in scripts.SCRIPT_NAMES:
        text = (tmp_path / f"{name}.lua").read_text()
        head, _, rest = text.partition("--[[")
        assert "--[[" + rest == scripts.source(name)
        assert all(len(line) <= 100 for line in head.splitlines())
        assert set(re.findall(r"211/([\w.*]+)", head)) == {"arg_.*", *exempt}


# --- the reply convention ----------------------------------------------------------------------


def test_every_script_declares_its_statuses() -> None:
    assert set(SCRIPT_STATUSES) == set(scripts.SCRIPT_NAMES)
    for statuses in SCRIPT_STATUSES.values():
        assert "ok" in statuses


@pytest.mark.parametrize("name", scripts.SCRIPT_NAMES)
def test_every_status_is_documented_in_the_script_header(name: str) -> None:
    text = (scripts.lua_dir() / f"{name}.lua").read_text()
    output = text[text.index("Output:"):text.index("]]")]
    documented = set(re.findall(r'\{"([a-z]+)"', output))
    assert documented == SCRIPT_STATUSES[name], name


def test_reply_splits_status_and_values() -> None:
    assert decode("route", ["none"]) == ("none", [])
    assert decode("sweep", ["held", 5, 6]) == ("held", [5, 6])
    assert decode("kv_put", ["ok", "1"]) == ("ok", ["1"])


@pytest.mark.parametrize(("name", "raw", "message"), [
    ("route", [], "expected a table led by a status string"),
    ("route", 1, "expected a table led by a status string"),
    ("kv_put", [1], "expected a table led by a status string"),
    ("kv_put", ["fenced"], "unexpected status 'fenced' .expected one of ok."),
    ("heartbeat", ["none", "0"], "unexpected status 'none' .expected one of ok, unknown."),
    ("no_such_script", ["ok"], "no reply statuses declared"),
])
def test_reply_rejects_anything_else(name: str, raw: Any, message: str) -> None:
    with pytest.raises(ScriptReplyError, match=message):
        decode(name, raw)


async def test_every_script_answers_every_status_it_declares(store: RouteStore) -> None:
    """Drive each script into each of its statuses, on fakeredis and a real redis-server, and
    check the raw replies (status first, then the documented fields)."""
    seen: dict[tuple[str, str], list[Any]] = {}
    store.registration.probe_min_topics = 0  # every registration is first offered as a digest
    for (name, layout), script in list(store.calls._scripts.items()):
        async def recording(*args: Any, _name: str = name, _script: Any = script,
                            **kwargs: Any) -> Any:
            raw = await _script(*args, **kwargs)
            seen.setdefault((_name, raw[0]), raw)
            return raw
        store.calls._scripts[name, layout] = recording  # type: ignore[assignment]

    await store.calls._init_layout(False)  # the fixture's load_scripts ran it unrecorded
    two = [TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)]
    a = BrokerRegistration("c1", "10.0.0.1:10911", "g", 0, "10.0.0.1:10912",
                           enable_acting_master=True, data_version=DataVersion(1, 100, 2),
                           topic_configs=two)
    b = replace(a, addr="10.0.0.2:10911", ha_server_addr="10.0.0.2:10912", broker_id=1)
    await store.register_broker(a)
    await store.register_broker(b)
    with pytest.raises(RegistrationRejected):
        await store.register_broker(replace(a, broker_id=7, addr="10.0.0.7:1",
                                            topic_configs=[TopicConfig("T1")]))
    assert (await store.register_broker(
        replace(b, broker_id=0, data_version=DataVersion(5, 500, 1)))).fenced
    await store.register_broker(b)
    assert await store.heartbeat("c1", a.addr)
    # A DataVersion the memo answered, for a registration no longer the broker's last.
    assert await store.registration._write_data_versions([("c1", a.addr, 0, 9, 900)]) == 0
    assert not await store.heartbeat("c1", "10.9.9.9:1")
    assert await store.pickup_route("T1") is not None
    assert await store.pickup_route("nope") is None
    await store.cluster_info()
    await store.topic_list("cluster", "c1")
    await store.topic_list("unit")
    assert await store.kv_put("ns", "k", "v")
    assert await store.kv_delete("ns", "k")
    await store.wipe_write_perm("g")
    await store.register_topic("T9", [])
    await store.delete_topic("T2")
    assert await store.unregister_broker("c1", b.addr, "g", closed_connection="w:1") == -1
    assert await store.unregister_broker("c1", b.addr, "g") == 0
    for i in range(5):
        await store.register_broker(replace(a, name=f"h{i}", addr=f"10.0.1.{i}:1"))
    far = 10**15
    assert (await store.sweep(now_ms=far, guard_share=0.5, guard_max_hold_ms=far)).held
    assert len((await store.sweep(now_ms=far, guard_share=0)).removed) == 6
    # Bounded script time: a registration whose deleteTopicWithBrokerRegistration may remove
    # more rows than one call may ("chunk", then "head", a chunk, the absent rows, the commit).
    store.calls.chunk_rows = 2
    three = [TopicConfig(f"C{i}", 8, 8, 6) for i in range(3)]
    big = replace(a, name="big", addr="10.0.2.1:1", topic_configs=three)
    await store.register_broker(big)
    await store.register_broker(replace(big, topic_configs=three[:2],
                                        data_version=DataVersion(2, 200, 2)),
                                delete_absent_topics=True)
    assert await store.all_topics() == ["C0", "C1"]
    # A chunk of a superseded registration writes nothing.
    assert (await store.calls.call("register_topics", scripts.RegisterTopicsArgs(
        "c1", big.addr, "big", "0", "1", "0", "", "[]", "[]", "0", "")))[0] == "stale"
    # Chunks of several registrations at once: each fenced on its own.
    assert (await store.calls.call("register_topics_joint", scripts.RegisterTopicsJointArgs(
        ["c1", big.addr, "big", "0", "0", "C0\t8\t8\t6\t0\n",
         "c1", "10.0.2.9:1", "other", "0", "0", "C0\t8\t8\t6\t0\n"]))).values == [
            "stale", "", "", ""] * 2
    # A group too big for one cascade is left to drain_cleanup.lua; registering its name
    # meanwhile answers "drain" (then drains and registers).
    await store.register_broker(big)
    assert (await store.calls.call("unregister_broker", scripts.UnregisterBrokerArgs(
        "c1", big.addr, "big", "", 2)))[1][1] == "1"
    await store.register_broker(big)
    assert await store.unregister_broker("c1", big.addr, "big") == 1
    assert await store.all_topics() == []
    # An acting-master group too big for one call loses its master: write perm cleared apart.
    acting = replace(big, name="act", addr="10.0.3.1:1")
    await store.register_broker(acting)
    await store.register_broker(replace(acting, broker_id=1, addr="10.0.3.2:1"))
    assert await store.unregister_broker("c1", acting.addr, "act") == 0
    await _drive_the_controller_scripts(store)
    # The move to layout 2 (lua/layout_move.lua), in a namespace of its own: it would hold the
    # store's writes.
    move = store.calls._scripts["layout_move", scripts.LAYOUT_TOPICS]
    for op, owner in (("begin", "w1"), ("begin", "w2"), ("renew", "w2")):
        await move(keys=[Keys("moving").prefix], args=scripts.argv(
            "layout_move", scripts.LayoutMoveArgs(op, owner, 30_000)))
    # Each queue-data script assembled for the layout the store is not in answers "layout".
    other = next(lay for lay in scripts.LAYOUTS if lay != store.calls.layout)
    for name in sorted(scripts.LAYOUT_SCRIPTS - {"heartbeat"}):
        fields = scripts.ARGS[name]._fields  # type: ignore[attr-defined]
        args = ["0"] * len(fields) if name not in scripts.REST else ["0"] * (len(fields) - 1)
        raw = await store.calls._scripts[name, other](keys=[store.keys.prefix], args=args)
        assert raw == ["layout", store.calls.layout], name

    # Last: its reads run concurrently, which would warm a second connection for the chunked
    # calls above and let their replies race for "seen".
    index = await store.topic_summary_rows.index()
    assert index.topics == ["C0", "C1", "C2"]
    rows = await store.topic_summary_rows.rows(index.topics)
    assert [(r.topic, [q[0] for q in r.queues]) for r in rows] == [
        (t, ["act"]) for t in ("C0", "C1", "C2")]
    assert seen[("topic_summary", "ok")] == ["ok", *(
        [r.topic, [q if i == 0 else str(q) for i, q in enumerate(r.queues[0])]]
        for r in rows)]

    assert set(seen) == {(n, s) for n, statuses in SCRIPT_STATUSES.items() for s in statuses}
    assert seen[("register_broker", "fenced")] == ["fenced"]
    assert seen[("register_broker", "rejected")] == ["rejected"]
    assert seen[("register_broker", "full")] == ["full"]
    assert seen[("unregister_broker", "kept")] == ["kept"]
    assert seen[("unregister_broker", "ok")] == ["ok", "0", "0"]
    assert seen[("register_broker", "chunk")] == ["chunk"]
    assert seen[("register_broker", "drain")] == ["drain"]
    assert seen[("register_broker", "head")][2:] == ["1", "0", "1", "1", "1", "0"]
    assert seen[("register_topics", "ok")] == ["ok", "1", "2", "2"]
    assert seen[("drain_cleanup", "ok")] == ["ok", 2, 1]
    # SSCAN's COUNT is a hint: fakeredis takes it literally; Redis may return a small set whole,
    # with a cursor left to follow or not (a hashtable-encoded set: it depends on the hashing).
    assert seen[("clear_write_perm", "ok")] in (["ok", 3, "0"], ["ok", 3, "1"], ["ok", 2, "1"])
    assert seen[("heartbeat", "unknown")] == ["unknown", "0", "", "", ""]
    assert seen[("heartbeat", "ok")] == ["ok", "0", "1", "100", "2"]
    assert seen[("route", "none")] == ["none"]
    assert seen[("sweep", "held")] == ["held", 6, 6, "0"]
    assert seen[("kv_put", "ok")] == ["ok", "1"]
    assert seen[("kv_delete", "ok")] == ["ok", "1"]
    assert seen[("register_topic", "ok")] == ["ok", 0]
    assert seen[("delete_topic", "ok")] == ["ok", 1, 0]
    assert seen[("write_perm", "ok")] == ["ok", 2, "0"]
    assert seen[("layout_move", "ok")] == ["ok", "1"]
    assert seen[("layout_move", "held")] == ["held", "owner"]
    assert seen[("layout_move", "lost")] == ["lost"]
    status, order_conf, mappings, rows, entries, now, first, deadlines, filters = seen[
        ("route", "ok")]
    assert (status, order_conf, mappings) == ("ok", "", [])  # no static topics
    name, row = rows.split("\n")  # one group: its name and its row, as one string
    assert name == "g" and row.count("\t") == 3
    assert entries.startswith("c1\t") and "\r" not in entries  # one group's entry
    assert int(first) >= int(now) and deadlines == []  # no broker is past its deadline
    assert filters == []


async def _drive_the_controller_scripts(store: RouteStore) -> None:
    """Every status of every controller script (lua/controller_*.lua)."""
    ct = store.controller

    async def beat(name: str, broker_id: int, timeout_ms: int = 10_000) -> None:
        await ct.heartbeat(ControllerHeartbeat("C", name, f"h:{broker_id}", broker_id, 0, 0, 0,
                                               timeout_ms, 0), "w:1")

    assert await ct.apply_broker_id("C", "s", 2, "h:2;1") == "unregistered"
    assert await ct.apply_broker_id("C", "s", 1, "h:1;1") == "ok"
    assert await ct.apply_broker_id("C", "s", 1, "h:9;1") == "taken"
    assert await ct.apply_broker_id("C", "s", 2, "h:2;1") == "ok"
    assert (await ct.register("nope", 1, "h:1"))[0] == "unknown"
    assert (await ct.register("s", 7, "h:7"))[0] == "unassigned"
    assert (await ct.register("s", 1, "h:1"))[0] == "ok"
    assert (await ct.elect("nope", 1, designate=False, unclean=False)).outcome == "unknown"
    await beat("s", 1)
    await beat("s", 2)
    assert (await ct.elect("s", 1, designate=False, unclean=False)).outcome == "elected"
    assert (await ct.elect("s", 2, designate=False, unclean=False)).outcome == "still"
    assert (await ct.elect("s", None, designate=False, unclean=False,
                           expected_epoch=0)).outcome == "fenced"
    alter = ct.alter_sync_state_set
    assert (await alter("nope", 1, 1, 1, [1]))[0] == "unknown"
    assert (await alter("s", 1, 1, 1, [1]))[0] == "same"
    assert (await alter("s", 2, 1, 1, [1, 2]))[0] == "master"
    assert (await alter("s", 1, 9, 1, [1, 2]))[0] == "fenced"
    assert (await alter("s", 1, 1, 9, [1, 2]))[0] == "stale"
    assert (await alter("s", 1, 1, 1, [1, 5]))[0] == "stranger"
    assert (await alter("s", 1, 1, 1, [2]))[0] == "leaderless"
    assert (await alter("s", 1, 1, 1, [1, 2]))[0] == "ok"
    # Another connection of the replica closes while its heartbeats still come over "w:1", on a
    # live worker: "kept".
    await store.mark_worker_alive("w", 60_000)
    assert await ct.inactive("s", 1, connection="w:2", unclean=False) is None
    # The master's connection closes: the in-sync slave is elected in the same call.
    moved = await ct.inactive("s", 1, connection="w:1", unclean=False)
    assert moved is not None and moved.master_id == 2 and moved.master_epoch == 2
    assert (await alter("s", 2, 2, 3, [1, 2]))[0] == "dead"
    assert (await ct.elect("s", 1, designate=True, unclean=False)).outcome == "failed"
    assert (await ct.clean("s", [], living=False))[0] == "master"
    assert (await ct.clean("s", [2], living=False))[0] == "alive"
    # The last replica goes: no candidate, the master is cleared ("none").
    gone = await ct.inactive("s", 2, connection="w:1", unclean=False)
    assert gone is not None and gone.outcome == "none"
    assert (await ct.elect("s", None, designate=False, unclean=False,
                           expected_epoch=3)).outcome == "none"
    assert (await ct.broker_set("s")) is not None  # masterEpoch 4: each "none" is a change
    assert (await ct.scan(10, reelect=True)) == ([], [SetHealth("s", None, 4, False, 1, False)])
    assert (await ct.clean("nope", [], living=True))[0] == "unknown"
    assert (await ct.clean("s", [], living=False))[0] == "ok"
    assert await ct.broker_set("s") is None
    # A set moved from a Java controller, then the same again, an older and a rival state.
    java = BrokerSet("m", "c", 3, 2, "10.0.0.2:1", 5, (1, 2), 7,
                     (Replica(1, "10.0.0.1:1", True), Replica(2, "10.0.0.2:1", True)))
    assert (await ct.import_set(java, 60_000)) == ("ok", [])
    assert await ct.broker_set("m", replicas=True) == java
    assert (await ct.import_set(java, 60_000)) == ("same", [])
    assert (await ct.import_set(replace(java, master_epoch=4), 60_000)) == ("behind", ["5"])
    assert (await ct.import_set(replace(java, master_id=1), 60_000)) == ("conflict", ["2"])
