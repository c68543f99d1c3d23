"""The classic RocketMQ HA wire format (4.9.x ``HAService``), as a pure codec.

Slave -> master: a bare 8-byte big-endian i64, the slave's CommitLog max offset. The first
one a connection carries is where the slave wants the stream to start; later ones are acks.
Master -> slave: frames ``{i64 startPhyOffset, i32 bodySize}`` followed by ``bodySize`` raw
CommitLog bytes; a frame with ``bodySize`` 0 is a heartbeat carrying the master's position.
"""

from __future__ import annotations

import struct

from bolide.errors import ProtocolError

OFFSET = struct.Struct(">q")
FRAME_HEADER = struct.Struct(">qi")
HEADER_SIZE = FRAME_HEADER.size  # 12
MAX_FRAME_BODY = 64 * 1024 * 1024  # a bound against garbage; masters send 32 KiB frames


def encode_offset(offset: int) -> bytes:
    """A slave's report (request or ack)."""
    return OFFSET.pack(offset)


def encode_frame_header(start_offset: int, body_size: int) -> bytes:
    """The 12 bytes before a frame's body (``body_size`` 0: a heartbeat)."""
    return FRAME_HEADER.pack(start_offset, body_size)


class OffsetReader:
    """The master's side: collects 8-byte reports; only the latest complete one matters."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> int | None:
        """Add received bytes; the newest complete report among them, or None."""
        buf = self._buf
        buf += data
        whole = len(buf) - len(buf) % 8
        if not whole:
            return None
        value: int = OFFSET.unpack_from(buf, whole - 8)[0]
        del buf[:whole]
        return value


class FrameDecoder:
    """The slave's side: turns a byte stream into ``(start_offset, body)`` frames."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add received bytes; returns the frames they complete (heartbeats have an empty
        body). Raises :class:`ProtocolError` on a negative or absurd body size."""
        buf = self._buf
        buf += data
        frames: list[tuple[int, bytes]] = []
        pos = 0
        size = len(buf)
        while size - pos >= HEADER_SIZE:
            offset, body_size = FRAME_HEADER.unpack_from(buf, pos)
            if not 0 <= body_size <= MAX_FRAME_BODY or offset < 0:
                raise ProtocolError(f"bad HA frame header: offset {offset}, body size "
                                    f"{body_size}; is the HA address really a master's HA port?")
            end = pos + HEADER_SIZE + body_size
            if end > size:
                break
            frames.append((offset, bytes(buf[pos + HEADER_SIZE : end])))
            pos = end
        if pos:
            del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held."""
        return len(self._buf)
