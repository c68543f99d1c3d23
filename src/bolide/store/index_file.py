"""One RocketMQ IndexFile: a hash table from message keys to CommitLog offsets.

Layout (big-endian): a 40-byte header (begin/end store timestamp, begin/end physical offset,
hash slot count, index count), ``hash_slot_num`` i32 slots holding the newest entry number of
their chain, then ``index_num`` 20-byte entries (key hash, physical offset, seconds since the
begin timestamp, previous entry number). Entry number 0 is never used.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from pathlib import Path

from bolide.common.hashing import java_string_hash
from bolide.errors import StoreFormatError
from bolide.store.compiled import load
from bolide.store.fastscan import compiled_module

_index = load("_index")

COMPILED = _index is not None
_NEEDS_PAGE = 3  # index_records stopped before a page whose blocks are not allocated yet

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_PRESET = struct.Struct(">qqqq")
_I32 = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")
_I32_MAX = 0x7FFFFFFF
_PAGE = mmap.PAGESIZE
_ENTRY_PAGES_AHEAD = 64
_SLOT_PAGES = 16  # slot pages are allocated in aligned groups of this many
# keys are mostly unique: keep them out of the tags cache; compiled where built
_hash = getattr(compiled_module(), "java_hash", None) or java_string_hash.__wrapped__


def index_key_hash(key: str) -> int:
    """``abs(key.hashCode())`` as Java computes it: the hash -2^31 stays negative and becomes 0."""
    h = _hash(key)
    return 0 if h == -0x80000000 else abs(h)


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def index_file_name(millis: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time, like RocketMQ's UtilAll.timeMillisToHumanString."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(millis / 1000)) + f"{millis % 1000:03d}"


class IndexFile:
    """An index file; ``begin_*``/``end_*`` are preset for a new file that follows another."""

    def __init__(self, path: Path, hash_slot_num: int, index_num: int,
                 end_phy_offset: int = 0, end_timestamp: int = 0) -> None:
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = index_file_size(hash_slot_num, index_num)
        # Read with pread: on a full disk (tmpfs even for reads of a hole) a page fault in a
        # sparse file would kill the process with SIGBUS instead of raising ENOSPC. Written
        # through a mapping, page by page once the page's blocks are allocated (see put).
        self._fd = fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            have = os.fstat(fd).st_size
            if have != size:
                if have:
                    raise StoreFormatError(
                        f"index file {path} is {have} bytes, expected {size}: "
                        f"set maxHashSlotNum/maxIndexNum to the values it was written with")
                os.ftruncate(fd, size)
        except BaseException:
            os.close(fd)
            raise
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = _HEADER.unpack(os.pread(fd, HEADER_SIZE, 0))
        if self.index_count <= 0:
            self.index_count = 1
        if end_phy_offset > 0:
            self.begin_phy_offset = self.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            self.begin_timestamp = self.end_timestamp = end_timestamp
        if end_phy_offset > 0 or end_timestamp > 0:  # only these fields: the counts stay 0
            os.pwrite(fd, _PRESET.pack(self.begin_timestamp, self.end_timestamp,
                                       self.begin_phy_offset, self.end_phy_offset), 0)
        self._entries_at = HEADER_SIZE + hash_slot_num * SLOT_SIZE
        self._size = size
        self._mm: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._map_failed = False
        self._allocated = bytearray()  # per page of the mapping: 1 once its blocks exist

    def set_end_phy_offset(self, offset: int) -> None:
        """Rewrite the header's endPhyOffset (the store cut its CommitLog before it)."""
        self.end_phy_offset = offset
        os.pwrite(self._fd, struct.pack(">q", offset), 24)

    @property
    def name(self) -> str:
        return self.path.name

    def is_full(self) -> bool:
        return self.index_count >= self.index_num

    def _header_bytes(self) -> bytes:
        return _HEADER.pack(self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                            self.end_phy_offset, self.hash_slot_count, self.index_count)

    def _writable_view(self) -> memoryview | None:
        """The file mapped for writing (None: pread/pwrite, when it cannot be mapped)."""
        if self._view is None and not self._map_failed:
            try:
                self._mm = mmap.mmap(self._fd, self._size, mmap.MAP_SHARED,
                                     mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError:
                self._map_failed = True
                return None
            self._allocated = bytearray((self._size + _PAGE - 1) // _PAGE)
            self._allocate(0)  # the header
            self._view = memoryview(self._mm)
        return self._view

    def _allocate(self, offset: int) -> None:
        """Allocate the disk blocks of the page(s) at ``offset`` before the mapping touches
        them, so that a full disk raises ENOSPC here instead of SIGBUS in the write. Entries
        grow in order: their pages are allocated ``_ENTRY_PAGES_AHEAD`` at a time; slots are
        hit at random: theirs in aligned groups of ``_SLOT_PAGES`` (fewer system calls)."""
        page = offset // _PAGE
        if offset >= self._entries_at:
            count = _ENTRY_PAGES_AHEAD
        elif offset >= HEADER_SIZE:
            page -= page % _SLOT_PAGES
            count = _SLOT_PAGES
        else:
            count = 1
        count = min(count, len(self._allocated) - page)
        length = min(count * _PAGE, self._size - page * _PAGE)
        os.posix_fallocate(self._fd, page * _PAGE, length)
        # the pages come into the page cache now, with the GIL released, rather than in the
        # writes' page faults, which hold it (and stall the event loop) while the kernel works
        os.posix_fadvise(self._fd, page * _PAGE, length, os.POSIX_FADV_WILLNEED)
        self._allocated[page : page + count] = b"\x01" * count

    def put(self, key: str, phy_offset: int, store_ts: int) -> bool:
        """Add ``key`` -> ``phy_offset``; False when the file is full (OSError when the disk is)."""
        count = self.index_count
        if count >= self.index_num:
            return False
        key_hash = index_key_hash(key)
        slot_at = HEADER_SIZE + (key_hash % self.hash_slot_num) * SLOT_SIZE
        view = self._view if self._view is not None else self._writable_view()
        fd = self._fd
        entry_at = self._entries_at + count * ENTRY_SIZE
        if view is not None:
            allocated = self._allocated
            if not allocated[slot_at // _PAGE]:
                self._allocate(slot_at)
            if not (allocated[entry_at // _PAGE] and allocated[(entry_at + ENTRY_SIZE - 1) // _PAGE]):
                self._allocate(entry_at)
                self._allocate(entry_at + ENTRY_SIZE - 1)
            slot_value = _I32.unpack_from(view, slot_at)[0]
        else:
            slot_value = _I32.unpack(os.pread(fd, SLOT_SIZE, slot_at))[0]
        if slot_value <= 0 or slot_value >= count:  # a link points at an older entry, or nowhere
            slot_value = 0
        begin = self.begin_timestamp
        # seconds since the begin timestamp, clamped to [0, 2^31-1]; 0 while there is none
        diff = 0 if begin <= 0 else min(max((store_ts - begin) // 1000, 0), _I32_MAX)
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_ts
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_ts
        if view is not None:  # entry, slot, header: the order a crash may cut
            _ENTRY.pack_into(view, entry_at, key_hash, phy_offset, diff, slot_value)
            _I32.pack_into(view, slot_at, count)
            _HEADER.pack_into(view, 0, self.begin_timestamp, self.end_timestamp,
                              self.begin_phy_offset, self.end_phy_offset, self.hash_slot_count,
                              self.index_count)
        else:
            os.pwrite(fd, _ENTRY.pack(key_hash, phy_offset, diff, slot_value), entry_at)
            os.pwrite(fd, _I32.pack(count), slot_at)
            os.pwrite(fd, self._header_bytes(), 0)
        return True

    def put_records(self, buf: memoryview, pos: int, end: int, last_indexed: int,
                    max_records: int) -> tuple[int, int, int]:
        """Index the records of the CommitLog bytes ``buf[pos:end]`` with the compiled loop
        (``bolide.store._index``, which writes what :meth:`put` writes, with the GIL
        released) as far as it takes them. Returns ``(pos, last_indexed, records)``: the
        record at ``pos``, if before ``end``, needs the Python path (the next file, or a page
        that could not be allocated: a full disk, which that path reports)."""
        view = self._view if self._view is not None else self._writable_view()
        if _index is None or view is None:
            return pos, last_indexed, 0
        done = 0
        while True:
            pos, state, last_indexed, records, reason, need_at = _index.index_records(
                buf, pos, end, view, self._allocated, self._entries_at, self.hash_slot_num,
                self.index_num, (self.begin_timestamp, self.end_timestamp,
                                 self.begin_phy_offset, self.end_phy_offset,
                                 self.hash_slot_count, self.index_count),
                last_indexed, max_records - done)
            (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
             self.end_phy_offset, self.hash_slot_count, self.index_count) = state
            done += records
            if reason != _NEEDS_PAGE:
                return pos, last_indexed, done
            try:
                self._allocate(need_at)
            except OSError:  # a full disk: the Python path reports it for this record
                return pos, last_indexed, done

    def is_time_matched(self, begin: int, end: int) -> bool:
        return begin <= self.begin_timestamp <= end or begin <= self.end_timestamp <= end or (
            self.begin_timestamp < begin and self.end_timestamp > end)

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int,
                           out: list[int] | None = None) -> list[int]:
        """Offsets of entries whose key hash equals ``key``'s, stored within [begin, end]."""
        found = [] if out is None else out
        count = self.index_count
        key_hash = index_key_hash(key)
        fd = self._fd
        n = _I32.unpack(os.pread(fd, SLOT_SIZE, HEADER_SIZE + (key_hash % self.hash_slot_num) * SLOT_SIZE))[0]
        if n <= 0 or n > count or count <= 1:
            return found
        base_ts = self.begin_timestamp
        while len(found) < max_num:
            hash_read, phy, diff, prev = _ENTRY.unpack(
                os.pread(fd, ENTRY_SIZE, self._entries_at + n * ENTRY_SIZE))
            if diff < 0:
                break
            ts = base_ts + diff * 1000
            if hash_read == key_hash and begin <= ts <= end:
                found.append(phy)
            if prev <= 0 or prev > count or prev == n or ts < begin:
                break
            n = prev
        return found

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)  # also writes the mapping's dirty pages (one page cache)

    def _unmap(self) -> None:
        if self._view is not None:
            self._view.release()
            self._view = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self._unmap()
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = -1

    def destroy(self) -> None:
        if self._fd >= 0:
            self._unmap()
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)
