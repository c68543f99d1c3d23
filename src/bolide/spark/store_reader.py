"""The ``rocketmq-store`` PySpark data source: batch reads of a store's CommitLog files.

``spark.read.format("rocketmq-store").load("/path/to/store")`` reads the CommitLog segments of
a Bolide or RocketMQ store directory straight from disk, with the columns of the ``rocketmq``
source. Nothing is locked, recovered or written: each segment is mapped read-only, so the
directory may be a copy or the store of a running broker (then the read sees the records
written when each segment is scanned). Planning lists the segment files and cuts them, at
record starts found through the ConsumeQueue (:mod:`bolide.spark.store_splits`), into ranges of
at most ``maxPartitionBytes`` (128 MiB by default) and into at least ``minPartitions`` ranges
(by default the planning machine's CPU count, as Spark splits files over its cores); each input
partition is one range, decoded in an executor straight from the mapped bytes into Arrow columns
(:mod:`bolide.spark.record_columns`), a record at a time only where a record is uncommon
(compressed, IPv6, v2) or unreadable. Records of deleted topics' queues
(``config/droppedQueues.json``, :mod:`bolide.store.dropped_queues`) are left out.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition

from bolide.common.compression import decompress_message
from bolide.common.message import MessageExt
from bolide.common.records import decode_record
from bolide.errors import ConfigError
from bolide.spark.options import SparkOptionError
from bolide.spark.record_columns import RecordBuffer, Records
from bolide.spark.schema import project, to_record_batch
from bolide.spark.store_source import FORMAT, RocketMQStoreDataSource
from bolide.spark.store_splits import ReadRange, plan_ranges
from bolide.store.dropped_queues import load_dropped_queues
from bolide.store.record import RecordError, parse_record

__all__ = ["FORMAT", "RocketMQStoreDataSource", "StoreBatchReader", "read_range", "store_options"]

OPTIONS = {"path", "topic", "brokername", "mappedfilesizecommitlog", "readbatchsize",
           "maxpartitionbytes", "minpartitions", "startoffset", "endoffset"}
DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
DEFAULT_READ_BATCH = 65536  # rows per Arrow batch: fewer per-batch costs; CHUNK_BYTES caps it
_ZERO_END = "end of data (zero bytes)"
CHUNK_BYTES = 8 * 1024 * 1024  # the most record bytes decoded into one Arrow batch


@dataclass(frozen=True, slots=True)
class StoreOptions:
    commit_log_dir: str
    topics: frozenset[str]  # empty: every topic
    broker_name: str = "broker-a"
    segment_size: int | None = None
    read_batch_size: int = DEFAULT_READ_BATCH
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    min_partitions: int = 1
    start_offset: int = 0  # CommitLog offsets: only records starting in [start, end)
    end_offset: int | None = None
    # deleted queues (topic, queue id, CommitLog offset before which their records are
    # left out), from the store's config/droppedQueues.json
    deleted: tuple[tuple[str, int, int], ...] = ()

    def is_deleted(self, topic: str, queue_id: int, commit_log_offset: int) -> bool:
        return any(commit_log_offset < before and queue_id == qid and topic == name
                   for name, qid, before in self.deleted)


@dataclass(frozen=True, slots=True)
class Segment:
    """One CommitLog file; ``tail`` marks the last one holding data (a live store's end)."""

    path: str
    start: int
    tail: bool


def _option(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        return None
    return str(value).strip() or None


def _positive(options: Mapping[str, str], name: str) -> int | None:
    raw = _option(options, name)
    if raw is None:
        return None
    if not raw.isdecimal() or int(raw) <= 0:
        raise SparkOptionError(f"option {name} must be a positive integer, not {raw!r}")
    return int(raw)


def _offset(options: Mapping[str, str], name: str) -> int | None:
    raw = _option(options, name)
    if raw is None:
        return None
    if not raw.isdecimal():
        raise SparkOptionError(f"option {name} must be a CommitLog offset (an integer >= 0), "
                               f"not {raw!r}")
    return int(raw)


def store_options(options: Mapping[str, str]) -> StoreOptions:
    """Parse the options of ``spark.read.format("rocketmq-store")``."""
    unknown = sorted(k for k in options if k.lower() not in OPTIONS)
    if unknown:
        raise SparkOptionError(f"unknown rocketmq-store option(s) {', '.join(unknown)}: the options are "
                               "path, topic, brokerName, mappedFileSizeCommitLog, readBatchSize, "
                               "maxPartitionBytes, minPartitions, startOffset, endOffset")
    path = _option(options, "path")
    if path is None:
        raise SparkOptionError('the store directory is required: .load("/path/to/store") or '
                               '.option("path", "/path/to/store")')
    root = Path(path)
    commit_log = root / "commitlog" if (root / "commitlog").is_dir() else root
    if not commit_log.is_dir():
        raise SparkOptionError(f"{path} is not a directory: pass a store directory (the one holding "
                               "commitlog/) or a CommitLog directory")
    topics = frozenset(t.strip() for t in (_option(options, "topic") or "").split(",") if t.strip())
    return StoreOptions(str(commit_log), topics, _option(options, "brokerName") or "broker-a",
                        _positive(options, "mappedFileSizeCommitLog"),
                        _positive(options, "readBatchSize") or DEFAULT_READ_BATCH,
                        _positive(options, "maxPartitionBytes") or DEFAULT_MAX_PARTITION_BYTES,
                        _positive(options, "minPartitions") or os.cpu_count() or 1,
                        _offset(options, "startOffset") or 0, _offset(options, "endOffset"),
                        _deleted_queues(commit_log.parent))


def _deleted_queues(store_root: Path) -> tuple[tuple[str, int, int], ...]:
    """The store's deleted queues (none for a bare CommitLog directory)."""
    try:
        horizons = load_dropped_queues(store_root).horizons
    except ConfigError as exc:
        raise SparkOptionError(f"{exc}: restore config/droppedQueues.json from its .bak (`bolide "
                               "store repair` does)") from None
    return tuple(sorted((topic, qid, before) for (topic, qid), before in horizons.items()))


def plan_segments(opts: StoreOptions) -> list[Segment]:
    """The segments holding data, in order; checks their sizes and that none is missing."""
    files = sorted((int(p.name), p) for p in Path(opts.commit_log_dir).iterdir()
                   if p.is_file() and p.name.isdigit())
    used: list[tuple[int, Path]] = []
    for start, path in files:
        with open(path, "rb") as f:
            if f.read(8).strip(b"\0"):
                used.append((start, path))
    if not used:
        return []
    size = opts.segment_size or used[0][1].stat().st_size
    for i, (start, path) in enumerate(used):
        if start % size or path.stat().st_size != size:
            raise SparkOptionError(f"CommitLog file {path} ({path.stat().st_size} bytes) does not fit "
                                   f"segments of {size} bytes: set option mappedFileSizeCommitLog to "
                                   "the size the store was written with")
        if i and start != used[i - 1][0] + size:
            raise SparkOptionError(f"CommitLog segment {start - size:020d} is missing before "
                                   f"{start:020d} in {opts.commit_log_dir}: copy the whole directory")
    return [Segment(str(path), start, i == len(used) - 1) for i, (start, path) in enumerate(used)]


def scan_segment(seg: Segment, topics: frozenset[str] = frozenset()) -> Iterator[MessageExt]:
    """The messages of one segment, in order; stops at its BLANK tail or where data ends.

    An unreadable record ends the tail segment quietly (a live store's end, or a write cut
    short); in any earlier segment it is an error naming the file and position.
    """
    size = Path(seg.path).stat().st_size
    yield from scan_range(ReadRange(seg.path, seg.start, seg.start, seg.start + size, seg.tail),
                          topics)


def scan_range(rng: ReadRange, topics: frozenset[str] = frozenset(), lo: int = 0,
               hi: int | None = None) -> Iterator[MessageExt]:
    """The messages of the records starting in ``[rng.begin, rng.end)`` (``begin`` is a
    record start) and in ``[lo, hi)``; the rules of :func:`scan_segment` for where data ends."""
    with open(rng.path, "rb") as f:
        length = f.seek(0, 2)
        if length == 0:
            return
        with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ) as m:
            pos = rng.begin - rng.segment_start
            stop = min(rng.end - rng.segment_start, length)
            if hi is not None:
                stop = min(stop, hi - rng.segment_start)
            first = lo - rng.segment_start
            while pos < stop:
                info = parse_record(m, pos, False)
                if type(info) is RecordError:
                    if rng.tail or info.reason == _ZERO_END:
                        return
                    raise OSError(f"CommitLog file {rng.path}: unreadable record at byte {pos} "
                                  f"({info.reason}); check the store with `bolide store verify`")
                if info.size == 0:  # BLANK: the rest of the segment is unused
                    return
                if pos >= first and (not topics or info.topic in topics):
                    msg = decode_record(m, pos)
                    decompress_message(msg)
                    yield msg
                pos += info.size


def read_range(rng: ReadRange, opts: StoreOptions,
               columns: tuple[str, ...] | None = None) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of the records of ``rng`` (those :func:`scan_range` yields, same rows,
    same order, but those of deleted queues, ``opts.deleted``), at most
    ``opts.read_batch_size`` rows or about :data:`CHUNK_BYTES` each; only ``columns`` when
    given (see :func:`~bolide.spark.schema.projection`)."""
    with open(rng.path, "rb") as f:
        length = f.seek(0, 2)
        if length == 0:
            return
        mapped = mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ)
    # not closed here: Arrow views of the map may live until the last batch is released
    yield from _RangeDecoder(RecordBuffer(mapped), rng, opts, columns).batches()


class _RangeDecoder:
    """Columnar decoding of one read range, falling back to the per-record decoder."""

    def __init__(self, buf: RecordBuffer, rng: ReadRange, opts: StoreOptions,
                 columns: tuple[str, ...] | None) -> None:
        self.buf, self.rng, self.opts, self.columns = buf, rng, opts, columns
        base = rng.segment_start
        self.stop = min(rng.end - base, buf.size)
        if opts.end_offset is not None:
            self.stop = min(self.stop, opts.end_offset - base)
        self.first = opts.start_offset - base  # records before it are skipped
        self.topics = pa.array(sorted(opts.topics), pa.string()) if opts.topics else None
        self.slow: list[MessageExt] = []
        # a record at or past this offset belongs to no deleted queue
        self.deleted_below = max((d[2] for d in opts.deleted), default=0) - base

    def batches(self) -> Iterator[pa.RecordBatch]:
        pos = self.rng.begin - self.rng.segment_start
        limit = self.opts.read_batch_size
        while pos < self.stop:
            starts, _ = self.buf.walk(pos, min(self.stop, pos + CHUNK_BYTES), limit)
            fast = 0
            if len(starts):
                ok, recs = self.buf.classify(starts)
                fast = len(ok) if ok.all() else int(np.argmin(ok))  # the leading common records
            if fast:
                if self.slow:
                    yield self._flush()
                batch = self._decode(recs.select(slice(0, fast)))
                if batch is not None and batch.num_rows:
                    yield batch
                pos = int(starts[fast - 1] + recs.total[fast - 1])
                continue
            size = self._one_record(pos)
            if size <= 0:
                break
            pos += size
            if len(self.slow) >= limit:
                yield self._flush()
        if self.slow:
            yield self._flush()

    def _decode(self, recs: Records) -> pa.RecordBatch | None:
        """The rows of ``recs`` the options select; odd ones (text that is not UTF-8, a repeated
        property key) through the per-record decoder into ``self.slow``."""
        keep = recs.pos >= self.first
        if self.topics is not None:
            try:
                keep &= pc.is_in(self.buf.topics(recs), value_set=self.topics).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid:
                keep[:] = False
                for pos in recs.pos:
                    self._one_record(int(pos))
                return None
        if len(recs) and recs.pos[0] < self.deleted_below:
            keep &= ~self._deleted(recs)
        if not keep.all():
            recs = recs.select(keep)
        if not len(recs):
            return None
        batch = self.buf.decode(recs, self.opts.broker_name, columns=self.columns)
        if batch is None:
            for pos in recs.pos:
                self._one_record(int(pos))
        return batch

    def _deleted(self, recs: Records) -> np.ndarray:
        """Which of ``recs`` belong to deleted queues."""
        try:
            topics = self.buf.topics(recs)
        except pa.ArrowInvalid:  # a topic that is not UTF-8 is no deleted queue's
            return np.zeros(len(recs), np.bool_)
        phys = recs.pos + self.rng.segment_start
        out = np.zeros(len(recs), np.bool_)
        for topic, qid, before in self.opts.deleted:
            out |= (pc.equal(topics, topic).to_numpy(zero_copy_only=False)
                    & (recs.head["queue_id"] == qid) & (phys < before))
        return out

    def _one_record(self, pos: int) -> int:
        """Decode the record at ``pos`` into ``self.slow`` when selected; its size, or 0 where
        the data ends (as :func:`scan_range`: a BLANK, zeros, or a torn tail)."""
        info = parse_record(self.buf.mv, pos, False)
        if type(info) is RecordError:
            if self.rng.tail or info.reason == _ZERO_END:
                return 0
            raise OSError(f"CommitLog file {self.rng.path}: unreadable record at byte {pos} "
                          f"({info.reason}); check the store with `bolide store verify`")
        if info.size == 0:  # BLANK: the rest of the segment is unused
            return 0
        if (pos >= self.first and (not self.opts.topics or info.topic in self.opts.topics)
                and not self.opts.is_deleted(info.topic, info.queue_id,
                                             self.rng.segment_start + pos)):
            msg = decode_record(self.buf.mv, pos)
            decompress_message(msg)
            self.slow.append(msg)
        return info.size

    def _flush(self) -> pa.RecordBatch:
        batch, self.slow = to_record_batch(self.opts.broker_name, self.slow), []
        return project(batch, self.columns)


class SegmentPartition(InputPartition):
    """A range of one CommitLog segment, read by one Spark task."""

    def __init__(self, rng: ReadRange) -> None:
        super().__init__(rng)
        self.range = rng


class StoreBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq-store")``: one partition per range of a segment."""

    def __init__(self, opts: StoreOptions, columns: tuple[str, ...] | None = None) -> None:
        self.opts, self.columns = opts, columns

    def partitions(self) -> list[InputPartition]:
        segments = plan_segments(self.opts)
        if not segments:
            return []
        size = Path(segments[0].path).stat().st_size
        cq_dir = Path(self.opts.commit_log_dir).parent / "consumequeue"
        ranges = plan_ranges([(s.path, s.start, s.tail) for s in segments], size,
                             self.opts.max_partition_bytes, cq_dir, self.opts.min_partitions)
        lo, hi = self.opts.start_offset, self.opts.end_offset
        return [SegmentPartition(r) for r in ranges
                if r.end > lo and (hi is None or r.begin < hi)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rng = getattr(partition, "range", None)
        if rng is None:  # Spark's placeholder partition of an empty plan
            return
        yield from read_range(rng, self.opts, self.columns)
