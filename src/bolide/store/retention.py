"""Retention: RocketMQ's CleanCommitLogService and CleanConsumeQueueService (section 11 of
the store format spec), plus per-topic retention floors and the disk-full write guard.

The decisions (:func:`decide`, :func:`files_to_delete`, :func:`first_offset_at_or_after`,
...) are pure functions of a clock, a disk usage and file times; :class:`CleanService` is
the thread that measures those and deletes files, every ``cleanResourceInterval``.

Concurrency: appends and reads never lock. A deleted segment leaves its queue's file list
by replacement of the list (readers keep the list they read), its file is unlinked and its
descriptor closed at once, and its mapping is closed later: after a grace period no reader
is still inside a call that found it, and pull responses may still hold views of it
(``mmap.close`` refuses while they exist), so closing is retried every run.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bolide.errors import ConfigError
from bolide.store.commitlog import CommitLog
from bolide.store.config import StoreConfig
from bolide.store.consume_queue import ConsumeQueue
from bolide.store.index_service import IndexService
from bolide.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
UNMAP_GRACE_S = 1.0  # a reader that found a segment before it left the list is done by then
MANUAL_DELETE_RUNS = 20  # runs a DELETE_EXPIRED_COMMITLOG lasts (RocketMQ's MAX_MANUAL_DELETE_FILE_TIMES)


# -- pure decisions ---------------------------------------------------------------------
def parse_delete_when(text: str) -> frozenset[int]:
    """The local hours of ``deleteWhen`` (``"04"``, ``"04;16"``) as a set of ints."""
    hours = set()
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        if not part.isdecimal() or int(part) > 23:
            raise ConfigError(f"deleteWhen={text!r}: {part!r} is not an hour; use hours 00 to "
                              "23 separated by ';', e.g. deleteWhen=04 or deleteWhen=04;16")
        hours.add(int(part))
    if not hours:
        raise ConfigError(f"deleteWhen={text!r} names no hour; use e.g. deleteWhen=04")
    return frozenset(hours)


@dataclass(frozen=True, slots=True)
class Watermarks:
    """Disk usage thresholds in percent, clamped to RocketMQ 5's ranges."""

    clean: int = 75  # diskMaxUsedSpaceRatio: delete expired files whatever the hour
    force: int = 85  # diskSpaceCleanForciblyRatio: delete files whatever their age
    full: int = 90  # diskSpaceWarningLevelRatio: refuse writes

    @classmethod
    def from_config(cls, cfg: StoreConfig) -> Watermarks:
        return cls(min(max(cfg.disk_max_used_space_ratio, 10), 95),
                   min(max(cfg.disk_space_clean_forcibly_ratio, 30), 85),
                   min(max(cfg.disk_space_warning_level_ratio, 35), 90))


def usage_percent(total: int, free: int, available: int) -> int:
    """Used share of a partition, rounded up to 1 % like RocketMQ: used / (used + available),
    where ``available`` excludes the blocks reserved for root. -1 when unknown."""
    used = total - free
    entire = used + available
    if entire <= 0:
        return -1
    return -(-used * 100 // entire)


def read_disk_usage(path: Path) -> int:
    """:func:`usage_percent` of the partition holding ``path`` (or its nearest parent)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    try:
        st = os.statvfs(path)
    except OSError:
        return -1
    return usage_percent(st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize,
                         st.f_bavail * st.f_frsize)


@dataclass(frozen=True, slots=True)
class CleanDecision:
    delete: bool  # delete expired CommitLog files in this run
    force: bool  # ... whatever their age (cleanAtOnce)
    disk_full: bool  # refuse writes
    reason: str  # why deleting


def decide(hour: int, usage: int, delete_hours: Iterable[int], marks: Watermarks,
           clean_forcibly_enable: bool = True) -> CleanDecision:
    """What a run does at local ``hour`` with the disk ``usage`` percent (11.2 of the spec)."""
    full = usage > marks.full
    immediate = usage > marks.force
    if full:
        reason = f"disk usage {usage}% is past diskSpaceWarningLevelRatio {marks.full}%"
    elif immediate:
        reason = f"disk usage {usage}% is past diskSpaceCleanForciblyRatio {marks.force}%"
    elif usage > marks.clean:
        reason = f"disk usage {usage}% is past diskMaxUsedSpaceRatio {marks.clean}%"
    elif usage < 0:
        reason = "disk usage is unknown"
    elif hour in delete_hours:
        reason = f"deleteWhen hour {hour:02d}"
    else:
        return CleanDecision(False, False, False, "")
    return CleanDecision(True, clean_forcibly_enable and immediate, full, reason)


def files_to_delete(mtimes_ms: Sequence[int], safe: int, now_ms: int, reserved_ms: int,
                    force: bool, limit: int) -> int:
    """How many of the oldest files go: never the last, none of the files from index
    ``safe`` on (not yet flushed or dispatched), at most ``limit``, and none after the first
    one kept (no holes). A file is expired ``reserved_ms`` after its modification time;
    ``force`` ignores age."""
    count = 0
    for mtime in mtimes_ms[: min(safe, len(mtimes_ms) - 1, limit)]:
        if not force and now_ms < mtime + reserved_ms:
            break
        count += 1
    return count


def first_offset_at_or_after(lo: int, hi: int, cutoff_ms: int,
                             stored_at: Callable[[int], int]) -> int:
    """First queue offset in [lo, hi) stored at or after ``cutoff_ms`` (store times grow
    along a queue; -1, unreadable, counts as older); ``hi`` when all are older."""
    while lo < hi:
        mid = (lo + hi) // 2
        if stored_at(mid) < cutoff_ms:
            lo = mid + 1
        else:
            hi = mid
    return lo


def disk_full_remark(usage: int, path: Path, marks: Watermarks) -> str:
    """The refusal a put gets while the disk is past the warning level."""
    return (f"disk usage {usage}% of {path} is past diskSpaceWarningLevelRatio {marks.full}%: "
            "delete old files, lower fileReservedTime or move the store to a larger disk; "
            f"writes resume by themselves once usage is back to {marks.full}% or less")


# -- the service ------------------------------------------------------------------------
@dataclass(slots=True)
class RetentionStats:
    """What retention did so far (``MessageStore.retention_stats()``)."""

    runs: int = 0
    commit_log_files_deleted: int = 0
    consume_queue_files_deleted: int = 0
    index_files_deleted: int = 0
    disk_usage_percent: int = -1
    disk_usage_path: str = ""
    disk_full: bool = False
    disk_full_remark: str = ""
    last_run_ms: int = 0
    last_reason: str = ""
    unmaps_pending: int = 0
    errors: int = 0
    topic_floors: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class _Retired:
    file: MappedFile
    at: float  # monotonic time it was retired
    warned_at: float = 0.0
    closed: bool = True  # its descriptor is closed (retire() ran); else at the unmap


class CleanService(threading.Thread):
    """Deletes expired CommitLog files, then the ConsumeQueue and index files below the new
    CommitLog min offset, applies per-topic floors, and flips the disk-full write guard."""

    def __init__(self, config: StoreConfig, commit_log: CommitLog,
                 queues: Callable[[], list[ConsumeQueue]],
                 index: Callable[[], IndexService | None],
                 dispatched_to: Callable[[], int],
                 stored_at: Callable[[ConsumeQueue, int], int],
                 on_disk_full: Callable[[str | None], None],
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(name="store-clean", daemon=True)
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.dispatched_to = dispatched_to
        self.stored_at = stored_at
        self.on_disk_full = on_disk_full
        self.clock = clock
        self.usage: Callable[[Path], int] = read_disk_usage
        self.delete_hours = parse_delete_when(config.delete_when)
        self.marks = Watermarks.from_config(config)
        self.paths = list(dict.fromkeys([config.commit_log_dir, config.consume_queue_dir]))
        self.topic_floors: dict[str, float] = {}  # topic -> retention hours
        self.unmap_grace_s = UNMAP_GRACE_S
        self._stats = RetentionStats()
        self._retired: list[_Retired] = []
        self._handed: list[MappedFile] = []  # files of dropped queues (retire_later)
        self._handed_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._stop_event = threading.Event()
        self._wake = threading.Event()  # set by stop() and when files are retired
        self._cleaned_below = -1  # CommitLog min the queues and index were cleaned for
        self._floors_pending = False
        self._manual_runs = 0  # runs left that delete expired files at any hour
        self._wake_now = False  # run at once (delete_expired_now)

    def reconfigure(self, config: StoreConfig) -> None:
        """Use ``config``'s retention settings from the next run; ConfigError (nothing changed)
        when its deleteWhen does not parse."""
        hours = parse_delete_when(config.delete_when)
        self.config, self.delete_hours, self.marks = config, hours, Watermarks.from_config(config)

    # -- thread -------------------------------------------------------------------------
    def run(self) -> None:
        interval = self.config.clean_resource_interval_ms / 1000
        next_run = time.monotonic()  # the first run checks the disk at once
        while not self._stop_event.is_set():
            if self._wake_now:
                self._wake_now = False
                next_run = time.monotonic()
            if time.monotonic() >= next_run:
                self._guarded(self.run_once)
                next_run = time.monotonic() + interval
            elif self._retired or self._handed:
                self._guarded(self.release_retired)
            if self._floors_pending:
                self._guarded(self.apply_topic_floors)
            wait = next_run - time.monotonic()
            if self._retired or self._handed:
                wait = min(wait, self.unmap_grace_s / 2)
            self._wake.wait(max(wait, 0.001))
            self._wake.clear()

    def _guarded(self, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception:  # never let the thread die: the next run tries again
            self._stats.errors += 1
            log.exception("retention run failed; retrying in the next run")

    def stop(self) -> None:
        """Stop the thread (a deletion under way ends first) and close what it can."""
        self._stop_event.set()
        self._wake.set()
        if self.is_alive():
            self.join()
        with self._run_lock:
            self._unmap(force=True)

    def delete_expired_now(self, runs: int = MANUAL_DELETE_RUNS) -> None:
        """Have the next ``runs`` runs delete expired CommitLog files whatever the hour, the
        first one at once (RocketMQ's DELETE_EXPIRED_COMMITLOG). Files are still kept for
        fileReservedTime, and never before they are flushed and dispatched."""
        self._manual_runs = runs
        self._wake_now = True
        self._wake.set()

    # -- one run ------------------------------------------------------------------------
    def stats(self) -> RetentionStats:
        s = dataclasses.replace(self._stats, topic_floors=dict(self.topic_floors))
        s.unmaps_pending = len(self._retired) + len(self._handed)
        return s

    def run_once(self, now_ms: int | None = None) -> RetentionStats:
        """One cleaning run; ``now_ms`` replaces the clock (deleteWhen hour, file ages and
        topic floors are all judged against it)."""
        with self._run_lock:
            now = int(self.clock() * 1000) if now_ms is None else now_ms
            usage = self._check_disk()
            decision = decide(time.localtime(now / 1000).tm_hour, usage, self.delete_hours,
                              self.marks, self.config.clean_file_forcibly_enable)
            if self._manual_runs > 0:
                self._manual_runs -= 1
                if not decision.delete:
                    decision = CleanDecision(True, False, False, "deleteExpiredCommitLog asked")
            if decision.delete and self._delete_commit_log_files(decision, now):
                self._check_disk()
            self._unmap()
            cl_min = self.commit_log.min_offset
            if cl_min != self._cleaned_below:
                self._clean_queues(cl_min)
                self._cleaned_below = cl_min
            self._floors_pending = False
            self._apply_topic_floors(now)
            self._stats.runs += 1
            self._stats.last_run_ms = now
            return self.stats()

    def release_retired(self) -> None:
        """Close the mappings of deleted files nobody reads any more; re-check the disk."""
        with self._run_lock:
            if self._unmap():
                self._check_disk()

    def retire_later(self, files: list[MappedFile]) -> None:
        """Take the files of a dropped ConsumeQueue, already unlinked: their descriptors and
        mappings are closed after the grace period (a flush or a reader may still be on
        them). Never blocks."""
        with self._handed_lock:
            self._handed.extend(files)
        self._wake.set()

    def check_disk(self) -> int:
        """Worst usage over the store's partitions; sets or clears the disk-full guard."""
        with self._run_lock:
            return self._check_disk()

    def _check_disk(self) -> int:
        usage, where = -1, self.paths[0]
        for path in self.paths:
            u = self.usage(path)
            if u > usage:
                usage, where = u, path
        s = self._stats
        s.disk_usage_percent, s.disk_usage_path = usage, str(where)
        full = usage > self.marks.full
        remark = disk_full_remark(usage, where, self.marks) if full else ""
        if full != s.disk_full:
            if full:
                log.error("store writes refused: %s", remark)
            else:
                log.warning("disk usage of %s is %d%%: store writes resume", where, usage)
        s.disk_full, s.disk_full_remark = full, remark
        self.on_disk_full(remark or None)
        return usage

    def _delete_commit_log_files(self, decision: CleanDecision, now_ms: int) -> int:
        cfg = self.config
        files = self.commit_log.files
        reserved = cfg.file_reserved_time_hours * HOUR_MS
        pause = cfg.delete_commit_log_files_interval_ms / 1000
        deleted = 0
        while deleted < cfg.delete_file_batch_max:
            head = files.files
            if len(head) < 2:
                break
            mf = head[0]
            safe_end = min(self.commit_log.flushed_offset, self.dispatched_to())
            safe = 1 if mf.file_from_offset + mf.file_size <= safe_end else 0
            mtimes = [_mtime_ms(f) for f in head[:2]]  # the head file, and one after it
            if not files_to_delete(mtimes, safe, now_ms, reserved, decision.force, 1):
                break
            gone = files.detach_head(1)
            if not gone:
                break
            self._retire(gone[0])
            deleted += 1
            self._stats.commit_log_files_deleted += 1
            self._stats.last_reason = decision.reason
            log.info("retention: deleted CommitLog file %s (%s%s)", mf.path.name,
                     decision.reason, "; cleaning forcibly" if decision.force else "")
            if pause and self._stop_event.wait(pause):
                break
        return deleted

    def _clean_queues(self, cl_min: int) -> None:
        pause = self.config.delete_consume_queue_files_interval_ms / 1000
        for cq in self.queues():
            gone = cq.detach_expired_files(cl_min)
            for mf in gone:
                self._retire(mf)
            if gone:
                self._stats.consume_queue_files_deleted += len(gone)
                log.info("retention: deleted %d ConsumeQueue files of %s/%d below CommitLog "
                         "offset %d", len(gone), cq.topic, cq.queue_id, cl_min)
                if pause and self._stop_event.wait(pause):
                    return
        index = self.index()
        if index is not None:
            paths = index.delete_below(cl_min)
            self._stats.index_files_deleted += len(paths)
            for path in paths:
                log.info("retention: deleted index file %s", path)

    def _apply_topic_floors(self, now_ms: int) -> None:
        floors = self.topic_floors
        if not floors:
            return
        for cq in self.queues():
            hours = floors.get(cq.topic)
            if hours is None:
                continue
            cutoff = now_ms - int(hours * HOUR_MS)
            first = first_offset_at_or_after(cq.min_offset, cq.max_offset, cutoff,
                                             lambda i, q=cq: self.stored_at(q, i))
            if first > cq.min_offset:
                log.info("retention: %s/%d now starts at offset %d (topic retention %g h)",
                         cq.topic, cq.queue_id, first, hours)
                cq.raise_min_offset(first)

    def apply_topic_floors(self) -> None:
        """Apply the floors now, or, during a run (which may pause between deletions),
        right after it: the caller may be an event loop and never waits."""
        if not self._run_lock.acquire(blocking=False):
            self._floors_pending = True
            self._wake.set()
            return
        try:
            self._floors_pending = False
            self._apply_topic_floors(int(self.clock() * 1000))
        finally:
            self._run_lock.release()

    # -- deleted files' mappings --------------------------------------------------------
    def _retire(self, mf: MappedFile) -> None:
        try:
            mf.retire()
        except OSError as exc:  # out of the list already: never read again
            self._stats.errors += 1
            log.error("retention: cannot delete %s: %s; delete it by hand", mf.path, exc)
        self._retired.append(_Retired(mf, time.monotonic()))
        self._wake.set()  # the thread comes back to close the mapping after the grace

    def _unmap(self, force: bool = False) -> int:
        """Close the mappings of retired files past the grace period; returns how many."""
        now = time.monotonic()
        with self._handed_lock:
            handed, self._handed = self._handed, []
        self._retired += [_Retired(mf, now, closed=False) for mf in handed]
        keep: list[_Retired] = []
        closed = 0
        hung_after = self.config.destroy_mapped_file_interval_forcibly_ms / 1000
        rewarn = self.config.redelete_hanged_file_interval_ms / 1000
        for r in self._retired:
            if (force or now - r.at >= self.unmap_grace_s) and not r.closed:
                r.file.close_descriptor()  # unlinked already; a new file may have its name
                r.closed = True
            if (force or now - r.at >= self.unmap_grace_s) and r.file.unmap():
                closed += 1
                continue
            if force:  # store closing: the mapping goes when its last view is dropped
                log.warning("retention: %s is still mapped by views a reader holds; its space "
                            "is freed when they are released", r.file.path)
                continue
            if now - r.at > hung_after and now - r.warned_at > rewarn:
                r.warned_at = now
                log.warning("retention: %s was deleted %.0f s ago but views of it are still "
                            "held (pull responses not released?); its disk space is freed "
                            "once they are", r.file.path, now - r.at)
            keep.append(r)
        self._retired = keep
        return closed


def _mtime_ms(mf: MappedFile) -> int:
    try:
        return os.stat(mf.path).st_mtime_ns // 1_000_000
    except FileNotFoundError:
        return 0
