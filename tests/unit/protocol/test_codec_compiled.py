"""The compiled codec twins (bolide.protocol._codec) give what the Python code gives, and hand
everything they do not take (returning None) to it: JSON headers both ways, frame splitting
and custom headers from extFields, on generated inputs."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bolide.common.compiled import load
from bolide.errors import BolideError, ProtocolError
from bolide.protocol import frame as frame_module
from bolide.protocol import headers
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from bolide.protocol.command import RemotingCommand
from bolide.protocol.frame import Frame, FrameDecoder, encode_frame_bytes
from bolide.protocol.headers.base import Header, compiled_table
from bolide.protocol.headers.send import SendMessageRequestHeader, send_response_ext
from bolide.protocol.serialize_json import (
    decode_json_header_pure,
    encode_json_header,
    encode_json_header_pure,
)

codec = load("bolide.protocol._codec")
compiled_only = pytest.mark.skipif(codec is None, reason="the compiled codec (not built)")
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SEND_PROPS = "TAGS\x01TagA\x02UNIQ_KEY\x01AC11000100002A9F0000000000000001\x02WAIT\x01true\x02"


def send_header_bytes() -> bytes:
    h = SendMessageRequestHeader(producer_group="g", topic="T", default_topic="TBW102",
                                 default_topic_queue_nums=8, queue_id=1, sys_flag=0,
                                 born_timestamp=1795743383747, flag=0, properties=SEND_PROPS,
                                 reconsume_times=0).to_v2()
    return encode_json_header(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h, opaque=7))


def test_the_compiled_codec_is_built() -> None:
    """CI installs with a C compiler: the compiled codec must be there (unless pure is asked)."""
    if os.environ.get("BOLIDE_PURE_PYTHON") == "1":
        assert codec is None
    else:
        assert codec is not None, "bolide.protocol._codec is not built: run `make venv` again"


@compiled_only
def test_the_common_cases_take_the_compiled_path() -> None:
    assert codec is not None
    raw = send_header_bytes()
    cmd = codec.decode_json_header(raw)
    assert cmd == decode_json_header_pure(raw)
    assert cmd.ext_fields["i"] == SEND_PROPS
    response = cmd.make_response_ext(ResponseCode.SUCCESS, send_response_ext("AB", 1, 400), None)
    assert codec.encode_json_header(response) == encode_json_header_pure(response)
    table = compiled_table(headers.SendMessageRequestHeaderV2.FIELDS)
    h = codec.header_from_ext(headers.SendMessageRequestHeaderV2, cmd.ext_fields, table)
    assert h is not None and h.born_timestamp == 1795743383747 and h.batch is False


# -- decode ---------------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["", "JAVA", "GO", "NODE_JS", "T", "true", "\x01\x02", "\\", '"', "\u2028", "é"])
numbers = (st.integers(-(2**31), 2**31 - 1) | st.integers() | st.sampled_from([0, -1, 2**31])
           | st.floats(allow_nan=False, allow_infinity=False))
scalars = st.none() | st.booleans() | numbers | texts
values = scalars | st.lists(scalars, max_size=2) | st.dictionaries(texts, scalars, max_size=2)
ext_maps = st.dictionaries(texts, texts | scalars, max_size=5)
header_objects = st.fixed_dictionaries(
    {},
    optional={"code": st.integers(-(2**31), 2**31 - 1) | values,
              "language": st.sampled_from(["JAVA", "GO", "CPP", "RUST", "NODE_JS"]) | values,
              "version": st.integers(0, 500) | values, "opaque": st.integers(-(2**31), 2**31 - 1),
              "flag": st.sampled_from([0, 1, 2, 3]) | values, "remark": texts | values,
              "extFields": st.dictionaries(texts, texts, max_size=6) | ext_maps | values,
              "serializeTypeCurrentRPC": st.sampled_from(["JSON", "ROCKETMQ"]) | values,
              "other": values},
)


def dumps(obj: dict[str, Any], ascii_only: bool, spaced: bool) -> bytes:
    seps = (", ", ": ") if spaced else (",", ":")
    return json.dumps(obj, ensure_ascii=ascii_only, separators=seps).encode("utf-8", "surrogatepass")


def same_decode(raw: bytes) -> RemotingCommand | None:
    """The compiled decode agrees with Python's (or steps aside); its result, if any."""
    assert codec is not None
    try:
        expected: RemotingCommand | ProtocolError = decode_json_header_pure(raw)
    except ProtocolError as exc:
        expected = exc
    got = codec.decode_json_header(raw)
    if got is None:
        return None
    assert not isinstance(expected, ProtocolError), f"compiled accepted what Python refuses: {raw!r}"
    assert got == expected
    assert type(got.code) is int and got.language is expected.language
    assert got.serialize_type is SerializeType.JSON and got.body == b""
    return got


@compiled_only
@SETTINGS
@given(header_objects, st.booleans(), st.booleans())
def test_decode_agrees_with_python(obj: dict[str, Any], ascii_only: bool, spaced: bool) -> None:
    same_decode(dumps(obj, ascii_only, spaced))


@compiled_only
@SETTINGS
@given(st.data())
def test_decode_agrees_on_edited_headers(data: st.DataObject) -> None:
    """Real headers cut, spliced and sprinkled with bytes: duplicates, bad escapes, bad UTF-8,
    trailing junk."""
    raw = bytearray(send_header_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw)))
        edit = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = data.draw(st.binary(max_size=4) | st.sampled_from(
            [b'"code":1,', b',"code":2', b'\\u0041', b'\\ud800', b'\\x', b'\xff', b'\xc3\xa9',
             b' ', b'1.5', b'e5', b'-0', b'00', b'null', b'true', b'{', b'}', b'"', b'\\"',
             b'"extFields":{"a":"1"},', b'"language":"GO",']))
        if edit == "insert":
            raw[at:at] = piece
        elif edit == "delete":
            del raw[at:at + len(piece)]
        else:
            raw[at:at + len(piece)] = piece
    same_decode(bytes(raw))


@compiled_only
@SETTINGS
@given(st.binary(max_size=64))
def test_decode_steps_aside_on_garbage(raw: bytes) -> None:
    same_decode(raw)


@compiled_only
@pytest.mark.parametrize("raw", [
    # found by the fuzzer: extFields never closed, a bad pair after a good one; the decoder
    # took its later keys for the header's own
    b'{"code":11,"extFields":{"a":"5","b":"x",,"language":"JA[A","opaque":8,"version":410}',
    b'{"code":11,"extFields":{"a":"5","b"}}',
    b'{"code":11,"extFields":{"a":"5" "b":"6"}}',
    b'{"code":11,"extFields":{"a":"5",}}',  # fastjson's trailing comma: Python takes it
])
def test_decode_steps_aside_on_a_bad_pair_after_a_good_one(raw: bytes) -> None:
    assert codec is not None
    assert codec.decode_json_header(raw) is None  # Python's decoder answers
    same_decode(raw)


@compiled_only
def test_decode_cases() -> None:
    """Cases the generators may miss: each is decoded by the compiled path when it can be."""
    taken = [b'{"code":1}', b' {"code" : -2147483648 , "opaque":2147483647} ',
             b'{"code":1,"code":2}', b'{"code":1,"extFields":{"a":"1","a":"2"}}',
             b'{"code":1,"extFields":{"k":"\\u00e9\\n\\/\\"\\u0000"}}',
             b'{"code":1,"language":"NOPE"}', b'{"code":1,"x":null,"y":true,"z":"s","w":-5}',
             b'{"code":1,"extFields":{}}', '{"code":1,"remark":"é€😀"}'.encode()]
    for raw in taken:
        assert same_decode(raw) is not None, raw
    refused = [b'{"code":2147483648}', b'{"code":1.0}', b'{"code":01}', b'{"code":1,}',
               b'{"opaque":1}', b'{"code":1}x', b'{"code":1,"extFields":{"a":1}}',
               b'{"code":1,"remark":"\\ud83d\\ude00"}', b'{"code":1,"x":[1]}',
               b'{"code":1,"language":0}', b'{"code":null}', b'[1]', b'{"code":1,"x":"\x01"}',
               b'{"code":1,"\xff":1}', b'{"code":1,"extFields":{"a":"\xff"}}']
    for raw in refused:
        assert codec is not None and codec.decode_json_header(raw) is None, raw
        same_decode(raw)


# -- encode ---------------------------------------------------------------------------------

any_text = st.text(max_size=10) | st.text(st.characters(codec=None), max_size=4)
commands = st.builds(
    RemotingCommand,
    st.sampled_from([0, 1, 105, 310, ResponseCode.SUCCESS, RequestCode.PULL_MESSAGE, -1, 2**40])
    | st.integers() | st.booleans(),
    st.sampled_from(list(LanguageCode)),
    st.integers(-(2**31), 2**31 - 1) | st.integers() | st.booleans(),
    st.integers(-(2**31), 2**31 - 1) | st.integers(),
    st.integers(0, 3) | st.booleans(),
    st.none() | any_text | st.integers(),
    st.dictionaries(any_text, any_text, max_size=6)
    | st.dictionaries(any_text | st.integers(), any_text | st.integers() | st.booleans() | st.none(),
                      max_size=3),
)


@compiled_only
@SETTINGS
@given(commands)
def test_encode_agrees_with_python(cmd: RemotingCommand) -> None:
    assert codec is not None
    try:
        expected: bytes | Exception = encode_json_header_pure(cmd)
    except Exception as exc:  # orjson refuses lone surrogates and ints over 64 bits
        expected = exc
    got = codec.encode_json_header(cmd)
    if got is not None:
        assert got == expected


@compiled_only
def test_encode_takes_plain_commands_and_steps_aside_on_others() -> None:
    assert codec is not None
    plain = RemotingCommand(ResponseCode.SUCCESS, remark="é\x01\"\\", ext_fields={"b": "\x7f", "a": "1"})
    assert codec.encode_json_header(plain) == encode_json_header_pure(plain)
    for odd in (RemotingCommand(1, ext_fields={"a": 1}),  # type: ignore[dict-item]
                RemotingCommand(1, flag=True),
                RemotingCommand(1, remark=5),  # type: ignore[arg-type]
                RemotingCommand(1, language=0),  # type: ignore[arg-type]
                RemotingCommand(1, ext_fields={"a": "\ud800"})):
        assert codec.encode_json_header(odd) is None


# -- frames ---------------------------------------------------------------------------------

@contextmanager
def pure_frames() -> Iterator[None]:
    saved = frame_module._compiled
    frame_module._compiled = None
    try:
        yield
    finally:
        frame_module._compiled = saved


def feed_all(chunks: list[bytes], limit: int) -> list[Frame] | str:
    decoder = FrameDecoder(limit)
    out: list[Frame] = []
    try:
        for chunk in chunks:
            out += decoder.feed(chunk)
    except ProtocolError as exc:
        return f"{out!r} then {exc}"
    return out


@compiled_only
@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 2), st.binary(max_size=40), st.binary(max_size=80)),
                max_size=6),
       st.binary(max_size=12), st.lists(st.integers(1, 60), max_size=8),
       st.sampled_from([64, 200, 1 << 24]))
def test_frame_splitting_agrees_with_python(parts: list[tuple[int, bytes, bytes]], tail: bytes,
                                            cuts: list[int], limit: int) -> None:
    stream = b"".join(encode_frame_bytes(t, h, b) for t, h, b in parts) + tail
    chunks, at = [], 0
    for cut in cuts:
        chunks.append(stream[at:at + cut])
        at += cut
    chunks.append(stream[at:])
    got = feed_all(chunks, limit)
    with pure_frames():
        expected = feed_all(chunks, limit)
    assert got == expected
    if isinstance(got, list):
        assert all(type(f) is Frame for f in got)


# -- custom headers -------------------------------------------------------------------------

def header_classes() -> list[type[Header]]:
    found: list[type[Header]] = []
    todo: list[type[Header]] = [Header]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.FIELDS:
            found.append(cls)
    return sorted(found, key=lambda c: c.__qualname__)


HEADERS = header_classes()
raw_values = (st.none() | st.sampled_from(
    ["0", "-1", "+7", "007", "18", " 5", "5 ", "1_000", "9" * 18, "9" * 19, "-" + "9" * 18, "",
     "true", "TRUE", "True", "false", "yes", "١٢", "1.5", "x", "é"])
    | st.text(max_size=4) | st.integers(-3, 3) | st.booleans())


@contextmanager
def pure_headers(cls: type[Header]) -> Iterator[None]:
    """``cls.from_ext_fields`` without its compiled first try."""
    env = cls.from_ext_fields.__func__.__globals__  # type: ignore[attr-defined]
    saved = env["_fast"]
    env["_fast"] = lambda *_: None
    try:
        yield
    finally:
        env["_fast"] = saved


def parse(fn: Callable[[], Header | None]) -> Header | str | None:
    try:
        return fn()
    except BolideError as exc:
        return f"error: {exc}"


@compiled_only
@SETTINGS
@given(st.sampled_from(HEADERS), st.data())
def test_headers_from_ext_agree_with_python(cls: type[Header], data: st.DataObject) -> None:
    assert codec is not None
    wires = [s.wire for s in cls.FIELDS]
    ext = data.draw(st.dictionaries(st.sampled_from(wires) | st.text(max_size=3), raw_values,
                                    max_size=len(wires) + 2))
    if data.draw(st.booleans()):  # mostly complete headers, as clients send them
        for s in cls.FIELDS:
            if s.required and s.wire not in ext:
                ext[s.wire] = "1" if s.kind != "a boolean" else "true"
    with pure_headers(cls):
        expected = parse(lambda: cls.from_ext_fields(ext))
    got = codec.header_from_ext(cls, ext, compiled_table(cls.FIELDS))
    if got is None:
        return
    assert not isinstance(expected, str), f"compiled accepted what Python refuses: {ext!r}"
    assert got == expected
    for s in cls.FIELDS:
        assert type(getattr(got, s.attr)) is type(getattr(expected, s.attr)), s.attr
    assert parse(lambda: cls.from_ext_fields(ext)) == expected


@compiled_only
def test_every_header_class_takes_the_compiled_path() -> None:
    """A complete header of strings parses in C for every class (none falls back wholesale)."""
    assert codec is not None
    for cls in HEADERS:
        ext = {s.wire: {"an integer": "12", "a boolean": "true", "a number": "1.5"}.get(s.kind, "s")
               for s in cls.FIELDS if s.kind != "a number"}
        got = codec.header_from_ext(cls, ext, compiled_table(cls.FIELDS))
        with pure_headers(cls):
            assert got == cls.from_ext_fields(ext), cls
