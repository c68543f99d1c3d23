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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from bolide.store.record import RecordError, parse_record

ENTRY = 20
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


def _search_file(path: Path, target: int) -> int | None:
    try:
        with open(path, "rb") as f:
            length = f.seek(0, 2)
            if length < ENTRY:
                return None
            with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ) as m:
                count = _entries(m)
                if count == 0 or _PHY_SIZE.unpack_from(m, (count - 1) * ENTRY)[0] < target:
                    return None
                lo, hi = 0, count - 1
                while lo < hi:
                    mid = (lo + hi) // 2
                    if _PHY_SIZE.unpack_from(m, mid * ENTRY)[0] < target:
                        lo = mid + 1
                    else:
                        hi = mid
                return int(_PHY_SIZE.unpack_from(m, lo * ENTRY)[0])
    except OSError:
        return None


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
                  queues: Sequence[QueueIndex]) -> list[ReadRange]:
    """Cut one segment into ranges of about ``max_bytes`` at record starts."""
    cuts = [start]
    target = start + max_bytes
    while queues and target < start + size:
        found = record_start_at_or_after(queues, target)
        if found is None or found >= start + size:
            break
        if found > cuts[-1] and _is_record_at(path, start, found):
            cuts.append(found)
        target = max(found, target) + max_bytes
    cuts.append(start + size)
    return [ReadRange(path, start, b, e, tail and i == len(cuts) - 2)
            for i, (b, e) in enumerate(pairwise(cuts))]


def plan_ranges(segments: Iterable[tuple[str, int, bool]], segment_size: int, max_bytes: int | None,
                consume_queue_dir: Path | None) -> Iterator[ReadRange]:
    """Read ranges for ``(path, start, tail)`` segments: one per segment when ``max_bytes``
    is None or at least the segment size, else cut through the ConsumeQueues."""
    queues: list[QueueIndex] = []
    if max_bytes is not None and max_bytes < segment_size and consume_queue_dir is not None:
        queues = queue_indexes(consume_queue_dir)
    for path, start, tail in segments:
        if queues and max_bytes is not None:
            yield from split_segment(path, start, segment_size, tail, max_bytes, queues)
        else:
            yield ReadRange(path, start, start, start + segment_size, tail)
