"""Rebuild a store's ConsumeQueue and index files from its CommitLog, on Spark.

For a store that lost ``consumequeue/`` or ``index/`` (or both): Spark tasks scan the CommitLog
segments in parallel (one task per segment, planned by the ``rocketmq-store`` source's
:func:`~bolide.spark.store_reader.plan_segments`) with the parser the store's dispatcher uses,
giving one :class:`DispatchRow` per record (topic, queueId, queueOffset, commitLogOffset,
size, tagsCode, keys, uniqKey, storeTimestamp). The rows are grouped by (topic, queueId),
sorted in CommitLog order, and executors write each queue's files through the store's own
:class:`~bolide.store.consume_queue.ConsumeQueue`: the files dispatch would have written, byte
for byte (mapped-file sized, named by start offset). The index files are built on the driver
in CommitLog order by the store's own :class:`~bolide.store.index_service.IndexService`
(index files are sequential by nature). Last, the ``checkpoint`` gets the ConsumeQueue and
index timestamps, so the store opens on the new files without rebuilding them again, even
after an unclean exit.

As in dispatch, transaction PREPARED and ROLLBACK records get no ConsumeQueue entry,
ROLLBACK records are not indexed, and ``SCHEDULE_TOPIC_XXXX`` entries carry the delivery time
as tags code. The store directory must be at the same path for the driver and every executor
(``local[*]``, or a shared file system).

Example::

    from bolide.spark.jobs.rebuild_index import rebuild_index
    from bolide.store import StoreConfig

    result = rebuild_index(spark, "/data/store",
                           config=StoreConfig.from_properties("broker.conf"), force=True)
    print(result.queue_entries, result.index_files)

The files are written to a scratch directory under the store and moved in place when
complete: a failed run leaves the store as it was.
"""

from __future__ import annotations

import mmap
import shutil
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from bolide.common import sysflag
from bolide.common.config_persist import sync_dir
from bolide.errors import ConfigError, StoreError, StoreLockedError
from bolide.spark.options import SparkOptionError
from bolide.spark.store_reader import Segment, plan_segments, store_options
from bolide.store.checkpoint import Checkpoint, StoreLock, is_locked_by_other_process
from bolide.store.config import StoreConfig
from bolide.store.consume_queue import ConsumeQueue
from bolide.store.delay import parse_delay_levels
from bolide.store.dropped_queues import load_dropped_queues
from bolide.store.index_service import IndexService
from bolide.store.record import RecordError, RecordInfo, compute_tags_code, parse_record, property_bytes

SCRATCH = ".rebuild-index.tmp"  # under the store root; removed at the end
_ZERO_END = "end of data (zero bytes)"
_KEYS = b"KEYS\x01"
_UNIQ = b"UNIQ_KEY\x01"


class RebuildRefused(StoreError):
    """The rebuild cannot run on this store now; the message says what to do first."""


@dataclass(frozen=True, slots=True)
class RebuildResult:
    """What :func:`rebuild_index` wrote."""

    store_dir: str
    segments: int  # CommitLog segments scanned
    records: int  # records found in them
    no_queue_entry: int  # records dispatch gives no ConsumeQueue entry (transaction
    # half/rollback, deleted queues)
    queues: int  # (topic, queueId) pairs written
    queue_entries: int
    queue_files: int
    rejected_entries: int  # records ConsumeQueue.put refused (duplicate or out of order)
    index_files: int
    index_entries: int
    logics_msg_timestamp: int  # what the checkpoint now holds (0: unchanged)
    index_msg_timestamp: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- executors: scan ------------------------------------------------------------------------------
def scan_dispatch(seg: Segment) -> Iterator[RecordInfo]:
    """The records of one segment as the dispatcher parses them (no body CRC check), as
    :class:`~bolide.store.record.RecordInfo`: the raw properties, where the first TAGS, KEYS
    and UNIQ_KEY count as in dispatch (``scan_segment`` decodes whole messages instead).

    Where data ends follows :func:`~bolide.spark.store_reader.scan_segment`: the segment ends at its BLANK
    record; an unreadable record ends the tail segment quietly (where writing stopped) and
    is an error in any earlier one. A record whose PHYSICALOFFSET is not its position counts
    as unreadable, as recovery treats it.
    """
    with open(seg.path, "rb") as f:
        length = f.seek(0, 2)
        if length == 0:
            return
        with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ) as m:
            pos = 0
            while True:
                info = parse_record(m, pos, False)
                if type(info) is RecordInfo and info.size == 0:  # BLANK: the rest is unused
                    return
                if type(info) is RecordError or info.commit_log_offset != seg.start + pos:
                    reason = (info.reason if type(info) is RecordError
                              else f"PHYSICALOFFSET {info.commit_log_offset} is not its position")
                    if seg.tail or reason == _ZERO_END:
                        return
                    raise OSError(f"CommitLog file {seg.path}: unreadable record at byte {pos} "
                                  f"({reason}); check the store with `bolide store verify`")
                yield info
                pos += info.size


class DispatchRow(NamedTuple):
    """What dispatch derives from one CommitLog record."""

    topic: str
    queueId: int  # column names as in the Spark sources
    queueOffset: int
    commitLogOffset: int
    size: int
    tagsCode: int
    keys: str | None
    uniqKey: str | None
    storeTimestamp: int
    sysFlag: int
    consumeQueue: bool  # gets a ConsumeQueue entry


def _text(raw: bytes | None) -> str | None:
    return raw.decode("utf-8", "replace") if raw else None


def dispatch_row(info: RecordInfo, delay_millis: dict[int, int],
                 deleted: dict[tuple[str, int], int] | None = None) -> DispatchRow:
    """The :class:`DispatchRow` of a record, its tags code computed as dispatch does; a
    record of a ``deleted`` queue (before its offset) gets no ConsumeQueue entry."""
    props = info.properties
    entry = sysflag.gets_queue_entry(info.sys_flag) and not (
        deleted and info.commit_log_offset < deleted.get((info.topic, info.queue_id), -1))
    return DispatchRow(info.topic, info.queue_id, info.queue_offset, info.commit_log_offset, info.size,
                       compute_tags_code(info, delay_millis), _text(property_bytes(props, _KEYS)),
                       _text(property_bytes(props, _UNIQ)), info.store_timestamp, info.sys_flag,
                       entry)


def scan_rows(delay_millis: dict[int, int], deleted: dict[tuple[str, int], int],
              seg: Segment) -> Iterator[DispatchRow]:
    """The rows of one segment (a Spark task)."""
    for info in scan_dispatch(seg):
        yield dispatch_row(info, delay_millis, deleted)


# -- executors: ConsumeQueue files ----------------------------------------------------------------
class _QueueWriter:
    """Entries of one (topic, queueId), appended in CommitLog order."""

    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int) -> None:
        self.cq = ConsumeQueue(root, topic, queue_id, file_size)
        self.written = self.rejected = 0
        self.last_phys = -1
        self.last_ts = 0

    def put(self, phys: int, size: int, tags_code: int, queue_offset: int, store_ts: int) -> None:
        if self.cq.put(phys, size, tags_code, queue_offset):
            self.written += 1
            self.last_phys, self.last_ts = phys, store_ts
        else:
            self.rejected += 1

    def finish(self) -> tuple[str, int, int, int, int, int, int]:
        cq = self.cq
        try:
            cq.flush()
            files = len(cq.files.files)
        finally:
            cq.close()
        return (cq.topic, cq.queue_id, self.written, self.rejected, files, self.last_phys, self.last_ts)


def write_queues(root: str, file_size: int, rows: Iterator[Any]
                 ) -> Iterator[tuple[str, int, int, int, int, int, int]]:
    """Write the ConsumeQueues of a partition sorted by (topic, queueId, commitLogOffset);
    yields (topic, queueId, entries, rejected, files, last offset, its store time) per queue."""
    writer: _QueueWriter | None = None
    try:
        for r in rows:
            if writer is None or writer.cq.topic != r.topic or writer.cq.queue_id != r.queueId:
                if writer is not None:
                    done, writer = writer, None
                    yield done.finish()
                writer = _QueueWriter(Path(root), r.topic, r.queueId, file_size)
            writer.put(r.commitLogOffset, r.size, r.tagsCode, r.queueOffset, r.storeTimestamp)
        if writer is not None:
            done, writer = writer, None
            yield done.finish()
    finally:
        if writer is not None:
            writer.cq.close()


def _gets_entry(row: DispatchRow) -> bool:
    return row.consumeQueue


def _has_keys(row: DispatchRow) -> bool:
    return bool(row.keys or row.uniqKey)


def _by_queue(row: DispatchRow) -> tuple[tuple[str, int, int], DispatchRow]:
    return (row.topic, row.queueId, row.commitLogOffset), row


def _queue_partition(parts: int, key: tuple[str, int, int]) -> int:
    """Partition of a (topic, queueId, offset) key: by queue, stable across processes."""
    return zlib.crc32(f"{key[0]}\0{key[1]}".encode()) % parts


# -- driver ---------------------------------------------------------------------------------------
def _holds_files(directory: Path) -> int:
    return sum(1 for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else 0


def _lock(root: Path) -> StoreLock:
    """The store's lock, taken for the whole rebuild; refused while a broker holds it."""
    if is_locked_by_other_process(root):
        raise RebuildRefused(f"the store at {root} is locked by a running process (a broker?): stop "
                             "it first; the ConsumeQueue and index files are rebuilt only on a store "
                             "nobody has open")
    lock = StoreLock(root)
    try:
        lock.acquire()
    except StoreLockedError as exc:
        raise RebuildRefused(f"{exc}; the ConsumeQueue and index files are rebuilt only on a "
                             "store nobody has open") from None
    return lock


def _segments(cfg: StoreConfig, sized: bool) -> list[Segment]:
    """The CommitLog segments holding data (sizes checked, none missing)."""
    options = {"path": str(cfg.commit_log_dir)}
    if sized:
        options["mappedfilesizecommitlog"] = str(cfg.mapped_file_size_commit_log)
    try:
        return plan_segments(store_options(options))
    except SparkOptionError as exc:
        raise RebuildRefused(f"{exc} (here: pass config= with the store's "
                             "mappedFileSizeCommitLog)") from None


def _replace(built: Path, target: Path) -> None:
    """Move ``built`` to ``target``, removing what ``target`` held."""
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    built.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _index_info(row: DispatchRow) -> tuple[RecordInfo, int]:
    """The record as the index hook reads it (just the properties it uses), and the number
    of entries it makes."""
    props = b""
    count = 0
    if row.uniqKey:
        props += _UNIQ + row.uniqKey.encode() + b"\x02"
        count += 1
    if row.keys:
        props += _KEYS + row.keys.encode() + b"\x02"
        count += sum(1 for k in row.keys.split(" ") if k)
    if row.sysFlag & sysflag.TRANSACTION_MASK == sysflag.TRANSACTION_ROLLBACK_TYPE:
        count = 0
    return RecordInfo(row.size, row.topic, row.queueId, row.queueOffset, row.commitLogOffset,
                      row.sysFlag, row.storeTimestamp, props, 0), count


def _build_index(rows: Iterable[DispatchRow], index_dir: Path, cfg: StoreConfig) -> tuple[int, int, int]:
    """Index ``rows`` (in CommitLog order); returns (files, entries, last end timestamp)."""
    index_dir.mkdir(parents=True)
    scratch = Checkpoint(index_dir.parent / "checkpoint")  # a roll writes to it: not the store's
    service = IndexService(index_dir, cfg.max_hash_slot_num, cfg.max_index_num, scratch,
                           cfg.max_msgs_num_batch)
    expected = 0
    try:
        for row in rows:
            info, count = _index_info(row)
            service.build(info)
            expected += count
        files = list(service.files)
        entries = sum(max(0, f.index_count - 1) for f in files)
        end_ts = files[-1].end_timestamp if files else 0
    finally:
        service.close()
        scratch.close()
    if entries != expected:  # build() logs and skips what it cannot write
        raise StoreError(f"the index holds {entries} of {expected} keys: {index_dir} could not be "
                         "written whole (is the disk full?); free space and run again")
    return len(files), entries, end_ts


def rebuild_index(spark: Any, store_dir: str | Path, *, consume_queue: bool = True, index: bool = True,
                  force: bool = False, config: StoreConfig | None = None) -> RebuildResult:
    """Rebuild ``store_dir``'s ConsumeQueue files and/or index files from its CommitLog.

    ``config`` gives the geometry the store was written with (``mappedFileSizeConsumeQueue``,
    ``maxHashSlotNum``, ``maxIndexNum``, ``messageDelayLevel``, ``mappedFileSizeCommitLog``,
    ``storePathCommitLog``); RocketMQ's defaults otherwise (the CommitLog segment size is then
    read off the files). Refused with :class:`RebuildRefused` while a process holds the store's
    lock (it is held here until the end), and when ``consumequeue/`` or ``index/`` already holds
    files, unless ``force``: then they are replaced once the new ones are complete.
    """
    if not consume_queue and not index:
        raise ValueError("nothing to rebuild: pass consume_queue=True and/or index=True")
    cfg = (config or StoreConfig()).replace(store_path_root_dir=str(store_dir))
    root = cfg.root
    if not cfg.commit_log_dir.is_dir():
        raise RebuildRefused(f"{cfg.commit_log_dir} is not a directory: pass the store directory "
                             "(the one holding commitlog/)")
    delay_millis = parse_delay_levels(cfg.message_delay_level)
    lock = _lock(root)
    try:  # records of deleted topics' queues get no entry (bolide.store.dropped_queues)
        deleted = load_dropped_queues(root).horizons
    except ConfigError as exc:
        lock.release()
        raise RebuildRefused(f"{exc}: restore config/droppedQueues.json from its .bak, or "
                             "`bolide store repair` does") from None
    scratch = root / SCRATCH
    try:
        targets = ([cfg.consume_queue_dir] if consume_queue else []) + ([cfg.index_dir] if index else [])
        for target in targets:
            if not force and (n := _holds_files(target)):
                raise RebuildRefused(f"{target} already holds {n} file(s): pass force=True to "
                                     "replace them, or move them away first")
        segments = _segments(cfg, config is not None)
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        sc = spark.sparkContext
        records = sc.parallelize(segments, max(1, len(segments))).flatMap(
            partial(scan_rows, delay_millis, deleted)).persist()
        try:
            counts = records.map(_gets_entry).countByValue()
            queues: list[tuple[str, int, int, int, int, int, int]] = []
            if consume_queue:
                parts = max(1, sc.defaultParallelism)
                queues = (records.filter(_gets_entry).map(_by_queue)
                          .repartitionAndSortWithinPartitions(parts, partial(_queue_partition, parts))
                          .values()
                          .mapPartitions(partial(write_queues, str(scratch / "consumequeue"),
                                                 cfg.mapped_file_size_consume_queue))
                          .collect())
                (scratch / "consumequeue").mkdir(exist_ok=True)
            index_files = index_entries = index_ts = 0
            if index:  # partitions are segments in order: CommitLog order without a sort
                index_files, index_entries, index_ts = _build_index(
                    records.filter(_has_keys).toLocalIterator(), scratch / "index", cfg)
        finally:
            records.unpersist()
        if consume_queue:
            _replace(scratch / "consumequeue", cfg.consume_queue_dir)
        if index:
            _replace(scratch / "index", cfg.index_dir)
        sync_dir(root)
        logics_ts = max(queues, key=lambda q: q[5])[6] if queues else 0
        checkpoint = Checkpoint(root / "checkpoint")
        try:
            if logics_ts:
                checkpoint.logics_msg_timestamp = logics_ts
            if index_ts:
                checkpoint.index_msg_timestamp = index_ts
            checkpoint.flush()
        finally:
            checkpoint.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        lock.release()
    return RebuildResult(
        store_dir=str(root), segments=len(segments), records=sum(counts.values()),
        no_queue_entry=counts.get(False, 0), queues=len(queues),
        queue_entries=sum(q[2] for q in queues), queue_files=sum(q[4] for q in queues),
        rejected_entries=sum(q[3] for q in queues), index_files=index_files,
        index_entries=index_entries, logics_msg_timestamp=logics_ts, index_msg_timestamp=index_ts)
