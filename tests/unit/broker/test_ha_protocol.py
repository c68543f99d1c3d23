"""The HA wire codec: slave reports (bare i64) and master frames ({i64, i32} + bytes)."""

from __future__ import annotations

import pytest

from bolide.broker.ha.protocol import (
    FrameDecoder,
    OffsetReader,
    encode_frame_header,
    encode_offset,
)
from bolide.errors import ProtocolError


def test_offset_report_is_a_bare_big_endian_i64() -> None:
    assert encode_offset(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_frame_header(1 << 32, 5) == bytes.fromhex("0000000100000000" "00000005")


def test_offset_reader_keeps_the_latest_complete_report() -> None:
    reader = OffsetReader()
    data = encode_offset(10) + encode_offset(20) + encode_offset(30)
    assert reader.feed(data[:5]) is None
    assert reader.feed(data[5:19]) == 20  # 19 bytes hold two whole reports: the latest counts
    assert reader.feed(data[19:]) == 30
    assert reader.feed(b"") is None


def test_frame_decoder_splits_and_joins_frames() -> None:
    stream = (encode_frame_header(100, 3) + b"abc" + encode_frame_header(103, 0)
              + encode_frame_header(103, 4) + b"defg")
    for cut in range(len(stream) + 1):
        decoder = FrameDecoder()
        frames = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert frames == [(100, b"abc"), (103, b""), (103, b"defg")]
        assert decoder.pending == 0
    decoder = FrameDecoder()
    assert decoder.feed(stream[:14]) == [] and decoder.pending == 14


def test_frame_decoder_refuses_garbage() -> None:
    with pytest.raises(ProtocolError, match="HA port"):
        FrameDecoder().feed(encode_frame_header(0, -1))
