"""The key -> newest queue offset map a compaction builds, in a fixed-size buffer.

RocketMQ's ``CompactionLog.OffsetMap``: an open-addressing table of 24-byte entries (the MD5 of
the key, then the offset), sized by ``maxOffsetMapSize`` divided among the compaction threads.
Memory is the buffer (sized for the records a pass reads, up to that share), whatever the number
of keys: when it holds as many keys as it can,
:meth:`put` answers False and the compaction stops its pass there (the later messages are kept
as they are and the next pass takes them on).
"""

from __future__ import annotations

import hashlib
import struct

_HASH = 16  # MD5
ENTRY_SIZE = _HASH + 8
_OFFSET = struct.Struct(">q")
_EMPTY = bytes(ENTRY_SIZE)
MIN_CAPACITY = 100  # RocketMQ's floor


class OffsetMap:
    """Newest queue offset per key; ``last_offset`` is the offset of the last put."""

    __slots__ = ("_data", "capacity", "count", "last_offset")

    def __init__(self, memory_bytes: int) -> None:
        self.capacity = max(memory_bytes // ENTRY_SIZE, MIN_CAPACITY)
        self._data = bytearray(self.capacity * ENTRY_SIZE)
        self.count = 0
        self.last_offset = -1

    @property
    def full(self) -> bool:
        """No room for another key (the table is kept at most 3/4 full, for short probes)."""
        return self.count >= self.capacity * 3 // 4

    def _slot(self, digest: bytes) -> tuple[int, bool]:
        """The entry position of ``digest``'s key and whether it is already there."""
        data = self._data
        index = int.from_bytes(digest[:8], "big") % self.capacity
        while True:
            pos = index * ENTRY_SIZE
            stored = data[pos : pos + _HASH]
            if stored == digest:
                return pos, True
            if data[pos : pos + ENTRY_SIZE] == _EMPTY:
                return pos, False
            index = (index + 1) % self.capacity

    def put(self, key: str, offset: int) -> bool:
        """Record ``offset`` as ``key``'s newest; False (nothing recorded) when the map is full
        and ``key`` is new."""
        digest = hashlib.md5(key.encode("utf-8")).digest()
        pos, present = self._slot(digest)
        if not present:
            if self.full:
                return False
            self._data[pos : pos + _HASH] = digest
            self.count += 1
        _OFFSET.pack_into(self._data, pos + _HASH, offset)
        self.last_offset = offset
        return True

    def get(self, key: str) -> int:
        """``key``'s newest offset, or -1 when the map does not have it."""
        digest = hashlib.md5(key.encode("utf-8")).digest()
        pos, present = self._slot(digest)
        return _OFFSET.unpack_from(self._data, pos + _HASH)[0] if present else -1
