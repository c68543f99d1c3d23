"""MessageStore: the embedded RocketMQ-compatible store (RocketMQ's DefaultMessageStore).

    with MessageStore(StoreConfig(store_path_root_dir="./store")) as store:
        store.put_message(Message("TopicTest", b"hi", tags="TagA"), queue_id=0)
        store.get_message("group", "TopicTest", 0, offset=0)
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import mmap
import os
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any

from bolide.common import properties as P
from bolide.common import sysflag
from bolide.common.hashing import java_string_hash
from bolide.common.hosts import encode_host
from bolide.common.message import Message, MessageExt
from bolide.common.msgid import UniqKeyGenerator
from bolide.common.topic import SCHEDULE_TOPIC, validate_topic
from bolide.errors import ConfigError, StoreError
from bolide.store import checkpoint as files
from bolide.store import controller_mode, entry_select
from bolide.store.checkpoint import Checkpoint, StoreLock
from bolide.store.commitlog import CommitLog, RecordFieldError, SegmentUnavailable
from bolide.store.compaction import CompactionStore
from bolide.store.compaction_log import record_keys
from bolide.store.config import RUNTIME_KEYS, BrokerRole, StoreConfig
from bolide.store.consume_queue import (
    ENTRY,
    ENTRY_SIZE,
    EXT_ADDRESS_MAX,
    ConsumeQueue,
    prepare_files,
    remove_queue_files,
)
from bolide.store.delay import parse_delay_levels
from bolide.store.dispatch import Dispatcher, DispatchListener, DispatchService
from bolide.store.dropped_queues import DroppedQueues
from bolide.store.fast_put import new_appender
from bolide.store.flush import CommitLogFlusher, ConsumeQueueFlusher
from bolide.store.index_builder import IndexBuilder
from bolide.store.index_service import IndexService
from bolide.store.mapped_file import MappedFile
from bolide.store.mapped_file_queue import SegmentAllocator
from bolide.store.record import (
    SIZE_AND_PHYSICAL_OFFSET,
    decode_record,
    property_bytes,
    read_store_timestamp,
    read_total_size,
    record_properties_blob,
    record_property,
)
from bolide.store.recovery import recover
from bolide.store.replica import ReplicaGapError, whole_records, write_raw
from bolide.store.results import (
    GetMessageResult,
    GetStatus,
    PutMessageResult,
    PutStatus,
    RecoveryReport,
)
from bolide.store.retention import CleanService, RetentionStats

log = logging.getLogger(__name__)

MAX_SCAN_ENTRIES = 16_000  # ConsumeQueue entries one get scans at most (docs/adr/0003)
INDEX_POLL_S = 0.01  # how often the index thread looks for new records while data flows
QUEUE_ROOM_AHEAD = 64  # entries: ConsumeQueue files exist this far past a queue's next offset
_PRE_BLANK_SIZE = 0x7FFFFFFF
_DELAY = P.DELAY_TIME_LEVEL.encode() + b"\x01"
_TAGS = P.TAGS.encode() + b"\x01"
_UNIQ_KEY = P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode() + b"\x01"
_TOTAL_RAM = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _with_keys(record_filter: Callable[[memoryview], bool] | None) -> Callable[[memoryview], bool]:
    """``record_filter`` that also drops records without KEYS (a compacted topic's)."""
    def keyed(buf: memoryview) -> bool:
        keys = record_keys(record_properties_blob(buf))
        return bool(keys) and (record_filter is None or record_filter(buf))
    return keyed


def _delayed_in_batch() -> PutMessageResult:
    return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, remark="delayed messages cannot be sent in a batch")


class _Batch:
    """The members of a batch put as they are checked: record items, ids, tags codes."""

    __slots__ = ("born", "codes", "ids", "items", "total")

    def __init__(self, born_host: str | None, store_host: bytes) -> None:
        self.born = encode_host(born_host) if born_host else store_host
        self.items: list[tuple[bytes, bytes, int, int]] = []
        self.ids: list[str] = []
        self.codes: list[int] = []
        self.total = 0

    def add(self, store: MessageStore, topic: str, queue_id: int, body: bytes, encoded: bytes,
            flag: int, uniq: str, code: int) -> PutMessageResult | None:
        """Take one member; the refusal when it cannot be stored."""
        bad = store._check(topic, queue_id, len(body), len(encoded), len(self.born))
        if bad is not None:
            return bad
        self.items.append((body, encoded, flag, zlib.crc32(body) & 0x7FFFFFFF))
        self.ids.append(uniq)
        self.codes.append(code)
        self.total += len(body) + len(encoded)
        return None


class MessageStore:
    """CommitLog + ConsumeQueues + dispatch + flush + recovery, in this process."""

    def __init__(self, config: StoreConfig | None = None, **overrides: object) -> None:
        config = config or StoreConfig()
        if overrides:
            config = config.replace(**overrides)
        self.config = config
        self.root = config.root
        self.delay_millis = parse_delay_levels(config.message_delay_level)
        self.recovery_report = RecoveryReport()
        self._lock: StoreLock | None = None
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._queues_lock = threading.Lock()
        self.dropped = DroppedQueues.in_store(self.root)
        self._uniq = UniqKeyGenerator()
        self._store_host = encode_host(config.store_address)
        self._topic_errors: dict[str, str | None] = {}
        self._flush_listeners: list[Callable[[int], None]] = []
        self._queue_room: dict[tuple[str, int], int] = {}  # entries with a file on disk
        self._queue_room_lock = threading.Lock()
        self._running = False
        self._writable = False
        self._read_only_reason: str | None = None
        self._disk_full_reason: str | None = None  # set and cleared by the clean service
        self._writable_lock = threading.Lock()
        self._raw_tail = bytearray()  # a slave's received bytes of a record not yet whole
        self._raw_from = 0  # the global offset of the first byte of _raw_tail
        self._topic_retention: dict[str, float] = {}
        self._compacted_topics: set[str] = set()
        self.compaction: CompactionStore | None = None
        self._clean_service: CleanService | None = None
        self._allocator: SegmentAllocator | None = None
        self.commit_log: CommitLog
        self.checkpoint: Checkpoint
        self.dispatcher: Dispatcher
        self._dispatch_service: DispatchService | None = None
        self._flusher: CommitLogFlusher | None = None
        self._cq_flusher: ConsumeQueueFlusher | None = None
        self.index: IndexService | None = None
        self._index_builder: IndexBuilder | None = None
        self._index_service: DispatchService | None = None
        self._appender: Any | None = None  # the compiled put path (fast_put)
        self._born_hosts: dict[str, bytes] = {}
        self._sync_flush = False
        self._internal_listeners: list[DispatchListener] = []  # the store's own
        # controller mode: the confirm offset (-1: none yet), whether it follows the max
        # offset (a master needing no acks), and the dispatch ceiling (-1: none)
        self._controller = config.enable_controller_mode
        self._confirm_offset = -1
        self._confirm_follows = False
        self._confirm_ceiling = -1
        self._cut_at: int | None = None  # truncate_to's offset, applied by the next open

    # -- lifecycle ----------------------------------------------------------------------
    def open(self) -> MessageStore:
        """Lock the directory, load and recover the files, start the services."""
        if self._running:
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = StoreLock(self.root)
        self._lock.acquire()
        try:
            self._load_and_start()
        except BaseException:
            self._close_files()
            self._lock.release()
            raise
        return self

    def _load_and_start(self) -> None:
        cfg = self.config
        self._queue_room.clear()  # recovery may have removed files made ahead
        abnormal = files.abort_file_exists(self.root)
        self._allocator = (SegmentAllocator(cfg.prefault_segments, populate=not cfg.sync_flush)
                           if cfg.preallocate_next_segment else None)
        self.commit_log = CommitLog(cfg, self._allocator)
        self._max_record = self.commit_log.max_record_size()
        self._sync_flush = cfg.sync_flush
        self._appender = new_appender(self.commit_log, self._queue_room, self._uniq,
                                      cfg.max_message_size, QUEUE_ROOM_AHEAD // 2)
        self._clean_service = CleanService(cfg, self.commit_log, self._queue_snapshot,
                                           lambda: self.index,
                                           self._read_up_to,
                                           self._stored_at, self._set_disk_full)
        self.commit_log.files.load()
        self.dropped.load()
        self._load_queues()
        self.checkpoint = Checkpoint(self.root / "checkpoint")
        for cq in self._queues.values():
            cq.recover()
        self.dispatcher = Dispatcher(self.commit_log, self.find_consume_queue,
                                     self._dispatch_limit, self.delay_millis, self.dropped,
                                     self._restart_queue)
        self.index = None
        if cfg.message_index_enable:
            self.index = IndexService(cfg.index_dir, cfg.max_hash_slot_num, cfg.max_index_num,
                                      self.checkpoint, cfg.max_msgs_num_batch,
                                      min_free_bytes=2 * cfg.mapped_file_size_commit_log)
            self.index.load(abnormal)
        resume, report = recover(self.commit_log, self._queues, self.dispatcher,
                                 self.checkpoint, abnormal, cfg.check_crc_on_recover,
                                 cfg.message_index_safe)
        reindex_from = -1
        if self._cut_at is not None:
            cut_at, self._cut_at = self._cut_at, None
            if cut_at < self.commit_log.max_offset:
                if controller_mode.cut(self.commit_log, self._queues, self.index, cut_at,
                                       report):
                    reindex_from = cut_at
                resume = min(resume, cut_at)
        if self._controller:
            confirm = controller_mode.recovered_confirm_offset(self.commit_log, self.checkpoint)
            if not cfg.read_uncommitted:
                controller_mode.hide_unconfirmed(self._queues, confirm, report)
                resume = min(resume, confirm)
            self._set_confirm(confirm)
        self.commit_log.files.flushed_where = self.commit_log.max_offset
        self._raw_tail.clear()
        self.dispatcher.reput_from = resume
        before = self.dispatcher.dispatched
        while self.dispatcher.dispatch_available():
            pass
        report.queue_entries_rebuilt += self.dispatcher.dispatched - before
        self.recovery_report = report
        if not report.clean:
            log.warning("store %s: %s", self.root, report.summary())
        cl_min = self.commit_log.min_offset
        for key, cq in self._queues.items():
            cq.correct_min_offset(cl_min)
            self.commit_log.queue_offsets[key] = cq.max_offset
        self._prune_dropped()
        files.create_abort_file(self.root)
        segments = self.commit_log.files.files
        if self._allocator is not None and segments:  # the segment the writer goes on with
            self._allocator.warm(segments[-1])
        self.compaction = None
        if cfg.enable_compaction:  # before any thread starts: a load that fails stops the open
            compaction = CompactionStore(cfg, self.commit_log, self._queue_snapshot)
            compaction.set_hold_heads(cfg.broker_role is BrokerRole.SLAVE)  # see heads_needed
            try:
                compaction.load()
            except BaseException:
                compaction.close_files()
                raise
            self.compaction = compaction
        self._flusher = CommitLogFlusher(cfg, self.commit_log, self.checkpoint,
                                         self._on_flushed, self._on_flush_error)
        self._cq_flusher = ConsumeQueueFlusher(cfg, self._queue_snapshot, self.checkpoint,
                                               lambda: self.dispatcher.last_store_timestamp,
                                               self._on_flush_error)
        self._dispatch_service = DispatchService(self.dispatcher, cfg.dispatch_batch_bytes)
        self._index_service = None
        self._index_builder = None
        if self.index is not None:
            self.dispatcher.index_feed = deque()
            builder = IndexBuilder(self.index, self.commit_log, lambda: self.dispatcher.reput_from,
                                   self.dispatcher.index_feed)
            if reindex_from >= 0:
                builder.reput_from = reindex_from
            self._index_builder = builder
            # the index polls less often: queries by key may see a message some ms later,
            # and the writer's thread is interrupted less for the GIL
            self._index_service = DispatchService(builder, cfg.dispatch_batch_bytes, "index",
                                                  poll_s=INDEX_POLL_S)
            self.dispatcher.listeners.append(lambda _touched: self._wake_index())
        self._flusher.start()
        self._cq_flusher.start()
        self._dispatch_service.start()
        if self._index_service is not None:
            self._index_service.start()
        if self.compaction is not None:
            for topic in self._compacted_topics:
                self.compaction.set_topic(topic, True)
            self.dispatcher.listeners.append(self.compaction.wake)
            self.compaction.start()
        self._disk_full_reason = None
        self._clean_service.topic_floors = dict(self._topic_retention)
        self._clean_service.check_disk()  # a full disk refuses the very first put
        self._internal_listeners = list(self.dispatcher.listeners)
        self._running = True
        self._update_writable()
        self._clean_service.start()

    def _load_queues(self) -> None:
        base = self.config.consume_queue_dir
        if not base.is_dir():
            return
        for topic_dir in sorted(base.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.lstrip("-").isdigit():
                    cq = ConsumeQueue(base, topic_dir.name, int(queue_dir.name),
                                      self.config.mapped_file_size_consume_queue,
                                      self.config.prefault_segments)
                    cq.load()
                    self._queues[(cq.topic, cq.queue_id)] = cq

    def close(self) -> None:
        """Flush everything, remove the abort file (clean shutdown) and unlock."""
        if not self._running:
            return
        self._running = False
        self._update_writable()
        if self._clean_service is not None:
            self._clean_service.stop()
        assert self._dispatch_service and self._flusher and self._cq_flusher
        self._flusher.stop()
        self._dispatch_service.stop()
        try:
            while self.dispatcher.dispatch_available():
                pass
        except OSError as exc:  # e.g. no space for a ConsumeQueue file: recovery redoes it
            log.error("store %s: dispatch could not catch up at close: %s", self.root, exc)
        if self._index_service is not None:
            self._index_service.stop()
            while self._index_builder is not None and self._index_builder.dispatch_available():
                pass  # the index skips what it cannot write; the next open indexes the rest
        if self.compaction is not None:
            self.compaction.close()  # copies in the last records first
            self.compaction = None
        self._cq_flusher.stop()
        caught_up = self.dispatcher.behind() == 0
        if self._read_only_reason is None and caught_up:
            self.checkpoint.flush()
            files.delete_abort_file(self.root)
        self._close_files()
        assert self._lock is not None
        self._lock.release()

    shutdown = close

    def _close_files(self) -> None:
        if self.compaction is not None:  # an open that failed part-way
            self.compaction.close()
            self.compaction = None
        if self._allocator is not None:
            self._allocator.close()
        if hasattr(self, "commit_log"):
            self.commit_log.close()
        for cq in self._queues.values():
            cq.close()
        if self.index is not None:
            self.index.close()
            self.index = None
        if hasattr(self, "checkpoint"):
            self.checkpoint.close()

    def __enter__(self) -> MessageStore:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._running

    # -- services' callbacks ------------------------------------------------------------
    def _dispatch_limit(self) -> int:
        if self.config.sync_flush and self._running:
            limit = self.commit_log.flushed_offset
        else:
            limit = self.commit_log.max_offset
        if self._controller:
            ceiling = self._confirm_ceiling
            if ceiling >= 0:
                return min(ceiling, limit)
            if self._confirm_follows:
                self.checkpoint.confirm_phy_offset = limit
        return limit

    def _on_flushed(self, offset: int) -> None:
        if self.config.sync_flush and self._dispatch_service is not None:
            self._dispatch_service.wakeup()
        for listener in self._flush_listeners:
            listener(offset)

    def add_flush_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(flushed_offset)`` on the flush thread after each flush that made
        more of the CommitLog durable: one call per group commit, however many puts it
        covers (an event loop resolves its own waiters from it)."""
        self._flush_listeners.append(listener)

    def _on_flush_error(self, exc: OSError) -> None:
        if self._read_only_reason is None:  # keep the first cause
            self._read_only_reason = str(exc)
        self._update_writable()

    def _queue_snapshot(self) -> list[ConsumeQueue]:
        with self._queues_lock:
            return list(self._queues.values())

    def add_dispatch_listener(self, listener: DispatchListener) -> None:
        """Call ``listener(set of (topic, queue_id))`` after new entries are dispatched."""
        self.dispatcher.listeners.append(listener)

    def set_broker_role(self, role: BrokerRole) -> None:
        """Change the role at runtime (controller mode's role changes): a SLAVE refuses
        puts and takes :meth:`append_raw`; a master the reverse. A partial record held from
        a master is dropped. A new master should :meth:`wait_dispatched` first and then
        call :meth:`recover_queue_offsets`."""
        self._raw_tail.clear()
        self.config = self.config.replace(broker_role=role)
        self._update_writable()
        if self.compaction is not None:  # a master copies every compacted queue in at once
            self.compaction.set_hold_heads(role is BrokerRole.SLAVE)

    def recover_queue_offsets(self) -> None:
        """Take each queue's next offset from its ConsumeQueue (RocketMQ's
        recoverTopicQueueTable): a slave that becomes master appends after what it copied."""
        with self._queues_lock:
            items = list(self._queues.items())
        for key, cq in items:
            self.commit_log.queue_offsets[key] = cq.max_offset

    # -- writing ------------------------------------------------------------------------
    def put_message(
        self,
        msg: Message,
        queue_id: int = 0,
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str | None = None,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        wait_store: bool = True,
    ) -> PutMessageResult:
        """Append one message. Under SYNC_FLUSH, waits until it is durable (group commit).

        A ``born_timestamp`` of 0 means the store time; ``born_host`` defaults to the store host.
        """
        appender = self._appender
        if appender is not None and self._writable:
            with self.commit_log.put_lock:
                result = appender.append(
                    msg.topic, queue_id, msg.body, msg.properties, msg.flag, sys_flag,
                    born_timestamp, None if born_host is None else self._born_bytes(born_host),
                    reconsume_times, prepared_transaction_offset)
            if result is not None:
                self._after_append(result, wait_store)
                return result
        if not self._writable:
            return self._refusal()
        topic = msg.topic
        props = msg.properties
        if "DELAY" in props and sysflag.gets_queue_entry(sys_flag):
            bad = self._check(topic, queue_id, 0, 0)  # the real destination, before the rewrite
            if bad is not None:
                return bad
            topic, queue_id, props = self._delayed(topic, queue_id, props)
        return self._append_one(topic, queue_id, msg.body, P.encode_properties(props),
                                props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), props.get(P.TAGS),
                                msg.flag, sys_flag, born_timestamp, born_host, reconsume_times,
                                prepared_transaction_offset, wait_store)

    def put_encoded(
        self,
        topic: str,
        body: bytes,
        properties: bytes,
        queue_id: int = 0,
        *,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str | None = None,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        wait_store: bool = True,
    ) -> PutMessageResult:
        """:meth:`put_message` for properties already encoded (``key 0x01 value 0x02`` pairs, as a send
        header carries them): stored as given, plus a UNIQ_KEY when absent. A message with a
        ``DELAY`` property takes the :meth:`put_message` path, which rewrites its properties."""
        appender = self._appender
        if appender is not None and self._writable:
            with self.commit_log.put_lock:
                result = appender.append(
                    topic, queue_id, body, properties, flag, sys_flag, born_timestamp,
                    None if born_host is None else self._born_bytes(born_host), reconsume_times,
                    prepared_transaction_offset)
            if result is not None:
                self._after_append(result, wait_store)
                return result
        if b"DELAY\x01" in properties and P.find_property(properties, b"DELAY") is not None:
            msg = Message(topic, body, flag=flag, properties=P.decode_properties(properties))
            return self.put_message(msg, queue_id, sys_flag=sys_flag, born_timestamp=born_timestamp,
                                    born_host=born_host, reconsume_times=reconsume_times,
                                    prepared_transaction_offset=prepared_transaction_offset,
                                    wait_store=wait_store)
        if not self._writable:
            return self._refusal()
        if properties and not properties.endswith(b"\x02"):
            properties += b"\x02"
        uniq = P.find_property(properties, b"UNIQ_KEY")
        return self._append_one(topic, queue_id, body, properties, uniq,
                                P.find_property(properties, b"TAGS"),
                                flag, sys_flag, born_timestamp, born_host, reconsume_times,
                                prepared_transaction_offset, wait_store)

    def _append_one(self, topic: str, queue_id: int, body: bytes, encoded: bytes, uniq: str | None,
                    tags: str | None, flag: int, sys_flag: int, born_timestamp: int,
                    born_host: str | None, reconsume_times: int, prepared_transaction_offset: int,
                    wait_store: bool) -> PutMessageResult:
        """Check and append one record whose properties are encoded."""
        if uniq is None:
            uniq = self._uniq.next_id()
            encoded += b"UNIQ_KEY\x01" + uniq.encode() + b"\x02"
        born = encode_host(born_host) if born_host else self._store_host
        bad = self._check(topic, queue_id, len(body), len(encoded), len(born))
        if bad is None and not sys_flag & 0x4:  # gets a ConsumeQueue entry
            bad = self._queue_room_for(topic, queue_id, 1)
        if bad is not None:
            return bad
        try:
            phys, size, qoff, store_ts = self.commit_log.append(
                topic, queue_id, body, encoded, flag, sys_flag, born_timestamp, born,
                reconsume_times, prepared_transaction_offset, zlib.crc32(body) & 0x7FFFFFFF,
                None if topic == SCHEDULE_TOPIC else java_string_hash(tags) if tags else 0,
            )
        except SegmentUnavailable as exc:
            return PutMessageResult(PutStatus.CREATE_MAPEDFILE_FAILED, remark=str(exc))
        except RecordFieldError as exc:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, remark=str(exc))
        result = PutMessageResult(PutStatus.PUT_OK, phys, size, qoff, uniq, store_ts,
                                  store_host=self._store_host)
        self._after_append(result, wait_store)
        return result

    def put_messages(self, msgs: Sequence[Message], queue_id: int = 0, *, born_timestamp: int = 0,
                     born_host: str | None = None, wait_store: bool = True) -> PutMessageResult:
        """Append a batch to one topic and queue: consecutive queue offsets, one segment."""
        if not msgs:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, remark="the batch is empty")
        topic = msgs[0].topic
        result = self._fast_batch(topic, queue_id, msgs, born_timestamp, born_host, wait_store)
        if result is not None:
            return result
        if not self._writable:
            return self._refusal()
        batch = _Batch(born_host, self._store_host)
        for m in msgs:
            if m.topic != topic:
                return PutMessageResult(
                    PutStatus.MESSAGE_ILLEGAL,
                    remark=f"a batch goes to one topic; got {topic!r} and {m.topic!r}",
                )
            props = m.properties
            if props.get(P.DELAY_TIME_LEVEL, "0") not in ("", "0"):
                return _delayed_in_batch()
            encoded = P.encode_properties(props)
            uniq = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if uniq is None:
                uniq = self._uniq.next_id()
                encoded += _UNIQ_KEY + uniq.encode() + b"\x02"
            bad = batch.add(self, topic, queue_id, m.body, encoded, m.flag, uniq,
                            java_string_hash(t) if (t := props.get(P.TAGS)) else 0)
            if bad is not None:
                return bad
        return self._put_batch(topic, queue_id, batch, born_timestamp, wait_store)

    def put_batch_encoded(self, topic: str, members: Sequence[tuple[bytes, bytes, int]],
                          queue_id: int = 0, *, born_timestamp: int = 0, born_host: str | None = None,
                          wait_store: bool = True) -> PutMessageResult:
        """:meth:`put_messages` of members given as (body, encoded properties, flag), as a
        SEND_BATCH_MESSAGE carries them: no message objects. A member without UNIQ_KEY gets one;
        delayed members are refused."""
        if not members:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, remark="the batch is empty")
        result = self._fast_batch(topic, queue_id, members, born_timestamp, born_host, wait_store)
        if result is not None:
            return result
        if not self._writable:
            return self._refusal()
        batch = _Batch(born_host, self._store_host)
        for body, encoded, flag in members:
            if property_bytes(encoded, _DELAY) not in (None, b"", b"0"):
                return _delayed_in_batch()
            found = property_bytes(encoded, _UNIQ_KEY)
            if found:
                uniq = found.decode("utf-8", "replace")
            else:
                uniq = self._uniq.next_id()
                if encoded and not encoded.endswith(b"\x02"):
                    encoded += b"\x02"
                encoded += _UNIQ_KEY + uniq.encode() + b"\x02"
            tags = property_bytes(encoded, _TAGS)
            bad = batch.add(self, topic, queue_id, body, encoded, flag, uniq,
                            java_string_hash(tags.decode("utf-8", "replace")) if tags else 0)
            if bad is not None:
                return bad
        return self._put_batch(topic, queue_id, batch, born_timestamp, wait_store)

    def try_put_batch_body(self, topic: str, body: bytes | memoryview, batch_properties: bytes,
                           queue_id: int = 0, *, born_timestamp: int = 0,
                           born_host: str | None = None, wait_store: bool = True,
                           ) -> PutMessageResult | None:
        """:meth:`put_batch_encoded` of a SEND_BATCH_MESSAGE body as it came (blocks of
        TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN, body, PROPSLEN, properties), the
        encoded ``batch_properties`` added to every member, by the compiled path only (as
        RocketMQ's CommitLog encodes a batch body itself). None when that path cannot take
        it (no compiled path, a body that does not parse, a member it does not handle): then
        decode the members and call :meth:`put_batch_encoded`, which says what is wrong."""
        return self._fast_batch(topic, queue_id, body, born_timestamp, born_host, wait_store,
                                batch_properties)

    def _fast_batch(self, topic: str, queue_id: int, members: Sequence[Any] | bytes | memoryview,
                    born_timestamp: int, born_host: str | None, wait_store: bool,
                    batch_properties: bytes | None = None) -> PutMessageResult | None:
        """A batch through the compiled path (see fast_put): a list of members, or with
        ``batch_properties`` a SEND_BATCH_MESSAGE body; None when it cannot take it."""
        appender = self._appender
        if appender is None or not self._writable:
            return None
        if batch_properties is not None:
            append, extra = appender.append_batch_body, batch_properties
        elif type(members) is list:
            append, extra = appender.append_batch, b""
        else:
            return None
        with self.commit_log.put_lock:
            result = append(topic, queue_id, members, extra, born_timestamp,
                            self._born_bytes(born_host))
        if result is not None:
            self._after_append(result, wait_store)
        return result

    def _born_bytes(self, born_host: str | None) -> bytes | None:
        """``born_host`` encoded (None stays None: the store host), cached per address."""
        if born_host is None:
            return None
        found = self._born_hosts.get(born_host)
        if found is None:
            found = encode_host(born_host)
            if len(self._born_hosts) >= 4096:
                self._born_hosts.clear()
            self._born_hosts[born_host] = found
        return found

    def _put_batch(self, topic: str, queue_id: int, batch: _Batch, born_timestamp: int,
                   wait_store: bool) -> PutMessageResult:
        """Append the checked members of a batch."""
        cl = self.commit_log
        total = batch.total + len(batch.items) * cl.record_size_for(0, len(topic.encode()), 0,
                                                                   len(batch.born))
        if total > cl.max_record_size():
            return PutMessageResult(
                PutStatus.MESSAGE_ILLEGAL,
                remark=f"the batch needs {total} bytes but a CommitLog segment holds at most "
                f"{cl.max_record_size()}; send smaller batches",
            )
        bad = self._queue_room_for(topic, queue_id, len(batch.items))
        if bad is not None:
            return bad
        try:
            phys, sizes, qoff, store_ts = cl.append_batch(
                topic, queue_id, batch.items, 0, born_timestamp, batch.born, batch.codes)
        except SegmentUnavailable as exc:
            return PutMessageResult(PutStatus.CREATE_MAPEDFILE_FAILED, remark=str(exc))
        except RecordFieldError as exc:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, remark=str(exc))
        ids = batch.ids
        result = PutMessageResult(PutStatus.PUT_OK, phys, sum(sizes), qoff, ids[0], store_ts,
                                  len(ids), ids, store_host=self._store_host, record_sizes=sizes)
        self._after_append(result, wait_store)
        return result

    def append_raw(self, offset: int, data: bytes | memoryview) -> int:
        """A SLAVE's write: the master's CommitLog bytes at exactly the master's ``offset``
        (HA replication). Whole records (and BLANK tails) go to the CommitLog at once, where
        dispatch builds their ConsumeQueue and index entries; the start of a record not yet
        whole waits in memory for the next call. Returns :attr:`max_phy_offset` (the end of
        the whole records written, what the slave reports to its master).

        ``offset`` continues the bytes received so far, or restarts at
        :attr:`max_phy_offset` (a new connection; a held partial record is dropped), or, for
        an empty CommitLog, is a segment start. Otherwise
        :class:`~bolide.store.replica.ReplicaGapError` and nothing is written.
        """
        if self.config.broker_role is not BrokerRole.SLAVE:
            raise StoreError(f"the store at {self.root} is a {self.config.broker_role.value}; "
                             "raw appends are for brokerRole=SLAVE stores only")
        if not self._running or self._read_only_reason is not None:
            raise StoreError(self._refusal().remark)
        cl = self.commit_log
        tail = self._raw_tail
        end = cl.max_offset
        if tail and offset == self._raw_from:
            tail.clear()  # the master starts over from our whole records
        if tail:
            if offset != self._raw_from + len(tail):
                raise ReplicaGapError(
                    f"raw bytes start at {offset} but this slave has received up to "
                    f"{self._raw_from + len(tail)}; resend from {self._raw_from}")
        elif cl.files.files:
            if offset != end:
                raise ReplicaGapError(f"raw bytes start at {offset} but this CommitLog ends at "
                                      f"{end}; the master must send from {end}")
        elif offset % cl.segment_size:
            raise ReplicaGapError(
                f"an empty CommitLog can only start at a segment boundary, not at {offset}; "
                "check that master and slave use the same mappedFileSizeCommitLog")
        if not tail:
            self._raw_from = offset
        start = self._raw_from
        tail += data
        try:
            n, store_ts = whole_records(tail, start, cl.segment_size)
            if n:
                with memoryview(tail) as view, view[:n] as whole:
                    end = write_raw(cl, start, whole)
                del tail[:n]
                self._raw_from = start + n
        except BaseException:
            tail.clear()  # the connection restarts from the whole records written
            raise
        if n:
            if store_ts:
                cl.last_store_timestamp = store_ts
            svc = self._dispatch_service
            if svc is not None and svc.idle:
                svc.wakeup()
        return end

    @property
    def raw_received(self) -> int:
        """A slave's received end: :attr:`max_phy_offset` plus a partial record held."""
        if self._raw_tail:
            return self._raw_from + len(self._raw_tail)
        return self.commit_log.max_offset

    def _queue_room_for(self, topic: str, queue_id: int, count: int) -> PutMessageResult | None:
        """Make sure the ConsumeQueue files for the queue's next ``count`` entries exist.

        Dispatch writes the entry after the put is acknowledged; if it then could not create
        the queue's next file (a full disk), the acknowledged message would stay unreadable
        until space is freed. So the file is created here, ahead of need, and a full disk
        refuses the put instead. When dispatch is more than a file behind, the put never waits
        (it may run on an event loop): it is refused unless the disk has room for the files
        dispatch has yet to make.
        """
        key = (topic, queue_id)
        nxt = self.commit_log.queue_offsets.get(key, 0)
        if nxt + count + QUEUE_ROOM_AHEAD // 2 <= self._queue_room.get(key, 0):
            return None
        cfg = self.config
        size = cfg.mapped_file_size_consume_queue
        # Dispatch writes the file ``last``; before its first entry, file 0 (puts make a new
        # queue's files from 0 on). Files are made at most one past it (see prepare_files).
        cq = self._queues.get(key)
        last = cq.files.last_file() if cq is not None else None
        last_start = last.file_from_offset if last is not None else 0
        max_start = last_start + size
        try:
            with self._queue_room_lock:  # one creator: a failed one deletes its file
                room = prepare_files(cfg.consume_queue_dir, topic, queue_id, size, nxt,
                                     nxt + count + QUEUE_ROOM_AHEAD, max_start)
            if room < nxt + count:
                # files dispatch will create itself, each in whole blocks, and room for the
                # CommitLog segment that may be preallocated meanwhile
                st = os.statvfs(self.root)
                files_left = (nxt + count - 1) * ENTRY_SIZE // size - max_start // size
                block = st.f_frsize or 4096
                need = (files_left * -(-size // block) * block
                        + cfg.mapped_file_size_commit_log)
                if st.f_bavail * st.f_frsize < need:
                    raise OSError(errno.ENOSPC, "too little space left for the ConsumeQueue "
                                  "files that dispatch has yet to create")
        except OSError as exc:
            return PutMessageResult(
                PutStatus.CREATE_MAPEDFILE_FAILED,
                remark=f"cannot create a ConsumeQueue file in {cfg.consume_queue_dir / topic}: "
                f"{exc.strerror or exc}; free disk space or point storePathRootDir at a larger "
                "disk",
            )
        self._queue_room[key] = room
        return None

    def _update_writable(self) -> None:
        with self._writable_lock:  # several threads flip the causes; the last word is right
            self._writable = (self._running and self._read_only_reason is None
                              and self._disk_full_reason is None
                              and self.config.broker_role is not BrokerRole.SLAVE)

    def _set_disk_full(self, reason: str | None) -> None:
        """The clean service's disk check: refuse puts with ``reason``, or resume (None)."""
        if reason != self._disk_full_reason:
            self._disk_full_reason = reason
            self._update_writable()

    def _refusal(self) -> PutMessageResult:
        if not self._running:
            why = "the store is not open; call open() first"
        elif self._read_only_reason is not None:
            why = self._read_only_reason
        elif self._disk_full_reason is not None:
            why = self._disk_full_reason
        else:
            why = "this store is a SLAVE; send to the master"
        return PutMessageResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=why)

    def _delayed(self, topic: str, queue_id: int, props: dict[str, str],
                 ) -> tuple[str, int, dict[str, str]]:
        """Rewrite a delayed message to SCHEDULE_TOPIC_XXXX, queue level - 1 (RocketMQ 4.9)."""
        text = props.get(P.DELAY_TIME_LEVEL, "")
        level = int(text) if text.isdecimal() else 0
        if level <= 0:
            return topic, queue_id, props
        level = min(level, len(self.delay_millis))
        props = {**props, P.REAL_TOPIC: topic, P.REAL_QUEUE_ID: str(queue_id),
                 P.DELAY_TIME_LEVEL: str(level)}
        return SCHEDULE_TOPIC, level - 1, props

    def _check(self, topic: str, queue_id: int, body_len: int, props_len: int,
               born_len: int = 8) -> PutMessageResult | None:
        """Why a message cannot be stored, as a result; None when it can."""
        why = self._topic_errors.get(topic, "?")
        if why == "?":
            why = None if topic == SCHEDULE_TOPIC else validate_topic(topic)
            if len(self._topic_errors) < 100_000:
                self._topic_errors[topic] = why
        if why is not None:
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL, remark=why)
        if queue_id < 0 or queue_id > 0x7FFFFFFF:  # QUEUEID is an i32 in the record
            return PutMessageResult(PutStatus.MESSAGE_ILLEGAL,
                                    remark=f"queue id {queue_id} is out of range; use 0 to 2147483647")
        if body_len > self.config.max_message_size:
            return PutMessageResult(
                PutStatus.MESSAGE_ILLEGAL,
                remark=f"the body has {body_len} bytes, over maxMessageSize="
                f"{self.config.max_message_size}; send a smaller body or raise maxMessageSize",
            )
        if props_len > P.MAX_PROPERTIES_BYTES:
            return PutMessageResult(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                remark=f"the properties take {props_len} bytes encoded, over the limit of "
                f"{P.MAX_PROPERTIES_BYTES}; use fewer or shorter properties",
            )
        if body_len + props_len + 300 > self._max_record:
            size = self.commit_log.record_size_for(body_len, len(topic.encode()), props_len,
                                                   born_len)
            if size > self._max_record:
                return PutMessageResult(
                    PutStatus.MESSAGE_ILLEGAL,
                    remark=f"the record needs {size} bytes but a CommitLog segment holds at most "
                    f"{self._max_record}; raise mappedFileSizeCommitLog",
                )
        return None

    def _after_append(self, result: PutMessageResult, wait_store: bool) -> None:
        if self._sync_flush:
            assert self._flusher is not None
            if not wait_store:
                self._flusher.wakeup()
                return
            fut = self._flusher.request(result.end_offset)
            try:
                fut.result(self.config.sync_flush_timeout_ms / 1000)
            except TimeoutError:
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
                result.remark = (f"the disk did not confirm the write within syncFlushTimeout="
                                 f"{self.config.sync_flush_timeout_ms} ms; the message is "
                                 "written but may not be durable")
            except OSError as exc:
                result.status = PutStatus.SERVICE_NOT_AVAILABLE
                result.remark = str(exc)
        else:
            svc = self._dispatch_service
            if svc is not None and svc.idle:
                svc.wakeup()

    # -- reading ------------------------------------------------------------------------
    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The ConsumeQueue of (topic, queue_id), created when missing."""
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            with self._queues_lock:
                cq = self._queues.get(key)
                if cq is None:
                    cq = ConsumeQueue(self.config.consume_queue_dir, topic, queue_id,
                                      self.config.mapped_file_size_consume_queue,
                                      self.config.prefault_segments)
                    self._queues[key] = cq
        return cq

    def consume_queues(self) -> list[ConsumeQueue]:
        return self._queue_snapshot()

    def topics(self) -> dict[str, list[int]]:
        """Topics with ConsumeQueues, and their queue ids."""
        with self._queues_lock:  # dispatch adds queues and cleaning removes them meanwhile
            keys = sorted(self._queues)
        result: dict[str, list[int]] = {}
        for topic, qid in keys:
            result.setdefault(topic, []).append(qid)
        return result

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return cq.max_offset if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return cq.min_offset if cq is not None else 0

    def queue_entries(self, topic: str, queue_id: int, index: int,
                      count: int) -> list[tuple[int, int, int]] | None:
        """Up to ``count`` ConsumeQueue entries ``(phys_offset, size, tags_code)`` from queue
        offset ``index`` (fewer at the queue's end, none below its minimum); None when the
        store has no such queue."""
        self._require_open()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return None
        out: list[tuple[int, int, int]] = []
        while len(out) < count:
            found = cq.entries_from(index + len(out))
            if found is None:
                break
            view = found[0]
            for pos in range(0, min(len(view), (count - len(out)) * ENTRY_SIZE), ENTRY_SIZE):
                out.append(ENTRY.unpack_from(view, pos))
        return out

    def _require_open(self) -> None:
        """Reads need the mapped files: refuse clearly instead of touching closed mappings."""
        if not self._running:
            raise StoreError(f"the store at {self.root} is not open; call open() first")

    def get_message(self, group: str, topic: str, queue_id: int, offset: int,
                    max_count: int = 32, tags: Iterable[str] | None = None, *,
                    joined: bool = False,
                    record_filter: Callable[[memoryview], bool] | None = None) -> GetMessageResult:
        """Read up to ``max_count`` messages from ``offset``; ``tags`` filters by exact tag,
        ``record_filter`` (called with each record's bytes) by anything else (SQL92).
        ``joined``: the records copied back to back into one buffer (a pull's body) instead of
        a view per record."""
        self._require_open()
        compaction = self.compaction
        if compaction is None or topic not in compaction.topics:
            return self._get_from_queue(topic, queue_id, offset, max_count, tags, joined, record_filter)
        result = self._get_compacted(compaction, self._queues.get((topic, queue_id)), topic, queue_id,
                                     offset, max_count, tags, joined, record_filter)
        if result is None:  # RocketMQ serves keyed messages only
            result = self._get_from_queue(topic, queue_id, offset, max_count, tags, joined,
                                          _with_keys(record_filter))
        low = compaction.min_offset(topic, queue_id)
        if low is not None:  # RocketMQ answers its compaction queue's minimum
            result.min_offset = low
        return result

    def _get_from_queue(self, topic: str, queue_id: int, offset: int, max_count: int,
                        tags: Iterable[str] | None, joined: bool,
                        record_filter: Callable[[memoryview], bool] | None) -> GetMessageResult:
        """:meth:`get_message` through the ConsumeQueue."""
        cq = self._queues.get((topic, queue_id))
        fix = self._next_offset_correction
        if cq is None:
            return GetMessageResult(GetStatus.NO_MESSAGE_IN_QUEUE, fix(offset, 0), 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0:
            return GetMessageResult(GetStatus.NO_MESSAGE_IN_QUEUE, fix(offset, 0), min_offset,
                                    max_offset)
        if offset < min_offset:
            return GetMessageResult(GetStatus.OFFSET_TOO_SMALL, fix(offset, min_offset), min_offset,
                                    max_offset)
        if offset == max_offset:
            return GetMessageResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetMessageResult(GetStatus.OFFSET_OVERFLOW_BADLY, fix(offset, max_offset),
                                    min_offset, max_offset)
        found = cq.entries_from(offset)
        if found is None:
            per_file = cq.file_size // ENTRY_SIZE
            return GetMessageResult(GetStatus.OFFSET_FOUND_NULL,
                                    fix(offset, offset + per_file - offset % per_file), min_offset,
                                    max_offset)
        view = found[0]
        n = min(len(view) // ENTRY_SIZE, MAX_SCAN_ENTRIES)
        tag_set = set(tags) if tags is not None else None
        if tag_set is not None and ("*" in tag_set or not tag_set):
            tag_set = None
        codes = {java_string_hash(t) for t in tag_set} if tag_set is not None else None
        cfg = self.config
        cl = self.commit_log
        cl_max = cl.max_offset
        memory_limit = self.memory_area_bytes()
        buffers: list[memoryview] | bytearray = bytearray() if joined else []
        qoffsets: list[int] = []
        total_bytes = 0
        scanned = 0
        removed = False
        damaged = 0
        max_phy = 0
        mem_count = min(max_count, cfg.max_transfer_count_on_message_in_memory)
        mem_bytes = cfg.max_transfer_bytes_on_message_in_memory
        disk_count = min(max_count, cfg.max_transfer_count_on_message_in_disk)
        disk_bytes = cfg.max_transfer_bytes_on_message_in_disk
        seg_start = seg_end = 0  # the segment of the last record read, and its written end
        seg_view: memoryview | None = None
        entries = view[: n * ENTRY_SIZE]
        fast = (entry_select.ENABLED and record_filter is None
                and (codes is None or len(codes) <= entry_select.MAX_CODES))
        code_tuple = tuple(codes) if codes is not None else None
        tag_tuple = tuple(t.encode("utf-8") for t in tag_set) if tag_set is not None else None
        limits = (cl_max, memory_limit, mem_count, mem_bytes, disk_count, disk_bytes)
        i = 0
        while i < n:
            if fast and seg_view is not None:  # the entries whose records lie in this segment
                i, scanned, total_bytes, max_phy, stop = entry_select.select_entries(
                    entries, i, n, seg_view, seg_start, seg_end, code_tuple, tag_tuple, limits,
                    buffers, qoffsets, (offset, scanned, total_bytes, max_phy))
                if stop != entry_select.DEFERRED:
                    break
            # the general step, one entry: looks its segment up (the first, or the next one)
            phys, size, code = ENTRY.unpack_from(entries, i * ENTRY_SIZE)
            i += 1
            if size == _PRE_BLANK_SIZE:
                scanned += 1
                continue
            if size <= 0 or phys < 0:  # damaged: no record to serve; skipped and reported
                scanned += 1
                removed = True
                damaged += 1
                continue
            max_phy = phys
            if qoffsets:
                if cl_max - phys > memory_limit:  # old data, likely on disk: smaller batches
                    if total_bytes + size > disk_bytes or len(qoffsets) >= disk_count:
                        break
                elif total_bytes + size > mem_bytes or len(qoffsets) >= mem_count:
                    break
            scanned += 1
            if codes is not None and code not in codes and code > EXT_ADDRESS_MAX:
                continue  # (a ConsumeQueueExt address is no tag code: the tag below decides)
            if seg_view is not None and seg_start <= phys and phys + size <= seg_end:
                buf = seg_view[phys - seg_start : phys - seg_start + size]
            else:
                mf = cl.files.find(phys)
                if mf is None or phys + size > mf.file_from_offset + mf.wrote_position:
                    removed = True
                    continue
                seg_start, seg_end, seg_view = mf.file_from_offset, mf.end_offset, mf.view
                buf = seg_view[phys - seg_start : phys - seg_start + size]
            if tag_set is not None and record_property(buf, b"TAGS\x01") not in tag_set:
                continue
            if record_filter is not None and not record_filter(buf):
                continue
            if joined:
                buffers += buf  # type: ignore[operator]
            else:
                buffers.append(buf)  # type: ignore[union-attr]
            qoffsets.append(offset + scanned - 1)
            total_bytes += size
        if damaged:
            log.error("ConsumeQueue %s-%d: %d damaged entries (a size or CommitLog offset below "
                      "zero) among offsets %d-%d, skipped; check the store with `bolide store "
                      "verify`", topic, queue_id, damaged, offset, offset + scanned - 1)
        if qoffsets:
            status = GetStatus.FOUND
        elif removed:
            status = GetStatus.MESSAGE_WAS_REMOVING
        else:
            status = GetStatus.NO_MATCHED_MESSAGE
        return GetMessageResult(
            status, offset + scanned, min_offset, max_offset,
            ([buffers] if qoffsets else []) if joined else buffers,  # type: ignore[list-item]
            qoffsets, total_bytes, cl_max - max_phy > memory_limit, joined=joined,
        )

    def _get_compacted(self, compaction: CompactionStore, cq: ConsumeQueue | None, topic: str,
                       queue_id: int, offset: int, max_count: int, tags: Iterable[str] | None,
                       joined: bool, record_filter: Callable[[memoryview], bool] | None,
                       ) -> GetMessageResult | None:
        """A compacted topic's get below the end of its compaction log: served from there
        (offsets compacted away, or gone with the CommitLog, give the next message kept);
        None: the ConsumeQueue serves it."""
        if offset >= compaction.ingested_end(topic, queue_id):
            return None
        tag_set = set(tags) if tags is not None else None
        if tag_set is not None and ("*" in tag_set or not tag_set):
            tag_set = None
        codes = {java_string_hash(t) for t in tag_set} if tag_set is not None else None
        cfg = self.config
        max_count = min(max_count, cfg.max_transfer_count_on_message_in_memory)
        min_offset = cq.min_offset if cq is not None else 0
        max_offset = cq.max_offset if cq is not None else 0
        return compaction.get_message(topic, queue_id, offset, max_count, codes, tag_set,
                                      record_filter, joined, cfg.max_transfer_bytes_on_message_in_memory,
                                      min_offset, max(max_offset, compaction.ingested_end(topic, queue_id)))

    def set_topic_compaction(self, topic: str, compacted: bool) -> None:
        """Declare ``topic`` compacted (its cleanup.policy is COMPACTION) or not. Not stored
        by the store: declare it again after each open (the broker does, from topics.json)."""
        if compacted:
            self._compacted_topics.add(topic)
        else:
            self._compacted_topics.discard(topic)
        if self.compaction is not None:
            self.compaction.set_topic(topic, compacted)

    def compacted_topics(self) -> set[str]:
        return set(self._compacted_topics)

    def compact_now(self) -> int:
        """Copy the compacted topics' new records into their compaction logs and compact every
        queue now (what the compaction thread does each compactionScheduleInternal); the
        number of compaction passes made. StoreError when compaction is disabled."""
        self._require_open()
        if self.compaction is None:
            raise StoreError("compaction is disabled (enableCompaction=false); enable it and restart")
        self.wait_dispatched(indexed=False)  # what is stored so far reaches the ConsumeQueues
        return self.compaction.compact_now()

    def _next_offset_correction(self, offset: int, corrected: int) -> int:
        """The next offset a get answers: a slave leaves the consumer's offset alone unless
        ``offsetCheckInSlave`` (its queues may lag the master's), as RocketMQ does."""
        cfg = self.config
        if cfg.broker_role is BrokerRole.SLAVE and not cfg.offset_check_in_slave:
            return offset
        return corrected

    def record_bytes(self, commit_log_offset: int, size: int) -> bytearray | None:
        """A copy of the ``size``-byte record at a CommitLog offset (None when it is gone)."""
        self._require_open()
        view = self.commit_log.read(commit_log_offset, size)
        if view is None:
            return None
        try:
            return bytearray(view)
        finally:
            view.release()

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """Decode the record at a CommitLog offset, or None when there is none."""
        self._require_open()
        head = self.commit_log.read(commit_log_offset, 8)
        if head is None:
            return None
        size = read_total_size(head, 0)
        buf = self.commit_log.read(commit_log_offset, size) if size > 0 else None
        if buf is None:
            return None
        try:
            return decode_record(buf, 0)
        except ValueError:
            return None

    def query_message(self, topic: str, key: str, max_num: int = 32, begin_ts: int = 0,
                      end_ts: int | None = None) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS contain ``key`` or whose UNIQ_KEY is ``key``.

        Searches the index files (newest first; at most ``max_msgs_num_batch`` hits) and,
        unlike RocketMQ, which compares key hashes only, keeps just the messages that really
        have this topic and key and were stored within [begin_ts, end_ts]; sorted by CommitLog
        offset. Empty when ``message_index_enable`` is off.
        """
        self._require_open()
        index = self.index
        if index is None:
            return []
        end = (1 << 63) - 1 if end_ts is None else end_ts
        found: dict[int, MessageExt] = {}
        for phy in index.query(topic, key, max_num, begin_ts, end):
            if phy in found or not self.commit_log.min_offset <= phy < self.commit_log.max_offset:
                continue
            msg = self.look_message_by_offset(phy)
            if (msg is None or msg.topic != topic or msg.commit_log_offset != phy
                    or not begin_ts <= msg.store_timestamp <= end
                    or self.dropped.dropped(topic, msg.queue_id, phy)):
                continue
            if msg.msg_id == key or key in msg.properties.get(P.KEYS, "").split(P.KEY_SEPARATOR):
                found[phy] = msg
        return [found[phy] for phy in sorted(found)]

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose message was stored at or after ``timestamp_ms``.

        Returns the max offset when every message is older, and the min offset when the
        queue is empty or every message is newer.
        """
        self._require_open()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self._stored_at(cq, mid) < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _stored_at(self, cq: ConsumeQueue, index: int) -> int:
        """Store time of a queue entry's message; -1 when unreadable (treated as too early)."""
        entry = cq.entry(index)
        if entry is None or entry[1] == _PRE_BLANK_SIZE:
            return -1
        buf = self.commit_log.read(entry[0], entry[1])
        return read_store_timestamp(buf, 0) if buf is not None else -1

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at a queue offset; -1 when there is none."""
        self._require_open()
        cq = self._queues.get((topic, queue_id))
        if cq is None or not cq.min_offset <= offset < cq.max_offset:
            return -1
        return self._stored_at(cq, offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        self._require_open()
        cq = self._queues.get((topic, queue_id))
        if cq is None or cq.max_offset == cq.min_offset:
            return -1
        return self._stored_at(cq, cq.min_offset)

    def index_behind(self) -> int:
        """Bytes of records dispatched to their ConsumeQueues but not yet indexed."""
        builder = self._index_builder
        return builder.behind() if builder is not None else 0

    def wait_dispatched(self, timeout: float = 10.0, indexed: bool = True) -> bool:
        """Block until every readable record has its ConsumeQueue entry and, with
        ``indexed``, its index entries (tests, tools); False on timeout."""
        svc = self._dispatch_service
        if svc is None:
            return self.dispatcher.behind() == 0
        deadline = time.monotonic() + timeout
        if not svc.wait_caught_up(timeout):
            return False
        index = self._index_service
        if not indexed or index is None:
            return True
        return index.wait_caught_up(max(0.0, deadline - time.monotonic()))

    def _read_up_to(self) -> int:
        """Where the slower of dispatch and indexing is: retention keeps what follows."""
        builder = self._index_builder
        reput = self.dispatcher.reput_from
        return reput if builder is None else min(reput, builder.reput_from)

    def _wake_index(self) -> None:
        if self._index_service is not None:
            self._index_service.wakeup()

    # -- controller mode (RocketMQ 5 AutoSwitch HA) ----------------------------------------
    @property
    def confirm_offset(self) -> int:
        """The CommitLog offset consumers may read up to. In controller mode: what every
        in-sync replica holds (:meth:`set_confirm_offset`; the max offset while it follows
        it); otherwise where dispatch may go (the max offset, or the flushed one with
        SYNC_FLUSH), as RocketMQ's CommitLog.getConfirmOffset."""
        if self._controller and not self._confirm_follows:
            return self._confirm_offset
        return self._dispatch_limit()

    def set_confirm_offset(self, offset: int | None) -> None:
        """Controller mode: set the confirm offset (kept in the checkpoint's
        confirmPhyOffset). None: it follows the max offset (a master whose sync state set is
        itself alone, or one not waiting for all of it). Consumers see the CommitLog up to
        it unless readUnCommitted. StoreError outside controller mode."""
        if not self._controller:
            raise StoreError("the confirm offset is for controller mode: set "
                             "enableControllerMode=true in broker.conf")
        self._set_confirm(offset)
        svc = self._dispatch_service
        if svc is not None:
            svc.wakeup()

    def _set_confirm(self, offset: int | None) -> None:
        if offset is None:
            self._confirm_follows = True
            self._confirm_ceiling = -1
            return
        # the ceiling first: the dispatch thread never sees neither a ceiling nor following
        self._confirm_ceiling = -1 if self.config.read_uncommitted else offset
        self._confirm_offset = offset
        self.checkpoint.confirm_phy_offset = offset
        self._confirm_follows = False

    def truncate_to(self, offset: int) -> RecoveryReport:
        """Cut the CommitLog at ``offset`` (a record start), with the ConsumeQueue entries
        and the index position of what follows, and lower the confirm offset to it: a slave
        whose tail diverges from its new master's (RocketMQ's truncateFiles). Done by
        closing the store and opening it again with the cut, so nothing reads the removed
        bytes meanwhile; returns that open's report. TruncateError (nothing changes) when
        ``offset`` is not a record start."""
        self._require_open()
        self._raw_tail.clear()
        if offset >= self.commit_log.max_offset:
            return RecoveryReport()
        controller_mode.check_cut_point(self.commit_log, offset)
        if self._controller and self.checkpoint.confirm_phy_offset > offset:
            self.checkpoint.confirm_phy_offset = offset
        self._cut_at = offset
        added = [fn for fn in self.dispatcher.listeners if fn not in self._internal_listeners]
        self.close()
        with self._queues_lock:
            self._queues.clear()  # closed: the open loads them again
        self.open()
        self.dispatcher.listeners.extend(added)  # add_dispatch_listener's, kept
        return self.recovery_report

    def flush(self) -> None:
        """Flush the CommitLog now (both modes); returns when durable."""
        self.durable(self.commit_log.max_offset).result(self.config.sync_flush_timeout_ms / 1000)

    def durable(self, offset: int) -> Future[None]:
        """A future done once the CommitLog is durable up to ``offset`` (group commit).

        For callers that must not block, such as an event loop: put with
        ``wait_store=False``, then ``await asyncio.wrap_future(store.durable(r.end_offset))``.
        """
        if self._flusher is None or not self._running:
            raise StoreError(f"the store at {self.root} is not open; call open() first")
        return self._flusher.request(offset)

    # -- retention ----------------------------------------------------------------------
    def set_topic_retention(self, topic: str, hours: float | None) -> None:
        """Serve ``topic``'s messages for ``hours`` at most (None or 0 removes the floor).

        A logical floor on top of the global ``fileReservedTime``: each queue's min offset
        moves past messages stored longer ago (pulls there get OFFSET_TOO_SMALL), checked on
        every clean run and at once here. The CommitLog is shared by all topics, so its files
        still go only by the global rules; the floor is not stored on disk (declare it again
        after each open).
        """
        if hours is not None and hours < 0:
            raise ValueError(f"topic retention of {topic!r} is {hours} h; use a positive "
                             "number of hours, or None to remove it")
        if hours:
            self._topic_retention[topic] = hours
        else:
            self._topic_retention.pop(topic, None)
        svc = self._clean_service
        if svc is not None and self._running:
            svc.topic_floors = dict(self._topic_retention)  # replaced whole: no lock
            svc.apply_topic_floors()

    def change_role(self, role: BrokerRole) -> None:
        """Controller mode's role change at runtime (call it on the thread that appends): a
        SLAVE refuses puts (SERVICE_NOT_AVAILABLE) and takes :meth:`append_raw`; a master
        takes puts. A partial record a slave held is dropped (the next master resends it).

        A slave becoming master takes each queue's next offset from its ConsumeQueue (as
        RocketMQ's recoverTopicQueueTable), so every replicated record must be dispatched
        first (:meth:`wait_dispatched`); StoreError otherwise, and nothing changes."""
        if role is self.config.broker_role:
            return
        if self.config.broker_role is BrokerRole.SLAVE:
            if self.dispatcher.behind():
                raise StoreError(f"the store at {self.root} has replicated records not yet in "
                                 "its ConsumeQueues: wait_dispatched() before it becomes master")
            with self.commit_log.put_lock:
                offsets = self.commit_log.queue_offsets  # the appender's own dict: in place
                offsets.clear()
                for key, cq in self._queues.items():
                    offsets[key] = cq.max_offset
        self.config = self.config.replace(broker_role=role)
        self._raw_tail.clear()
        self._raw_from = 0
        self._update_writable()

    def reconfigure(self, **changes: Any) -> StoreConfig:
        """Change settings of the running store (fields named by ``RUNTIME_KEYS``: retention,
        disk watermarks, get sizes); they apply from the next clean run or get. ConfigError for
        another field or a value the store cannot use, and nothing changes. Returns the config."""
        runtime = {f.name for f in dataclasses.fields(StoreConfig) if f.metadata.get("key") in RUNTIME_KEYS}
        fixed = sorted(set(changes) - runtime)
        if fixed:
            raise ConfigError(f"{', '.join(fixed)} cannot change while the store runs: set it in "
                              "broker.conf and restart")
        config = self.config.replace(**changes)
        if self._clean_service is not None:
            self._clean_service.reconfigure(config)  # validates deleteWhen before any change
        self.config = config
        return config

    def topic_retention(self) -> dict[str, float]:
        """Topics with a retention floor, in hours."""
        return dict(self._topic_retention)

    def run_retention(self, now_ms: int | None = None) -> RetentionStats:
        """Run one clean cycle now (what the clean thread does every cleanResourceInterval);
        ``now_ms`` replaces the clock for the deleteWhen hour, file ages and topic floors."""
        self._require_open()
        assert self._clean_service is not None
        return self._clean_service.run_once(now_ms)

    def delete_expired_files_now(self) -> None:
        """Delete expired CommitLog files (older than fileReservedTime, flushed and
        dispatched) in the clean thread's next runs whatever the hour, the first at once."""
        self._require_open()
        assert self._clean_service is not None
        self._clean_service.delete_expired_now()

    def set_commit_log_read_ahead(self, enabled: bool) -> None:
        """Whether the kernel reads ahead in the CommitLog's mapped segments (RocketMQ's
        dataReadAheadEnable, set by SET_COMMITLOG_READ_MODE): ``madvise`` MADV_NORMAL when
        enabled, MADV_RANDOM (no read-ahead: random reads of old messages fetch only their
        pages) when not; segments mapped later get the same."""
        self._require_open()
        self.commit_log.files.set_read_advice(mmap.MADV_NORMAL if enabled else mmap.MADV_RANDOM)

    @property
    def commit_log_read_ahead(self) -> bool:
        """False once :meth:`set_commit_log_read_ahead` turned read-ahead off."""
        return self.commit_log.files.read_advice != mmap.MADV_RANDOM

    def clean_expired_queues(self, topics: Callable[[str], bool] | None = None,
                             ) -> list[tuple[str, int]]:
        """Delete the ConsumeQueues all of whose messages are gone from the CommitLog
        (RocketMQ's cleanExpiredConsumerQueue), of the topics ``topics`` accepts (default:
        all), never SCHEDULE_TOPIC_XXXX's delay levels; the (topic, queue id) pairs deleted.

        Their files go and a later message to such a queue starts again at offset 0. Since
        none of their records is left, no restart or repair can bring them back. A queue
        with a message not dispatched yet is kept (the next call takes it)."""
        self._require_open()
        self._prune_dropped()
        cl_min = self.commit_log.min_offset
        expired = [(cq.topic, cq.queue_id) for cq in self._queue_snapshot()
                   if cq.topic != SCHEDULE_TOPIC and 0 <= cq.max_physic_offset <= cl_min
                   and (topics is None or topics(cq.topic))]
        return [key for key in expired if self._drop_expired_queue(key, cl_min)]

    def _drop_expired_queue(self, key: tuple[str, int], cl_min: int) -> bool:
        """Forget an expired queue and delete its files; False when it changed meanwhile."""
        with self.commit_log.put_lock, self._queue_room_lock:
            cq = self._queues.get(key)
            if (cq is None or cq.max_physic_offset > cl_min
                    or self.commit_log.queue_offsets.get(key, cq.max_offset) != cq.max_offset):
                return False  # written to since, or a put not dispatched yet
            files = self._forget_queue(key, cq)
            self.commit_log.queue_offsets.pop(key, None)
        self._retire(files)
        log.info("deleted the ConsumeQueue of %s/%d: its messages (offsets %d to %d) are all "
                 "gone from the CommitLog", key[0], key[1], cq.min_offset, cq.max_offset)
        return True

    def delete_queues(self, topics: Callable[[str], bool]) -> list[tuple[str, int]]:
        """Delete every ConsumeQueue of the topics ``topics`` accepts, messages and all
        (RocketMQ's deleteTopics and cleanUnusedTopic), never SCHEDULE_TOPIC_XXXX's delay
        levels; the (topic, queue id) pairs deleted.

        A later message to such a queue starts it again at offset 0. The deleted queues'
        records stay in the CommitLog until retention removes them; ``config/droppedQueues.json``
        (written and synced before any file goes) marks them deleted so that no restart,
        ``verify``, ``repair`` or rebuild brings them back, and queries by key skip them.
        Raises ConfigError, deleting nothing, when that file cannot be written."""
        self._require_open()
        retired: list[MappedFile] = []
        # no entry is dispatched and no message put meanwhile: every record of these queues
        # so far lies before ``before``, every later one after it
        with self.dispatcher.lock, self.commit_log.put_lock, self._queue_room_lock:
            with self._queues_lock:  # queues dispatch has made, and those of puts not yet
                known = set(self._queues) | set(self.commit_log.queue_offsets)
            keys = sorted(k for k in known if k[0] != SCHEDULE_TOPIC and topics(k[0]))
            if not keys:
                return []
            before = max(self.commit_log.max_offset, self.raw_received)
            self._record_dropped(keys, before)
            for key in keys:
                cq = self._queues.get(key)
                if cq is not None:
                    retired += self._forget_queue(key, cq)
                else:  # files made ahead for the puts
                    self._queue_room.pop(key, None)
                    remove_queue_files(self.config.consume_queue_dir, *key)
                self.commit_log.queue_offsets.pop(key, None)
            for topic in {key[0] for key in keys}:  # else every topic ever written stays cached
                self.commit_log.topic_fields.pop(topic, None)
                self._topic_errors.pop(topic, None)
        self._retire(retired)
        log.info("deleted %d ConsumeQueue(s) of %s; their records before CommitLog offset %d "
                 "are skipped until retention removes them", len(keys),
                 ", ".join(sorted({k[0] for k in keys})), before)
        return keys

    def _restart_queue(self, topic: str, queue_id: int, first: int) -> ConsumeQueue:
        """The dispatcher's answer to a queue numbered from the start again at CommitLog
        offset ``first`` (its master deleted it): records before it are the old queue's."""
        key = (topic, queue_id)
        with self.dispatcher.lock, self._queue_room_lock:
            try:
                self._record_dropped([key], first)
            except ConfigError as exc:  # skipped all the same; a restart redoes this
                log.error("%s", exc)
            cq = self._queues.get(key)
            retired = self._forget_queue(key, cq) if cq is not None else []
        self._retire(retired)
        return self.find_consume_queue(topic, queue_id)

    def _record_dropped(self, keys: list[tuple[str, int]], before: int) -> None:
        """Mark the records of ``keys`` before ``before`` deleted, durably (ConfigError)."""
        previous = self.dropped.horizons
        self.dropped.add(keys, before)
        try:
            self.dropped.persist()
        except ConfigError:
            self.dropped.horizons = previous
            raise

    def _prune_dropped(self) -> None:
        """Forget dropped queues whose records retention has all removed."""
        if self.dropped.horizons and self.dropped.prune(self.commit_log.min_offset):
            try:
                self.dropped.persist()
            except ConfigError as exc:  # the old entries are harmless; the next prune retries
                log.warning("%s", exc)

    def _forget_queue(self, key: tuple[str, int], cq: ConsumeQueue) -> list[MappedFile]:
        """Take ``cq`` out of the store and delete its files (their mappings are returned
        for :meth:`_retire`). Called with the queue-room lock held."""
        with self._queues_lock:
            del self._queues[key]
        self._queue_room.pop(key, None)
        files = cq.files.detach_all()
        remove_queue_files(self.config.consume_queue_dir, *key)
        return files

    def _retire(self, files: list[MappedFile]) -> None:
        svc = self._clean_service
        if svc is not None:
            svc.retire_later(files)  # a flush or a reader may still be on them
        else:
            for mf in files:
                mf.close_descriptor()
                mf.unmap()

    def retention_stats(self) -> RetentionStats:
        """Files deleted so far, the last disk usage seen and whether writes are refused."""
        svc = self._clean_service
        return svc.stats() if svc is not None else RetentionStats()

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    def memory_area_bytes(self) -> int:
        """How far behind the CommitLog's end data still counts as in memory:
        accessMessageInMemoryMaxRatio percent of the machine's memory (RocketMQ's rule for how
        much a pull may carry)."""
        cfg = self.config
        return (cfg.total_physical_memory_bytes or _TOTAL_RAM) * cfg.access_message_in_memory_max_ratio // 100

    def in_memory_at(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the queue has a message at ``offset`` within :meth:`memory_area_bytes`."""
        entries = self.queue_entries(topic, queue_id, offset, 1)
        return bool(entries) and self.commit_log.max_offset - entries[0][0] <= self.memory_area_bytes()

    # -- cold data (RocketMQ 5's checkInColdAreaByCommitOffset) ---------------------------------
    def hot_area_bytes(self) -> int:
        """How far behind the CommitLog's end data still counts as hot (in the page cache):
        accessMessageInMemoryHotRatio percent of the machine's memory."""
        cfg = self.config
        return (cfg.total_physical_memory_bytes or _TOTAL_RAM) * cfg.access_message_in_memory_hot_ratio // 100

    def in_cold_area(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the message at a queue offset lies in the cold area (further than
        :meth:`hot_area_bytes` behind the CommitLog's end); False when there is none."""
        entries = self.queue_entries(topic, queue_id, offset, 1)
        if not entries:
            return False
        return self.commit_log.max_offset - entries[0][0] > self.hot_area_bytes()

    def cold_bytes(self, records: bytes | bytearray | memoryview) -> int:
        """Bytes of the records (back to back, as a pull's body) that lie in the cold area."""
        limit = self.commit_log.max_offset - self.hot_area_bytes()
        unpack, need = SIZE_AND_PHYSICAL_OFFSET.unpack_from, SIZE_AND_PHYSICAL_OFFSET.size
        pos, end = 0, len(records)
        while pos + need <= end:  # the records go up the CommitLog: the cold ones come first
            size, phys = unpack(records, pos)
            if size <= 0 or phys >= limit:
                break
            pos += size
        return min(pos, end)
