"""One compacted queue's files: RocketMQ 5's ``TopicPartitionLog`` of the compaction store.

A compaction log (``compaction/compactionLog/{topic}/{queueId}/``) holds CommitLog-format records
whose PHYSICALOFFSET is rewritten to their place in this log; beside it a sparse consume queue
(``compaction/compactionCq/{topic}/{queueId}/``) holds one 46-byte BatchConsumeQueue unit per
record::

    commitLogOffset i64 | size i32 | tagsCode i64 | storeTime i64 | msgBaseOffset i64 |
    batchSize i16 (1) | compactedOffset i32 (-1) | reserved i32 (0)

Each log file has a queue file of the same name (the log file's first offset); the files need
not be contiguous, as compaction leaves gaps. A file pair ends when either file is full: the
log gets a BLANK record (size, BLANK_MAGIC) and the queue an end unit (offset -1, batch 0).
The last file pair a compaction writes gets neither (RocketMQ 5.3.3's end callback writes
nothing): its records are followed by zeros, and it is never written to again, as the file pair
still being written always comes after it.
"""

from __future__ import annotations

import bisect
import logging
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

from bolide.common import sysflag
from bolide.errors import StoreFormatError
from bolide.store.config import StoreConfig
from bolide.store.mapped_file import MappedFile, file_name
from bolide.store.record import BLANK_MAGIC, RecordError, parse_record

log = logging.getLogger(__name__)

UNIT = struct.Struct(">qiqqqhii")
UNIT_SIZE = UNIT.size  # 46, RocketMQ's BatchConsumeQueue.CQ_STORE_UNIT_SIZE
END_UNIT = UNIT.pack(-1, 0, 0, 0, 0, 0, -1, 0)
_QUEUE_OFFSET = struct.Struct(">q")  # QUEUEOFFSET at 20, PHYSICALOFFSET at 28 in a record
_I32 = struct.Struct(">i")
_BLANK = struct.Struct(">ii")
END_FILE_MIN_BLANK = 8


def log_file_size(cq_file_size: int, log_size: int) -> int:
    """The compaction log's file size from the configured one, as RocketMQ rounds it: a
    multiple of the queue file size, at least five of them."""
    n, m = divmod(log_size, cq_file_size)
    if n < 5:
        return cq_file_size * 5
    return n * cq_file_size if 0 < m < cq_file_size >> 1 else (n + 1) * cq_file_size


def file_sizes(config: StoreConfig) -> tuple[int, int]:
    """(log file size, queue file size) from ``compactionMappedFileSize`` and
    ``compactionCqMappedFileSize``, rounded as RocketMQ does."""
    cq_size = config.compaction_cq_mapped_file_size // UNIT_SIZE * UNIT_SIZE
    return log_file_size(cq_size, config.compaction_mapped_file_size), cq_size


def record_body_length(buf: memoryview | bytes) -> int:
    """BODYLENGTH of the record at the start of ``buf``."""
    flag = _I32.unpack_from(buf, 36)[0]
    pos = 48 + (20 if flag & sysflag.BORNHOST_V6 else 8) + 8 + (20 if flag & sysflag.STOREHOST_V6 else 8) + 12
    return int(_I32.unpack_from(buf, pos)[0])


class Segment:
    """A log file and its queue file; ``units`` records so far, their queue offsets
    ``first``..``last`` (-1 when none)."""

    __slots__ = ("cq", "ended", "first", "last", "log", "units")

    def __init__(self, log_file: MappedFile, cq_file: MappedFile) -> None:
        self.log = log_file
        self.cq = cq_file
        self.units = 0
        self.first = self.last = -1
        self.ended = False

    @property
    def base(self) -> int:
        return self.log.file_from_offset

    def unit(self, i: int) -> tuple[int, int, int, int, int, int, int, int]:
        return UNIT.unpack_from(self.cq.view, i * UNIT_SIZE)  # type: ignore[return-value]

    def queue_offset(self, i: int) -> int:
        return int(_QUEUE_OFFSET.unpack_from(self.cq.view, i * UNIT_SIZE + 28)[0])

    def index_from(self, offset: int) -> int:
        """The first unit whose queue offset is ``offset`` or more (``units`` when none)."""
        lo, hi = 0, self.units
        while lo < hi:
            mid = (lo + hi) // 2
            if self.queue_offset(mid) < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def record(self, phys: int, size: int) -> memoryview | None:
        pos = phys - self.base
        if pos < 0 or pos + size > self.log.wrote_position:
            return None
        return self.log.view[pos : pos + size]

    def close(self) -> None:
        self.log.close()
        self.cq.close()


class PartitionLog:
    """The log and queue files of one directory pair, appended to in queue-offset order."""

    def __init__(self, log_dir: Path, cq_dir: Path, log_size: int, cq_size: int) -> None:
        self.log_dir = log_dir
        self.cq_dir = cq_dir
        self.log_size = log_size
        self.cq_size = cq_size
        self.segments: list[Segment] = []

    # -- loading ------------------------------------------------------------------------
    def load(self, check_crc: bool = True) -> None:
        """Open the file pairs and recover the written ends: each queue file up to its last
        valid unit, the log up to the end of the last unit's record (a record whose CRC or
        framing is wrong ends the queue there). Raises StoreFormatError for a log file
        without its queue file or the reverse (except an empty last one, removed)."""
        logs = _segment_names(self.log_dir)
        cqs = _segment_names(self.cq_dir)
        self._drop_unwritten_newest(logs, cqs)
        for names, other, directory in ((logs, cqs, self.log_dir), (cqs, logs, self.cq_dir)):
            for name in sorted(set(names) - set(other)):
                pair_dir = self.cq_dir if directory == self.log_dir else self.log_dir
                raise StoreFormatError(
                    f"{directory / name} has no matching file in {pair_dir}; "
                    "restore it, or remove both compaction directories of the queue to rebuild them")
        try:
            for name in sorted(logs):
                seg = Segment(MappedFile.open(self.log_dir / name, self.log_size),
                              MappedFile.open(self.cq_dir / name, self.cq_size))
                self.segments.append(seg)
                self._recover(seg, check_crc)
        except BaseException:
            self.close()
            raise

    def _drop_unwritten_newest(self, logs: list[str], cqs: list[str]) -> None:
        """Remove the newest file pair when a kill cut its creation short (one file missing or
        not yet of full size) before anything was written to it."""
        if not logs and not cqs:
            return
        newest = max(logs + cqs)
        paths = [(self.log_dir / newest, self.log_size), (self.cq_dir / newest, self.cq_size)]
        whole = all(path.is_file() and path.stat().st_size == size for path, size in paths)
        if whole or not all(unwritten(path) for path, _ in paths):
            return
        for path, _ in paths:
            if path.is_file():
                log.warning("removing %s: a compaction file whose creation was cut short, never written",
                            path)
                path.unlink()
        for names in (logs, cqs):
            if newest in names:
                names.remove(newest)

    def _recover(self, seg: Segment, check_crc: bool) -> None:
        view = seg.cq.view
        log_end = 0
        count = 0
        while (count + 1) * UNIT_SIZE <= self.cq_size:
            phys, size, _tags, _ts, qoff, batch, _c, _r = UNIT.unpack_from(view, count * UNIT_SIZE)
            if phys < 0 or size <= 0 or qoff < 0 or batch <= 0:
                seg.ended = phys == -1 and batch == 0 and size == 0
                break
            pos = phys - seg.base
            if pos < 0 or pos + size > self.log_size:
                break
            info = parse_record(seg.log.view[pos : pos + size], 0, check_crc)
            if isinstance(info, RecordError) or info.size != size:
                reason = info.reason if isinstance(info, RecordError) else "size differs from its unit"
                log.error("compaction log %s: the record at %d is bad (%s); the queue ends before it",
                          seg.log.path, phys, reason)
                break
            if seg.first < 0:
                seg.first = qoff
            seg.last = qoff
            log_end = pos + size
            count += 1
        seg.units = count
        seg.cq.wrote_position = seg.cq.flushed_position = count * UNIT_SIZE
        if seg.ended:
            seg.cq.wrote_position = self.cq_size
        seg.log.wrote_position = seg.log.flushed_position = self.log_size if seg.ended else log_end

    # -- queries ------------------------------------------------------------------------
    @property
    def max_queue_offset(self) -> int:
        """One past the last record's queue offset (0 when empty): RocketMQ's maxOffsetInQueue."""
        for seg in reversed(self.segments):
            if seg.units:
                return seg.last + 1
        return 0

    @property
    def min_queue_offset(self) -> int:
        for seg in self.segments:
            if seg.units:
                return seg.first
        return 0

    def units_from(self, offset: int) -> Iterator[tuple[Segment, int]]:
        """``(segment, unit index)`` of the records from queue offset ``offset`` on (the next
        one kept when ``offset`` was compacted away)."""
        segments = self.segments  # replaced whole by a compaction, never changed in place
        lasts = [seg.last if seg.units else -1 for seg in segments]
        start = bisect.bisect_left(lasts, offset)
        for seg in segments[start:]:
            units = seg.units
            for i in range(seg.index_from(offset), units):
                yield seg, i

    # -- writing ------------------------------------------------------------------------
    def append(self, record: memoryview | bytes, queue_offset: int, tags_code: int,
               store_timestamp: int) -> None:
        """Copy one record in, its PHYSICALOFFSET set to its place here; OSError when a file
        cannot be made."""
        size = len(record)
        if size + END_FILE_MIN_BLANK > self.log_size:
            raise StoreFormatError(f"a {size}-byte record does not fit compaction log files of "
                                   f"{self.log_size} bytes; raise compactionMappedFileSize")
        seg = self.segments[-1] if self.segments else None
        if seg is not None and not seg.ended and (
                (seg.units + 2) * UNIT_SIZE > self.cq_size
                or seg.log.wrote_position + size + END_FILE_MIN_BLANK > self.log_size):
            self.end_segment(seg)
        if seg is None or seg.ended:
            seg = self._roll(seg.base + self.log_size if seg is not None else 0)
        pos = seg.log.wrote_position
        seg.log.view[pos : pos + size] = record
        phys = seg.base + pos
        _QUEUE_OFFSET.pack_into(seg.log.view, pos + 28, phys)
        seg.log.wrote_position = pos + size
        UNIT.pack_into(seg.cq.view, seg.units * UNIT_SIZE, phys, size, tags_code, store_timestamp,
                       queue_offset, 1, -1, 0)
        seg.cq.wrote_position = (seg.units + 1) * UNIT_SIZE
        if seg.first < 0:
            seg.first = queue_offset
        seg.last = queue_offset
        seg.units += 1  # last: readers see the unit only once it is whole

    def end_segment(self, seg: Segment, marks: bool = True) -> None:
        """Close the pair to writes: a BLANK in the log, an end unit in the queue (``marks``);
        without them (a compaction's last file, as RocketMQ leaves it) only in memory."""
        room = self.log_size - seg.log.wrote_position
        if marks and room >= END_FILE_MIN_BLANK:
            _BLANK.pack_into(seg.log.view, seg.log.wrote_position, room, BLANK_MAGIC)
        seg.log.wrote_position = self.log_size
        if marks and (seg.units + 1) * UNIT_SIZE <= self.cq_size:
            seg.cq.view[seg.units * UNIT_SIZE : (seg.units + 1) * UNIT_SIZE] = END_UNIT
        seg.cq.wrote_position = self.cq_size
        seg.ended = True

    def _roll(self, base: int) -> Segment:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cq_dir.mkdir(parents=True, exist_ok=True)
        log_file = MappedFile.create(self.log_dir / file_name(base), self.log_size)
        try:
            cq_file = MappedFile.create(self.cq_dir / file_name(base), self.cq_size)
        except BaseException:
            log_file.destroy()
            raise
        seg = Segment(log_file, cq_file)
        self.segments = [*self.segments, seg]
        return seg

    def flush(self) -> None:
        """Make what was written durable (log before queue, so a unit never outlives its
        record)."""
        for seg in self.segments:
            if seg.log.wrote_position > seg.log.flushed_position:
                seg.log.flush()
        for seg in self.segments:
            if seg.cq.wrote_position > seg.cq.flushed_position:
                seg.cq.flush()

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        self.segments = []

    def destroy(self) -> None:
        """Close and delete both directories."""
        self.close()
        shutil.rmtree(self.log_dir, ignore_errors=True)
        shutil.rmtree(self.cq_dir, ignore_errors=True)


def unwritten(path: Path) -> bool:
    """``path`` is missing or holds only zero bytes (read a chunk at a time)."""
    if not path.is_file():
        return True
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            if any(chunk):
                return False
    return True


def _segment_names(directory: Path) -> list[str]:
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.is_file() and p.name.isdigit())
