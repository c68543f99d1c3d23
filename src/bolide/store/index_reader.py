"""Read-only index files (``<root>/index/``) for the offline tools: header, lookups by key.

The geometry (``maxHashSlotNum``, ``maxIndexNum``) comes from the config; a file of another
size is read with the geometry its size implies when the slots are a quarter of the entries
(RocketMQ's default ratio, 5,000,000 to 20,000,000).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from bolide.store.config import StoreConfig
from bolide.store.index_file import ENTRY_SIZE, HEADER_SIZE, SLOT_SIZE, index_file_size, index_key_hash

_HEADER = struct.Struct(">qqqqii")
_I32 = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")


class IndexGeometryError(ValueError):
    """An index file whose size fits neither the configured nor an inferable geometry."""


@dataclass(slots=True)
class IndexHeader:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


class IndexReader:
    """One index file mapped read-only."""

    def __init__(self, path: Path, hash_slot_num: int, index_num: int) -> None:
        self.path = path
        size = path.stat().st_size
        if size != index_file_size(hash_slot_num, index_num):
            slots = (size - HEADER_SIZE) // (SLOT_SIZE + 4 * ENTRY_SIZE)
            if size <= HEADER_SIZE or index_file_size(slots, 4 * slots) != size:
                raise IndexGeometryError(
                    f"index file {path} is {size} bytes, not the {index_file_size(hash_slot_num, index_num)} "
                    f"of maxHashSlotNum={hash_slot_num} maxIndexNum={index_num}: pass the broker.conf "
                    "it was written with (-c)")
            hash_slot_num, index_num = slots, 4 * slots
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.entries_at = HEADER_SIZE + hash_slot_num * SLOT_SIZE
        with open(path, "rb") as f:
            self.mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        self.header = IndexHeader(*_HEADER.unpack_from(self.mm, 0))

    @property
    def count(self) -> int:
        """Next entry number (entries 1 .. count-1 are used)."""
        return max(1, self.header.index_count)

    def slot(self, number: int) -> int:
        return _I32.unpack_from(self.mm, HEADER_SIZE + number * SLOT_SIZE)[0]

    def entry(self, number: int) -> tuple[int, int, int, int]:
        """(key hash, CommitLog offset, seconds since begin, previous entry number)."""
        return _ENTRY.unpack_from(self.mm, self.entries_at + number * ENTRY_SIZE)

    def lookup(self, key: str, max_num: int = 64) -> list[tuple[int, int]]:
        """(CommitLog offset, store time in ms) of the entries whose hash matches ``key``
        (newest first; hash only: the caller reads the records back)."""
        key_hash = index_key_hash(key)
        count = self.count
        n = self.slot(key_hash % self.hash_slot_num)
        found: list[tuple[int, int]] = []
        seen = 0
        while 0 < n < count and len(found) < max_num and seen < count:
            hash_read, phy, diff, prev = self.entry(n)
            if hash_read == key_hash:
                found.append((phy, self.header.begin_timestamp + diff * 1000))
            if prev <= 0 or prev >= n:
                break
            n = prev
            seen += 1
        return found

    def close(self) -> None:
        self.mm.close()

    def __enter__(self) -> IndexReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def index_paths(config: StoreConfig) -> list[Path]:
    """The index files, oldest first (their names are creation times)."""
    d = config.index_dir
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def open_index(config: StoreConfig, path: Path) -> IndexReader:
    return IndexReader(path, config.max_hash_slot_num, config.max_index_num)
