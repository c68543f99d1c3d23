"""Offline consistency check of a store directory (what ``bolide store verify`` runs): an fsck.

Reads the files read-only: every CommitLog record's framing and CRC, the record chain
across segments, CommitLog <-> ConsumeQueue agreement in both directions, the index files'
hash chains (:mod:`bolide.store.verify_index`, in a child process beside the CommitLog scan
when the index is large) and the config files
(:mod:`bolide.store.verify_config`) and the compacted queues' files
(:mod:`bolide.store.verify_compaction`). Each problem names its global offset.

The CommitLog scan is the hot loop (docs/performance.md): one ``struct`` unpack and one
``zlib.crc32`` over a memoryview slice of the mapping per record, and ConsumeQueue entries
read by iterating each queue in step with the records instead of looking each one up.
"""

from __future__ import annotations

import collections
import itertools
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bolide.errors import BolideError
from bolide.store.config import StoreConfig
from bolide.store.consume_queue import ENTRY, ENTRY_SIZE
from bolide.store.dropped_queues import load_dropped_queues
from bolide.store.fastscan import Run, scan_runs
from bolide.store.offline import (
    PRE_BLANK_SIZE,
    Segments,
    nonzero_after,
    open_commit_log,
    queue_dirs,
    queue_range,
)
from bolide.store.record import MAGIC_V1, RecordInfo, parse_record

if TYPE_CHECKING:
    from bolide.store.verify_compaction import CompactionScan

# TOTALSIZE MAGIC BODYCRC QUEUEID (FLAG) QUEUEOFFSET PHYSICALOFFSET SYSFLAG, then BODYLENGTH
# at 84 for a record with IPv4 hosts: everything the scan needs in one unpack.
_FAST = struct.Struct(">iiii4xqqi44xi")
_PROGRESS_EVERY = 64 * 1024 * 1024


@dataclass(slots=True)
class Problem:
    where: str
    offset: int
    message: str

    def __str__(self) -> str:
        at = f" @ {self.offset}" if self.offset >= 0 else ""
        return f"{self.where}{at}: {self.message}"

    def to_json(self) -> dict[str, object]:
        return {"where": self.where, "offset": self.offset, "message": self.message}


@dataclass(slots=True)
class VerifyReport:
    records: int = 0
    bytes_checked: int = 0
    commit_log_min: int = 0
    commit_log_end: int = 0
    queues: int = 0
    queue_entries: int = 0
    index_files: int = 0
    index_entries: int = 0
    config_files: int = 0
    deleted_queue_records: int = 0  # records of deleted queues (config/droppedQueues.json)
    compaction_queues: int = 0
    compaction_records: int = 0
    compaction: CompactionScan | None = None  # the compaction files as read (for repair)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok, "records": self.records, "bytes": self.bytes_checked,
            "commit_log_min": self.commit_log_min, "commit_log_end": self.commit_log_end,
            "queues": self.queues, "queue_entries": self.queue_entries,
            "index_files": self.index_files, "index_entries": self.index_entries,
            "config_files": self.config_files,
            "deleted_queue_records": self.deleted_queue_records,
            "compaction_queues": self.compaction_queues,
            "compaction_records": self.compaction_records,
            "problems": [p.to_json() for p in self.problems],
            "warnings": [p.to_json() for p in self.warnings],
        }


class _Queue:
    """One ConsumeQueue, read in step with the CommitLog: ``entries`` yields entry after
    entry; ``confirmed`` is the run of offsets [first, next) matched to their records."""

    __slots__ = ("entries", "first", "in_step", "next", "segs", "where")

    def __init__(self, segs: Segments, where: str) -> None:
        self.segs = segs
        self.where = where
        self.first = -1
        self.next = -1
        self.in_step = True
        self.entries: Iterator[tuple[int, int, int]] = iter(())

    def start_at(self, qoff: int) -> None:
        self.first = self.next = qoff
        self.entries = self._from(qoff)

    def _from(self, qoff: int) -> Iterator[tuple[int, int, int]]:
        offset = qoff * ENTRY_SIZE
        size = self.segs.size
        return itertools.chain.from_iterable(
            ENTRY.iter_unpack(memoryview(m)[max(0, offset - start):])
            for start, m in self.segs.maps if start + size > offset)

    def entry(self, qoff: int) -> tuple[int, int, int] | None:
        found = self.segs.find(qoff * ENTRY_SIZE)
        if found is None:
            return None
        return ENTRY.unpack_from(found[1], qoff * ENTRY_SIZE - found[0])


def verify_store(root: str | os.PathLike[str], config: StoreConfig | None = None,
                 progress: Callable[[int], None] | None = None) -> VerifyReport:
    """Check the store at ``root``; ``progress(bytes)`` is called as the CommitLog is read."""
    from bolide.store.verify_compaction import check_compaction
    from bolide.store.verify_config import check_config_files
    from bolide.store.verify_index import BackgroundIndexCheck, check_index_files

    cfg = (config or StoreConfig()).replace(store_path_root_dir=str(root))
    report = VerifyReport()
    log = open_commit_log(cfg)
    for issue in log.issues:
        report.problems.append(Problem(issue.path, issue.offset, issue.message))
    queues: dict[tuple[bytes, int], _Queue] = {}
    index_check = None
    try:
        index_check = BackgroundIndexCheck.start(cfg, log)  # a large index: beside the scan
        for (topic, qid), path in queue_dirs(cfg).items():
            segs = Segments.open(path, cfg.mapped_file_size_consume_queue)
            where = f"consumequeue/{topic}/{qid}"
            for issue in segs.issues:
                report.problems.append(Problem(where, issue.offset, f"{issue.path}: {issue.message}"))
            queues[(topic.encode(), qid)] = _Queue(segs, where)
        _check_commit_log(log, queues, report, progress, _deleted_queues(cfg),
                          _unconfirmed_from(cfg))
        _check_queues(log, queues, report)
        if index_check is None:
            check_index_files(cfg, log, report)
        else:
            index_check, running = None, index_check
            running.finish(cfg, log, report)
        ranges: dict[tuple[str, int], tuple[int, int] | None] = {}

        def bounds(topic: str, qid: int) -> tuple[int, int] | None:
            if (topic, qid) not in ranges:
                ranges[(topic, qid)] = _bounds(queues, topic, qid, report)
            return ranges[(topic, qid)]

        check_config_files(cfg, bounds, report)
        check_compaction(cfg, report)
    finally:
        if index_check is not None:
            index_check.cancel()
        for q in queues.values():
            q.entries = iter(())  # drops the generator's views of the mapping
            q.segs.close()
        log.close()
    return report


def _deleted_queues(cfg: StoreConfig) -> dict[tuple[bytes, int], int]:
    """Deleted queues and the CommitLog offset before which their records are skipped (a
    file that does not decode is reported by the config-file check)."""
    try:
        horizons = load_dropped_queues(cfg.root).horizons
    except (BolideError, ValueError, OSError):
        return {}
    return {(topic.encode(), qid): before for (topic, qid), before in horizons.items()}


def _bounds(queues: dict[tuple[bytes, int], _Queue], topic: str, qid: int,
            report: VerifyReport) -> tuple[int, int] | None:
    q = queues.get((topic.encode(), qid))
    return None if q is None else queue_range(q.segs, report.commit_log_min)


_NO_LIMIT = 1 << 62


def _unconfirmed_from(cfg: StoreConfig) -> int:
    """Controller mode: the checkpoint's confirmPhyOffset, past which records are not yet
    readable (no ConsumeQueue entry needed); otherwise no limit."""
    if not cfg.enable_controller_mode or cfg.read_uncommitted:
        return _NO_LIMIT
    try:
        with open(cfg.root / "checkpoint", "rb") as f:
            raw = f.read(40)
    except FileNotFoundError:
        return _NO_LIMIT
    return int.from_bytes(raw[32:40], "big", signed=True) if len(raw) == 40 else _NO_LIMIT


def _check_commit_log(log: Segments, queues: dict[tuple[bytes, int], _Queue],
                      report: VerifyReport, progress: Callable[[int], None] | None,
                      deleted: dict[tuple[bytes, int], int],
                      unconfirmed: int = _NO_LIMIT) -> None:
    """Walk the record chain; each record that needs a ConsumeQueue entry must have it
    (controller mode: those up to the confirm offset, ``unconfirmed``)
    (but those of ``deleted`` queues before their offsets)."""
    if not log.maps:
        return
    report.commit_log_min = log.maps[0][0]
    end = log.maps[0][0]
    missing: dict[tuple[bytes, int], int] = {}
    topics: dict[str, bytes] = {}
    problems = report.problems
    unpack = _FAST.unpack_from
    crc32 = zlib.crc32
    size = log.size
    records = 0
    for index, (start, m) in enumerate(log.maps):
        view = memoryview(m)
        pos = 0
        reported = 0
        last = index == len(log.maps) - 1
        limit = size - 88  # the fast path needs the whole fixed header in the segment
        try:
            while True:
                after, count, runs = scan_runs(m, pos, start, True)
                if count:  # records of the common kind, checked in bulk
                    for run in runs:
                        _check_run(run, queues, missing, problems, topics, deleted, report,
                                   unconfirmed)
                    records += count
                    pos = after
                    if progress is not None and pos - reported >= _PROGRESS_EVERY:
                        progress(pos - reported)
                        reported = pos
                    continue
                if pos <= limit:
                    total, magic, crc, qid, qoff, phys, sys_flag, body_len = unpack(m, pos)
                    fast = (magic == MAGIC_V1 and not sys_flag & 0x30 and total >= 91
                            and pos + total <= size and 0 <= body_len <= total - 91)
                else:
                    fast = False
                if fast:
                    p = pos + 88 + body_len
                    topic_len = m[p]
                    if (topic_len > 127 or p + 2 + topic_len >= pos + total or 91 + body_len + topic_len
                            + (m[p + 1 + topic_len] << 8 | m[p + 2 + topic_len]) != total
                            or (topic_len and m[p + 1] == 0)
                            or (p + 3 + topic_len < pos + total and m[pos + total - 1] == 0)):
                        fast = False  # the parser reports it (a torn write among others)
                    elif body_len and crc32(view[pos + 88 : p]) & 0x7FFFFFFF != crc:
                        problems.append(Problem("commitlog", start + pos, "body CRC mismatch"))
                        break
                    else:
                        topic = m[p + 1 : p + 1 + topic_len]
                if not fast:
                    info = parse_record(view, pos, True)
                    if type(info) is not RecordInfo:
                        if info.reason != "end of data (zero bytes)":
                            problems.append(Problem("commitlog", start + pos, info.reason))
                        break
                    if info.size == 0:
                        pos = size
                        break
                    total, qid, qoff, phys, sys_flag = (info.size, info.queue_id,
                                                        info.queue_offset, info.commit_log_offset,
                                                        info.sys_flag)
                    topic = info.topic.encode()
                if phys != start + pos:
                    problems.append(Problem("commitlog", start + pos,
                                            f"record claims PHYSICALOFFSET {phys}"))
                    break
                records += 1
                if not sys_flag & 0x4:  # transaction NOT_TYPE or COMMIT: has an entry
                    key = (topic, qid)
                    q = queues.get(key)
                    if deleted and phys < deleted.get(key, -1):
                        report.deleted_queue_records += 1
                    elif q is None:
                        if phys + total <= unconfirmed:
                            missing[key] = missing.get(key, 0) + 1
                    else:
                        if qoff == q.next:
                            q.next = qoff + 1
                            got = next(q.entries, None)
                        elif q.first < 0:
                            q.start_at(qoff)
                            q.next = qoff + 1
                            got = next(q.entries, None)
                        else:
                            q.in_step = False
                            got = q.entry(qoff)
                        if (got is None or got[0] != phys or got[1] != total) \
                                and phys + total <= unconfirmed:
                            q.in_step = False
                            problems.append(Problem(
                                q.where, qoff,
                                f"missing entry for the record at CommitLog offset {phys}"))
                pos += total
                if progress is not None and pos - reported >= _PROGRESS_EVERY:
                    progress(pos - reported)
                    reported = pos
            end = start + pos
            if pos < size and nonzero_after(log.paths[index], pos):
                problems.append(Problem(
                    "commitlog", start + pos,
                    "non-zero bytes after the last valid record" if last else
                    "segment ends without a BLANK record but later segments follow"))
        finally:
            view.release()
        report.bytes_checked += pos
        if progress is not None:
            progress(size - reported)
        if pos < size and not last:
            break
    report.records = records
    report.commit_log_end = end
    for key, count in missing.items():
        report.problems.append(Problem(
            f"consumequeue/{key[0].decode('utf-8', 'replace')}/{key[1]}", -1,
            f"queue missing for {count} records: `bolide store repair` rebuilds it"))


def _check_run(run: Run, queues: dict[tuple[bytes, int], _Queue],
               missing: dict[tuple[bytes, int], int], problems: list[Problem],
               topics: dict[str, bytes], deleted: dict[tuple[bytes, int], int],
               report: VerifyReport, unconfirmed: int = 1 << 62) -> None:
    """The ConsumeQueue entries of a run of records (see :func:`_check_commit_log`): in
    step, one comparison with the queue's bytes; else entry by entry."""
    raw = topics.get(run.topic)
    if raw is None:
        raw = topics[run.topic] = run.topic.encode()
    key = (raw, run.queue_id)
    count = len(run.entries) // ENTRY_SIZE
    if deleted and run.first_phys < deleted.get(key, -1):  # a run is of one queue's life
        report.deleted_queue_records += count
        return
    q = queues.get(key)
    if q is None:
        if run.first_phys < unconfirmed:
            missing[key] = missing.get(key, 0) + count
        return
    qoff = run.first_queue_offset
    if qoff == q.next or q.first < 0:
        if q.first < 0:
            q.start_at(qoff)
        q.next = qoff + count
        found = q.segs.find(qoff * ENTRY_SIZE)
        if found is not None:
            at = qoff * ENTRY_SIZE - found[0]
            if found[1][at : at + len(run.entries)] == run.entries:
                collections.deque(itertools.islice(q.entries, count), maxlen=0)  # skip them
                return
        expected = [next(q.entries, None) for _ in range(count)]
    else:
        q.in_step = False
        expected = [q.entry(qoff + i) for i in range(count)]
    for i, (phys, size, _tags) in enumerate(ENTRY.iter_unpack(run.entries)):
        got = expected[i]
        if (got is None or got[0] != phys or got[1] != size) and phys + size <= unconfirmed:
            q.in_step = False
            problems.append(Problem(q.where, qoff + i,
                                    f"missing entry for the record at CommitLog offset {phys}"))


def _check_queues(log: Segments, queues: dict[tuple[bytes, int], _Queue],
                  report: VerifyReport) -> None:
    """Every ConsumeQueue entry must point at its own queue's record with that offset.
    Entries the CommitLog scan matched in step (the run [first, next)) need no second look."""
    report.queues = len(queues)
    for (topic_raw, qid), q in queues.items():
        topic = topic_raw.decode("utf-8", "replace")
        skip_from, skip_to = (q.first, q.next) if q.in_step and q.first >= 0 else (0, 0)
        for start, m in q.segs.maps:
            base = start // ENTRY_SIZE
            view = memoryview(m)
            try:
                lo = max(0, min(skip_from, base + len(m) // ENTRY_SIZE) - base)
                hi = max(lo, min(skip_to, base + len(m) // ENTRY_SIZE) - base)
                stop = _check_entries(log, view, base, 0, lo, topic, qid, q.where, report)
                if stop is None:  # the matched run: real entries, each checked already
                    report.queue_entries += hi - lo
                if stop is None:
                    stop = _check_entries(log, view, base, hi, len(m) // ENTRY_SIZE, topic, qid,
                                          q.where, report)
            finally:
                view.release()
            if stop is not None:
                break


def _check_entries(log: Segments, view: memoryview, base: int, lo: int, hi: int, topic: str,
                   qid: int, where: str, report: VerifyReport) -> int | None:
    """Check entries [lo, hi) of one file; returns the offset of the first invalid entry
    (the end of the queue) or None."""
    for i, (phys, size, _tags) in enumerate(
            ENTRY.iter_unpack(view[lo * ENTRY_SIZE : hi * ENTRY_SIZE]), start=lo):
        qoff = base + i
        if phys < 0 or size <= 0:
            return qoff
        if size == PRE_BLANK_SIZE:
            continue
        report.queue_entries += 1
        if phys + size > report.commit_log_end:
            report.problems.append(Problem(
                where, qoff, f"entry points past the CommitLog end ({phys})"))
        elif phys >= report.commit_log_min:
            found = log.find(phys)
            info = parse_record(found[1], phys - found[0], False) if found else None
            if (type(info) is not RecordInfo or info.size != size or info.topic != topic
                    or info.queue_id != qid or info.queue_offset != qoff):
                report.problems.append(Problem(
                    where, qoff, f"entry ({phys}, {size}) does not point at this "
                    f"queue's record number {qoff}"))
    return None
