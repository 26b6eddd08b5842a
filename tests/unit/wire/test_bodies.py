"""REGISTER_BROKER bodies (RegisterBrokerBody.decode), crc32 and Java Properties text."""

from __future__ import annotations

import struct
import zlib

import pytest

from nsfleet.domain.errors import BodyDecodeError
from nsfleet.domain.java_properties import format_properties, parse_properties
from nsfleet.domain.model import DataVersion, TopicConfig
from nsfleet.wire.bodies import (
    RegisterBody,
    crc32,
    decode_register_body,
    decode_topic_config_line,
    is_zlib_stream,
)
from tests.support.register_bodies import encode_register_body, encode_topic_config_line

SAMPLE_4X = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":293,'
    b'"timestamp":1645882625002},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,'
    b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,'
    b'"writeQueueNums":4}}}}'
)

SAMPLE_5X = (
    b'{"filterServerList":["10.0.0.9:30000"],"topicConfigSerializeWrapper":{"dataVersion":'
    b'{"counter":5,"stateVersion":2,"timestamp":1700000000000},"mappingDataVersion":{"counter":0,'
    b'"stateVersion":0,"timestamp":1700000000001},"topicConfigTable":{"TopicTest":{"attributes":'
    b'{"+message.type":"NORMAL"},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":'
    b'"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":8},"OrderTopic":'
    b'{"attributes":{},"order":true,"perm":7,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"OrderTopic","topicSysFlag":1,"writeQueueNums":2}},'
    b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{"StaticTopic":{"bname":'
    b'"broker-a","currIdMap":{0:0,1:1},"dirty":false,"epoch":1700000000000,"scope":"__global__",'
    b'"topic":"StaticTopic","totalQueues":2}}}}'
)

MAPPING = {"bname": "broker-a", "currIdMap": {"0": 0, "1": 1}, "dirty": False,
           "epoch": 1700000000000, "scope": "__global__", "topic": "StaticTopic",
           "totalQueues": 2}


def sample_body() -> RegisterBody:
    return RegisterBody(
        data_version=DataVersion(7, 1700000000000, 3),
        topic_config_table={
            "TopicTest": TopicConfig("TopicTest", 8, 8, 6),
            "OrderTopic": TopicConfig("OrderTopic", 4, 2, 7, topic_sys_flag=1, order=True),
        },
        filter_server_list=["10.0.0.9:30000"],
        topic_queue_mapping_info={"StaticTopic": MAPPING},
    )


# --- JSON forms ----------------------------------------------------------------------------------


def test_4x_json_sample() -> None:
    body = decode_register_body(SAMPLE_4X, compressed=False, version=400)
    assert body.data_version == DataVersion(293, 1645882625002, 0)
    assert body.topic_config_table == {"TopicTest": TopicConfig("TopicTest", 4, 4, 6)}
    assert body.filter_server_list == []
    assert body.topic_queue_mapping_info == {}
    assert encode_register_body(body, version=400) == SAMPLE_4X


def test_5x_json_sample_with_state_version_attributes_and_bare_mapping_keys() -> None:
    body = decode_register_body(SAMPLE_5X, compressed=False, version=479)
    assert body.data_version == DataVersion(5, 1700000000000, 2)
    assert body.topic_config_table == {
        "TopicTest": TopicConfig("TopicTest", 8, 8, 6),
        "OrderTopic": TopicConfig("OrderTopic", 4, 2, 7, topic_sys_flag=1, order=True),
    }
    assert body.filter_server_list == ["10.0.0.9:30000"]
    assert body.topic_queue_mapping_info == {"StaticTopic": MAPPING}


def test_5x_json_encoding_is_fastjson_shaped() -> None:
    body = RegisterBody(DataVersion(1, 2, 3), {"t": TopicConfig("t", 8, 8, 6)}, [],
                        {"s": {"topic": "s", "currIdMap": {"0": 5}}})
    assert encode_register_body(body) == (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,'
        b'"stateVersion":3,"timestamp":2},"mappingDataVersion":{"counter":0,"stateVersion":0,'
        b'"timestamp":0},"topicConfigTable":{"t":{"attributes":{},"order":false,"perm":6,'
        b'"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"t","topicSysFlag":0,'
        b'"writeQueueNums":8}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":'
        b'{"s":{"currIdMap":{0:5},"topic":"s"}}}}')


def test_json_round_trip() -> None:
    body = sample_body()
    assert decode_register_body(encode_register_body(body), False, 479) == body


def test_missing_topic_config_fields_default_like_java() -> None:
    raw = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":{},"u":null}}}'
    body = decode_register_body(raw, compressed=False, version=479)
    assert body.topic_config_table == {"t": TopicConfig("t", 16, 16, 6, 0, False)}
    assert body.data_version == DataVersion()
    assert body.filter_server_list == []


def test_null_filter_server_list_and_lenient_field_types() -> None:
    raw = (b'{"filterServerList":null,"topicConfigSerializeWrapper":{"dataVersion":{"counter":"4"},'
           b'"topicConfigTable":{"t":{"topicName":"t","perm":"6","order":"true"}}}}')
    body = decode_register_body(raw, compressed=False, version=479)
    assert body.filter_server_list is None
    assert body.data_version.counter == 4
    assert body.topic_config_table["t"].order is True


def test_old_version_bare_wrapper() -> None:
    raw = (b'{"dataVersion":{"counter":1,"timestamp":2},"topicConfigTable":{"unit-test1":'
           b'{"perm":6,"readQueueNums":8,"topicName":"unit-test1","writeQueueNums":8}}}')
    body = decode_register_body(raw, compressed=False, version=0)
    assert body.topic_config_table == {"unit-test1": TopicConfig("unit-test1", 8, 8, 6)}
    assert body.data_version == DataVersion(1, 2)
    assert body.filter_server_list is None
    assert decode_register_body(encode_register_body(body, version=36), False, 36) == body


def test_old_version_with_a_register_broker_body_reads_no_topics() -> None:
    # RequestProcessorTest.testProcessRequest_RegisterBroker: version 0 parses the body as a bare
    # wrapper, which has no top-level topicConfigTable, so Java registers the broker without topics.
    body = decode_register_body(SAMPLE_4X, compressed=False, version=0)
    assert body.topic_config_table == {}


@pytest.mark.parametrize("version", [0, 36, 37, 479])
@pytest.mark.parametrize("raw", [None, b""])
def test_empty_body(raw: bytes | None, version: int) -> None:
    body = decode_register_body(raw, compressed=False, version=version)
    assert body.topic_config_table == {}
    assert body.data_version == DataVersion(0, 0, 0)
    assert body.filter_server_list == ([] if version >= 37 else None)


# --- compressed form -----------------------------------------------------------------------------


def test_register_broker_body_test_encode_decode() -> None:
    # RegisterBrokerBodyTest.test_encode_decode: 10000 default TopicConfigs survive compression.
    table = {str(i): TopicConfig(str(i)) for i in range(10000)}
    body = RegisterBody(topic_config_table=table)
    compressed = encode_register_body(body, compressed=True, version=413)
    assert compressed[:2] == b"\x78\xda"  # Deflater(BEST_COMPRESSION)
    decoded = decode_register_body(compressed, compressed=True, version=413)
    assert len(decoded.topic_config_table) == 10000
    assert decoded.topic_config_table == table


def test_compressed_round_trip_drops_sys_flag_and_order_like_java() -> None:
    body = sample_body()
    decoded = decode_register_body(encode_register_body(body, compressed=True), True, 479)
    assert decoded.data_version == body.data_version
    assert decoded.filter_server_list == body.filter_server_list
    assert decoded.topic_queue_mapping_info == {"StaticTopic": MAPPING}
    assert decoded.topic_config_table["OrderTopic"] == TopicConfig("OrderTopic", 4, 2, 7, 0, False)


def test_compressed_layout_matches_java() -> None:
    raw = zlib.decompress(encode_register_body(sample_body(), compressed=True, version=479))
    dv = b'{"counter":7,"stateVersion":3,"timestamp":1700000000000}'
    assert raw.startswith(struct.pack(">i", len(dv)) + dv + struct.pack(">i", 2))
    assert b"TopicTest 8 8 6 SINGLE_TAG {}" in raw
    assert b'"currIdMap":{0:0,1:1}' in raw
    raw4 = zlib.decompress(encode_register_body(sample_body(), compressed=True, version=400))
    assert b"TopicTest 8 8 6 SINGLE_TAG\x00" in raw4
    assert raw4.endswith(b'["10.0.0.9:30000"]')  # no mapping section before V5_0_0


def test_compressed_4x_form_has_no_mapping_section() -> None:
    body = sample_body()
    decoded = decode_register_body(encode_register_body(body, compressed=True, version=400),
                                   True, 400)
    assert decoded.topic_queue_mapping_info == {}
    assert set(decoded.topic_config_table) == {"TopicTest", "OrderTopic"}


def test_5x_compressed_body_without_mapping_section_is_accepted() -> None:
    body = encode_register_body(sample_body(), compressed=True, version=400)
    assert decode_register_body(body, True, 479).topic_queue_mapping_info == {}


def test_deflated_body_labelled_uncompressed_is_inflated() -> None:
    # 5.x brokers with compressedRegister=true always send compressed=false
    # (BrokerOuterAPI.registerBrokerAll calls RegisterBrokerBody.encode(compressedRegister)).
    body = sample_body()
    wire = encode_register_body(body, compressed=True, version=479)
    assert decode_register_body(wire, compressed=False, version=479) == decode_register_body(
        wire, compressed=True, version=479)


def test_json_body_labelled_compressed_is_parsed_as_json() -> None:
    assert decode_register_body(SAMPLE_4X, compressed=True, version=400).topic_config_table


def test_topic_config_line() -> None:
    tc = TopicConfig("T", 3, 2, 4)
    assert encode_topic_config_line(tc) == "T 3 2 4 SINGLE_TAG {}"
    assert encode_topic_config_line(tc, version=400) == "T 3 2 4 SINGLE_TAG"
    assert decode_topic_config_line("T 3 2 4 SINGLE_TAG {}") == tc
    assert decode_topic_config_line("T 3 2 4 MULTI_TAG") == tc
    assert decode_topic_config_line('T 3 2 4 SINGLE_TAG {"a b":"c"} ') == tc


@pytest.mark.parametrize("line", ["T 3 2 4", "T x 2 4 SINGLE_TAG", "T 3 2 1_0 SINGLE_TAG", ""])
def test_bad_topic_config_line(line: str) -> None:
    with pytest.raises(BodyDecodeError):
        decode_topic_config_line(line)


def deflate(payload: bytes) -> bytes:
    return zlib.compress(payload, 9)


@pytest.mark.parametrize(
    "raw",
    [
        b"garbage",
        b"[1,2]",
        b"null",
        b'{"topicConfigSerializeWrapper":"x"}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":{"perm":"rw"}}}}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":[1]}}}',
        b'{"filterServerList":"a"}',
        b"\x78\xda" + b"\x00" * 20,  # zlib header, junk stream
        deflate(b"\x00\x00"),  # truncated before the DataVersion length
        deflate(struct.pack(">i", 50) + b"{}"),  # DataVersion length past the end
        deflate(struct.pack(">i", 2) + b"{}" + struct.pack(">i", -1)),  # negative topic count
        # a topic config entry with fewer than 5 fields
        deflate(struct.pack(">i", 2) + b"{}" + struct.pack(">ii", 1, 3) + b"a b"),
        deflate(struct.pack(">i", 4) + b"[1]x"),  # DataVersion not JSON
    ],
)
def test_undecodable_bodies(raw: bytes) -> None:
    with pytest.raises(BodyDecodeError):
        decode_register_body(raw, compressed=False, version=479)


def test_undecodable_old_wrapper() -> None:
    with pytest.raises(BodyDecodeError):
        decode_register_body(b"[]", compressed=False, version=10)
    with pytest.raises(BodyDecodeError):
        decode_register_body(deflate(b"{}"), compressed=True, version=10)


def test_inflate_limit() -> None:
    wire = encode_register_body(sample_body(), compressed=True)
    with pytest.raises(BodyDecodeError, match="inflates past"):
        decode_register_body(wire, True, 479, max_inflated=50)


def test_bad_filter_list_json_reads_as_empty_like_java() -> None:
    payload = (struct.pack(">i", 2) + b"{}" + struct.pack(">i", 0) + struct.pack(">i", 3)
               + b"[x," + struct.pack(">i", 0))
    assert decode_register_body(deflate(payload), True, 479).filter_server_list == []


def test_mapping_without_topic_is_rejected() -> None:
    payload = (struct.pack(">i", 2) + b"{}" + struct.pack(">i", 0) + struct.pack(">i", 2) + b"[]"
               + struct.pack(">i", 1) + struct.pack(">i", 2) + b"{}")
    with pytest.raises(BodyDecodeError, match="topic"):
        decode_register_body(deflate(payload), True, 479)


@pytest.mark.parametrize(
    ("head", "expected"),
    [(b"\x78\x9c", True), (b"\x78\xda", True), (b"\x78\x01", True), (b"\x78\x5e", True),
     (b"\x78\x00", False), (b"\x78\xbb", False), (b"{", False), (b"x", False), (b"", False)],
)
def test_is_zlib_stream(head: bytes, expected: bool) -> None:
    assert is_zlib_stream(head + b"rest" if head else head) is expected


def test_crc32_is_masked_to_31_bits() -> None:
    assert crc32(None) == 0
    assert crc32(b"") == 0
    assert zlib.crc32(b"a") == 0xE8B7BE43
    assert crc32(b"a") == 0x68B7BE43
    assert crc32(SAMPLE_4X) == zlib.crc32(SAMPLE_4X) & 0x7FFFFFFF


# --- java.util.Properties ------------------------------------------------------------------------


def test_update_config_odd_body() -> None:
    # RequestProcessorTest.testUpdateConfig sends a Java Map's toString().
    assert parse_properties("{key=value}") == {"{key": "value}"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b\nc:d\ne f\n", {"a": "b", "c": "d", "e": "f"}),
        ("   key  =  value  ", {"key": "value  "}),
        ("key", {"key": ""}),
        ("key=", {"key": ""}),
        ("=value", {"": "value"}),
        ("k = = v", {"k": "= v"}),
        ("k  :v", {"k": "v"}),
        ("k\t\f v", {"k": "v"}),
        ("# comment\n! other\n\n   \n\tk=v\n", {"k": "v"}),
        ("#c\\\nk=v", {"k": "v"}),
        ("k=a\\\n    b\\\n  c", {"k": "abc"}),
        ("k=a\\\r\n  b\rx=y\r\nz=w", {"k": "ab", "x": "y", "z": "w"}),
        ("k=v\\\\\nx=y", {"k": "v\\", "x": "y"}),
        ("k=v\\", {"k": "v"}),
        ("k=a\\\n\nx=y", {"k": "a", "x": "y"}),
        ("a\\=b=c", {"a=b": "c"}),
        ("a\\ b c", {"a b": "c"}),
        ("a\\:b:c", {"a:b": "c"}),
        ("k=\\u00e9\\t\\n\\r\\f\\x\\\\", {"k": "é\t\n\r\fx\\"}),
        ("k=\\uD83D\\uDE00", {"k": "😀"}),
        ("k=1\nk=2", {"k": "2"}),
        ("k=#not a comment", {"k": "#not a comment"}),
        ("a=b\\\n#c", {"a": "b#c"}),
        ("", {}),
    ],
)
def test_parse_properties(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text", ["k=\\u12", "k=\\uzzzz", "\\u00g0=v"])
def test_parse_properties_malformed_unicode_escape(text: str) -> None:
    with pytest.raises(ValueError, match="Malformed"):
        parse_properties(text)


def test_format_properties() -> None:
    props = {"rocketmqHome": "/opt/rmq", "enableTopicList": True, "listenPort": 9876,
             "zone": None, "clusterTest": False}
    text = format_properties(props)
    assert text == ("clusterTest=false\nenableTopicList=true\nlistenPort=9876\n"
                    "rocketmqHome=/opt/rmq\n")
    assert parse_properties(text) == {"clusterTest": "false", "enableTopicList": "true",
                                      "listenPort": "9876", "rocketmqHome": "/opt/rmq"}
