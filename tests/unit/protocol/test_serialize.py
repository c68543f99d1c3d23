"""Both header codecs: the spec's worked examples byte for byte, round trips, what Go and
ali-ons send, and garbage that must only ever raise ProtocolError."""

from __future__ import annotations

import contextlib
import json

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from bolide.errors import ProtocolError
from bolide.protocol import (
    CommandDecoder,
    LanguageCode,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    decode_command,
    encode_command_bytes,
)
from bolide.protocol.frame import Frame
from bolide.protocol.serialize_binary import decode_binary_header, encode_binary_header
from bolide.protocol.serialize_json import decode_json_header, encode_json_header

# spec 1.5a, one line each on the wire
GOLDEN_JSON = [
    '{"code":310,"extFields":{"a":"pg","b":"TopicTest","c":"TBW102","d":"4","e":"2","f":"0",'
    '"g":"1700000000123","h":"0","i":"KEYS\\u0001k1\\u0002UNIQ_KEY\\u00017F000001\\u0002WAIT'
    '\\u0001true\\u0002TAGS\\u0001TagA","j":"0","k":"false","m":"false","n":"broker-a"},"flag":0,'
    '"language":"JAVA","opaque":17,"serializeTypeCurrentRPC":"JSON","version":409}',
    '{"code":0,"extFields":{"MSG_REGION":"DefaultRegion","TRACE_ON":"true",'
    '"msgId":"0A00000100002A9F00000000000004D2","queueId":"2","queueOffset":"41"},"flag":1,'
    '"language":"JAVA","opaque":17,"serializeTypeCurrentRPC":"JSON","version":409}',
    '{"code":11,"extFields":{"bname":"broker-a","commitOffset":"0","consumerGroup":"cg",'
    '"expressionType":"TAG","maxMsgNums":"32","queueId":"0","queueOffset":"41",'
    '"subVersion":"1700000000000","suspendTimeoutMillis":"15000","sysFlag":"2","topic":"TopicTest"},'
    '"flag":0,"language":"JAVA","opaque":23,"serializeTypeCurrentRPC":"JSON","version":409}',
    '{"code":19,"extFields":{"maxOffset":"41","minOffset":"0","nextBeginOffset":"41",'
    '"suggestWhichBrokerId":"0"},"flag":1,"language":"JAVA","opaque":23,"remark":"OFFSET_OVERFLOW_ONE",'
    '"serializeTypeCurrentRPC":"JSON","version":409}',
    '{"code":40,"extFields":{"consumerGroup":"cg"},"flag":2,"language":"JAVA","opaque":5,'
    '"serializeTypeCurrentRPC":"JSON","version":409}',
]

# spec 1.4: the same route request in the binary codec
GOLDEN_BINARY = bytes.fromhex(
    "00000025 01000021 0069 00 0199 00000001 00000000 00000000 0000000c 0005 746f706963 00000001 54"
    .replace(" ", "")
)

text = st.text(st.characters(codec="utf-8"), max_size=30)
nonempty = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
languages = st.sampled_from(list(LanguageCode))


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType) -> RemotingCommand:
    binary = serialize_type == SerializeType.ROCKETMQ
    values = nonempty if binary else text  # empty binary strings decode as null (absent)
    return RemotingCommand(
        draw(int16 if binary else int32),
        language=draw(languages),
        version=draw(int16 if binary else int32),
        opaque=draw(int32),
        flag=draw(int32),
        remark=draw(st.none() | values),
        ext_fields=draw(st.dictionaries(nonempty if binary else text, values, max_size=6)),
        body=draw(st.binary(max_size=40)),
        serialize_type=serialize_type,
    )


@pytest.mark.parametrize("line", GOLDEN_JSON)
def test_spec_json_examples_decode_and_reencode_byte_for_byte(line: str) -> None:
    cmd = decode_json_header(line.encode())
    assert cmd.language == LanguageCode.JAVA and cmd.version == 409
    assert encode_json_header(cmd) == line.encode()


def test_spec_send_example_values() -> None:
    cmd = decode_json_header(GOLDEN_JSON[0].encode())
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.opaque == 17
    assert cmd.ext_fields["i"].startswith("KEYS\x01k1\x02UNIQ_KEY\x01")
    assert not cmd.is_response and not cmd.is_oneway
    response = decode_json_header(GOLDEN_JSON[1].encode())
    assert response.is_response and response.code == ResponseCode.SUCCESS
    notify = decode_json_header(GOLDEN_JSON[4].encode())
    assert notify.is_oneway and notify.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED


def test_binary_header_layout_byte_by_byte() -> None:
    cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=1, ext_fields={"topic": "T"},
                          serialize_type=SerializeType.ROCKETMQ)
    header = encode_binary_header(cmd)
    assert header == GOLDEN_BINARY[8:]
    assert header[0:2] == b"\x00\x69"  # code 105
    assert header[2:3] == b"\x00"  # JAVA
    assert header[3:5] == b"\x01\x99"  # version 409
    assert header[5:9] == b"\x00\x00\x00\x01"  # opaque
    assert header[9:13] == b"\x00\x00\x00\x00"  # flag
    assert header[13:17] == b"\x00\x00\x00\x00"  # no remark
    assert header[17:21] == b"\x00\x00\x00\x0c"  # 12 bytes of entries
    assert header[21:] == b"\x00\x05topic\x00\x00\x00\x01T"
    assert encode_command_bytes(cmd) == GOLDEN_BINARY


def test_binary_header_with_remark_and_language() -> None:
    cmd = RemotingCommand(17, LanguageCode.GO, 317, 9, 1, "ño", {}, b"", SerializeType.ROCKETMQ)
    header = encode_binary_header(cmd)
    assert header == bytes.fromhex("0011 09 013d 00000009 00000001 00000003 c3b16f 00000000".replace(" ", ""))
    assert decode_binary_header(header) == cmd


def test_binary_empty_strings_decode_as_absent_like_java() -> None:
    cmd = RemotingCommand(10, remark="", ext_fields={"a": "", "b": "x"},
                          serialize_type=SerializeType.ROCKETMQ)
    back = decode_binary_header(encode_binary_header(cmd))
    assert back.remark is None and back.ext_fields == {"b": "x"}


def test_binary_codec_refuses_codes_over_int16() -> None:
    cmd = RemotingCommand(70000, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(ProtocolError, match="int16"):
        encode_binary_header(cmd)


@settings(max_examples=200)
@given(commands(SerializeType.JSON))
def test_json_round_trip(cmd: RemotingCommand) -> None:
    back = CommandDecoder().feed(encode_command_bytes(cmd))
    assert back == [cmd]


@settings(max_examples=200)
@given(commands(SerializeType.ROCKETMQ))
def test_binary_round_trip(cmd: RemotingCommand) -> None:
    assert decode_command(Frame(1, encode_binary_header(cmd), cmd.body)) == cmd  # type: ignore[arg-type]


@settings(max_examples=400)
@given(st.binary(max_size=80))
def test_binary_garbage_raises_only_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_binary_header(data)


@settings(max_examples=400)
@given(st.binary(max_size=80) | st.text(max_size=60).map(str.encode))
def test_json_garbage_raises_only_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_json_header(data)


@settings(max_examples=200)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | text,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                    max_leaves=10))
def test_json_values_of_any_shape_raise_only_protocol_errors(value: object) -> None:
    shaped = {"code": 10, "language": value, "extFields": value, "remark": value, "opaque": value}
    for doc in (value, shaped):
        with contextlib.suppress(ProtocolError):
            decode_json_header(json.dumps(doc).encode())


def test_ali_ons_numbers_and_booleans_become_java_strings() -> None:
    line = (b'{"code":310,"language":"JAVA","opaque":3,"flag":0,"version":121,'
            b'"extFields":{"a":"pg","e":0,"g":1700000000123,"k":false,"x":null,"y":1.5}}')
    cmd = decode_json_header(line)
    assert cmd.ext_fields == {"a": "pg", "e": "0", "g": "1700000000123", "k": "false", "y": "1.5"}
    assert cmd.remark is None and cmd.version == 121


def test_go_header_and_lenient_json() -> None:
    cmd = decode_json_header(b'{"code":34,"language":"GO","version":317,"opaque":1,"flag":0,'
                             b'"remark":"","extFields":{}}')
    assert cmd.language == LanguageCode.GO and cmd.remark == "" and cmd.ext_fields == {}
    relaxed = decode_json_header(b"{code:105,'extFields':{topic:'T',},opaque:2,}")
    assert relaxed.code == 105 and relaxed.ext_fields == {"topic": "T"}
    assert decode_json_header(b'{"code":1,"language":"KLINGON"}').language == LanguageCode.OTHER
    assert decode_json_header(b'{"code":1,"language":9}').language == LanguageCode.GO


@pytest.mark.parametrize("doc", [b"[]", b'{"flag":1}', b'{"code":"10"}', b'{"code":2147483648}',
                                 b'{"code":1,"extFields":[1]}', b'{"code":1,"language":[]}', b""])
def test_bad_json_headers_name_the_problem(doc: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_json_header(doc)


def test_json_encoder_writes_non_string_ext_values_as_strings() -> None:
    cmd = RemotingCommand(0, flag=1, ext_fields={"queueId": 2, "ok": True, "gone": None})  # type: ignore[dict-item]
    assert json.loads(encode_json_header(cmd))["extFields"] == {"queueId": "2", "ok": "true"}


def test_unknown_codec_byte_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="codec 2"):
        decode_command(Frame(2, b"{}", b""))


def test_response_answers_in_the_request_codec() -> None:
    request = decode_command(Frame(1, GOLDEN_BINARY[8:], b""))
    response = request.make_response(ResponseCode.TOPIC_NOT_EXIST, "No topic route info")
    wire = encode_command_bytes(response)
    assert wire[4] == 1
    back = CommandDecoder().feed(wire)[0]
    assert back.opaque == 1 and back.is_response and back.remark == "No topic route info"


def test_lone_surrogate_escapes_become_replacement_characters() -> None:
    cmd = decode_json_header(b'{"code":1,"remark":"\\ud800x\\ud83d\\ude00","extFields":{"k":"\\udc00"}}')
    assert cmd.remark == "\ufffdx\U0001f600" and cmd.ext_fields == {"k": "\ufffd"}
    assert decode_json_header(encode_json_header(cmd)) == cmd
