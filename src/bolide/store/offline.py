"""Read-only access to a store directory for the offline tools (inspect, dump, query, verify).

Nothing here writes, locks or recovers: files are mapped with ``ACCESS_READ``, so these
helpers also work on a directory a running broker (Bolide or RocketMQ) has open.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bolide.store.config import StoreConfig
from bolide.store.consume_queue import ENTRY, ENTRY_SIZE
from bolide.store.record import RecordError, RecordInfo, parse_record

PRE_BLANK_SIZE = 0x7FFFFFFF
_ZERO = bytes(4 << 20)


@dataclass(slots=True)
class SegmentIssue:
    """A segment file that could not be mapped (wrong size, gap before it)."""

    path: str
    offset: int
    message: str


@dataclass
class Segments:
    """Read-only mappings of one directory of fixed-size segments, sorted by start offset."""

    directory: Path
    size: int
    maps: list[tuple[int, mmap.mmap]] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    issues: list[SegmentIssue] = field(default_factory=list)

    @classmethod
    def open(cls, directory: Path, size: int) -> Segments:
        segs = cls(directory, size)
        if not directory.is_dir():
            return segs
        names = sorted(p for p in directory.iterdir() if p.is_file() and p.name.isdigit())
        expected = None
        for path in names:
            length = path.stat().st_size
            start = int(path.name)
            if length != size:
                segs.issues.append(SegmentIssue(
                    str(path), start, f"{length} bytes, expected {size}: pass the segment size "
                    "it was written with (-c broker.conf), or `bolide store repair` when it is "
                    "the last segment cut short"))
                continue
            if expected is not None and start != expected:
                segs.issues.append(SegmentIssue(str(path), expected,
                                                f"segment missing before {path.name}"))
            with open(path, "rb") as f:
                segs.maps.append((start, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)))
            segs.paths.append(path)
            expected = start + size
        return segs

    @property
    def start(self) -> int:
        return self.maps[0][0] if self.maps else 0

    def find(self, offset: int) -> tuple[int, mmap.mmap] | None:
        """(segment start, mapping) of the segment holding global ``offset``."""
        if not self.maps:
            return None
        i = offset // self.size - self.maps[0][0] // self.size
        return self.maps[i] if 0 <= i < len(self.maps) else None

    def close(self) -> None:
        for _, m in self.maps:
            m.close()
        self.maps = []
        self.paths = []

    def __enter__(self) -> Segments:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def nonzero_after(path: Path, pos: int) -> bool:
    """True when the file holds a non-zero byte at or after ``pos``. Holes and unwritten
    (fallocated) extents are skipped with SEEK_DATA, the rest read with pread: no page
    faults over a mostly empty segment."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        while pos < end:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    return False
                data = pos
            hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
            while data < hole:
                chunk = os.pread(fd, min(len(_ZERO), hole - data), data)
                if not chunk:
                    return False
                if chunk != _ZERO[: len(chunk)]:
                    return True
                data += len(chunk)
            pos = hole
        return False
    finally:
        os.close(fd)


def open_commit_log(config: StoreConfig) -> Segments:
    return Segments.open(config.commit_log_dir, config.mapped_file_size_commit_log)


def queue_dirs(config: StoreConfig) -> dict[tuple[str, int], Path]:
    """Every ``consumequeue/<topic>/<queueId>`` directory, sorted."""
    base = config.consume_queue_dir
    found: dict[tuple[str, int], Path] = {}
    if not base.is_dir():
        return found
    for topic_dir in sorted(base.iterdir()):
        if topic_dir.is_dir():
            for queue_dir in sorted(topic_dir.iterdir(), key=lambda p: p.name):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    found[(topic_dir.name, int(queue_dir.name))] = queue_dir
    return dict(sorted(found.items()))


def open_queue(config: StoreConfig, topic: str, queue_id: int) -> Segments:
    return Segments.open(config.consume_queue_dir / topic / str(queue_id),
                         config.mapped_file_size_consume_queue)


def scan_end(log: Segments, check_crc: bool = False) -> tuple[int, str]:
    """End of the valid record chain, read from the third-to-last segment holding data (as
    a normal RocketMQ recovery does), and why it stops there ("" at a clean end)."""
    used = [(s, m) for s, m in log.maps if m[:8] != bytes(8)]
    if not used:
        return log.start, ""
    index = log.maps.index(used[max(0, len(used) - 3)])
    for start, m in log.maps[index:]:
        pos = 0
        while True:
            info = parse_record(m, pos, check_crc)
            if type(info) is RecordError:
                reason = "" if info.reason == "end of data (zero bytes)" else info.reason
                return start + pos, reason
            assert type(info) is RecordInfo
            if info.size == 0:
                break
            if info.commit_log_offset != start + pos:
                return start + pos, f"record claims PHYSICALOFFSET {info.commit_log_offset}"
            pos += info.size
    last_start = log.maps[-1][0]
    return last_start + log.size, ""


def iter_records(config: StoreConfig, from_offset: int | None = None, check_crc: bool = False
                 ) -> Iterator[RecordInfo]:
    """Records of the CommitLog from ``from_offset`` (a record start; default the first),
    in order, up to the first record that does not parse."""
    with open_commit_log(config) as log:
        if not log.maps:
            return
        offset = log.start if from_offset is None else from_offset
        while (found := log.find(offset)) is not None:
            start, m = found
            pos = offset - start
            while True:
                info = parse_record(m, pos, check_crc)
                if type(info) is not RecordInfo:
                    return
                if info.size == 0:
                    break
                yield info
                pos += info.size
            offset = start + log.size


def read_record(log: Segments, offset: int) -> bytes | None:
    """The raw bytes of the record at CommitLog ``offset`` (whole, CRC unchecked), or None."""
    found = log.find(offset)
    if found is None:
        return None
    start, m = found
    info = parse_record(m, offset - start, False)
    if type(info) is not RecordInfo or info.size == 0:
        return None
    return m[offset - start : offset - start + info.size]


def queue_entries(segs: Segments) -> Iterator[tuple[int, int, int, int]]:
    """``(queue offset, phys, size, tags code)`` of every valid entry, pre-blanks included,
    up to the first invalid one."""
    for start, m in segs.maps:
        base = start // ENTRY_SIZE
        for i, (phys, size, tags) in enumerate(ENTRY.iter_unpack(m)):
            if phys < 0 or size <= 0:
                return
            yield base + i, phys, size, tags


def queue_range(segs: Segments, commit_log_min: int) -> tuple[int, int]:
    """(min, max) offsets of a queue as a broker would serve them: max is the end of the
    valid entries; min the first real entry whose record is still in the CommitLog."""
    end = 0
    low = None
    for start, m in segs.maps:
        count = 0
        for phys, size, _ in ENTRY.iter_unpack(m):
            if phys < 0 or size <= 0:
                break
            if low is None and size != PRE_BLANK_SIZE and phys >= commit_log_min:
                low = start // ENTRY_SIZE + count
            count += 1
        end = start // ENTRY_SIZE + count
        if count < segs.size // ENTRY_SIZE:
            break
    return (end if low is None else low), end
