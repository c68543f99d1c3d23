"""Frames on a remoting connection, sans I/O.

Layout (big-endian): int32 ``length`` (counts everything after itself), int32 header word
(top byte: header codec, low 24 bits: header length), header bytes, body bytes.
:class:`FrameDecoder` turns a byte stream into :class:`Frame` objects; :func:`encode_frame`
builds the buffers of one frame for ``transport.writelines`` without copying the body.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple, NoReturn, TypeAlias

from bolide.common.compiled import load
from bolide.errors import ProtocolError

MAX_FRAME_SIZE = 16 * 1024 * 1024  # Java's default, counting the 4 length bytes
MAX_HEADER_LENGTH = 0xFFFFFF  # 24 bits of the header word
PREFIX_SIZE = 8

Buffer: TypeAlias = bytes | bytearray | memoryview
BodyLike: TypeAlias = Buffer | Sequence[Buffer]

_PREFIX = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_compiled = load("bolide.protocol._codec")


class Frame(NamedTuple):
    """One complete frame: header codec byte, raw header bytes, body bytes (``b""`` if none)."""

    serialize_type: int
    header: bytes
    body: bytes


def nbytes(buf: Buffer) -> int:
    """Size of ``buf`` in bytes (``len`` of a memoryview counts items, not bytes)."""
    return buf.nbytes if isinstance(buf, memoryview) else len(buf)


def body_parts(body: BodyLike) -> list[Buffer]:
    """``body`` as a list of non-empty buffers."""
    if isinstance(body, bytes | bytearray | memoryview):
        return [body] if nbytes(body) else []
    return [part for part in body if nbytes(part)]


def frame_prefix(serialize_type: int, header_length: int, body_length: int,
                 max_frame_size: int = MAX_FRAME_SIZE) -> bytes:
    """The 8 bytes that start a frame: total length and the header word."""
    if not 0 <= serialize_type <= 0xFF:
        raise ProtocolError(f"header codec {serialize_type} does not fit the header word's top byte")
    if header_length > MAX_HEADER_LENGTH:
        raise ProtocolError(
            f"the header is {header_length} bytes; a frame carries at most {MAX_HEADER_LENGTH}: "
            "move data from the header fields to the body"
        )
    length = 4 + header_length + body_length
    if length + 4 > max_frame_size:
        raise ProtocolError(
            f"the frame would be {length + 4} bytes, over the {max_frame_size}-byte limit peers "
            "accept: send a smaller body (fewer or smaller messages)"
        )
    return _PREFIX.pack(length, (serialize_type << 24) | header_length)


def encode_frame(serialize_type: int, header: bytes, body: BodyLike = b"",
                 max_frame_size: int = MAX_FRAME_SIZE) -> list[Buffer]:
    """Buffers of one frame: prefix and header in the first, then the body buffers unchanged."""
    if body.__class__ is bytes and not body and 0 <= serialize_type <= 0xFF:  # most responses
        header_length = len(header)
        if header_length + 8 <= max_frame_size and header_length <= MAX_HEADER_LENGTH:
            return [_PREFIX.pack(4 + header_length, (serialize_type << 24) | header_length)
                    + header]
    parts = body_parts(body)
    body_length = sum(map(nbytes, parts))
    head = frame_prefix(serialize_type, len(header), body_length, max_frame_size) + header
    return [head, *parts]


def encode_frame_bytes(serialize_type: int, header: bytes, body: BodyLike = b"",
                       max_frame_size: int = MAX_FRAME_SIZE) -> bytes:
    """One frame as a single ``bytes`` object."""
    return b"".join(encode_frame(serialize_type, header, body, max_frame_size))


class FrameDecoder:
    """Incremental frame decoder: :meth:`feed` bytes as they arrive, get complete frames back.

    Oversized or negative lengths and header lengths past the frame raise
    :class:`~bolide.errors.ProtocolError` as soon as the length fields arrive; the stream is
    then out of step, every later :meth:`feed` raises the same error, and the connection
    should be closed.
    """

    __slots__ = ("_buf", "_error", "max_frame_size")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        if max_frame_size < PREFIX_SIZE:
            raise ValueError(f"max_frame_size must be at least {PREFIX_SIZE} bytes")
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return len(self._buf)

    def feed(self, data: Buffer) -> list[Frame]:
        """Add ``data`` and return the frames it completes, in order (maybe none)."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        if buf:
            buf += data
            src: Buffer = buf
        else:
            src = data
        with memoryview(src) as view:
            view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
            n = view.nbytes
            limit = self.max_frame_size
            if _compiled is not None:  # the complete, valid frames; the loop below does the rest
                frames, pos = _compiled.split_frames(view, limit, Frame)
            else:
                frames, pos = [], 0
            while n - pos >= 4:
                length = _I32.unpack_from(view, pos)[0]
                if length < 4 or length > limit - 4:
                    self._fail(self._length_error(length))
                if n - pos < PREFIX_SIZE:
                    break
                word = _I32.unpack_from(view, pos + 4)[0]
                header_length = word & MAX_HEADER_LENGTH
                if header_length > length - 4:
                    self._fail(ProtocolError(
                        f"frame header length {header_length} exceeds the frame's "
                        f"{length - 4} bytes after the header word: the stream is corrupt; "
                        "close the connection"
                    ))
                end = pos + 4 + length
                if end > n:
                    break
                start = pos + PREFIX_SIZE
                frames.append(Frame((word >> 24) & 0xFF, bytes(view[start:start + header_length]),
                                    bytes(view[start + header_length:end])))
                pos = end
            rest = bytes(view[pos:]) if src is not buf and pos < n else b""
        if src is buf:
            del buf[:pos]
        elif rest:
            buf += rest
        return frames

    def _length_error(self, length: int) -> ProtocolError:
        if length < 4:
            return ProtocolError(
                f"frame length {length} is below 4 (the header word alone takes 4 bytes): the "
                "peer does not speak the RocketMQ protocol or the stream is out of step; "
                "close the connection"
            )
        return ProtocolError(
            f"frame of {length + 4} bytes (length field {length}) is over the "
            f"{self.max_frame_size}-byte limit: close the connection, or raise max_frame_size "
            "if the peer really sends frames this large"
        )

    def _fail(self, error: ProtocolError) -> NoReturn:
        self._error = error
        raise error
