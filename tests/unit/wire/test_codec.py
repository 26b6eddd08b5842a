"""Wire conformance of nsfleet.wire.codec against byte-level GET_ROUTEINFO_BY_TOPIC frames
(a Java RemotingCommand request and the ClientRequestProcessor.getRouteInfoByTopic response)
and the Java remoting tests (RemotingCommandTest, RocketMQSerializableTest)."""

from __future__ import annotations

import struct

import pytest

from nsfleet.wire.codec import (
    CURRENT_VERSION,
    ONEWAY,
    RESPONSE,
    V4_9_8_SERVER,
    V5_0_0,
    BadFrameLengthError,
    BadHeaderLengthError,
    FrameDecoder,
    FrameTooLargeError,
    HeaderDecodeError,
    HeaderTooLargeError,
    LanguageCode,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    UnknownSerializeTypeError,
    decode_frame,
    decode_json_header,
    decode_rocketmq_header,
    encode_frame,
    encode_json_header,
    encode_rocketmq_header,
    make_response,
    mark_protocol_type,
)

REQUEST_HEADER = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}'
)
RESPONSE_HEADER = (
    b'{"code":0,"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON",'
    b'"version":479}'
)
ROCKETMQ_REQUEST = bytes.fromhex(
    "0000002d 01000029"
    "0069 00 01df 00000007 00000000"
    "00000000"
    "00000014"
    "0005 746f706963 00000009 546f70696354657374"
)
ROUTE_BODY = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
    b'"topicSysFlag":0,"writeQueueNums":4}]}'
)


def route_request(serialize_type: SerializeType = SerializeType.JSON) -> RemotingCommand:
    return RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, version=479, opaque=7,
                           ext_fields={"topic": "TopicTest"}, serialize_type=serialize_type)


# --- GET_ROUTEINFO_BY_TOPIC frames (ClientRequestProcessor.getRouteInfoByTopic) ------------------


def test_json_request_frame_is_byte_exact() -> None:
    frame = encode_frame(route_request())
    assert len(REQUEST_HEADER) == 131
    assert len(frame) == 139
    assert frame[:8] == bytes.fromhex("00000087 00000083")
    assert frame[8:] == REQUEST_HEADER


def test_json_request_frame_decodes() -> None:
    cmd = decode_frame(bytes.fromhex("00000087 00000083") + REQUEST_HEADER)
    assert cmd == route_request()


def test_rocketmq_request_frame_is_byte_exact() -> None:
    frame = encode_frame(route_request(SerializeType.ROCKETMQ))
    assert len(frame) == 49
    assert frame == ROCKETMQ_REQUEST


def test_rocketmq_request_frame_decodes() -> None:
    assert decode_frame(ROCKETMQ_REQUEST) == route_request(SerializeType.ROCKETMQ)


def test_response_header_and_frame_prefix() -> None:
    response = make_response(route_request(), ResponseCode.SUCCESS, body=ROUTE_BODY)
    assert encode_json_header(response) == RESPONSE_HEADER
    assert len(RESPONSE_HEADER) == 95
    assert len(ROUTE_BODY) == 282
    frame = encode_frame(response)
    assert frame[:8] == bytes.fromhex("0000017d 0000005f")
    assert frame[8:103] == RESPONSE_HEADER
    assert frame[103:] == ROUTE_BODY
    assert len(frame) == 4 + 381


# --- RemotingCommandTest -------------------------------------------------------------------------


def test_mark_protocol_type_json() -> None:
    assert mark_protocol_type(261, SerializeType.JSON) == bytes([0, 0, 1, 5])


def test_mark_protocol_type_rocketmq() -> None:
    assert mark_protocol_type(0xFFFFFF, SerializeType.ROCKETMQ) == bytes([1, 0xFF, 0xFF, 0xFF])


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_round_trip_empty_body(serialize_type: SerializeType) -> None:
    cmd = RemotingCommand(code=103, version=2333, opaque=42, serialize_type=serialize_type)
    decoded = decode_frame(encode_frame(cmd))
    assert decoded == cmd
    assert decoded.body is None
    assert decoded.serialize_type == serialize_type


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_round_trip_filled_body(serialize_type: SerializeType) -> None:
    cmd = RemotingCommand(code=103, version=2333, opaque=1, body=bytes([0, 1, 2, 3, 4]),
                          serialize_type=serialize_type)
    assert decode_frame(encode_frame(cmd)).body == bytes([0, 1, 2, 3, 4])


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_round_trip_filled_body_with_ext_fields(serialize_type: SerializeType) -> None:
    ext = {"stringValue": "bilibili", "intValue": "2333", "longValue": "23333333",
           "booleanValue": "true", "doubleValue": "0.618", "key": "value"}
    cmd = RemotingCommand(code=103, version=2333, opaque=1, ext_fields=ext, body=b"\x00\x01",
                          serialize_type=serialize_type)
    decoded = decode_frame(encode_frame(cmd))
    assert decoded.ext_fields == ext
    assert decoded.body == b"\x00\x01"


def test_empty_body_is_sent_as_no_body() -> None:
    cmd = RemotingCommand(code=1, body=b"")
    assert decode_frame(encode_frame(cmd)).body is None


# --- RocketMQSerializableTest --------------------------------------------------------------------


def test_rocketmq_header_without_remark_and_ext_is_21_bytes() -> None:
    cmd = RemotingCommand(code=103, version=2333, opaque=9, serialize_type=SerializeType.ROCKETMQ)
    header = encode_rocketmq_header(cmd)
    assert len(header) == 21
    assert struct.unpack_from(">h", header, 0)[0] == 103
    assert header[2] == LanguageCode.JAVA
    assert struct.unpack_from(">h", header, 3)[0] == 2333
    assert struct.unpack_from(">i", header, 9)[0] == 0  # flag
    assert struct.unpack_from(">i", header, 13)[0] == 0  # remark length
    assert struct.unpack_from(">i", header, 17)[0] == 0  # ext length
    decoded = decode_rocketmq_header(header)
    assert decoded.remark is None
    assert decoded.ext_fields is None
    assert decoded == cmd


def test_rocketmq_header_with_remark() -> None:
    cmd = RemotingCommand(code=103, version=2333, opaque=9, remark="Sample Remark",
                          serialize_type=SerializeType.ROCKETMQ)
    header = encode_rocketmq_header(cmd)
    assert len(header) == 34
    assert struct.unpack_from(">i", header, 13)[0] == 13
    assert header[17:30] == b"Sample Remark"
    assert struct.unpack_from(">i", header, 30)[0] == 0
    assert decode_rocketmq_header(header) == cmd


def test_rocketmq_header_with_ext_fields() -> None:
    cmd = RemotingCommand(code=103, version=2333, opaque=9, ext_fields={"key": "value"},
                          serialize_type=SerializeType.ROCKETMQ)
    header = encode_rocketmq_header(cmd)
    assert len(header) == 35
    assert struct.unpack_from(">i", header, 17)[0] == 14
    assert header[21:] == b"\x00\x03key\x00\x00\x00\x05value"
    assert decode_rocketmq_header(header) == cmd


def test_rocketmq_header_zero_length_strings_are_null() -> None:
    cmd = RemotingCommand(code=1, remark="", ext_fields={"a": "", "": "x", "b": "1"},
                          serialize_type=SerializeType.ROCKETMQ)
    decoded = decode_rocketmq_header(encode_rocketmq_header(cmd))
    assert decoded.remark is None
    assert decoded.ext_fields == {"b": "1"}


def test_rocketmq_header_zero_length_value_replaces_earlier_value() -> None:
    ext = b"\x00\x01a\x00\x00\x00\x011" + b"\x00\x01a\x00\x00\x00\x00"
    header = struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", len(ext)) + ext
    assert decode_rocketmq_header(header).ext_fields == {}


def test_rocketmq_header_16_bit_code_and_version_wrap() -> None:
    cmd = RemotingCommand(code=99999, version=70000, serialize_type=SerializeType.ROCKETMQ)
    decoded = decode_rocketmq_header(encode_rocketmq_header(cmd))
    assert decoded.code == struct.unpack(">h", struct.pack(">H", 99999 & 0xFFFF))[0]
    assert decoded.version == 70000 - 65536


def test_rocketmq_header_unknown_language_is_other() -> None:
    header = bytearray(encode_rocketmq_header(
        RemotingCommand(code=1, serialize_type=SerializeType.ROCKETMQ)))
    header[2] = 99
    assert decode_rocketmq_header(bytes(header)).language == "OTHER"
    cmd = RemotingCommand(code=1, language="KOTLIN", serialize_type=SerializeType.ROCKETMQ)
    assert encode_rocketmq_header(cmd)[2] == LanguageCode.OTHER


@pytest.mark.parametrize(
    "header",
    [
        b"\x00" * 20,  # shorter than the fixed part
        struct.pack(">hbhiii", 1, 0, 0, 0, 0, 50) + b"\x00" * 8,  # remark past the header
        struct.pack(">hbhiii", 1, 0, 0, 0, 0, -1) + b"\x00" * 8,  # negative remark length
        struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", 99),  # ext past the header
        struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", 3) + b"\x00\x05a",
        struct.pack(">hbhiiii", 1, 0, 0, 0, 0, 0, 7) + b"\x00\x01a\xff\xff\xff\xff",
    ],
)
def test_rocketmq_header_length_checks(header: bytes) -> None:
    with pytest.raises(HeaderDecodeError):
        decode_rocketmq_header(header)


def test_rocketmq_negative_ext_length_means_no_ext() -> None:
    header = struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", -5)
    assert decode_rocketmq_header(header).ext_fields is None


# --- JSON header encoding (RemotingSerializable) and lenient decoding ----------------------------


def test_json_header_omits_nulls_and_keeps_empty_ext() -> None:
    cmd = RemotingCommand(code=22, flag=1, opaque=3, version=479, remark="No config item",
                          ext_fields={})
    assert encode_json_header(cmd) == (
        b'{"code":22,"extFields":{},"flag":1,"language":"JAVA","opaque":3,'
        b'"remark":"No config item","serializeTypeCurrentRPC":"JSON","version":479}')


def test_json_header_sorts_ext_fields_and_skips_null_values() -> None:
    cmd = RemotingCommand(code=1, ext_fields={"b": "2", "a": "1", "c": None})  # type: ignore[dict-item]
    assert b'"extFields":{"a":"1","b":"2"}' in encode_json_header(cmd)


def test_json_header_writes_non_ascii_raw_and_escapes_like_fastjson() -> None:
    cmd = RemotingCommand(code=1, remark='zürich "q"\n\x01')
    assert b'"remark":"z\xc3\xbcrich \\"q\\"\\n\\u0001"' in encode_json_header(cmd)


def test_json_header_serialize_type_name() -> None:
    cmd = RemotingCommand(code=1, serialize_type=SerializeType.ROCKETMQ)
    assert b'"serializeTypeCurrentRPC":"ROCKETMQ"' in encode_json_header(cmd)


def test_json_header_decoding_defaults_missing_fields() -> None:
    cmd = decode_json_header(b'{"code":105}')
    assert cmd == RemotingCommand(code=105, language="JAVA", version=0, opaque=0, flag=0)
    assert cmd.ext_fields is None
    assert decode_json_header(b"{}").code == 0


def test_json_header_decoding_ignores_unknown_keys_and_rpc_type() -> None:
    cmd = decode_json_header(
        b'{"code":105,"serializeTypeCurrentRPC":"ROCKETMQ","whatever":[1,2],"suspended":true,'
        b'"extFields":{"topic":"t","AccessKey":"ak"},"opaque":5}')
    assert cmd.serialize_type == SerializeType.JSON
    assert cmd.ext_fields == {"topic": "t", "AccessKey": "ak"}
    assert cmd.opaque == 5


@pytest.mark.parametrize(
    ("language", "expected"),
    [('"GO"', "GO"), ('"RUST"', "RUST"), ('"NODE_JS"', "NODE_JS"), ('"COBOL"', "OTHER"),
     ("9", "GO"), ("77", "OTHER"), ("null", "JAVA")],
)
def test_json_header_language(language: str, expected: str) -> None:
    assert decode_json_header(f'{{"code":1,"language":{language}}}'.encode()).language == expected


def test_json_header_ext_values_coerced_to_strings() -> None:
    cmd = decode_json_header(
        b'{"code":1,"extFields":{"n":5,"b":true,"f":0.5,"z":null,"o":{"k":1}}}')
    assert cmd.ext_fields == {"n": "5", "b": "true", "f": "0.5", "o": '{"k":1}'}


def test_json_header_accepts_numeric_strings_and_fastjson_syntax() -> None:
    cmd = decode_json_header(b"{code:'105',opaque:\"7\",extFields:{topic:'T'}}")
    assert (cmd.code, cmd.opaque, cmd.ext_fields) == (105, 7, {"topic": "T"})


@pytest.mark.parametrize(
    "header",
    [b"", b"[1,2]", b"not json", b'{"code":"abc"}', b'{"code":99999999999}',
     b'{"extFields":[1]}', b'{"code":1.5}', b"\xff\xfe"],
)
def test_json_header_garbage(header: bytes) -> None:
    with pytest.raises(HeaderDecodeError):
        decode_json_header(header)


# --- command helpers -----------------------------------------------------------------------------


def test_make_response_echoes_opaque_and_type() -> None:
    request = RemotingCommand(code=101, opaque=77, version=401, language="GO",
                              serialize_type=SerializeType.ROCKETMQ)
    response = make_response(request, ResponseCode.QUERY_NOT_FOUND, remark="x", ext_fields={})
    assert response.opaque == 77
    assert response.flag == RESPONSE
    assert response.is_response and not response.is_oneway
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert response.version == V4_9_8_SERVER == 409  # a 4.x client: what 4.9.8 answers
    assert response.language == "JAVA"
    assert (response.code, response.remark, response.ext_fields) == (22, "x", {})
    request.version = V5_0_0
    assert make_response(request, ResponseCode.SUCCESS).version == CURRENT_VERSION == 479


def test_flags() -> None:
    assert RemotingCommand(code=904, flag=ONEWAY).is_oneway
    assert not RemotingCommand(code=904, flag=ONEWAY).is_response
    assert RemotingCommand(code=0, flag=RESPONSE | ONEWAY).is_response


def test_enums_match_java() -> None:
    assert [m.name for m in LanguageCode] == [
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO",
        "PHP", "OMS", "RUST", "NODE_JS"]
    assert [m.value for m in LanguageCode] == list(range(14))
    assert {c.value for c in RequestCode} == {
        100, 101, 102, 103, 104, 105, 106, 205, 206, 216, 217, 219, 224, 304, 311, 312, 313, 318,
        319, 322, 327, 901, 904, 905, 1001, 1002, 1003, 1004, 1005, 1006, 1008, 1009, 1010, 1011,
        1012, 1013}
    assert {c.name: c.value for c in ResponseCode} == {
        "SUCCESS": 0, "SYSTEM_ERROR": 1, "SYSTEM_BUSY": 2, "REQUEST_CODE_NOT_SUPPORTED": 3,
        "NO_PERMISSION": 16, "TOPIC_NOT_EXIST": 17, "QUERY_NOT_FOUND": 22,
        # The controller's, ResponseCode.CONTROLLER_*.
        **{f"CONTROLLER_{n}": 2000 + i for i, n in enumerate((
            "FENCED_MASTER_EPOCH", "FENCED_SYNC_STATE_SET_EPOCH", "INVALID_MASTER",
            "INVALID_REPLICAS", "MASTER_NOT_AVAILABLE", "INVALID_REQUEST", "BROKER_NOT_ALIVE",
            "NOT_LEADER", "BROKER_METADATA_NOT_EXIST", "INVALID_CLEAN_BROKER_METADATA",
            "BROKER_NEED_TO_BE_REGISTERED", "MASTER_STILL_EXIST", "ELECT_MASTER_FAILED",
            "ALTER_SYNC_STATE_SET_FAILED", "BROKER_ID_INVALID"))}}
    assert (SerializeType.JSON, SerializeType.ROCKETMQ) == (0, 1)


# --- FrameDecoder --------------------------------------------------------------------------------


def frames() -> tuple[list[RemotingCommand], bytes]:
    cmds = [
        route_request(),
        route_request(SerializeType.ROCKETMQ),
        RemotingCommand(code=103, opaque=2, body=b"\x78\x9c" + bytes(300)),
        make_response(route_request(), 0, body=ROUTE_BODY),
        RemotingCommand(code=904, flag=ONEWAY, opaque=9, serialize_type=SerializeType.ROCKETMQ,
                        remark="r\u00e9", body=b"x"),
    ]
    return cmds, b"".join(encode_frame(c) for c in cmds)


def test_decoder_byte_by_byte() -> None:
    cmds, stream = frames()
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(len(stream)):
        out.extend(decoder.feed(stream[i:i + 1]))
    assert out == cmds
    assert decoder.buffered == 0


def test_decoder_many_frames_in_one_feed_and_partial_tail() -> None:
    cmds, stream = frames()
    decoder = FrameDecoder()
    assert decoder.feed(stream + stream[:10]) == cmds
    assert decoder.buffered == 10
    assert decoder.feed(stream[10:]) == cmds
    assert decoder.buffered == 0


def test_decoder_accepts_memoryview_and_bytearray() -> None:
    cmds, stream = frames()
    decoder = FrameDecoder()
    assert decoder.feed(memoryview(stream)[:50]) + decoder.feed(bytearray(stream[50:])) == cmds


def test_decoder_rejects_oversize_frame_on_its_length_prefix() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameTooLargeError):
        decoder.feed(struct.pack(">i", 1021))  # 1021 + 4 > 1024, before any content arrives
    ok = FrameDecoder(max_frame_size=1024)
    frame = struct.pack(">ii", 1020, 2) + b"{}" + bytes(1014)
    assert ok.feed(frame)[0].body == bytes(1014)


def test_decoder_default_limit_is_16_mib() -> None:
    with pytest.raises(FrameTooLargeError):
        FrameDecoder().feed(struct.pack(">i", 16 * 1024 * 1024 - 3))
    assert FrameDecoder().feed(struct.pack(">i", 16 * 1024 * 1024 - 4)) == []


def test_decoder_refuses_a_header_over_1_mib_on_its_length() -> None:
    """Java bounds only the frame; a header over MAX_HEADER_SIZE is refused as soon as the
    header length arrives, before its bytes do."""
    decoder = FrameDecoder()
    with pytest.raises(HeaderTooLargeError, match="header of 1048577 bytes exceeds"):
        decoder.feed(struct.pack(">ii", 8 * 1024 * 1024, 1024 * 1024 + 1))
    header = b'{"code":105,"extFields":{"value":"' + b"v" * (1024 * 1024 - 40) + b'"}}'
    (cmd,) = FrameDecoder().feed(struct.pack(">ii", 4 + len(header), len(header)) + header)
    assert len(cmd.ext_fields["value"]) == 1024 * 1024 - 40


def test_a_failed_decoder_keeps_neither_the_stream_nor_the_exception() -> None:
    """The bytes of a dead stream are never read, and the stored failure is the exception's
    type and text: its traceback would hold the frames that held the connection."""
    decoder = FrameDecoder()
    header = b'{"code":105,"extFields":"' + b"A" * 100_000 + b'"}'
    with pytest.raises(HeaderDecodeError) as info:
        decoder.feed(struct.pack(">ii", 4 + len(header), len(header)) + header)
    assert decoder.buffered == 0
    assert "…(100000 chars)" in str(info.value) and len(str(info.value)) < 300
    assert not any(isinstance(v, BaseException) for v in
                   (getattr(decoder, slot) for slot in type(decoder).__slots__))


def test_decoder_bad_header_length() -> None:
    with pytest.raises(BadHeaderLengthError):
        FrameDecoder().feed(struct.pack(">ii", 8, 5) + b"{}{}")


@pytest.mark.parametrize("length", [-1, 0, 3])
def test_decoder_bad_frame_length(length: int) -> None:
    with pytest.raises(BadFrameLengthError):
        FrameDecoder().feed(struct.pack(">i", length) + bytes(8))


def test_decoder_unknown_serialize_type() -> None:
    with pytest.raises(UnknownSerializeTypeError):
        FrameDecoder().feed(struct.pack(">ii", 6, (2 << 24) | 2) + b"{}")


def test_decoder_garbage_header() -> None:
    with pytest.raises(HeaderDecodeError):
        FrameDecoder().feed(struct.pack(">ii", 9, 5) + b"hello")


def test_decoder_keeps_commands_decoded_before_the_error_and_stays_failed() -> None:
    good = encode_frame(route_request())
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError) as info:
        decoder.feed(good + struct.pack(">ii", 9, 5) + b"hello")
    assert info.value.decoded == [route_request()]
    with pytest.raises(HeaderDecodeError):
        decoder.feed(good)


def test_decoder_http_request_is_rejected() -> None:
    with pytest.raises(FrameTooLargeError):
        FrameDecoder().feed(b"GET / HTTP/1.1\r\n\r\n")


def test_decoder_error_in_binary_header_after_good_frames() -> None:
    good = encode_frame(route_request(SerializeType.ROCKETMQ))
    bad = struct.pack(">ii", 4 + 21, (1 << 24) | 21) + struct.pack(">hbhiii", 1, 0, 0, 0, 0, 99)
    bad += b"\x00\x00\x00\x00"
    decoder = FrameDecoder()
    with pytest.raises(HeaderDecodeError) as info:
        decoder.feed(good + good + bad)
    assert len(info.value.decoded) == 2


def test_error_hierarchy() -> None:
    for cls in (FrameTooLargeError, BadFrameLengthError, BadHeaderLengthError,
                UnknownSerializeTypeError, HeaderDecodeError, HeaderTooLargeError):
        assert issubclass(cls, ProtocolError)
