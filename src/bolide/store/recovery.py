"""Crash recovery: find the CommitLog's valid end by parsing (and CRC-checking) records,
cut everything after it, drop ConsumeQueue entries that point past it, and work out where
dispatch must resume so that every missing ConsumeQueue entry is rebuilt.
"""

from __future__ import annotations

import logging
import struct

from bolide.common import sysflag
from bolide.store.checkpoint import Checkpoint
from bolide.store.commitlog import CommitLog
from bolide.store.consume_queue import ConsumeQueue
from bolide.store.dispatch import Dispatcher
from bolide.store.fastscan import Run, scan_runs
from bolide.store.record import (
    MAGIC_V1,
    MAGIC_V2,
    RecordInfo,
    parse_record,
    read_store_timestamp,
)
from bolide.store.results import RecoveryReport, Truncation

log = logging.getLogger(__name__)
_MAGIC_AT = struct.Struct(">i")


def choose_start_file(commit_log: CommitLog, checkpoint: Checkpoint, abnormal: bool,
                      index_safe: bool) -> int:
    """Index of the segment recovery starts from (RocketMQ's rules, 7.3 and 7.4 of the spec)."""
    files = commit_log.files.files
    if not abnormal:
        return max(0, len(files) - 3)
    limit = checkpoint.min_timestamp_index if index_safe else checkpoint.min_timestamp
    for index in range(len(files) - 1, -1, -1):
        view = files[index].view
        magic = _MAGIC_AT.unpack_from(view, 4)[0]
        if magic not in (MAGIC_V1, MAGIC_V2):
            continue
        ts = read_store_timestamp(view, 0)
        if ts != 0 and ts <= limit:
            return index
    return 0


def recover(commit_log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue],
            dispatcher: Dispatcher, checkpoint: Checkpoint, abnormal: bool, check_crc: bool,
            index_safe: bool = False) -> tuple[int, RecoveryReport]:
    """Recover the CommitLog and ConsumeQueues; returns (dispatch resume offset, report).

    Records of the checked range that lack their ConsumeQueue entry get it during the
    scan (those of deleted queues, ``dispatcher.skips``, get none). A queue whose first
    record in the range is already past its end misses older entries too: dispatch must
    then resume at the CommitLog start (returned offset).
    """
    report = RecoveryReport(abnormal=abnormal)
    files = commit_log.files.files
    if not files:
        for cq in queues.values():
            report.queue_entries_removed += cq.max_offset - cq.min_offset
            cq.destroy()
        return 0, report
    index = choose_start_file(commit_log, checkpoint, abnormal, index_safe)
    report.commit_log_start = files[index].file_from_offset
    seen: set[tuple[str, int]] = set()
    gapped: set[tuple[str, int]] = set()
    cache: dict[tuple[str, int], ConsumeQueue] = {}
    pos = 0
    reason = ""
    checked = 0

    def complete_before(key: tuple[str, int], first_queue_offset: int) -> bool:
        """False when the queue misses entries older than the checked range."""
        if key not in seen:
            seen.add(key)
            cq = queues.get(key)
            if first_queue_offset > (cq.max_offset if cq is not None else 0):
                gapped.add(key)
        return key not in gapped

    def take_run(run: Run) -> None:
        if dispatcher.skips(run.topic, run.queue_id, run.first_phys):
            return  # a deleted queue's: neither an entry nor a gap
        if complete_before((run.topic, run.queue_id), run.first_queue_offset):
            report.queue_entries_rebuilt += dispatcher.dispatch_run(run, cache)

    while True:
        mf = files[index]
        view = mf.view
        # records on the fast path (the common kind) in bulk, then one record at a time
        after, count, runs = scan_runs(view, pos, mf.file_from_offset, check_crc)
        if count:
            report.records_checked += count
            checked += after - pos
            pos = after
            for run in runs:
                take_run(run)
            continue
        info = parse_record(view, pos, check_crc)
        if type(info) is RecordInfo:
            if info.size == 0:  # BLANK: the segment is complete
                checked += mf.file_size - pos
                if index + 1 >= len(files):
                    pos = mf.file_size
                    break
                index += 1
                pos = 0
                continue
            phys = mf.file_from_offset + pos
            if info.commit_log_offset != phys:
                reason = (f"record claims PHYSICALOFFSET {info.commit_log_offset} but "
                          f"sits at {phys}")
                break
            report.records_checked += 1
            checked += info.size
            if (sysflag.gets_queue_entry(info.sys_flag)
                    and not dispatcher.skips(info.topic, info.queue_id, phys)
                    and complete_before((info.topic, info.queue_id), info.queue_offset)
                    and dispatcher.dispatch_record(info, cache)):
                report.queue_entries_rebuilt += 1
            pos += info.size
        else:
            if info.reason != "end of data (zero bytes)":
                reason = info.reason
            break
    end = mf.file_from_offset + pos
    report.bytes_checked = checked
    report.commit_log_end = end

    for cq in queues.values():
        if cq.max_physic_offset > end:
            report.queue_entries_removed += cq.truncate_dirty(end)
    for path, start, stop in commit_log.files.truncate_dirty(end):
        why = reason or "bytes past the last valid record"
        report.truncations.append(Truncation(path, start, stop, why))
        log.warning("recovery truncated %s [%d, %d): %s", path, start, stop, why)

    return (commit_log.min_offset if gapped else end), report
