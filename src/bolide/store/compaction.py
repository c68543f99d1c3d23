"""Compacted topics' store: RocketMQ 5's ``CompactionStore`` under ``{storePathRootDir}/compaction``.

``compactionLog/{topic}/{queueId}/`` and ``compactionCq/{topic}/{queueId}/`` hold each compacted
queue (:mod:`bolide.store.compaction_log`); ``position-checkpoint`` (RocketMQ's
``CompactionPositionMgr``, ``{"empty":false,"queueOffsetMap":{"<topic>_<queueId>":offset}}`` in
fastjson's pretty format) the queue offset
each queue is compacted up to.

A background thread (``compaction``) copies the new keyed records of the compacted topics'
ConsumeQueues into their compaction logs (woken by dispatch) and compacts every queue each
``compactionScheduleInternal`` ms; :meth:`CompactionStore.compact_now` does both at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bolide.common.config_persist import load_with_backup, write_atomic
from bolide.common.fastjson import dumps_pretty, loads
from bolide.errors import BolideError, ConfigError
from bolide.store.commitlog import CommitLog
from bolide.store.compaction_files import file_sizes
from bolide.store.compaction_log import CompactionLog, record_keys
from bolide.store.config import StoreConfig
from bolide.store.consume_queue import ENTRY, ENTRY_SIZE, ConsumeQueue
from bolide.store.record import BLANK, RecordError, compute_tags_code, parse_record, record_property
from bolide.store.results import GetMessageResult, GetStatus

log = logging.getLogger(__name__)

COMPACTION_DIR = "compaction"
POSITION_FILE = "position-checkpoint"
_PRE_BLANK_SIZE = 0x7FFFFFFF
INGEST_BATCH = 4096  # ConsumeQueue entries copied per queue before the thread looks around


class PositionFile:
    """``position-checkpoint``: the queue offset each compacted queue is compacted up to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: dict[str, int] = {}

    def load(self) -> None:
        self.offsets = load_with_backup(self.path, decode_positions,
                                        what="the compaction positions") or {}

    def get(self, topic: str, queue_id: int) -> int:
        return self.offsets.get(f"{topic}_{queue_id}", -1)

    def set(self, topic: str, queue_id: int, offset: int) -> None:
        self.offsets[f"{topic}_{queue_id}"] = offset
        self.persist()

    def persist(self) -> None:
        """Write the file as RocketMQ's ``ConfigManager.persist`` does: fastjson's pretty
        format, with the ``empty`` bean property its ``isEmpty()`` getter adds."""
        write_atomic(self.path, encode_positions(self.offsets))


def decode_positions(data: bytes) -> dict[str, int]:
    """``position-checkpoint``'s queue offsets; ConfigError or ValueError when it does not decode."""
    obj = loads(data)
    table = obj.get("queueOffsetMap") if isinstance(obj, dict) else None
    if not isinstance(table, dict):
        raise ConfigError("no queueOffsetMap object")
    return {str(k): int(v) for k, v in table.items()}


def encode_positions(offsets: dict[str, int]) -> bytes:
    """``position-checkpoint``'s text, byte for byte as RocketMQ 5.3.3 writes it."""
    return dumps_pretty({"empty": not offsets, "queueOffsetMap": dict(offsets)})


class CompactionStore:
    """The compaction logs of the compacted topics, their positions and their thread."""

    def __init__(self, config: StoreConfig, commit_log: CommitLog,
                 queues: Callable[[], Iterable[ConsumeQueue]]) -> None:
        self.config = config
        self.root = config.root / COMPACTION_DIR
        self.log_root = self.root / "compactionLog"
        self.cq_root = self.root / "compactionCq"
        self.log_size, self.cq_size = file_sizes(config)
        threads = min(os.cpu_count() or 1, max(1, config.compaction_thread_num))
        self.map_bytes = config.max_offset_map_size // threads
        self.positions = PositionFile(self.root / POSITION_FILE)
        self._commit_log = commit_log
        self._queues = queues
        self.topics: set[str] = set()
        self.logs: dict[tuple[str, int], CompactionLog] = {}
        self._work = threading.Lock()  # ingest and compaction: one at a time
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        # a slave: a compacted queue whose CommitLog copy starts past offset 0 waits, its log
        # empty, until the broker has put in the master's older records (put_head, head_done)
        self.hold_heads = False
        self._heads_done: set[tuple[str, int]] = set()

    # -- lifecycle ----------------------------------------------------------------------
    def load(self) -> None:
        """Open the compaction logs on disk (finishing or dropping interrupted compactions)."""
        self.positions.load()
        if not self.log_root.is_dir():
            return
        for topic_dir in sorted(self.log_root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.lstrip("-").isdigit():
                    self._open(topic_dir.name, int(queue_dir.name))

    def _open(self, topic: str, queue_id: int) -> CompactionLog:
        clog = CompactionLog(self.log_root / topic / str(queue_id), self.cq_root / topic / str(queue_id),
                             self.log_size, self.cq_size, topic, queue_id)
        swapped = clog.load(self.config.check_crc_on_recover)
        if swapped is not None:
            self.positions.set(topic, queue_id, swapped)
            clog.remove_swap_record()
        self.logs[(topic, queue_id)] = clog
        return clog

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="compaction", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread, copy in what is left, flush and close the files."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._work:
            try:
                self._ingest_all(limit=None)
            except (OSError, BolideError) as exc:
                log.error("compaction store: could not copy the last records in at close: %s", exc)
            for clog in self.logs.values():
                clog.current.flush()
            self.close_files()

    def close_files(self) -> None:
        """Close the compaction logs' files (nothing is copied in or flushed)."""
        for clog in self.logs.values():
            clog.close()
        self.logs.clear()

    def wake(self, touched: set[tuple[str, int]]) -> None:
        """Dispatch listener: new records in a compacted topic's queue."""
        topics = self.topics
        if topics and any(topic in topics for topic, _ in touched):
            self._wake.set()

    def set_topic(self, topic: str, compacted: bool) -> None:
        topics = set(self.topics)
        if compacted:
            topics.add(topic)
        else:
            topics.discard(topic)
        self.topics = topics  # replaced whole: readers take it without a lock
        self._wake.set()

    # -- the thread ---------------------------------------------------------------------
    def _run(self) -> None:
        interval = max(self.config.compaction_schedule_interval_ms, 1) / 1000
        next_compaction = time.monotonic() + interval
        while not self._stop.is_set():
            self._wake.wait(min(1.0, max(0.0, next_compaction - time.monotonic())))
            self._wake.clear()
            if self._stop.is_set():
                break
            due = time.monotonic() >= next_compaction
            try:
                with self._work:
                    while self._ingest_all(limit=INGEST_BATCH) and not self._stop.is_set():
                        pass
                    if due:
                        self._compact_all(until_done=False)
                self.last_error = None
            except (OSError, BolideError) as exc:
                self.last_error = str(exc)
                log.error("compaction store: %s", exc)
            except Exception as exc:  # never let the thread die silently: retry next round
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("compaction store: unexpected error; retried at the next round")
            if due:
                next_compaction = time.monotonic() + interval

    def compact_now(self) -> int:
        """Copy the new records in and compact every compacted queue until nothing is left to
        do; the number of compaction passes made."""
        with self._work:
            self._ingest_all(limit=None)
            return self._compact_all(until_done=True)

    def ingest_now(self) -> None:
        """Copy the compacted queues' new records into their compaction logs now."""
        with self._work:
            self._ingest_all(limit=None)

    # -- ingest -------------------------------------------------------------------------
    def _ingest_all(self, limit: int | None) -> bool:
        """Copy the compacted queues' new keyed records; True when ``limit`` stopped one."""
        topics = self.topics
        more = False
        for cq in list(self._queues()):
            if cq.topic in topics and self._ingest(cq, limit):
                more = True
        return more

    def _ingest(self, cq: ConsumeQueue, limit: int | None) -> bool:
        key = (cq.topic, cq.queue_id)
        clog = self.logs.get(key)
        if self._head_missing(key, clog, cq):
            return False  # the master's older records first (see heads_needed)
        end = cq.max_offset
        start = max(clog.max_offset if clog is not None else 0, cq.min_offset)
        if start >= end:
            return False
        if clog is None:
            clog = self._open(*key)
            start = max(clog.max_offset, cq.min_offset)
        stop = end if limit is None else min(end, start + limit)
        index = start
        read = self._commit_log.read
        while index < stop:
            found = cq.entries_from(index)
            if found is None:
                break
            view = found[0]
            count = min(len(view) // ENTRY_SIZE, stop - index)
            for i in range(count):
                phys, size, tags_code = ENTRY.unpack_from(view, i * ENTRY_SIZE)
                if size == _PRE_BLANK_SIZE or size <= 0:
                    continue
                record = read(phys, size)
                if record is None:
                    continue  # gone with retention before it could be copied
                info = parse_record(record, 0, False)
                if isinstance(info, RecordError):
                    log.error("compaction: the record of %s-%d offset %d at %d is bad (%s); skipped",
                              cq.topic, cq.queue_id, index + i, phys, info.reason)
                    continue
                clog.ingest(record, index + i, tags_code, info.store_timestamp,
                            record_keys(info.properties))
            index += count
        clog.current.flush()
        return index < end

    # -- a slave's head: the master's records before its CommitLog copy --------------------
    def _head_missing(self, key: tuple[str, int], clog: CompactionLog | None, cq: ConsumeQueue) -> bool:
        return (self.hold_heads and key not in self._heads_done and cq.min_offset > 0
                and (clog is None or clog.max_offset == 0))

    def set_hold_heads(self, hold: bool) -> None:
        """Hold (a slave) or copy in at once (a master) the compacted queues whose copy starts
        past offset 0 and whose compaction log is empty."""
        self.hold_heads = hold
        self._wake.set()

    def heads_needed(self) -> list[tuple[str, int, int]]:
        """(topic, queue id, end) of the compacted queues waiting for the master's records of
        queue offsets below ``end`` (where this store's copy of the queue starts), as RocketMQ's
        slave fetches them into an empty compaction log."""
        topics = self.topics
        out = []
        for cq in list(self._queues()):
            key = (cq.topic, cq.queue_id)
            if cq.topic in topics and self._head_missing(key, self.logs.get(key), cq):
                out.append((cq.topic, cq.queue_id, cq.min_offset))
        return out

    def put_head(self, topic: str, queue_id: int, records: Iterable[bytes]) -> int:
        """Copy in records of the queue fetched from the master (each a whole CommitLog
        record, queue offsets increasing); those not below the queue's own start, bad or
        without keys are skipped. The number copied."""
        copied = 0
        with self._work:
            key = (topic, queue_id)
            clog = self.logs.get(key) or self._open(topic, queue_id)
            for record in records:
                info = parse_record(record, 0, True)
                if isinstance(info, RecordError) or info is BLANK:
                    log.error("compaction: a record of %s-%d from the master is bad (%s); skipped",
                              topic, queue_id, getattr(info, "reason", "blank"))
                    continue
                if info.topic != topic or info.queue_id != queue_id:
                    continue
                if clog.ingest(record, info.queue_offset, compute_tags_code(info, {}),
                               info.store_timestamp, record_keys(info.properties)):
                    copied += 1
            clog.current.flush()
        return copied

    def head_done(self, topic: str, queue_id: int) -> None:
        """The queue's older records are in (or there were none): copy in its own now."""
        self._heads_done.add((topic, queue_id))
        self._wake.set()

    # -- compaction ---------------------------------------------------------------------
    def _compact_all(self, until_done: bool) -> int:
        passes = 0
        for key, clog in list(self.logs.items()):
            if key[0] not in self.topics:
                continue
            topic, queue_id = key

            def store_position(offset: int, t: str = topic, q: int = queue_id) -> None:
                self.positions.set(t, q, offset)

            while True:
                done = clog.compact(self.positions.get(topic, queue_id), self.map_bytes, store_position)
                if done is None:
                    break
                clog.remove_swap_record()
                passes += 1
                if not until_done:
                    break
        return passes

    # -- reads --------------------------------------------------------------------------
    def ingested_end(self, topic: str, queue_id: int) -> int:
        """One past the last queue offset copied into the queue's compaction log (0: none)."""
        clog = self.logs.get((topic, queue_id))
        return clog.max_offset if clog is not None else 0

    def min_offset(self, topic: str, queue_id: int) -> int | None:
        """The first queue offset in the queue's compaction log (None: no log or no record
        in it): what RocketMQ answers a compacted topic's pull with as minOffset."""
        clog = self.logs.get((topic, queue_id))
        if clog is None or clog.max_offset == 0:
            return None
        return clog.min_offset

    def get_message(self, topic: str, queue_id: int, offset: int, max_count: int,
                    codes: set[int] | None, tag_set: set[str] | None,
                    record_filter: Callable[[memoryview], bool] | None, joined: bool,
                    max_bytes: int, min_offset: int, max_offset: int) -> GetMessageResult | None:
        """Up to ``max_count`` records from ``offset`` (the next one kept when it was compacted
        away) out of the compaction log; None when the log has nothing at or after ``offset``."""
        clog = self.logs.get((topic, queue_id))
        if clog is None:
            return None
        buffers: list[Any] = []
        joined_buf = bytearray()
        qoffsets: list[int] = []
        total = 0
        next_offset = offset
        with clog.read_lock:
            for seg, i in clog.current.units_from(offset):
                phys, size, tags_code, _ts, qoff, _b, _c, _r = seg.unit(i)
                if qoffsets and (len(qoffsets) >= max_count or total + size > max_bytes):
                    break
                next_offset = qoff + 1
                if codes is not None and tags_code not in codes:
                    continue
                view = seg.record(phys, size)
                if view is None:
                    continue
                if tag_set is not None and record_property(view, b"TAGS\x01") not in tag_set:
                    continue
                if record_filter is not None and not record_filter(view):
                    continue
                if joined:
                    joined_buf += view
                else:
                    buffers.append(bytes(view))  # a copy: the file may be swapped afterwards
                qoffsets.append(qoff)
                total += size
                if next_offset - offset >= 16_000:  # bounded scan, as a ConsumeQueue get
                    break
        if next_offset == offset:
            return None
        status = GetStatus.FOUND if qoffsets else GetStatus.NO_MATCHED_MESSAGE
        out: list[Any] = ([joined_buf] if qoffsets else []) if joined else buffers
        return GetMessageResult(status, next_offset, min_offset, max_offset, out, qoffsets, total,
                                False, joined=joined)
