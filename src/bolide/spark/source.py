"""The ``rocketmq`` PySpark data source: batch reads, streaming reads and (in sink.py) writes.

Planning (queues, bounds, offsets) runs on the driver; each input partition is one
:class:`QueueRange` that ``read()`` fetches in an executor with the blocking Admin client and
yields as Arrow record batches. Streaming offsets are ``{"topic": {"broker": {"queueId": next}}}``
in a fixed key order; the checkpoint is the truth, a consumer group only mirrors it for lag.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from bolide.spark import offsets as O
from bolide.spark.message_source import MessageSource
from bolide.spark.options import EARLIEST, LATEST, ReadOptions, SparkOptionError, read_options
from bolide.spark.schema import projection

if TYPE_CHECKING:
    import pyarrow as pa

    from bolide.spark.cluster import Cluster, GroupCommitter

log = logging.getLogger(__name__)

FORMAT = "rocketmq"


def _cluster(opts: ReadOptions) -> Cluster:
    """The brokers of ``opts``. The client is imported here, where a broker is called: Spark also
    imports this module in processes that only look the source up or build it."""
    from bolide.spark.cluster import Cluster

    return Cluster(opts.nameserver, opts.timeout_ms)


class RocketMQDataSource(MessageSource):
    """``spark.read.format("rocketmq")``, ``readStream``, ``write`` and ``writeStream``."""

    FORMAT = FORMAT

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketMQBatchReader(read_options(self.options, streaming=False), projection(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RocketMQStreamReader(read_options(self.options, streaming=True), projection(schema))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from bolide.spark.sink import RocketMQWriter

        return RocketMQWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from bolide.spark.sink import RocketMQStreamWriter

        return RocketMQStreamWriter(self.options, schema)


class RangePartition(InputPartition):
    """One queue range, read by one Spark task."""

    def __init__(self, part: O.QueueRange) -> None:
        super().__init__(part)
        self.part = part


def read_partition(opts: ReadOptions, partition: InputPartition,
                   columns: tuple[str, ...] | None = None) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one partition (nothing for Spark's placeholder of an empty plan),
    only ``columns`` when given (see :func:`~bolide.spark.schema.projection`)."""
    part = getattr(partition, "part", None)
    if part is None or part.size == 0:
        return
    with _cluster(opts) as cluster:
        yield from cluster.read_batches(part, expression=opts.expression,
                                        batch_size=opts.read_batch_size,
                                        pull_batch=opts.pull_batch_size,
                                        fail_on_data_loss=opts.fail_on_data_loss, columns=columns)


def _check_order(start: O.Offsets, end: O.Offsets, what: str) -> None:
    for key in sorted(end):
        if key in start and start[key] > end[key]:
            raise SparkOptionError(f"{what}: queue {O.queue_name(key)} would start at {start[key]} "
                                   f"after its end {end[key]}: check startingOffsets/startingTimestamp "
                                   "against endingOffsets/endingTimestamp")


class RocketMQBatchReader(DataSourceReader):
    """``spark.read``: the ranges are fixed when the query is planned."""

    def __init__(self, opts: ReadOptions, columns: tuple[str, ...] | None = None) -> None:
        self.opts, self.columns = opts, columns

    def plan(self) -> list[O.QueueRange]:
        opts = self.opts
        with _cluster(opts) as cluster:
            keys = cluster.queues(opts.topics)
            bounds = cluster.bounds(keys)
            O.check_known_queues(opts.starting, bounds, "startingOffsets")
            O.check_known_queues(opts.ending, bounds, "endingOffsets")
            if opts.starting_timestamp is not None:
                start = cluster.offsets_for_time(keys, opts.starting_timestamp)
            else:
                start = O.resolve(opts.starting, bounds, missing=EARLIEST)
            if opts.ending_timestamp is not None:
                end = cluster.offsets_for_time(keys, opts.ending_timestamp)
            else:
                end = O.resolve(opts.ending, bounds, missing=LATEST)
        end = {k: min(e, bounds[k][1]) for k, e in end.items()}
        start = {k: O.clamp_start(k, s, bounds[k][0], fail_on_data_loss=opts.fail_on_data_loss)
                 if s < end[k] else s for k, s in start.items()}
        _check_order(start, end, "batch read")
        return O.split(O.ranges(start, end), opts.min_partitions)

    def partitions(self) -> list[InputPartition]:
        return [RangePartition(p) for p in self.plan()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.opts, partition, self.columns)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``; one instance lives in the driver's runner process for the query,
    another (from planning) serves ``read()`` in executors."""

    def __init__(self, opts: ReadOptions, columns: tuple[str, ...] | None = None) -> None:
        self.opts, self.columns = opts, columns
        self._frozen: O.Offsets | None = None  # Trigger.AvailableNow's target
        self._waiting_since: float | None = None  # minOffsetsPerTrigger: first refusal
        self._committer: GroupCommitter | None = None

    # -- offsets ------------------------------------------------------------------------------
    def _bounds(self) -> O.Bounds:
        with _cluster(self.opts) as cluster:
            return cluster.bounds(cluster.queues(self.opts.topics))

    def initialOffset(self) -> dict[str, Any]:
        opts = self.opts
        with _cluster(opts) as cluster:
            keys = cluster.queues(opts.topics)
            bounds = cluster.bounds(keys)
            O.check_known_queues(opts.starting, bounds, "startingOffsets")
            if opts.starting_timestamp is not None:
                start = cluster.offsets_for_time(keys, opts.starting_timestamp)
            else:
                start = O.resolve(opts.starting, bounds, missing=LATEST)
        start = {k: min(max(s, bounds[k][0]), bounds[k][1]) for k, s in start.items()}
        return O.to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._frozen = {k: high for k, (_, high) in self._bounds().items()}

    def latestOffset(self, start: dict[str, Any] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, Any]:
        begin = O.from_json(start or {})
        bounds = self._bounds()
        latest = {k: high for k, (_, high) in bounds.items()}
        if self._frozen is not None:
            latest = {k: min(v, self._frozen.get(k, bounds[k][0])) for k, v in latest.items()}
        begin = {k: begin.get(k, bounds[k][0]) for k in latest} | begin
        latest = {k: max(v, begin[k]) for k, v in latest.items()}
        if isinstance(limit, ReadAllAvailable):
            return O.to_json(begin | latest)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.opts.max_offsets_per_trigger
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.opts.min_offsets_per_trigger
        if min_rows and self._frozen is None and not self._min_reached(O.backlog(begin, latest), min_rows):
            return O.to_json(begin)
        if max_rows:
            latest = O.rate_limit(begin, latest, max_rows)
        return O.to_json(begin | latest)

    def _min_reached(self, available: int, min_rows: int) -> bool:
        """minOffsetsPerTrigger, until maxTriggerDelay has passed since the first wait."""
        if available >= min_rows or available == 0:
            self._waiting_since = None
            return available > 0
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
        if (now - self._waiting_since) * 1000 >= self.opts.max_trigger_delay_ms:
            self._waiting_since = None
            return True
        return False

    # -- batches ------------------------------------------------------------------------------
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin, stop = O.from_json(start), O.from_json(end)
        if begin == stop:
            return []
        bounds = self._bounds()
        begin = {k: begin.get(k, bounds.get(k, (0, 0))[0]) for k in stop} | begin
        begin = {k: O.clamp_start(k, s, bounds[k][0], fail_on_data_loss=self.opts.fail_on_data_loss)
                 if k in bounds and k in stop and s < stop[k] else s for k, s in begin.items()}
        return [RangePartition(p) for p in O.split(O.ranges(begin, stop), self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.opts, partition, self.columns)

    def commit(self, end: dict[str, Any]) -> None:
        """Mirror the checkpointed offsets to ``consumerGroup`` (best effort: lag only)."""
        if not self.opts.consumer_group:
            return
        try:
            if self._committer is None:
                from bolide.spark.cluster import GroupCommitter

                self._committer = GroupCommitter(self.opts.nameserver, self.opts.consumer_group)
            self._committer.commit(O.from_json(end))
        except Exception as exc:
            log.warning("committing offsets of consumer group %s failed (%s); the checkpoint "
                        "still holds them", self.opts.consumer_group, exc)

    def stop(self) -> None:
        if self._committer is not None:
            self._committer.close()
            self._committer = None

