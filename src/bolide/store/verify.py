"""Offline consistency check of a store directory (what ``bolide store verify`` runs).

Reads the files read-only: every CommitLog record's framing and CRC, the record chain
across segments, and CommitLog <-> ConsumeQueue agreement in both directions.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bolide.common import sysflag
from bolide.store.config import StoreConfig
from bolide.store.consume_queue import ENTRY, ENTRY_SIZE
from bolide.store.record import RecordInfo, parse_record

_PRE_BLANK = 0x7FFFFFFF


@dataclass(slots=True)
class Problem:
    where: str
    offset: int
    message: str

    def __str__(self) -> str:
        return f"{self.where} @ {self.offset}: {self.message}"


@dataclass(slots=True)
class VerifyReport:
    records: int = 0
    bytes_checked: int = 0
    commit_log_min: int = 0
    commit_log_end: int = 0
    queues: int = 0
    queue_entries: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class _Segments:
    """Read-only mappings of one directory of fixed-size segments."""

    def __init__(self, directory: Path, size: int, report: VerifyReport, label: str) -> None:
        self.size = size
        self.maps: list[tuple[int, mmap.mmap]] = []
        if not directory.is_dir():
            return
        names = sorted(p for p in directory.iterdir() if p.is_file() and p.name.isdigit())
        expected = None
        for path in names:
            length = path.stat().st_size
            if length != size:
                report.problems.append(Problem(str(path), 0, f"{length} bytes, expected {size}"))
                continue
            start = int(path.name)
            if expected is not None and start != expected:
                report.problems.append(Problem(label, expected, f"segment missing before {path}"))
            with open(path, "rb") as f:
                self.maps.append((start, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)))
            expected = start + size

    def find(self, offset: int) -> tuple[int, mmap.mmap] | None:
        if not self.maps:
            return None
        i = offset // self.size - self.maps[0][0] // self.size
        return self.maps[i] if 0 <= i < len(self.maps) else None

    def close(self) -> None:
        for _, m in self.maps:
            m.close()


def verify_store(root: str | os.PathLike[str], config: StoreConfig | None = None,
                 progress: Callable[[int], None] | None = None) -> VerifyReport:
    """Check the store at ``root``; ``progress(bytes)`` is called as the CommitLog is read."""
    cfg = (config or StoreConfig()).replace(store_path_root_dir=str(root))
    report = VerifyReport()
    log = _Segments(cfg.commit_log_dir, cfg.mapped_file_size_commit_log, report, "commitlog")
    queues: dict[tuple[str, int], _Segments] = {}
    try:
        _load_queues(cfg, queues, report)
        _check_commit_log(log, queues, report, progress)
        _check_queues(log, queues, report)
    finally:
        log.close()
        for q in queues.values():
            q.close()
    return report


def _load_queues(cfg: StoreConfig, queues: dict[tuple[str, int], _Segments],
                 report: VerifyReport) -> None:
    base = cfg.consume_queue_dir
    if not base.is_dir():
        return
    for topic_dir in sorted(base.iterdir()):
        for queue_dir in sorted(topic_dir.iterdir()) if topic_dir.is_dir() else []:
            if queue_dir.is_dir() and queue_dir.name.isdigit():
                key = (topic_dir.name, int(queue_dir.name))
                queues[key] = _Segments(queue_dir, cfg.mapped_file_size_consume_queue, report,
                                        f"consumequeue/{key[0]}/{key[1]}")


def _check_commit_log(log: _Segments, queues: dict[tuple[str, int], _Segments],
                      report: VerifyReport, progress: Callable[[int], None] | None) -> None:
    """Walk the record chain; each record that needs a ConsumeQueue entry must have it."""
    if not log.maps:
        return
    report.commit_log_min = log.maps[0][0]
    end = log.maps[0][0]
    missing_queues: dict[tuple[str, int], int] = {}
    for index, (start, m) in enumerate(log.maps):
        view = memoryview(m)
        pos = 0
        last = index == len(log.maps) - 1
        try:
            while True:
                info = parse_record(view, pos, True)
                if type(info) is RecordInfo:
                    if info.size == 0:
                        pos = log.size
                        break
                    if info.commit_log_offset != start + pos:
                        report.problems.append(Problem(
                            "commitlog", start + pos,
                            f"record claims PHYSICALOFFSET {info.commit_log_offset}"))
                        break
                    report.records += 1
                    if sysflag.gets_queue_entry(info.sys_flag):
                        key = (info.topic, info.queue_id)
                        segs = queues.get(key)
                        if segs is None:
                            missing_queues[key] = missing_queues.get(key, 0) + 1
                        elif _entry(segs, info.queue_offset) != (start + pos, info.size):
                            report.problems.append(Problem(
                                f"consumequeue/{key[0]}/{key[1]}", info.queue_offset,
                                f"missing entry for the record at CommitLog offset {start + pos}"))
                    pos += info.size
                else:
                    if info.reason != "end of data (zero bytes)":
                        report.problems.append(Problem("commitlog", start + pos, info.reason))
                    break
            end = start + pos
            if pos < log.size and _nonzero(view, pos):
                report.problems.append(Problem(
                    "commitlog", start + pos,
                    "non-zero bytes after the last valid record" if last else
                    "segment ends without a BLANK record but later segments follow"))
        finally:
            view.release()
        report.bytes_checked += pos
        if progress is not None:
            progress(pos)
        if pos < log.size and not last:
            break
    report.commit_log_end = end
    for key, count in missing_queues.items():
        report.problems.append(Problem(f"consumequeue/{key[0]}/{key[1]}", 0,
                                       f"queue missing for {count} records"))


def _entry(segs: _Segments, qoff: int) -> tuple[int, int] | None:
    found = segs.find(qoff * ENTRY_SIZE)
    if found is None:
        return None
    phys, size, _ = ENTRY.unpack_from(found[1], qoff * ENTRY_SIZE - found[0])
    return phys, size


def _nonzero(view: memoryview, pos: int) -> bool:
    chunk = 1 << 20
    zero = bytes(chunk)
    while pos < len(view):
        part = view[pos : pos + chunk]
        if part != zero[: len(part)]:
            return True
        pos += chunk
    return False


def _check_queues(log: _Segments, queues: dict[tuple[str, int], _Segments],
                  report: VerifyReport) -> None:
    """Every ConsumeQueue entry must point at its own queue's record with that offset."""
    report.queues = len(queues)
    for key, segs in queues.items():
        where = f"consumequeue/{key[0]}/{key[1]}"
        for start, m in segs.maps:
            view = memoryview(m)
            try:
                for i, (phys, size, _tags) in enumerate(ENTRY.iter_unpack(view)):
                    if phys < 0 or size <= 0:
                        break
                    if size == _PRE_BLANK:
                        continue
                    report.queue_entries += 1
                    qoff = (start + i * ENTRY_SIZE) // ENTRY_SIZE
                    if phys + size > report.commit_log_end:
                        report.problems.append(Problem(
                            where, qoff, f"entry points past the CommitLog end ({phys})"))
                    elif phys >= report.commit_log_min:
                        found = log.find(phys)
                        info = (parse_record(memoryview(found[1]), phys - found[0], False)
                                if found else None)
                        if (type(info) is not RecordInfo or info.size != size
                                or info.topic != key[0] or info.queue_id != key[1]
                                or info.queue_offset != qoff):
                            report.problems.append(Problem(
                                where, qoff, f"entry ({phys}, {size}) does not point at this "
                                f"queue's record number {qoff}"))
            finally:
                view.release()
