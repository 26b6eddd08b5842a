"""nsfleet/store/keys.py and lua/includes/keys.lua build the same keys, every script loads with
its includes inlined and a documented KEYS/arguments/Output header, and Python and Lua agree on
each script's arguments (nsfleet/store/scripts.py names them, the header documents them)."""

from __future__ import annotations

import re

import pytest
import redis.asyncio as aioredis

from nsfleet.store import scripts
from nsfleet.store.keys import Keys, escape, live_member, replica_member, unescape

# (lua builder call, python builder) with the same arguments.
CASES = [
    ("k_broker('c1', '10.0.0.1:10911')", lambda k: k.broker("c1", "10.0.0.1:10911")),
    ("k_group('broker-a')", lambda k: k.group("broker-a")),
    ("k_queue('%RETRY%g|x', 'broker-a')", lambda k: k.queue("%RETRY%g|x", "broker-a")),
    # The parts a loop over a table joins around each topic.
    ("table.concat({k_queue_parts('broker-a')}, '%RETRY%g|x')",
     lambda k: k.queue("%RETRY%g|x", "broker-a")),
    ("k_clusters()", lambda k: k.clusters),
    ("k_cluster('c1')", lambda k: k.cluster("c1")),
    ("k_members('broker-a')", lambda k: k.members("broker-a")),
    ("k_topics()", lambda k: k.topics),
    ("k_topic('T1')", lambda k: k.topic("T1")),
    ("k_topic_prefix() .. 'T1'", lambda k: k.topic("T1")),
    ("k_group_ids()", lambda k: k.group_ids),
    ("k_group_names()", lambda k: k.group_names),
    ("k_group_seq()", lambda k: k.group_seq),
    ("k_broker_topics('broker-a')", lambda k: k.broker_topics("broker-a")),
    ("k_deadlines()", lambda k: k.deadlines),
    ("k_reg('c1', 'h:1')", lambda k: k.reg("c1", "h:1")),
    ("k_tables('c1', 'h:1')", lambda k: k.tables("c1", "h:1")),
    ("k_filters('c1', 'h:1')", lambda k: k.filters("c1", "h:1")),
    ("k_member_clusters('b')", lambda k: k.member_clusters("b")),
    ("k_route_groups()", lambda k: k.route_groups),
    ("k_filtered()", lambda k: k.filtered),
    ("k_conns('c1', 'h:1')", lambda k: k.conns("c1", "h:1")),
    ("k_worker('w1')", lambda k: k.worker("w1")),
    ("k_mappings('t')", lambda k: k.mappings("t")),
    ("k_cleanups()", lambda k: k.cleanups),
    ("k_cleanup('b')", lambda k: k.cleanup("b")),
    ("k_perm_clears()", lambda k: k.perm_clears),
    ("k_seq()", lambda k: k.seq),
    ("k_rev()", lambda k: k.rev),
    ("k_changes()", lambda k: k.changes),
    ("k_ctl_set('b')", lambda k: k.ctl_set("b")),
    ("k_ctl_replica('b', 2)", lambda k: k.ctl_replica("b", 2)),
    ("k_ctl_live('b', 2)", lambda k: k.ctl_live("b", 2)),
    ("k_ctl_conns('b', 2)", lambda k: k.ctl_conns("b", 2)),
    ("k_ctl_sets()", lambda k: k.ctl_sets),
    ("k_ctl_ids('b')", lambda k: k.ctl_ids("b")),
    ("k_ctl_deadlines()", lambda k: k.ctl_deadlines),
    ("k_layout()", lambda k: k.layout),
    ("k_layout_move()", lambda k: k.layout_move),
    ("k_topic_routes('T:1')", lambda k: k.topic_routes("T:1")),
    ("k_topic_routes_prefix() .. 'T'", lambda k: k.topic_routes("T")),
    ("k_group_topics('b')", lambda k: k.group_topics("b")),
    ("k_cleanup_topics('b')", lambda k: k.cleanup_topics("b")),
    # Members of a sorted set, not keys: the last two.
    ("live_member('c1', 'h:1')", lambda k: live_member("c1", "h:1")),
    ("replica_member('b', 2)", lambda k: replica_member("b", 2)),
]


@pytest.mark.parametrize("namespace", ["default", "test", "prod-eu.1"])
async def test_lua_and_python_key_builders_agree(any_redis: aioredis.Redis, namespace: str) -> None:
    keys_lua = (scripts.lua_dir() / "includes" / "keys.lua").read_text()
    body = "return {" + ", ".join(call for call, _ in CASES) + "}"
    k = Keys(namespace)
    built = await any_redis.eval(keys_lua + "\n" + body, 1, k.prefix)
    assert built == [build(k) for _, build in CASES]
    # One hash tag per namespace: every key lands in the namespace's cluster slot.
    for key in built[:-2]:
        assert key.startswith(f"nsfleet:{{{namespace}}}:")


def test_kv_keys_escape_separators() -> None:
    k = Keys("ns")
    assert k.kv("a:b", "c%d") == "nsfleet:{ns}:kv:a%3Ab:c%25d"
    assert k.kv_table("a:b") == "nsfleet:{ns}:idx:kv:a%3Ab"
    for raw in ["a:b", "%3A", "100%", "x%25:y", ""]:
        assert unescape(escape(raw)) == raw
        assert ":" not in escape(raw)


def test_row_tables_and_indexes_do_not_overlap() -> None:
    k = Keys("ns")
    for table in ("brokers", "groups", "queues", "kv"):
        pattern = k.table_pattern(table)
        prefix = pattern[:-1]
        for index in (k.clusters, k.cluster("x"), k.members("x"), k.topics, k.topic("x"),
                      k.broker_topics("x"), k.deadlines, k.reg("c", "h:1"), k.filters("c", "h:1"),
                      k.kv_namespaces, k.kv_table("x"), k.seq, k.rev,
                      k.config):
            assert not index.startswith(prefix), (index, pattern)


@pytest.mark.parametrize("name", scripts.SCRIPT_NAMES)
def test_every_script_is_complete_and_documented(name: str) -> None:
    text = scripts.source(name)
    assert "--- @include" not in text
    header = text[:text.index("]]")]
    assert re.search(r"KEYS\[1\]", header) and "Output:" in header and "Input:" in header
    # Every KEYS[i] the script reads is documented in its header.
    body = text[text.index("]]"):]
    for used in set(re.findall(r"KEYS\[(\d+)\]", body)):
        assert re.search(rf"KEYS\[{used}\]", header), (name, used)
    # ARGV is read by name only, through the locals generated from Python (the includes'
    # comments may say so).
    code = re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", body.replace(scripts.args_prelude(name), ""),
                  flags=re.DOTALL)
    assert "ARGV" not in code, name


@pytest.mark.parametrize("name", scripts.SCRIPT_NAMES)
def test_python_and_lua_agree_on_the_arguments(name: str) -> None:
    """The header lists the arguments of the script's NamedTuple, in ARGV order, and the script
    reads them all and no other."""
    fields = scripts.ARGS[name]._fields  # type: ignore[attr-defined]
    text = (scripts.lua_dir() / f"{name}.lua").read_text()
    header = text[:text.index("]]")]
    listed = re.findall(r"^ {4}ARGV\[(\d+)(\.\.)?\] arg_(\w+)\b", header, re.MULTILINE)
    assert [f for _, _, f in listed] == list(fields), name
    assert [int(i) for i, _, _ in listed] == list(range(1, len(fields) + 1)), name
    # A list argument takes the rest of ARGV: ARGV[n..].
    assert [f for _, rest, f in listed if rest] == (list(fields[-1:]) if name in scripts.REST
                                                    else []), name
    if fields:
        assert f"nsfleet/store/scripts.py, {scripts.ARGS[name].__name__}):" in header, name
    code = re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", text, flags=re.DOTALL)
    used = set(re.findall(r"\barg_(\w+)", code))
    assert used <= set(fields), name
    # One argument is there for SLOWLOG and MONITOR readers only.
    assert set(fields) - used <= {"topic_count"}, name
    if name in scripts.REST:
        assert "the last ARGV items" in header or "every ARGV item" in header \
            or "the rest of ARGV" in header, name


def test_arguments_go_in_field_order_and_the_rest_goes_last() -> None:
    assert scripts.argv("register_topic", scripts.RegisterTopicArgs("T", ["g", 1, 1, 6, 0])) == [
        "T", "g", 1, 1, 6, 0]
    assert scripts.argv("route", scripts.RouteArgs("T", "1")) == ["T", "1"]
    with pytest.raises(TypeError, match=r"route\.lua takes RouteArgs, not list"):
        scripts.argv("route", ["T", "1"])  # type: ignore[arg-type]


async def test_the_generated_locals_name_argv(any_redis: aioredis.Redis) -> None:
    prelude = scripts.args_prelude("register_topic")
    got = await any_redis.eval(prelude + "return {arg_topic, #arg_groups, arg_groups[4]}", 0,
                               *scripts.argv("register_topic",
                                             scripts.RegisterTopicArgs("T", ["g", 1, 2, 6, 0])))
    assert got == ["T", 5, "6"]


async def test_every_script_compiles(any_redis: aioredis.Redis) -> None:
    for name in scripts.SCRIPT_NAMES:
        sha = await any_redis.script_load(scripts.source(name))
        assert (await any_redis.script_exists(sha)) == [True]
