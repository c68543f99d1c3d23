"""Message bodies compressed as RocketMQ clients compress them.

sysFlag bit 0 says a body is compressed, bits 8 to 10 how (RocketMQ 5): 1 LZ4, 2 ZSTD, 3 ZLIB,
and 0, what 4.x clients write, ZLIB. ZLIB is Java's Deflater (the zlib format), LZ4 the LZ4 frame
format (lz4-java's LZ4FrameOutputStream) and ZSTD a zstd frame without a content size
(zstd-jni's ZstdOutputStream), so a body one client compressed another decompresses.
"""

from __future__ import annotations

import enum
import logging
import zlib
from typing import TYPE_CHECKING

import lz4.frame
import zstandard

from bolide.common import sysflag

if TYPE_CHECKING:
    from bolide.common.message import MessageExt

log = logging.getLogger(__name__)


class CompressionType(enum.Enum):
    """How a producer compresses bodies; the value is its sysFlag bits."""

    ZLIB = 0x300
    LZ4 = 0x100
    ZSTD = 0x200

    @classmethod
    def of(cls, name: str) -> CompressionType:
        """``"zlib"``, ``"lz4"`` or ``"zstd"`` (any case); ValueError naming them otherwise."""
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"compression type {name!r} is none of zlib, lz4, zstd") from None


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """The body a producer compressed (``body`` itself when sys_flag says it is not); raises
    ValueError when it does not decompress the way sys_flag says."""
    if not sys_flag & sysflag.COMPRESSED:
        return body
    kind = sys_flag & sysflag.COMPRESSION_TYPE_MASK
    try:
        if kind in (0, CompressionType.ZLIB.value):
            return zlib.decompress(body)
        if kind == CompressionType.LZ4.value:
            return bytes(lz4.frame.decompress(body))
        if kind == CompressionType.ZSTD.value:
            return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    except (zlib.error, RuntimeError, zstandard.ZstdError) as exc:
        raise ValueError(f"a body compressed with {_name(kind)} does not decompress: {exc}") from None
    raise ValueError(f"compression type bits {kind:#x} name no algorithm RocketMQ knows")


def decompress_message(msg: MessageExt) -> None:
    """Decompress a received message's compressed body in place (as its sysFlag says); a body
    that does not decompress is delivered as it is, with a warning."""
    if msg.sys_flag & sysflag.COMPRESSED:
        try:
            msg.body = decompress_body(msg.body, msg.sys_flag)
        except ValueError as exc:
            log.warning("message %s at offset %d of %s has a bad compressed body (%s); delivered as is",
                        msg.msg_id, msg.queue_offset, msg.topic, exc)


def compress_body(body: bytes, kind: CompressionType, level: int) -> tuple[bytes, int]:
    """``body`` compressed with ``kind`` and the sysFlag bits that say so (bit 0 and, but for
    ZLIB, which 4.x consumers read without type bits, the type)."""
    if kind is CompressionType.LZ4:
        return lz4.frame.compress(body), sysflag.COMPRESSED | kind.value
    if kind is CompressionType.ZSTD:
        writer = zstandard.ZstdCompressor(level=level).compressobj()
        return writer.compress(body) + writer.flush(), sysflag.COMPRESSED | kind.value
    return zlib.compress(body, level), sysflag.COMPRESSED


def _name(kind: int) -> str:
    for member in CompressionType:
        if member.value == kind:
            return member.name
    return "ZLIB" if kind == 0 else f"type {kind:#x}"
