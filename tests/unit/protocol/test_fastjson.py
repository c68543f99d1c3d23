"""fastjson's quirks: bare integer and object map keys written and parsed, relaxed syntax
accepted, and garbage rejected with ProtocolError only."""

from __future__ import annotations

import contextlib
import json
import math

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from bolide.errors import ProtocolError
from bolide.protocol import fastjson
from bolide.protocol.bodies import MessageQueue

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def test_integer_keys_are_bare_unless_standard() -> None:
    value = {"brokerAddrs": {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"}}
    assert fastjson.dumps(value) == b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}'
    assert fastjson.dumps(value, standard=True) == (
        b'{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}}')


def test_object_keys_are_bare_objects_unless_standard() -> None:
    value = {"offsetTable": {MessageQueue("T", "b", 0): {"maxOffset": 5}}}
    assert fastjson.dumps(value) == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":5}}}')
    assert json.loads(fastjson.dumps(value, standard=True)) == {
        "offsetTable": {'{"brokerName":"b","queueId":0,"topic":"T"}': {"maxOffset": 5}}}


def test_bare_keys_parse_to_the_same_strings_as_quoted_keys() -> None:
    bare = fastjson.loads(b'{"a":{0:"x",-1:"y"},"b":{{"topic":"T","queueId":0}:1}}')
    quoted = fastjson.loads(b'{"a":{"0":"x","-1":"y"},"b":{"{\\"queueId\\":0,\\"topic\\":\\"T\\"}":1}}')
    assert bare == quoted == {"a": {"0": "x", "-1": "y"}, "b": {'{"queueId":0,"topic":"T"}': 1}}


def test_relaxed_syntax_fastjson_accepts() -> None:
    assert fastjson.loads("{a:1, 'b':'it\\'s', \"c\":[1,,2,],}") == {"a": 1, "b": "it's", "c": [1, 2]}
    assert fastjson.loads(" {\"s\":\"\\u0001\\n\\\"\",\"f\":-1.5e2,\"n\":null,\"t\":true} ") == {
        "s": "\x01\n\"", "f": -150.0, "n": None, "t": True}


def test_writer_matches_compact_sorted_json_and_drops_nulls() -> None:
    value: dict[str, object] = {"b": [1, 2.5, True, None], "a": "é\x01\"", "z": None,
                                "c": {"y": {}, "x": []}}
    assert fastjson.dumps(value) == b'{"a":"\xc3\xa9\\u0001\\"","b":[1,2.5,true,null],"c":{"x":[],"y":{}}}'
    assert fastjson.dumps({"tps": 0.0, "inf": math.inf}) == b'{"inf":null,"tps":0.0}'
    assert fastjson.dumps({"s": {"b", "a"}}) == b'{"s":["a","b"]}'


@pytest.mark.parametrize("doc", ["", "{", "[1", "{'a", "{a}", "{1:}", "tru", "[1 2]", "{\"a\":1 \"b\":2}",
                                 "\"\\x\"", "[" * 2000 + "]" * 2000, "{\"a\":1}x", "1e99999999999", "'abc\\"])
def test_bad_json_raises_protocol_error(doc: str) -> None:
    with pytest.raises(ProtocolError):
        value = fastjson.loads(doc)
        if isinstance(value, float):  # a huge exponent parses to inf in strict parsers
            raise ProtocolError("inf")


@settings(max_examples=200)
@given(json_values)
def test_standard_output_round_trips_through_strict_and_lenient_parsers(value: object) -> None:
    data = fastjson.dumps(value)
    expected = json.loads(data)
    assert fastjson.loads(data) == expected
    assert fastjson._Parser(data.decode()).parse() == expected
    assert fastjson._Parser(json.dumps(value, indent=1)).parse() == json.loads(json.dumps(value))


@settings(max_examples=400)
@given(st.text(alphabet="{}[]:,'\"\\ 0123abtrulenf-.eE", max_size=40) | st.text(max_size=30))
def test_garbage_raises_only_protocol_errors(doc: str) -> None:
    with contextlib.suppress(ProtocolError):
        fastjson.loads(doc)


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        fastjson.loads(b'{"a":"\xff"}')
