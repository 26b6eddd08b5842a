"""The fast paths of REGISTER_BROKER body decoding read every body exactly as the generic path
does: the typed msgspec decode of JSON bodies, the inline TopicConfig line reader of compressed
bodies, the strict parser in front of the tolerant one, and the connection's memo of its last
decoded body."""

from __future__ import annotations

import struct
import zlib

import pytest

from nsfleet.domain.errors import BodyDecodeError
from nsfleet.domain.model import check_topics
from nsfleet.remoting.handlers import Connection
from nsfleet.runtime.table_thread import OFF_LOOP_BODY_BYTES
from nsfleet.wire import bodies
from nsfleet.wire.bodies import decode_register_body, decode_topic_config_line
from nsfleet.wire.codec import V3_0_11, V5_0_0
from nsfleet.wire.fastjson import loads_lenient
from tests.unit.wire.test_bodies import SAMPLE_4X, SAMPLE_5X

TC = '"topicConfigTable":{"T":{"perm":6,"readQueueNums":4,"topicName":"T","writeQueueNums":4}}'
JSON_BODIES = [
    SAMPLE_4X, SAMPLE_5X,
    b'{"filterServerList":null,"topicConfigSerializeWrapper":{' + TC.encode() + b"}}",
    b'{"topicConfigSerializeWrapper":{' + TC.encode() + b"}}",  # no filterServerList at all
    b'{"filterServerList":["a:1",null,7],"topicConfigSerializeWrapper":null}',
    b'{"topicConfigSerializeWrapper":{"dataVersion":null,"topicConfigTable":{"T":null}}}',
    # values the typed shapes refuse, read by the generic path's rules
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"6","order":1}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":6.0,"readQueueNums":true}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"key":{"perm":6}}}}',  # no topicName
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"A":{"topicName":"B"},'
    b'"B":{"topicName":"B","perm":2}}}}',  # the last entry of a name wins
    b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":123456789012345678901234}}}',
    b'\xef\xbb\xbf{"topicConfigSerializeWrapper":{' + TC.encode() + b"}}",  # a BOM
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T\xff":{"perm":6}}}}',  # bad UTF-8
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{T:{perm:6,}}}}',  # fastjson only
    b'{"a":1,"a":2,"topicConfigSerializeWrapper":{' + TC.encode() + b',"topicConfigTable":{}}}',
    # numbers at and past Java's int, a null number: only the first is decoded as sent
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T",'
    b'"perm":2147483647,"readQueueNums":-2147483648,"topicSysFlag":0}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T",'
    b'"perm":2147483648},"U":{"topicName":"U"}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":null}}}}',
    b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":null,"perm":2}}}}',
]


def _generic(body: bytes, compressed: bool, version: int) -> object:
    saved = bodies._typed_json_form
    bodies._typed_json_form = lambda _body: None
    try:
        return decode_register_body(body, compressed, version)
    except BodyDecodeError as exc:
        return ("error", exc.remark)
    finally:
        bodies._typed_json_form = saved


def _served(body: bytes, compressed: bool, version: int) -> object:
    try:
        return decode_register_body(body, compressed, version)
    except BodyDecodeError as exc:
        return ("error", exc.remark)


@pytest.mark.parametrize("body", JSON_BODIES)
@pytest.mark.parametrize("version", [V5_0_0, 405])
def test_typed_json_decode_reads_what_the_generic_path_reads(body: bytes, version: int) -> None:
    assert _served(body, False, version) == _generic(body, False, version)


@pytest.mark.parametrize("wrapper", [
    b'{"dataVersion":{"counter":1,"timestamp":2},' + TC.encode() + b"}",
    b'{"topicConfigTable":{"T":{"perm":"6"}}}',
    b'{"topicConfigTable":{"T":{"perm":6}},"topicQueueMappingInfoMap":{"T":{"bname":"b"}}}',
])
def test_the_pre_v3_wrapper_fast_path_matches_the_generic_one(wrapper: bytes) -> None:
    served = decode_register_body(wrapper, False, V3_0_11 - 1)
    generic = bodies._decode_wrapper(loads_lenient(wrapper))
    generic.topic_queue_mapping_info = {}
    assert served == generic


def test_a_typed_body_decode_gives_the_topics_and_filters() -> None:
    body = decode_register_body(SAMPLE_5X, False, V5_0_0)
    assert body.filter_server_list == ["10.0.0.9:30000"]
    assert sorted(body.topic_config_table) == ["OrderTopic", "TopicTest"]
    assert body.topic_config_table["OrderTopic"].order is True
    assert body.topic_queue_mapping_info["StaticTopic"]["currIdMap"] == {"0": 0, "1": 1}


def test_a_table_as_brokers_send_it_needs_no_second_look_at_its_numbers() -> None:
    """Decoded straight into TopicConfigs, a table's numbers are proven within Java's int, so
    ``check_topics`` checks only the names; a number past it sends the table the other way, and
    the registration then drops that topic alone."""
    sent = decode_register_body(b'{"topicConfigSerializeWrapper":{' + TC.encode() + b"}}", False,
                                V5_0_0)
    assert sent.numbers_checked
    past = decode_register_body(
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"Big":{"topicName":"Big",'
        b'"perm":2147483648},"T":{"topicName":"T","perm":6}}}}', False, V5_0_0)
    assert not past.numbers_checked
    checked = check_topics(past.topic_configs, numbers_checked=past.numbers_checked)
    assert [tc.topic_name for tc in checked.kept] == ["T"]
    assert [d.topic for d in checked.dropped] == ["Big"]


LINES = [
    "T 8 8 6 SINGLE_TAG {}", "T 8 8 6 SINGLE_TAG", "T 8 8 6 SINGLE_TAG ", "T 8 8 6 ", "T 8 8 6",
    "T +8 8 6 SINGLE_TAG", "T 0008 8 6 X", "T 2147483647 8 6 X", "T 2147483648 8 6 X",
    "T 99999999999 8 6 X", "T \u0668 8 6 X", " 8 8 6 X", "Tö\u00e9 1 2 3 X {\"a\":\"b c\"}",
    "T  8 8 6 X", "T 8 8 6 X  Y",
]


def _compressed(lines: list[bytes], version: int = V5_0_0) -> bytes:
    def block(b: bytes) -> bytes:
        return struct.pack(">i", len(b)) + b
    raw = block(b'{"counter":1,"timestamp":2}') + struct.pack(">i", len(lines))
    raw += b"".join(block(line) for line in lines) + block(b"[]") + struct.pack(">i", 0)
    return zlib.compress(raw, 9)


@pytest.mark.parametrize("line", LINES)
def test_compressed_lines_read_as_decode_topic_config_line_reads_them(line: str) -> None:
    try:
        expected: object = decode_topic_config_line(line)
    except BodyDecodeError as exc:
        expected = ("error", exc.remark)
    try:
        table = decode_register_body(_compressed([line.encode()]), True, V5_0_0).topic_config_table
        got: object = next(iter(table.values()))
    except BodyDecodeError as exc:
        got = ("error", exc.remark)
    assert got == expected


def test_an_invalid_utf8_name_is_decoded_as_the_whole_line_would_be() -> None:
    raw = b"T\xff\xfe 1 2 3 SINGLE_TAG {}"
    table = decode_register_body(_compressed([raw]), True, V5_0_0).topic_config_table
    assert list(table.values()) == [decode_topic_config_line(raw.decode("utf-8", "replace"))]


@pytest.mark.parametrize("raw", [b"\x00\x00\x00\x09T 1 2", b"\x00\x00\x00", b"\xff\xff\xff\xff"])
def test_truncated_topic_lines_are_refused(raw: bytes) -> None:
    body = zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + raw)
    with pytest.raises(BodyDecodeError):
        decode_register_body(body, True, V5_0_0)


@pytest.mark.parametrize("text", ["[" * 5000, '{"a":' * 5000])
def test_deep_nesting_is_a_value_error_not_a_crash(text: str) -> None:
    with pytest.raises(ValueError, match="invalid JSON: nested deeper than 100 levels"):
        loads_lenient(text.encode())


async def test_the_connection_remembers_its_last_decoded_body_only_for_the_same_bytes() -> None:
    conn = Connection(peer="p")
    first = await conn.register_body(SAMPLE_5X, False, V5_0_0)
    assert await conn.register_body(bytes(SAMPLE_5X), False, V5_0_0) is first
    assert await conn.register_body(SAMPLE_5X, False, 405) is not first  # another version
    changed = SAMPLE_5X.replace(b'"counter":5', b'"counter":6')
    assert (await conn.register_body(changed, False, V5_0_0)).data_version.counter == 6
    assert (await conn.register_body(SAMPLE_5X, False, V5_0_0)).data_version.counter == 5
    assert (await conn.register_body(None, False, V5_0_0)).topic_config_table == {}


async def test_the_connection_keeps_a_digest_of_its_last_body_not_the_bytes() -> None:
    """A 10,000-topic broker's body is 1.7 MB: a worker with 150 of them kept ~250 MB."""
    conn = Connection(peer="p")
    body = bytes(SAMPLE_5X) + b" " * (2 * OFF_LOOP_BODY_BYTES)  # a big body, decoded off the loop
    first = await conn.register_body(body, False, V5_0_0)
    assert conn.last_register_body is not None
    assert not any(isinstance(part, bytes) and len(part) > 64
                   for part in conn.last_register_body)
    assert await conn.register_body(bytes(body), False, V5_0_0) is first
    same_length = body.replace(b'"counter":5', b'"counter":7')
    assert (await conn.register_body(same_length, False, V5_0_0)).data_version.counter == 7


async def test_a_big_body_is_decoded_off_the_loop_to_the_same_result() -> None:
    """Past OFF_LOOP_BODY_BYTES the decode runs in a thread; the answer is the same."""
    topics = ",".join(f'"T{i}":{{"topicName":"T{i}","readQueueNums":4,"writeQueueNums":4,'
                      f'"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,'
                      f'"order":false}}' for i in range(2000))
    big = (b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1},'
           b'"topicConfigTable":{' + topics.encode() + b'}},"filterServerList":[]}')
    assert len(big) > OFF_LOOP_BODY_BYTES
    decoded = await Connection(peer="p").register_body(big, False, V5_0_0)
    assert decoded == decode_register_body(big, False, V5_0_0)
    assert len(decoded.topic_config_table) == 2000
