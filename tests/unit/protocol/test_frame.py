"""Frame layout and the incremental frame decoder, fed real bytes in every chunking."""

from __future__ import annotations

import itertools
import struct

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from bolide.errors import ProtocolError
from bolide.protocol.frame import (
    MAX_FRAME_SIZE,
    Frame,
    FrameDecoder,
    encode_frame,
    encode_frame_bytes,
    frame_prefix,
)

# spec 1.2: GET_ROUTEINFO_BY_TOPIC, topic "T", opaque 1, JSON header of 123 bytes, no body
ROUTE_HEADER = (b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,'
                b'"serializeTypeCurrentRPC":"JSON","version":409}')
ROUTE_FRAME = bytes.fromhex("0000007f0000007b") + ROUTE_HEADER

frames = st.builds(
    Frame,
    st.integers(0, 1),
    st.binary(max_size=64),
    st.binary(max_size=256),
)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def test_golden_frame_from_the_spec() -> None:
    assert len(ROUTE_HEADER) == 123
    assert encode_frame_bytes(0, ROUTE_HEADER) == ROUTE_FRAME
    assert FrameDecoder().feed(ROUTE_FRAME) == [Frame(0, ROUTE_HEADER, b"")]


def test_prefix_layout_byte_by_byte() -> None:
    prefix = frame_prefix(1, 0x21, 5)
    assert prefix == bytes([0, 0, 0, 0x2A, 1, 0, 0, 0x21])  # length 4 + 33 + 5; codec 1; 33
    assert struct.unpack(">ii", prefix) == (42, (1 << 24) | 33)


def test_body_buffers_are_passed_through_uncopied() -> None:
    store = bytearray(b"0123456789")
    part = memoryview(store)[2:6]
    parts = encode_frame(0, b"{}", [part, b"", b"xy"])
    assert parts[1] is part and parts[2] == b"xy" and len(parts) == 3
    assert parts[0] == frame_prefix(0, 2, 6) + b"{}"
    assert FrameDecoder().feed(b"".join(parts)) == [Frame(0, b"{}", b"2345xy")]


def test_memoryview_body_length_counts_bytes_not_items() -> None:
    words = memoryview(struct.pack(">4i", 1, 2, 3, 4)).cast("i")
    head = encode_frame(0, b"h", words)[0]
    assert struct.unpack_from(">i", head)[0] == 4 + 1 + 16


def test_many_frames_in_one_feed_and_a_partial_tail() -> None:
    one = encode_frame_bytes(0, b"a", b"body-1")
    two = encode_frame_bytes(1, b"bb", b"")
    three = encode_frame_bytes(0, b"ccc", b"z" * 100)
    decoder = FrameDecoder()
    got = decoder.feed(one + two + three[:50])
    assert got == [Frame(0, b"a", b"body-1"), Frame(1, b"bb", b"")]
    assert decoder.buffered == 50
    assert decoder.feed(three[50:]) == [Frame(0, b"ccc", b"z" * 100)]
    assert decoder.buffered == 0


def test_bytes_fed_one_at_a_time() -> None:
    data = ROUTE_FRAME + encode_frame_bytes(1, b"\x00" * 21, b"payload") + ROUTE_FRAME
    decoder = FrameDecoder()
    got: list[Frame] = []
    for i in range(len(data)):
        got += decoder.feed(data[i:i + 1])
    assert got == [Frame(0, ROUTE_HEADER, b""), Frame(1, b"\x00" * 21, b"payload"),
                   Frame(0, ROUTE_HEADER, b"")]
    assert decoder.buffered == 0


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames, max_size=6), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_chunking_yields_the_same_frames(sent: list[Frame], cuts: list[int]) -> None:
    data = b"".join(encode_frame_bytes(*f) for f in sent)
    decoder = FrameDecoder()
    got: list[Frame] = []
    for piece in chunked(data, cuts):
        got += decoder.feed(piece)
    assert got == sent
    assert decoder.buffered == 0


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=40), max_size=8))
def test_garbage_raises_only_protocol_errors(pieces: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_size=4096)
    try:
        for piece in pieces:
            for frame in decoder.feed(piece):
                assert len(frame.header) + len(frame.body) <= 4096
    except ProtocolError:
        pass


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 3])
def test_short_or_negative_length_is_rejected(length: int) -> None:
    with pytest.raises(ProtocolError, match="below 4"):
        FrameDecoder().feed(struct.pack(">i", length))


def test_oversized_frame_is_rejected_as_soon_as_its_length_arrives() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError, match="over the 16777216-byte limit"):
        decoder.feed(struct.pack(">i", MAX_FRAME_SIZE - 3))
    with pytest.raises(ProtocolError):  # the stream stays failed
        decoder.feed(ROUTE_FRAME)


def test_largest_allowed_frame_is_accepted() -> None:
    limit = 1024
    body = b"x" * (limit - 8 - 2)
    data = encode_frame_bytes(0, b"{}", body, max_frame_size=limit)
    assert len(data) == limit
    assert FrameDecoder(limit).feed(data) == [Frame(0, b"{}", body)]
    with pytest.raises(ProtocolError, match="limit"):
        encode_frame_bytes(0, b"{}", body + b"x", max_frame_size=limit)
    with pytest.raises(ProtocolError, match="limit"):
        FrameDecoder(limit - 1).feed(data[:4])


def test_header_length_past_the_frame_is_rejected() -> None:
    data = struct.pack(">ii", 10, 7) + b"x" * 6  # 6 bytes follow the header word, header says 7
    with pytest.raises(ProtocolError, match="header length 7"):
        FrameDecoder().feed(data[:8])


def test_codec_byte_and_masked_header_length() -> None:
    data = encode_frame_bytes(1, b"h" * 300, b"b")
    assert data[4] == 1 and int.from_bytes(data[5:8], "big") == 300
    assert FrameDecoder().feed(data) == [Frame(1, b"h" * 300, b"b")]


def test_encoding_rejects_headers_over_24_bits() -> None:
    with pytest.raises(ProtocolError, match="header"):
        frame_prefix(0, 0x1000000, 0, max_frame_size=2**31 - 1)


@pytest.mark.parametrize("header", [b"", b"{}", b"x" * 5000])
@pytest.mark.parametrize("serialize_type", [0, 1])
def test_a_bodyless_frame_is_encoded_like_any_other(header: bytes, serialize_type: int) -> None:
    """Responses without a body take a shorter path to the same bytes and the same refusals."""
    assert encode_frame(serialize_type, header, b"") == [b"".join(
        encode_frame(serialize_type, header, [b""]))]
    with pytest.raises(ProtocolError):
        encode_frame(serialize_type, header, b"", max_frame_size=len(header) + 7)
