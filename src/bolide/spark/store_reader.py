"""The ``rocketmq-store`` PySpark data source: batch reads of a store's CommitLog files.

``spark.read.format("rocketmq-store").load("/path/to/store")`` reads the CommitLog segments of
a Bolide or RocketMQ store directory straight from disk, with the columns of the ``rocketmq``
source. Nothing is locked, recovered or written: each segment is mapped read-only, so the
directory may be a copy or the store of a running broker (then the read sees the records
written when each segment is scanned). Planning only lists the segment files; each input
partition is one segment, scanned record by record in an executor.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from bolide.client.pulling import decompress
from bolide.common.message import MessageExt
from bolide.common.records import decode_record
from bolide.spark.options import SparkOptionError
from bolide.spark.schema import spark_schema, to_record_batch
from bolide.store.record import RecordError, parse_record

FORMAT = "rocketmq-store"
OPTIONS = {"path", "topic", "brokername", "mappedfilesizecommitlog", "readbatchsize"}
_ZERO_END = "end of data (zero bytes)"


@dataclass(frozen=True, slots=True)
class StoreOptions:
    commit_log_dir: str
    topics: frozenset[str]  # empty: every topic
    broker_name: str = "broker-a"
    segment_size: int | None = None
    read_batch_size: int = 1024


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


def store_options(options: Mapping[str, str]) -> StoreOptions:
    """Parse the options of ``spark.read.format("rocketmq-store")``."""
    unknown = sorted(k for k in options if k.lower() not in OPTIONS)
    if unknown:
        raise SparkOptionError(f"unknown rocketmq-store option(s) {', '.join(unknown)}: the options are "
                               "path, topic, brokerName, mappedFileSizeCommitLog, readBatchSize")
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
                        _positive(options, "readBatchSize") or 1024)


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
    with open(seg.path, "rb") as f:
        length = f.seek(0, 2)
        if length == 0:
            return
        with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ) as m:
            pos = 0
            while True:
                info = parse_record(m, pos, False)
                if type(info) is RecordError:
                    if seg.tail or info.reason == _ZERO_END:
                        return
                    raise OSError(f"CommitLog file {seg.path}: unreadable record at byte {pos} "
                                  f"({info.reason}); check the store with `bolide store verify`")
                if info.size == 0:  # BLANK: the rest of the segment is unused
                    return
                if not topics or info.topic in topics:
                    msg = decode_record(m, pos)
                    decompress(msg)
                    yield msg
                pos += info.size


class SegmentPartition(InputPartition):
    """One CommitLog segment, read by one Spark task."""

    def __init__(self, segment: Segment) -> None:
        super().__init__(segment)
        self.segment = segment


class StoreBatchReader(DataSourceReader):
    """``spark.read.format("rocketmq-store")``: one partition per segment holding data."""

    def __init__(self, opts: StoreOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return [SegmentPartition(s) for s in plan_segments(self.opts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        segment = getattr(partition, "segment", None)
        if segment is None:  # Spark's placeholder partition of an empty plan
            return
        batch: list[MessageExt] = []
        for msg in scan_segment(segment, self.opts.topics):
            batch.append(msg)
            if len(batch) >= self.opts.read_batch_size:
                yield to_record_batch(self.opts.broker_name, batch)
                batch = []
        if batch:
            yield to_record_batch(self.opts.broker_name, batch)


class RocketMQStoreDataSource(DataSource):
    """``spark.read.format("rocketmq-store").load(store_dir)``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return StoreBatchReader(store_options(self.options))
