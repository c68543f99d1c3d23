"""The store's part of RocketMQ 5's controller mode: the confirm offset (what every in-sync
replica holds, kept in the checkpoint's confirmPhyOffset) as the ceiling of what dispatch
makes readable, and cutting the CommitLog (ConsumeQueues, index) at an offset where a slave
stops agreeing with its new master.
"""

from __future__ import annotations

import logging

from bolide.errors import StoreError
from bolide.store.checkpoint import Checkpoint
from bolide.store.commitlog import CommitLog
from bolide.store.consume_queue import ConsumeQueue
from bolide.store.index_service import IndexService
from bolide.store.record import RecordInfo, parse_record
from bolide.store.results import RecoveryReport, Truncation

log = logging.getLogger(__name__)


class TruncateError(StoreError):
    """An offset the CommitLog cannot be cut at (not a record start, or already deleted)."""


def check_cut_point(commit_log: CommitLog, offset: int) -> None:
    """Raise :class:`TruncateError` unless ``offset`` starts a record (or a segment, or is
    the end) of the CommitLog (RocketMQ's isOffsetAligned)."""
    if offset >= commit_log.max_offset or (offset % commit_log.segment_size == 0
                                           and offset >= commit_log.min_offset):
        return
    if offset < commit_log.min_offset:
        raise TruncateError(
            f"cannot cut the CommitLog at {offset}: it starts at {commit_log.min_offset} "
            "(older files were deleted); empty this replica's store directory so that it "
            "copies its master's CommitLog afresh")
    found = commit_log.readable_from(offset, commit_log.max_offset)
    info = parse_record(found[0], found[1], False) if found is not None else None
    if type(info) is not RecordInfo or (info.size and info.commit_log_offset != offset):
        raise TruncateError(
            f"cannot cut the CommitLog at {offset}: no record starts there (the epoch files "
            "of this replica and its master disagree with the data); empty this replica's "
            "store directory so that it copies its master's CommitLog afresh")


def cut(commit_log: CommitLog, queues: dict[tuple[str, int], ConsumeQueue],
        index: IndexService | None, offset: int, report: RecoveryReport) -> bool:
    """Cut everything at and after CommitLog ``offset``: ConsumeQueue entries of the
    removed records, the records themselves, and the index's position (its entries of
    removed records stay; queries check hits against the CommitLog). Returns whether the
    index must be rebuilt from ``offset``."""
    for cq in queues.values():
        if cq.max_physic_offset > offset:
            report.queue_entries_removed += cq.truncate_dirty(offset)
    for path, start, stop in commit_log.files.truncate_dirty(offset):
        report.truncations.append(Truncation(path, start, stop, "diverges from the master"))
        log.warning("cut %s [%d, %d): this replica's data diverges from its master's", path,
                    start, stop)
    report.commit_log_end = commit_log.max_offset
    return index is not None and index.forget_after(offset)


def recovered_confirm_offset(commit_log: CommitLog, checkpoint: Checkpoint) -> int:
    """The checkpoint's confirmPhyOffset, within the recovered CommitLog (RocketMQ corrects
    it to the min offset or the end of the valid records the same way)."""
    confirm = checkpoint.confirm_phy_offset
    if confirm < commit_log.min_offset:
        confirm = commit_log.min_offset
    elif confirm > commit_log.max_offset:
        log.warning("confirmPhyOffset %d is past the CommitLog end %d after recovery; using "
                    "the end", confirm, commit_log.max_offset)
        confirm = commit_log.max_offset
    return confirm


def hide_unconfirmed(queues: dict[tuple[str, int], ConsumeQueue], confirm: int,
                     report: RecoveryReport) -> None:
    """Drop ConsumeQueue entries of records past the confirm offset (recovery dispatched
    them): dispatch adds them again once they are confirmed."""
    for cq in queues.values():
        if cq.max_physic_offset > confirm:
            report.queue_entries_removed += cq.truncate_dirty(confirm)
