"""Records framed as ``[u32 length][u32 crc32(payload)][payload]`` (big-endian), as the
controller's event log and each peer's Raft log store them. A reader stops at the first record
that is cut short, whose CRC does not match or whose payload its parser refuses, and says why:
what follows is a torn or damaged tail."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import TypeVar

HEAD = struct.Struct(">II")
T = TypeVar("T")


def frame(payload: bytes) -> bytes:
    """``payload`` as one record."""
    return HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def read_frames(data: bytes, parse: Callable[[bytes], T], *, max_record: int) -> tuple[list[T], int, str]:
    """What ``parse`` makes of each record of ``data``, the length of the good prefix and why it
    stops early ("" when every byte was read). ``parse`` refuses a payload with ValueError, whose
    message is the reason."""
    out: list[T] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEAD.size:
            return out, pos, "a record header cut short"
        length, crc = HEAD.unpack_from(data, pos)
        end = pos + HEAD.size + length
        if length > max_record or end > len(data):
            return out, pos, "a record cut short"
        payload = data[pos + HEAD.size:end]
        if zlib.crc32(payload) != crc:
            return out, pos, "a record whose CRC does not match"
        try:
            out.append(parse(payload))
        except ValueError as exc:
            return out, pos, str(exc)
        pos = end
    return out, pos, ""
