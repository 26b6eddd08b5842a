"""fastjson-compatible JSON writers and the lenient reader (Java RemotingSerializable, and the
standard and legacy TopicRouteData JSON of ClientRequestProcessor.getRouteInfoByTopic)."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsfleet.domain.model import BrokerData, QueueData, TopicRouteData
from nsfleet.wire.fastjson import (
    MAX_JSON_DEPTH,
    JsonTooDeep,
    dumps_legacy,
    dumps_standard,
    dumps_standard_in_order,
    loads_lenient,
    loads_standard,
    quote_legacy,
    quote_standard,
)


def example_route() -> dict[str, Any]:
    return {
        "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4,
                        "topicSysFlag": 0, "writeQueueNums": 4}],
        "brokerDatas": [{"cluster": "DefaultCluster", "brokerName": "broker-a",
                         "brokerAddrs": {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"},
                         "enableActingMaster": False, "zoneName": None}],
        "filterServerTable": {},
        "orderTopicConf": None,
    }


STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
    b'"topicSysFlag":0,"writeQueueNums":4}]}'
)
LEGACY = STANDARD.replace(b'{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}',
                          b'{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}')


def test_route_example_standard_encoding() -> None:
    assert dumps_standard(example_route()) == STANDARD
    assert len(STANDARD) == 282


def test_route_example_legacy_encoding() -> None:
    assert dumps_legacy(example_route()) == LEGACY


def test_legacy_output_reads_back() -> None:
    assert loads_lenient(LEGACY) == json.loads(STANDARD)


def test_int_keys_sort_numerically() -> None:
    data = {10: "x", 2: "y", 1: "z"}
    assert dumps_legacy(data) == b'{1:"z",2:"y",10:"x"}'
    assert dumps_standard(data) == b'{"1":"z","2":"y","10":"x"}'


def test_str_keys_sort_alphabetically_and_nulls_are_dropped() -> None:
    assert dumps_legacy({"b": 1, "a": None, "C": [None, 1]}) == b'{"C":[null,1],"b":1}'


def test_non_ascii() -> None:
    data = {"t": "zürich 東京 😀"}
    assert dumps_legacy(data) == '{"t":"zürich 東京 😀"}'.encode()
    assert dumps_standard(data) == b'{"t":"z\\u00FCrich \\u6771\\u4EAC \\uD83D\\uDE00"}'


def test_escapes_follow_fastjson() -> None:
    s = 'a"b\\c/d\n\t\b\f\r\x01\x0b\x7f\x85\u2028é'
    assert quote_legacy(s) == '"a\\"b\\\\c/d\\n\\t\\b\\f\\r\\u0001\\u000B\\u007F\\u0085\\u2028é"'
    assert quote_standard(s) == (
        '"a\\"b\\\\c\\/d\\n\\t\\b\\f\\r\\u0001\\u000B\\u007F\\u0085\\u2028\\u00E9"')
    assert json.loads(quote_standard(s)) == s
    assert json.loads(quote_legacy(s)) == s


def test_big_longs_are_quoted_only_in_standard_mode() -> None:
    big = 2**53
    assert dumps_standard({"v": big, "w": big - 1}) == (
        b'{"v":"9007199254740992","w":9007199254740991}')
    assert dumps_legacy({"v": big}) == b'{"v":9007199254740992}'


def test_other_types() -> None:
    class Color(enum.Enum):
        RED = "r"

    class Code(enum.IntEnum):
        OK = 0

    values = [True, False, None, 1.5, float("nan"), Code.OK, Color.RED, b"\x00\x01", (1,),
              {"b", "a"}]
    assert dumps_legacy(values) == b'[true,false,null,1.5,null,0,"RED","AAE=",[1],["a","b"]]'
    assert dumps_legacy({True: 1}) == b"{true:1}"
    with pytest.raises(TypeError):
        dumps_legacy(object())
    with pytest.raises(TypeError):
        dumps_legacy({(1, 2): 1})


def test_lone_surrogate_written_as_question_mark() -> None:
    assert dumps_legacy("a\ud800b") == b'"a?b"'


# --- loads_lenient -------------------------------------------------------------------------------


def test_standard_json() -> None:
    assert loads_lenient(b'{"a":[1,2.5,"x",null,true]}') == {"a": [1, 2.5, "x", None, True]}
    assert loads_lenient('"\\u00e9"') == "é"
    assert loads_lenient(bytearray(b"[]")) == []
    assert loads_lenient(memoryview(b"{}")) == {}


def test_unquoted_numeric_keys_become_strings() -> None:
    body = b'{"bname":"broker-a","currIdMap":{0:0,1:1,-1:3},"epoch":1}'
    assert loads_lenient(body) == {"bname": "broker-a", "currIdMap": {"0": 0, "1": 1, "-1": 3},
                                   "epoch": 1}


def test_fastjson_extras() -> None:
    text = "{topic:'Topic\\'A\"', $x_1 : [1, 2, ], 'k':{},\"s\":\"tab\there\",}"
    assert loads_lenient(text) == {"topic": "Topic'A\"", "$x_1": [1, 2], "k": {},
                                   "s": "tab\there"}


def test_bom_and_invalid_utf8() -> None:
    assert loads_lenient(b"\xef\xbb\xbf{}") == {}
    assert loads_lenient(b'{"a":"\xff"}') == {"a": "\ufffd"}
    assert loads_lenient(b'{0:"\xff"}') == {"0": "\ufffd"}


@pytest.mark.parametrize(
    "text",
    ["", "   ", "{", "}", "{a}", "{a:}", "{:1}", "[1,,2]", "[1 2]", "nul", "{'a':1} x", "'abc",
     "{\"a\":1", "[" * 3000, "{a:" * 3000, "\x00"],
)
def test_garbage_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="invalid JSON"):
        loads_lenient(text)


def test_wrong_input_type() -> None:
    with pytest.raises(TypeError):
        loads_lenient(123)  # type: ignore[arg-type]


def nested(depth: int, standard: bool) -> str:
    opener = '{"a":' if standard else "{a:"
    return opener * depth + "1" + "}" * depth


@pytest.mark.parametrize("standard", [True, False])
def test_every_reader_refuses_nesting_past_the_limit_with_one_error(standard: bool) -> None:
    """msgspec, json.loads and the lenient reader each have their own guard (the interpreter's
    recursion limit, which depends on the caller's stack); whichever reads the text, 101 levels
    and 100,000 levels get the same error, and 100 levels are read."""
    readers = [loads_lenient] + ([loads_standard] if standard else [])
    for read in readers:
        assert read(nested(MAX_JSON_DEPTH, standard)) is not None
        for depth in (MAX_JSON_DEPTH + 1, 500, 1001, 100_000):
            with pytest.raises(JsonTooDeep, match="invalid JSON: nested deeper than 100 levels"):
                read(nested(depth, standard))
    deep_list = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(JsonTooDeep):
        loads_lenient(deep_list.encode())
    wide = json.dumps({str(i): [[i]] for i in range(1000)})  # many brackets, shallow
    assert len(loads_lenient(wide)) == 1000


def test_non_standard_json_past_the_lenient_limit_is_refused() -> None:
    text = "{'a':'" + "x" * 1000 + "'}"
    assert loads_lenient(text, lenient_max=2000) == {"a": "x" * 1000}
    with pytest.raises(ValueError, match="non-standard JSON"):
        loads_lenient(text, lenient_max=500)
    assert loads_lenient('{"a":"' + "x" * 1000 + '"}', lenient_max=10)  # standard: any size


@pytest.mark.parametrize(("text", "value"), [
    ("'x\\'y'", "x'y"), ("'say \"hi\"'", 'say "hi"'), ("'esc \\\"q'", 'esc "q'),
    ("'back\\\\'", "back\\"), ("'nl\\n\\u0041'", "nl\nA"), ("''", ""),
])
def test_single_quoted_strings_read_as_fastjson_reads_them(text: str, value: str) -> None:
    assert loads_lenient("{k:" + text + "}") == {"k": value}


# --- the fast path of a route missing the cache --------------------------------------------------

_texts = st.text(max_size=12) | st.sampled_from(["broker-a", "10.0.0.1:10911", "a/b",
                                                 "DefaultCluster"])
_ints = st.integers(-(2**31), 2**31 - 1)


@st.composite
def routes(draw: st.DrawFn) -> TopicRouteData:
    names = draw(st.lists(_texts, min_size=1, max_size=4, unique=True))
    return TopicRouteData(
        [QueueData(n, draw(_ints), draw(_ints), draw(_ints), draw(_ints)) for n in names],
        [BrokerData(draw(_texts), n, draw(st.dictionaries(st.integers(-(2**63), 2**63 - 1),
                                                          _texts, max_size=3)),
                    draw(st.booleans()), draw(st.none() | _texts)) for n in names],
        draw(st.dictionaries(_texts, st.lists(_texts, max_size=2), max_size=2)),
        draw(st.none() | _texts))


@settings(max_examples=300)
@given(route=routes(), acting_master=st.booleans())
def test_a_route_in_order_is_written_as_the_python_writer_writes_it(
        route: TopicRouteData, acting_master: bool) -> None:
    """TopicRouteData.to_dict (no static-topic mappings) holds its keys as fastjson sorts them,
    so msgspec's encoder, with '/' escaped and any other escape, non-ASCII or DEL left to the
    Python writer, writes the same bytes, whatever the strings and ids."""
    value = route.to_dict(acting_master=acting_master)
    assert dumps_standard_in_order(value) == dumps_standard(value)


def test_the_in_order_writer_keeps_the_order_it_is_given() -> None:
    # Its precondition, shown: an unsorted dict stays unsorted (dumps_standard sorts it).
    assert dumps_standard_in_order({"b": 1, "a": 2}) == b'{"b":1,"a":2}'
    assert dumps_standard_in_order({"a/": "\u00e9"}) == dumps_standard({"a/": "\u00e9"})
