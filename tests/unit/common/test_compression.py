"""Bodies compressed as RocketMQ clients compress them: ZLIB (with or without the 5.x type bits),
LZ4 frames and ZSTD frames without a content size, each read back by its sysFlag; damaged
bodies and unknown type bits are refused by name."""

from __future__ import annotations

import zlib

import lz4.frame
import pytest
import zstandard

from bolide.client import Producer
from bolide.client.errors import ClientConfigError
from bolide.common import sysflag
from bolide.common.compression import CompressionType, compress_body, decompress_body

BODY = b"price=42.00;sku=7;" * 500


@pytest.mark.parametrize("kind", list(CompressionType))
def test_round_trip(kind: CompressionType) -> None:
    packed, flags = compress_body(BODY, kind, 5)
    assert len(packed) < len(BODY) and flags & sysflag.COMPRESSED
    assert flags & sysflag.COMPRESSION_TYPE_MASK == (0 if kind is CompressionType.ZLIB else kind.value)
    assert decompress_body(packed, flags) == BODY


def test_bodies_written_the_java_clients_way() -> None:
    assert decompress_body(zlib.compress(BODY), 0x301) == BODY  # 5.x ZLIB: type bits 3
    assert decompress_body(zlib.compress(BODY), 0x1) == BODY  # 4.x: no type bits
    assert decompress_body(lz4.frame.compress(BODY), 0x101) == BODY
    stream = zstandard.ZstdCompressor().compressobj()  # no content size, as ZstdOutputStream
    frame = stream.compress(BODY) + stream.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress_body(frame, 0x201) == BODY
    assert decompress_body(BODY, 0x200) == BODY  # the COMPRESSED bit is what counts


@pytest.mark.parametrize(("flags", "text"), [
    (0x101, "LZ4 does not decompress"), (0x201, "ZSTD does not decompress"),
    (0x301, "ZLIB does not decompress"), (0x401, "0x400 name no algorithm"),
])
def test_damaged_bodies_are_refused(flags: int, text: str) -> None:
    with pytest.raises(ValueError, match=text):
        decompress_body(b"\x00not compressed at all", flags)


def test_the_producer_names_the_compression_types() -> None:
    assert Producer("127.0.0.1:9876", compress_type="ZSTD").compress_type is CompressionType.ZSTD
    with pytest.raises(ClientConfigError, match="none of zlib, lz4, zstd"):
        Producer("127.0.0.1:9876", compress_type="snappy")
