"""Robustness of the wire decoders: the frame splitter, both header codecs, the command decoder
and the typed custom headers, fed arbitrary bytes and mutated valid frames, either decode or
raise :class:`~bolide.errors.ProtocolError` (or its subclass HeaderFieldError), never anything
else; and whatever they decode can be encoded again, as a server echoing it would."""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import struct

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, example, given, settings

from bolide.errors import HeaderFieldError, ProtocolError
from bolide.protocol import headers as H
from bolide.protocol.codec import CommandDecoder, decode_command, encode_command_bytes, encode_header
from bolide.protocol.codes import LanguageCode, SerializeType
from bolide.protocol.command import RemotingCommand
from bolide.protocol.frame import MAX_FRAME_SIZE, Frame, FrameDecoder, encode_frame_bytes
from bolide.protocol.serialize_binary import decode_binary_header, encode_binary_header
from bolide.protocol.serialize_json import decode_json_header, encode_json_header

SMALL_LIMIT = 4096  # a frame limit small enough for random length fields to hit both sides of it
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
text = st.text(st.characters(codec="utf-8"), max_size=30)

commands = st.builds(
    RemotingCommand,
    code=i16,
    language=st.sampled_from(list(LanguageCode)),
    version=i16,
    opaque=i32,
    flag=i32,
    remark=st.none() | text,
    ext_fields=st.dictionaries(st.text(st.characters(codec="utf-8"), min_size=1, max_size=12),
                               text, max_size=6),
    body=st.binary(max_size=64),
    serialize_type=st.sampled_from(list(SerializeType)),
)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few random edits: flipped, overwritten, inserted or deleted bytes, a
    random 32-bit word written anywhere (a length field, often), or a cut."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "word", "cut"]))
        pos = draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and buf:
            buf[pos] = draw(st.integers(0, 255))
        elif kind == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and buf:
            del buf[pos:pos + draw(st.integers(1, 8))]
        elif kind == "word" and len(buf) >= 4:
            pos = min(pos, len(buf) - 4)
            buf[pos:pos + 4] = struct.pack(">i", draw(i32 | st.sampled_from([0, 4, -1, 2**31 - 1])))
        elif kind == "cut":
            del buf[pos:]
    return bytes(buf)


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    return draw(mutated(encode_command_bytes(draw(commands))))


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def reencode(cmd: RemotingCommand) -> None:
    """A decoded command goes out again (a response echoing its fields) without surprises."""
    with contextlib.suppress(ProtocolError):  # a clear refusal, e.g. a code over the binary int16
        encode_command_bytes(cmd)


def feed_all(decoder: FrameDecoder | CommandDecoder, chunks: list[bytes]) -> list:
    """Feed every chunk; the items decoded before an error, and the error (None if none)."""
    out: list = []
    for chunk in chunks:
        try:
            out += decoder.feed(chunk)
        except ProtocolError as exc:
            return [out, exc]
    return [out, None]


# -- frames -----------------------------------------------------------------------------------
@FUZZ
@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=6))
@example(struct.pack(">ii", 2**31 - 1, 0), [])  # a huge length prefix
@example(struct.pack(">ii", 12, 100) + b"x" * 12, [])  # header length past the frame
@example(struct.pack(">ii", -5, 0), [2])  # negative length, split inside the prefix
def test_frame_decoder_takes_any_bytes_in_any_chunks(data: bytes, cuts: list[int]) -> None:
    whole = feed_all(FrameDecoder(SMALL_LIMIT), [data])
    split = feed_all(FrameDecoder(SMALL_LIMIT), chunked(data, cuts))
    assert split[0] == whole[0]  # chunking changes nothing about the frames found
    assert (split[1] is None) == (whole[1] is None)
    for frame in whole[0]:
        assert isinstance(frame, Frame) and 0 <= frame.serialize_type <= 255
        assert len(frame.header) + len(frame.body) + 8 <= SMALL_LIMIT


@FUZZ
@given(st.binary(min_size=1, max_size=64))
def test_a_failed_frame_decoder_stays_failed(tail: bytes) -> None:
    decoder = FrameDecoder(SMALL_LIMIT)
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">i", SMALL_LIMIT + 1))
    with pytest.raises(ProtocolError):
        decoder.feed(tail)  # out of step for good: the connection must be closed


@FUZZ
@given(mutated_frames(), st.lists(st.integers(0, 400), max_size=4))
def test_command_decoder_takes_mutated_frames(data: bytes, cuts: list[int]) -> None:
    decoded, _ = feed_all(CommandDecoder(), chunked(data, cuts))
    for cmd in decoded:
        assert isinstance(cmd, RemotingCommand)
        reencode(cmd)


@FUZZ
@given(st.integers(0, 255), st.binary(max_size=200), st.binary(max_size=16))
def test_decode_command_takes_any_frame(codec: int, header: bytes, body: bytes) -> None:
    try:
        cmd = decode_command(Frame(codec, header, body))
    except ProtocolError:
        return
    assert codec in (SerializeType.JSON, SerializeType.ROCKETMQ) and cmd.body == body
    reencode(cmd)


# -- header codecs ----------------------------------------------------------------------------
@FUZZ
@given(st.binary(max_size=200))
@example(b"")
@example(b"\xff\xfe{")
@example(b'{"code":1e400}')
@example(b'{"code":' + b"9" * 5000 + b"}")
@example(b"[" * 5000)
@example(b'{"code":1,"extFields":{"a":' + b"[" * 400 + b"]" * 400 + b"}}")
@example(b'{"code":1,"remark":"\\ud800"}')
@example(b'{code:1,extFields:{0:1,"k":true,"n":null,"f":1.5,"o":{"x":[1]}}}')
def test_json_header_decoder_takes_any_bytes(data: bytes) -> None:
    try:
        cmd = decode_json_header(data)
    except ProtocolError:
        return
    assert all(type(k) is str and type(v) is str for k, v in cmd.ext_fields.items())
    encode_json_header(cmd)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(st.dictionaries(st.sampled_from(["code", "language", "version", "opaque", "flag", "remark",
                                        "extFields", "serializeTypeCurrentRPC", "other"]),
                       json_values, max_size=8))
def test_json_header_decoder_takes_any_json_object(obj: dict) -> None:
    data = json.dumps(obj, allow_nan=True).encode()
    try:
        cmd = decode_json_header(data)
    except ProtocolError:
        return
    assert all(type(k) is str and type(v) is str for k, v in cmd.ext_fields.items())
    encode_json_header(cmd)


@FUZZ
@given(st.binary(max_size=200))
@example(b"\x00" * 13 + struct.pack(">i", -1) + b"\x00" * 4)  # negative remark length
@example(b"\x00" * 13 + struct.pack(">ii", 0, 2**31 - 1))  # extFields length past the end
@example(b"\x00" * 13 + struct.pack(">ii", 0, 6) + struct.pack(">hi", -3, 0))  # negative key length
@example(b"\x00" * 13 + struct.pack(">ii", 0, 7) + struct.pack(">hi", 1, 9) + b"k")  # value past end
def test_binary_header_decoder_takes_any_bytes(data: bytes) -> None:
    try:
        cmd = decode_binary_header(data)
    except ProtocolError:
        return
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    encode_binary_header(cmd)


@FUZZ
@given(st.data())
def test_binary_header_decoder_takes_mutated_headers(data: st.DataObject) -> None:
    cmd = data.draw(commands)
    cmd.serialize_type = SerializeType.ROCKETMQ
    raw = data.draw(mutated(encode_header(cmd)))
    with contextlib.suppress(ProtocolError):
        decode_binary_header(raw)


# -- typed custom headers ---------------------------------------------------------------------
HEADER_CLASSES = sorted((cls for _, cls in inspect.getmembers(H, inspect.isclass)
                         if issubclass(cls, H.Header) and cls is not H.Header and cls.FIELDS),
                        key=lambda cls: cls.__name__)
odd_values = (st.sampled_from(["", "0", "-1", "true", "TRUE", "nan", "inf", "1e3", " 7 ", "1_0",
                               "٣", "9" * 40, "0x10", "\x00", "\ud7ff"])
              | st.integers().map(str) | text)


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_custom_headers_take_any_ext_fields(cls: type[H.Header], data: st.DataObject) -> None:
    wires = [s.wire for s in cls.FIELDS]
    ext = data.draw(st.dictionaries(st.sampled_from(wires) | text, odd_values, max_size=len(wires) + 2))
    try:
        decoded = cls.from_ext_fields(ext)
    except ProtocolError:
        return
    again = decoded.to_ext_fields()  # what a processor would write back
    assert all(type(k) is str and type(v) is str for k, v in again.items())


SEND_INT32 = ["default_topic_queue_nums", "queue_id", "sys_flag", "flag", "reconsume_times",
              "max_reconsume_times"]


@FUZZ
@given(st.sampled_from([*SEND_INT32, "born_timestamp"]), st.integers(), st.booleans())
def test_send_header_takes_only_numbers_its_record_fields_hold(attr: str, value: int, v2: bool) -> None:
    good = H.SendMessageRequestHeader(producer_group="pg", topic="T", default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                      born_timestamp=1, flag=0, reconsume_times=0, max_reconsume_times=16)
    setattr(good, attr, value)
    header = good.to_v2() if v2 else good
    code = 310 if v2 else 10
    bits = 64 if attr == "born_timestamp" else 32
    if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        assert H.decode_send_request_header(code, header.to_ext_fields()) == header
    else:
        with pytest.raises(HeaderFieldError, match="outside the range"):
            H.decode_send_request_header(code, header.to_ext_fields())


def test_a_frame_at_the_limit_passes_and_one_byte_more_fails() -> None:
    header = encode_json_header(RemotingCommand(1))
    body = b"x" * (MAX_FRAME_SIZE - 8 - len(header))
    frame = encode_frame_bytes(SerializeType.JSON, header, body)
    [cmd] = CommandDecoder().feed(frame)
    assert cmd.body == body
    with pytest.raises(ProtocolError, match="limit"):
        FrameDecoder().feed(struct.pack(">i", MAX_FRAME_SIZE - 3))
