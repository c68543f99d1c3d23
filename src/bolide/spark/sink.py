"""``df.write.format("rocketmq")`` and ``writeStream``: each Spark task sends its rows with the
blocking Producer, in batches (SEND_BATCH_MESSAGE) per topic and queue, several batches in
flight (one at a time for a given ``queueId``, which keeps their order).

Input columns: ``body`` (binary or string, required) and optional ``topic``, ``tags``,
``keys``, ``properties`` (map<string,string>), ``queueId`` (int) and ``dedupeKey`` (string);
other columns are ignored. Delivery is at-least-once: a task Spark retries sends its rows
again. A ``dedupeKey`` becomes the message's client id (UNIQ_KEY, the ``msgId`` consumers
see), so the copies of a resent row share one id a consumer can deduplicate on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, LongType, MapType, StringType, StructType

from bolide.spark.options import SparkOptionError, WriteOptions, write_options

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

OPTIONAL_COLUMNS = {
    "topic": (StringType,),
    "tags": (StringType,),
    "keys": (StringType,),
    "properties": (MapType,),
    "queueId": (IntegerType, LongType),
    "dedupeKey": (StringType,),
}


@dataclass
class SentMessages(WriterCommitMessage):
    """What one task sent: messages per topic."""

    partition_id: int
    count: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)


def check_schema(schema: StructType, opts: WriteOptions) -> None:
    """Refuse input a write cannot turn into messages, naming the column to fix."""
    types = {f.name: f.dataType for f in schema.fields}
    if "body" not in types:
        raise SparkOptionError("writing to rocketmq needs a column body (binary or string): "
                               "select one, e.g. df.selectExpr('CAST(value AS BINARY) AS body')")
    if not isinstance(types["body"], BinaryType | StringType):
        raise SparkOptionError(f"column body is {types['body'].simpleString()}: cast it to binary or string")
    for name, allowed in OPTIONAL_COLUMNS.items():
        if name in types and not isinstance(types[name], allowed):
            want = " or ".join(t.__name__.removesuffix("Type").lower() for t in allowed)
            raise SparkOptionError(f"column {name} is {types[name].simpleString()}: cast it to {want}")
    if opts.topic is None and "topic" not in types:
        raise SparkOptionError('writing to rocketmq needs a topic: .option("topic", "T") or a topic column')


def _send(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> SentMessages:
    """A task's rows sent (in an executor). The client is imported here: Spark also imports
    this module where writes are only planned and committed."""
    from bolide.spark.sink_sender import TaskSender

    return TaskSender(opts).write(batches)


class RocketMQWriter(DataSourceArrowWriter):
    """Batch writes (``mode("append")``): at-least-once."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = write_options(options)
        check_schema(schema, self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        return _send(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.count for m in messages if isinstance(m, SentMessages))
        log.info("rocketmq write committed: %d messages from %d tasks", total, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.count for m in messages if isinstance(m, SentMessages))
        log.warning("rocketmq write aborted: %d messages sent by the tasks that finished stay in "
                    "their topics (at-least-once)", sent)


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream`` (append or complete mode): at-least-once; a replayed micro-batch sends
    its rows again."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = write_options(options)
        check_schema(schema, self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        return _send(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.count for m in messages if isinstance(m, SentMessages))
        log.info("rocketmq stream write of batch %d committed: %d messages", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("rocketmq stream write of batch %d aborted: messages already sent stay "
                    "(at-least-once)", batchId)
