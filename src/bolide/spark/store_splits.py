"""Split CommitLog segments into several read ranges at record boundaries.

A CommitLog record does not say where the next one starts when read from the middle of a
segment, but every ConsumeQueue entry holds the CommitLog offset of a record. To cut a segment
near a target offset, the planner looks up, in each queue, the first entry at or after the
target (a binary search over the queue's 20-byte entries) and takes the smallest: a record
start. Candidates are checked by parsing the record there, so a stale or foreign ConsumeQueue
never yields a bad cut; without usable ConsumeQueues a segment stays one range.

Pure functions over files: no Spark import.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from bolide.store.record import RecordError, parse_record

ENTRY = 20
MIN_SPLIT_BYTES = 4 * 1024 * 1024  # ranges smaller than this cost more to plan than they save
_PHY_SIZE = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class ReadRange:
    """Bytes [begin, end) of one segment (global CommitLog offsets); records start at
    ``begin`` and the range ends before the first record starting at or after ``end``."""

    path: str
    segment_start: int
    begin: int
    end: int
    tail: bool  # the last range of the store's last segment: its end is where data ends


class QueueIndex:
    """The entries of one ConsumeQueue (its files in order), searchable by CommitLog offset."""

    def __init__(self, files: Sequence[Path]) -> None:
        self.files = list(files)

    def first_at_or_after(self, target: int) -> int | None:
        """The smallest CommitLog offset >= ``target`` among this queue's entries."""
        for path in self.files:
            found = _search_file(path, target)
            if found is not None:
                return found
        return None

    def end(self) -> int | None:
        """Where the record of this queue's last entry ends (None: no entries)."""
        for path in reversed(self.files):
            found = _last_end(path)
            if found is not None:
                return found
        return None


def _entries(buf: bytes | mmap.mmap) -> int:
    """How many entries of a ConsumeQueue file are written (the rest is zero filled)."""
    lo, hi = 0, len(buf) // ENTRY
    while lo < hi:  # written entries form a prefix: the first all-zero size marks the end
        mid = (lo + hi) // 2
        phy, size = _PHY_SIZE.unpack_from(buf, mid * ENTRY)
        if size > 0 or phy > 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _with_entries(path: Path, use: Callable[[mmap.mmap, int], int | None]) -> int | None:
    """``use(mapping, entries written)`` of a ConsumeQueue file holding entries; None when it
    holds none or cannot be read."""
    try:
        with open(path, "rb") as f:
            length = f.seek(0, 2)
            if length < ENTRY:
                return None
            with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ) as m:
                count = _entries(m)
                return use(m, count) if count else None
    except OSError:
        return None


def _search_file(path: Path, target: int) -> int | None:
    def search(m: mmap.mmap, count: int) -> int | None:
        if _PHY_SIZE.unpack_from(m, (count - 1) * ENTRY)[0] < target:
            return None
        lo, hi = 0, count - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if _PHY_SIZE.unpack_from(m, mid * ENTRY)[0] < target:
                lo = mid + 1
            else:
                hi = mid
        return int(_PHY_SIZE.unpack_from(m, lo * ENTRY)[0])

    return _with_entries(path, search)


def _last_end(path: Path) -> int | None:
    def end(m: mmap.mmap, count: int) -> int:
        phy, size = _PHY_SIZE.unpack_from(m, (count - 1) * ENTRY)
        return int(phy + size)

    return _with_entries(path, end)


def queue_indexes(consume_queue_dir: Path) -> list[QueueIndex]:
    """One index per ``<topic>/<queueId>/`` directory holding ConsumeQueue files."""
    if not consume_queue_dir.is_dir():
        return []
    found: list[QueueIndex] = []
    for topic in sorted(p for p in consume_queue_dir.iterdir() if p.is_dir()):
        for queue in sorted(p for p in topic.iterdir() if p.is_dir() and p.name.isdigit()):
            files = sorted((p for p in queue.iterdir() if p.is_file() and p.name.isdigit()),
                           key=lambda p: int(p.name))
            if files:
                found.append(QueueIndex(files))
    return found


def record_start_at_or_after(queues: Iterable[QueueIndex], target: int) -> int | None:
    """The smallest record start >= ``target`` any ConsumeQueue knows of."""
    best: int | None = None
    for q in queues:
        found = q.first_at_or_after(target)
        if found is not None and (best is None or found < best):
            best = found
    return best


def _is_record_at(path: str, segment_start: int, offset: int) -> bool:
    with open(path, "rb") as f:
        length = f.seek(0, 2)
        pos = offset - segment_start
        if not 0 <= pos < length:
            return False
        with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ) as m:
            info = parse_record(m, pos, False)
            return type(info) is not RecordError and info.size > 0


def split_segment(path: str, start: int, size: int, tail: bool, max_bytes: int,
                  queues: Sequence[QueueIndex], data_end: int | None = None) -> list[ReadRange]:
    """Cut one segment into ranges of about ``max_bytes`` at record starts, below
    ``data_end`` when given (the last range still reaches the segment's end)."""
    cuts = [start]
    limit = start + size if data_end is None else min(start + size, data_end)
    target = start + max_bytes
    while queues and target < limit:
        found = record_start_at_or_after(queues, target)
        if found is None or found >= limit:
            break
        if found > cuts[-1] and _is_record_at(path, start, found):
            cuts.append(found)
        target = max(found, target) + max_bytes
    cuts.append(start + size)
    return [ReadRange(path, start, b, e, tail and i == len(cuts) - 2)
            for i, (b, e) in enumerate(pairwise(cuts))]


def plan_ranges(segments: Sequence[tuple[str, int, bool]], segment_size: int, max_bytes: int | None,
                consume_queue_dir: Path | None, min_partitions: int = 1,
                min_split: int = MIN_SPLIT_BYTES) -> Iterator[ReadRange]:
    """Read ranges for ``(path, start, tail)`` segments, cut through the ConsumeQueues into
    pieces of at most ``max_bytes`` (None: no limit) and, as Spark splits files, into at least
    ``min_partitions`` pieces of about equal size (none under ``min_split`` bytes). The data
    of the last segment ends where the ConsumeQueues say; without them a segment stays whole."""
    split = segment_size if max_bytes is None else min(max_bytes, segment_size)
    queues: list[QueueIndex] = []
    if segments and consume_queue_dir is not None and (split < segment_size or min_partitions > 1):
        queues = queue_indexes(consume_queue_dir)
    ends = [q_end for q_end in (q.end() for q in queues) if q_end is not None]
    data_end = max(ends) if ends else None
    if queues and min_partitions > 1:
        last = segments[-1][1]
        used = segment_size * (len(segments) - 1) + (
            segment_size if data_end is None else max(0, min(data_end - last, segment_size)))
        split = min(split, max(min_split, -(-used // min_partitions)))
    for path, start, tail in segments:
        if queues and split < segment_size:
            yield from split_segment(path, start, segment_size, tail, split, queues,
                                     data_end if tail else None)
        else:
            yield ReadRange(path, start, start, start + segment_size, tail)
