"""ConsumeQueue: the per topic/queue index of 20-byte entries {offset i64, size i32, tags i64}."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

from bolide.store.mapped_file import MappedFile, file_name
from bolide.store.mapped_file_queue import MappedFileQueue

ENTRY_SIZE = 20
ENTRY = struct.Struct(">qiq")
PRE_BLANK = ENTRY.pack(0, 0x7FFFFFFF, 0)
# A tagsCode at or below this is the address of a ConsumeQueueExt unit, which RocketMQ writes
# with enableConsumeQueueExt (off by default) and which holds the real tagsCode: the tag of such
# an entry is taken from its record instead.
EXT_ADDRESS_MAX = -(2**31) - 1


class ConsumeQueue:
    """Entries of one (topic, queue id), in files named by logical byte offset."""

    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int,
                 prefault: bool = True) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.files = MappedFileQueue(root / topic / str(queue_id), file_size, prefault=prefault)
        self.min_logic_offset = 0  # bytes
        self.max_physic_offset = -1  # end (offset + size) of the last entry's record
        self.last_store_timestamp = 0

    # -- offsets (in entries) -----------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """Index of the next entry to write."""
        return self.files.max_offset // ENTRY_SIZE

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // ENTRY_SIZE

    # -- writing ------------------------------------------------------------------------
    def put(self, phys_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write the entry for ``queue_offset``; False when it is a duplicate or out of order."""
        if phys_offset + size <= self.max_physic_offset:
            return False  # already dispatched
        expected = queue_offset * ENTRY_SIZE
        files = self.files.files
        if files:  # common case: the next entry of the last file
            mf = files[-1]
            pos = mf.wrote_position
            if pos < mf.file_size and mf.file_from_offset + pos == expected:
                ENTRY.pack_into(mf.view, pos, phys_offset, size, tags_code)
                mf.wrote_position = pos + ENTRY_SIZE
                self.max_physic_offset = phys_offset + size
                return True
        mf = self.files.last_file()
        if mf is None or mf.is_full:
            start = expected - expected % self.file_size
            if mf is None:
                mf = self.files.new_file(start)
                if expected > start or start > 0:
                    self._pre_blank(mf, expected - start)
                    self.min_logic_offset = expected
            else:
                mf = self.files.new_file(mf.file_from_offset + self.file_size)
        current = mf.end_offset
        if expected < current:
            return False
        if expected > current:
            # a gap: fill with pre-blank entries so the logical position lines up
            while mf.end_offset < expected:
                if mf.is_full:
                    mf = self.files.new_file(mf.file_from_offset + self.file_size)
                self._pre_blank(mf, min(expected, mf.file_from_offset + self.file_size)
                                - mf.file_from_offset)
            if mf.is_full:  # the gap ended at a file boundary: the entry starts the next file
                mf = self.files.new_file(mf.file_from_offset + self.file_size)
        ENTRY.pack_into(mf.view, mf.wrote_position, phys_offset, size, tags_code)
        mf.wrote_position += ENTRY_SIZE
        self.max_physic_offset = phys_offset + size
        return True

    def put_entries(self, first_queue_offset: int, entries: bytes, end_phys: int) -> int:
        """Write consecutive entries (20 bytes each) from ``first_queue_offset``; returns how
        many were written. ``end_phys`` is where the last entry's record ends.

        One copy when they follow the last file's entries and fit in it; otherwise entry by
        entry through :meth:`put` (gaps, duplicates, file boundaries)."""
        count = len(entries) // ENTRY_SIZE
        files = self.files.files
        first_phys = ENTRY.unpack_from(entries, 0)[0]
        if files and first_phys >= self.max_physic_offset:
            mf = files[-1]
            pos = mf.wrote_position
            if (mf.file_from_offset + pos == first_queue_offset * ENTRY_SIZE
                    and pos + len(entries) <= mf.file_size):
                mf.view[pos : pos + len(entries)] = entries
                mf.wrote_position = pos + len(entries)
                self.max_physic_offset = end_phys
                return count
        written = 0
        for i, (phys, size, code) in enumerate(ENTRY.iter_unpack(entries)):
            written += self.put(phys, size, code, first_queue_offset + i)
        return written

    @staticmethod
    def _pre_blank(mf: MappedFile, up_to: int) -> None:
        view = mf.view
        pos = mf.wrote_position
        while pos < up_to:
            view[pos : pos + ENTRY_SIZE] = PRE_BLANK
            pos += ENTRY_SIZE
        mf.wrote_position = pos

    # -- reading ------------------------------------------------------------------------
    def entries_from(self, index: int) -> tuple[memoryview, int] | None:
        """Readable entries from ``index`` to the end of that file: (view, first index)."""
        byte_offset = index * ENTRY_SIZE
        if byte_offset < self.min_logic_offset:
            return None
        mf = self.files.find(byte_offset)
        if mf is None:
            return None
        pos = byte_offset - mf.file_from_offset
        if pos >= mf.wrote_position:
            return None
        return mf.view[pos : mf.wrote_position], index

    def entry(self, index: int) -> tuple[int, int, int] | None:
        """``(phys_offset, size, tags_code)`` of one entry, or None."""
        found = self.entries_from(index)
        if found is None:
            return None
        return ENTRY.unpack_from(found[0], 0)

    # -- recovery -----------------------------------------------------------------------
    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Find the end of valid entries, scanning from the third-to-last file that has any.

        Files holding no entry at all (made ahead of need, or whose entries a power loss
        took) do not count: three of them would hide a partly written file before them.
        """
        files = self.files.files
        if not files:
            return
        used = len(files)
        while used > 1 and not _valid_prefix(files[used - 1].view[:ENTRY_SIZE]):
            used -= 1
        index = max(0, used - 3)
        while True:
            mf = files[index]
            pos = _valid_prefix(mf.view[: mf.file_size])
            if pos and (last := _last_real_entry(mf.view[:pos])) is not None:
                self.max_physic_offset = last
            if pos == mf.file_size and index + 1 < len(files):
                index += 1
                continue
            break
        self.truncate_positions(mf.file_from_offset + pos)

    def truncate_positions(self, logical_end: int) -> int:
        """Drop entries at or after byte ``logical_end``; returns entries removed."""
        removed = 0
        first = self.files.files[0] if self.files.files else None
        for mf in list(self.files.files):
            if mf.file_from_offset >= logical_end and mf is not first:
                removed += _valid_prefix(mf.view[: mf.file_size]) // ENTRY_SIZE
                self.files.files.remove(mf)
                mf.destroy()
            elif mf.file_from_offset + mf.file_size > logical_end:
                pos = max(0, logical_end - mf.file_from_offset)
                removed += _valid_prefix(mf.view[pos : mf.file_size]) // ENTRY_SIZE
                mf.zero_from(pos)
                mf.wrote_position = mf.flushed_position = pos
        self.files.flushed_where = min(self.files.flushed_where, logical_end)
        return removed

    def truncate_dirty(self, phys_end: int) -> int:
        """Remove entries whose record starts at or after CommitLog offset ``phys_end``."""
        logical_end = None
        for mf in reversed(self.files.files):
            pos = 0
            for off, size, _ in ENTRY.iter_unpack(mf.view[: mf.wrote_position]):
                if off < 0 or size <= 0 or (off >= phys_end and size != 0x7FFFFFFF):
                    break
                pos += ENTRY_SIZE
            logical_end = mf.file_from_offset + pos
            if pos > 0:
                break
        if logical_end is None or logical_end >= self.files.max_offset:
            return 0
        removed = self.truncate_positions(logical_end)
        self._recompute_max_physic()
        return removed

    def _recompute_max_physic(self) -> None:
        self.max_physic_offset = -1
        last = self.max_offset - 1
        while last >= self.min_offset:
            entry = self.entry(last)
            if entry is None:
                break
            if entry[1] != 0x7FFFFFFF:
                self.max_physic_offset = entry[0] + entry[1]
                break
            last -= 1

    def correct_min_offset(self, commit_log_min: int) -> None:
        """Move the min offset to the first entry whose record is still in the CommitLog
        (3.5 of the spec; it never moves back). Scans on from the current min, across files
        whose entries all point below ``commit_log_min``."""
        for mf in self.files.files:
            view = mf.view
            pos = max(0, self.min_logic_offset - mf.file_from_offset)
            wrote = mf.wrote_position
            while pos < wrote:
                off, size, _ = ENTRY.unpack_from(view, pos)
                if size != 0x7FFFFFFF and off >= commit_log_min:
                    self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + pos)
                    return
                pos += ENTRY_SIZE
            self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + pos)
            if wrote < mf.file_size:  # the end of the entries
                return

    def raise_min_offset(self, index: int) -> None:
        """Stop serving entries before ``index`` (a retention floor); never moves back."""
        index = min(index, self.max_offset)
        self.min_logic_offset = max(self.min_logic_offset, index * ENTRY_SIZE)

    def detach_expired_files(self, commit_log_min: int) -> list[MappedFile]:
        """Take out the oldest files whose entries all point below ``commit_log_min`` (11.3
        of the spec): never the last file, and only full, flushed ones (the flush thread is
        done with them). The min offset moves past them first, so a reader gets
        OFFSET_TOO_SMALL rather than a missing file. The caller retires the files."""
        files = self.files.files
        flushed = self.files.flushed_where
        count = 0
        while count < len(files) - 1:
            mf = files[count]
            if mf.wrote_position < mf.file_size or flushed < mf.file_from_offset + mf.file_size:
                break
            last = _last_real_entry(mf.view[: mf.file_size])
            if last is not None and last > commit_log_min:
                break
            count += 1
        self.correct_min_offset(commit_log_min)
        return self.files.detach_head(count) if count else []

    def flush(self, least_pages: int = 0) -> bool:
        return self.files.flush(least_pages)

    def close(self) -> None:
        self.files.close()

    def destroy(self) -> None:
        for mf in self.files.files:
            mf.destroy()
        self.files.files = []
        self.max_physic_offset = -1
        self.min_logic_offset = 0


def _valid_prefix(view: memoryview) -> int:
    """Bytes of ``view`` up to the first invalid entry (offset < 0 or size <= 0)."""
    pos = 0
    for off, size, _ in ENTRY.iter_unpack(view):
        if off < 0 or size <= 0:
            break
        pos += ENTRY_SIZE
    return pos


def _last_real_entry(view: memoryview) -> int | None:
    """End (offset + size) of the last non-pre-blank entry in ``view``."""
    pos = len(view) - ENTRY_SIZE
    while pos >= 0:
        off, size, _ = ENTRY.unpack_from(view, pos)
        if size != 0x7FFFFFFF:
            return off + size
        pos -= ENTRY_SIZE
    return None


def prepare_files(root: Path, topic: str, queue_id: int, file_size: int, first: int, last: int,
                  max_start: int) -> int:
    """Create (space reserved, all zeros) the missing files that will hold entries ``first``
    to ``last`` of a queue, but none starting after byte ``max_start``; returns the number of
    entries the files up to the last one created or found can hold (``first`` if none).

    The put path calls this before appending, so a full disk refuses the put instead of
    leaving an acknowledged message whose entry dispatch cannot write. The dispatcher adopts
    such a file (``MappedFile.create`` reuses an allocated file of the right size); recovery
    removes the ones never written. ``max_start`` keeps it to one such file past the one
    dispatch writes: RocketMQ's ConsumeQueue recovery starts at the third-to-last file, and
    three empty files after a partly written one (say, the one dispatch writes emptied by a
    power loss, and two made ahead) would hide its end from it. Raises ``OSError``.
    """
    directory = root / topic / str(queue_id)
    start = first * ENTRY_SIZE // file_size * file_size
    end = min(last * ENTRY_SIZE, max_start)
    room = first
    while start <= end:
        path = directory / file_name(start)
        if not path.exists():
            directory.mkdir(parents=True, exist_ok=True)
            MappedFile.create(path, file_size).close()
        start += file_size
        room = start // ENTRY_SIZE
    return room


def remove_queue_files(root: Path, topic: str, queue_id: int) -> int:
    """Unlink every file of a queue's directory (mapped ones keep their mappings until
    closed), then the directory and, when empty, the topic's; returns the files unlinked."""
    directory = root / topic / str(queue_id)
    removed = 0
    if directory.is_dir():
        for path in directory.iterdir():
            if path.is_file():
                path.unlink(missing_ok=True)
                removed += 1
    for empty in (directory, directory.parent):
        with contextlib.suppress(OSError):
            empty.rmdir()  # OSError when not empty: another queue of the topic
    return removed
