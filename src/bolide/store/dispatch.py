"""Dispatch (RocketMQ's ReputMessageService): re-reads new CommitLog records in batches and
appends their ConsumeQueue entries, off the send path. Under SYNC_FLUSH it never passes the
flushed offset, so no consumer sees a message a crash could take back.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

from bolide.common.hashing import java_string_hash
from bolide.store.commitlog import CommitLog
from bolide.store.consume_queue import ConsumeQueue
from bolide.store.dropped_queues import DroppedQueues
from bolide.store.fastscan import Run, scan_runs
from bolide.store.record import RecordInfo, compute_tags_code, parse_record, property_bytes


def _tags_code_of(props: bytes) -> int:
    """Java hash of the TAGS property of an encoded properties blob (0 when absent)."""
    tags = property_bytes(props, b"TAGS\x01")
    return java_string_hash(tags.decode("utf-8", "replace")) if tags else 0


log = logging.getLogger(__name__)

DispatchListener = Callable[[set[tuple[str, int]]], None]
# (topic, queue id, CommitLog offset of its first record) -> the queue started again
QueueRestart = Callable[[str, int, int], ConsumeQueue]
IndexFed = tuple[int, int, str, int, int, bytes]  # offset, size, topic, sysflag, store ts, props
INDEX_FEED_MAX = 16384
_PARSED_BETWEEN_SCANS = 32


def parse_segment(commit_log: CommitLog, offset: int, stop: int,
                  handle: Callable[[RecordInfo], None], log_errors: bool,
                  max_records: int = -1) -> int | None:
    """Hand each record from ``offset`` to ``stop`` (or its segment's end) to ``handle``
    (at most ``max_records`` when that is positive).

    Returns the offset after the last record consumed (the next segment's start after a
    BLANK), or None when nothing is readable at ``offset``. A bad record is skipped (by its
    length when known, else to the end of the readable data) and, with ``log_errors``, logged.
    """
    found = commit_log.readable_from(offset, stop)
    if found is None:
        return None
    view, pos = found
    base = offset - pos
    end = len(view)
    while pos < end:
        info = parse_record(view, pos, False)
        if type(info) is RecordInfo:
            if info.size == 0:  # BLANK: continue in the next segment
                return commit_log.roll_next_file(base)
            handle(info)
            pos += info.size
            max_records -= 1
            if max_records == 0:
                break
        elif info.size > 0:
            if log_errors:
                log.error("skipping bad record at %d: %s", base + pos, info.reason)
            pos += info.size
        else:
            if base + end == stop and commit_log.readable_from(stop, stop + 1) is not None:
                # a record cut by ``stop`` (a confirm offset inside it): wait for more
                return base + pos if pos > offset - base else None
            if log_errors:
                log.error("unreadable record at %d (%s); skipping to %d",
                          base + pos, info.reason, base + end)
            return base + end
    return base + pos


def resume_point(commit_log: CommitLog, offset: int, feed: deque[tuple[int, ...]] | None,
                 limit: int) -> tuple[int, int]:
    """Where parsing resumes (never below the CommitLog's min offset) and where it stops:
    at the next record handed over on ``feed``, else at ``limit``."""
    offset = max(offset, commit_log.min_offset)
    return offset, feed[0][0] if feed and offset < feed[0][0] < limit else limit


class Dispatcher:
    """Turns CommitLog records into ConsumeQueue entries, from ``reput_from`` onward.

    Records of deleted queues (``dropped``) get no entry. A record newer than every entry of
    its queue but numbered below the queue's end belongs to a queue deleted and started again
    elsewhere (a slave's copy of a master that deleted a topic): ``restart_queue`` gives the
    new queue, with the records before this one marked deleted.
    """

    def __init__(self, commit_log: CommitLog, queue_for: Callable[[str, int], ConsumeQueue],
                 limit: Callable[[], int], delay_millis: dict[int, int],
                 dropped: DroppedQueues | None = None,
                 restart_queue: QueueRestart | None = None) -> None:
        self.commit_log = commit_log
        self.queue_for = queue_for
        self.dropped = dropped
        self.restart_queue = restart_queue
        self.limit = limit
        self.delay_millis = delay_millis
        self.reput_from = 0
        self.last_store_timestamp = 0
        self.listeners: list[DispatchListener] = []
        # dispatched records handed on to the index builder, so that it need not parse them
        self.index_feed: deque[IndexFed] | None = None
        self.dispatched = 0
        # held while dispatching: whoever deletes a queue holds it so that no entry of the
        # deleted queue is being written meanwhile
        self.lock = threading.RLock()

    def skips(self, topic: str, queue_id: int, commit_log_offset: int) -> bool:
        """True when the record at ``commit_log_offset`` belongs to a deleted queue."""
        dropped = self.dropped
        return dropped is not None and dropped.dropped(topic, queue_id, commit_log_offset)

    def _restarted(self, cq: ConsumeQueue, queue_offset: int, phys: int,
                   queues: dict[tuple[str, int], ConsumeQueue]) -> ConsumeQueue:
        """``cq``, or the queue started again when the record at ``phys`` (newer than every
        entry of ``cq``) is numbered below its end."""
        if queue_offset >= cq.max_offset or self.restart_queue is None:
            return cq
        log.warning("%s/%d starts again at offset %d with the record at %d (it had entries up "
                    "to %d): the queue was deleted, its older records are skipped",
                    cq.topic, cq.queue_id, queue_offset, phys, cq.max_offset)
        cq = queues[(cq.topic, cq.queue_id)] = self.restart_queue(cq.topic, cq.queue_id, phys)
        return cq

    def dispatch_record(self, info: RecordInfo,
                        queues: dict[tuple[str, int], ConsumeQueue]) -> bool:
        """Write ``info``'s ConsumeQueue entry; False when it has none or already had it.

        ``queues`` caches queue lookups for the caller's batch.
        """
        if info.sys_flag & 0x4:  # transaction PREPARED or ROLLBACK: no entry
            return False
        if self.skips(info.topic, info.queue_id, info.commit_log_offset):
            return False
        key = (info.topic, info.queue_id)
        cq = queues.get(key)
        if cq is None:
            cq = queues[key] = self.queue_for(info.topic, info.queue_id)
        if info.commit_log_offset + info.size <= cq.max_physic_offset:
            return False  # already dispatched (recovery re-reads records the queue has)
        if info.commit_log_offset >= cq.max_physic_offset:
            cq = self._restarted(cq, info.queue_offset, info.commit_log_offset, queues)
        if info.topic == "SCHEDULE_TOPIC_XXXX":
            code = compute_tags_code(info, self.delay_millis)
        else:
            code = _tags_code_of(info.properties)
        if cq.put(info.commit_log_offset, info.size, code, info.queue_offset):
            self.dispatched += 1
            self.last_store_timestamp = info.store_timestamp
            return True
        return False

    def dispatch_run(self, run: Run, queues: dict[tuple[str, int], ConsumeQueue]) -> int:
        """Write the ConsumeQueue entries of a run of records of one queue (a fast scan's
        output); returns how many were new."""
        # a run's records have consecutive queue offsets: all of one queue's life, since a
        # queue started again numbers from 0 again
        if self.skips(run.topic, run.queue_id, run.first_phys):
            return 0
        key = (run.topic, run.queue_id)
        cq = queues.get(key)
        if cq is None:
            cq = queues[key] = self.queue_for(run.topic, run.queue_id)
        if run.end_phys <= cq.max_physic_offset:
            return 0  # already dispatched
        if run.first_phys >= cq.max_physic_offset:
            cq = self._restarted(cq, run.first_queue_offset, run.first_phys, queues)
        written = cq.put_entries(run.first_queue_offset, run.entries, run.end_phys)
        if written:
            self.dispatched += written
            self.last_store_timestamp = run.last_store_timestamp
        return written

    def _take_fed(self, feed: deque[tuple[int, int, str, int, int, int, int, bytes, int]],
                  limit: int, budget_end: int, queues: dict[tuple[str, int], ConsumeQueue],
                  touched: set[tuple[str, int]]) -> bool:
        """Dispatch the records the writer handed over that start at ``reput_from``.

        Returns False when the next one is not there yet (it must be parsed from the log).
        """
        took = False
        horizons = self.dropped.horizons if self.dropped is not None else None
        while feed:
            phys, size, topic, queue_id, queue_offset, sys_flag, store_ts, props, code = feed[0]
            if phys < self.reput_from:  # already dispatched by parsing
                feed.popleft()
                continue
            if phys != self.reput_from or phys + size > limit or phys >= budget_end:
                break
            feed.popleft()
            # transaction NOT_TYPE or COMMIT, of a queue not deleted
            if not sys_flag & 0x4 and not (horizons and phys < horizons.get((topic, queue_id), -1)):
                key = (topic, queue_id)
                cq = queues.get(key)
                if cq is None:
                    cq = queues[key] = self.queue_for(topic, queue_id)
                if cq.put(phys, size, code, queue_offset):
                    touched.add(key)
                    self.dispatched += 1
            self.last_store_timestamp = store_ts
            self.reput_from = phys + size
            took = True
            index_feed = self.index_feed
            if index_feed is not None and len(index_feed) < INDEX_FEED_MAX:
                index_feed.append((phys, size, topic, sys_flag, store_ts, props))
        return took

    def _scan_runs(self, stop: int, queues: dict[tuple[str, int], ConsumeQueue],
                   touched: set[tuple[str, int]]) -> bool:
        """Dispatch the fast-path records from ``reput_from`` in bulk; False when the next
        record is not one of them (or nothing is readable)."""
        found = self.commit_log.readable_from(self.reput_from, stop)
        if found is None:
            return False
        view, pos = found
        base = self.reput_from - pos
        after, count, runs = scan_runs(view, pos, base, False)
        if not count:
            return False
        for run in runs:
            if self.dispatch_run(run, queues):
                touched.add((run.topic, run.queue_id))
        self.reput_from = base + after
        return True

    def behind(self) -> int:
        """Bytes written (and readable) but not yet dispatched."""
        return max(0, self.limit() - self.reput_from)

    def dispatch_available(self, max_bytes: int = 1 << 62) -> int:
        """Dispatch what is readable now (up to about ``max_bytes``); returns bytes consumed."""
        with self.lock:
            return self._dispatch_available(max_bytes)

    def _dispatch_available(self, max_bytes: int) -> int:
        commit_log = self.commit_log
        limit = self.limit()
        start = self.reput_from
        touched: set[tuple[str, int]] = set()
        queues: dict[tuple[str, int], ConsumeQueue] = {}
        feed = commit_log.feed

        index_feed = self.index_feed

        def handle(info: RecordInfo) -> None:
            if self.dispatch_record(info, queues):
                touched.add((info.topic, info.queue_id))
            self.last_store_timestamp = info.store_timestamp
            if index_feed is not None and len(index_feed) < INDEX_FEED_MAX:
                index_feed.append((info.commit_log_offset, info.size, info.topic, info.sys_flag,
                                   info.store_timestamp, info.properties))

        while self.reput_from < limit and self.reput_from - start < max_bytes:
            if feed and self._take_fed(feed, limit, start + max_bytes, queues, touched):
                continue
            # parse up to the next record the writer handed over (a BLANK, or records the
            # feed had no room for), or to the limit
            self.reput_from, stop = resume_point(commit_log, self.reput_from, feed, limit)
            if self._scan_runs(stop, queues, touched):
                continue
            # records the scan does not take (v2, IPv6, non-ASCII tags, damage...) come in
            # stretches: parse a few before scanning again
            after = parse_segment(commit_log, self.reput_from, stop, handle, log_errors=True,
                                  max_records=_PARSED_BETWEEN_SCANS)
            if after is None:
                break
            self.reput_from = after
        if touched:
            for listener in self.listeners:
                listener(touched)
        return self.reput_from - start


class Reput(Protocol):
    """A reader of new CommitLog records with its own position (ConsumeQueue or index)."""

    reput_from: int

    def limit(self) -> int: ...

    def behind(self) -> int: ...

    def dispatch_available(self, max_bytes: int = ...) -> int: ...


class DispatchService(threading.Thread):
    """Runs a :class:`Dispatcher` (or another :class:`Reput`) whenever new data is readable."""

    def __init__(self, dispatcher: Reput, batch_bytes: int, name: str = "dispatch",
                 poll_s: float = 0.001) -> None:
        super().__init__(name=name, daemon=True)
        self.dispatcher = dispatcher
        self.batch_bytes = batch_bytes
        self.poll_s = poll_s
        self._event = threading.Event()
        self._idle = threading.Condition()
        self._stopping = False
        self.idle = False

    def wakeup(self) -> None:
        """Cut a long idle wait short; cheap to call on every append."""
        if self.idle:
            self.idle = False  # one signal per idle period is enough
            self._event.set()

    def run(self) -> None:
        # Poll every ``poll_s`` (a millisecond: RocketMQ's reput loop) while data keeps coming,
        # so appends need not signal; after ~100 ms without data, sleep until woken.
        d = self.dispatcher
        idle_rounds = 0
        while not self._stopping:
            try:
                n = d.dispatch_available(self.batch_bytes)
            except Exception:  # keep dispatching other data; the error is reported
                log.exception("%s failed at offset %d", self.name, d.reput_from)
                self._event.wait(0.1)
                n = 0
            if n:
                idle_rounds = 0
                continue
            with self._idle:
                self._idle.notify_all()
            idle_rounds += 1
            if idle_rounds * self.poll_s < 0.1:
                self._event.wait(self.poll_s)
            else:
                self.idle = True
                if d.behind() == 0:
                    self._event.wait(0.05)
                self.idle = False
            self._event.clear()

    def wait_caught_up(self, timeout: float) -> bool:
        """Block until everything readable now is dispatched; False on timeout."""
        target = self.dispatcher.limit()
        with self._idle:
            return self._idle.wait_for(
                lambda: self.dispatcher.reput_from >= target or self._stopping, timeout
            )

    def stop(self) -> None:
        self._stopping = True
        self._event.set()
        self.join()
