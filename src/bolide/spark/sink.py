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
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, LongType, MapType, StringType, StructType

from bolide.client import Message, MessageQueue
from bolide.client.blocking import Producer
from bolide.common import properties as P
from bolide.spark.options import SparkOptionError, WriteOptions, write_options

log = logging.getLogger(__name__)

OPTIONAL_COLUMNS = {
    "topic": (StringType,),
    "tags": (StringType,),
    "keys": (StringType,),
    "properties": (MapType,),
    "queueId": (IntegerType, LongType),
    "dedupeKey": (StringType,),
}
MAX_BATCH_BYTES = 1024 * 1024
MAX_IN_FLIGHT = 4  # batches a task has sent and not yet seen answered


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


def _rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
    names = [n for n in batch.schema.names if n == "body" or n in OPTIONAL_COLUMNS]
    columns = {n: batch.column(n).to_pylist() for n in names}
    for i in range(batch.num_rows):
        yield {n: columns[n][i] for n in names}


def to_message(row: Mapping[str, Any], default_topic: str | None) -> Message:
    """The message of one input row (the topic option wins over the column, as in Kafka)."""
    topic = default_topic or row.get("topic")
    if not topic:
        raise SparkOptionError("a row has no topic: set option topic, or fill the topic column")
    body = row["body"]
    if body is None:
        raise SparkOptionError(f"a row for topic {topic!r} has a null body: filter or fill such rows")
    props = dict(row.get("properties") or ())
    msg = Message(topic, body.encode() if isinstance(body, str) else bytes(body),
                  tags=row.get("tags"), keys=row.get("keys"), properties=props)
    if row.get("dedupeKey"):
        msg.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = row["dedupeKey"]
    return msg


class _Sender:
    """Batches messages per (topic, queueId) and sends them with one producer."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.producer = Producer(opts.nameserver, group=opts.producer_group,
                                 send_timeout_ms=opts.send_timeout_ms, retry_times=opts.retry_times)
        self.pending: dict[tuple[str, int | None], list[Message]] = {}
        self.pending_bytes: dict[tuple[str, int | None], int] = {}
        self.queues: dict[str, list[MessageQueue]] = {}
        self.sent = SentMessages(_partition_id())
        self.in_flight: deque[tuple[Future[Any], tuple[str, int | None], int]] = deque()

    def add(self, msg: Message, queue_id: int | None) -> None:
        key = (msg.topic, queue_id)
        self.pending.setdefault(key, []).append(msg)
        self.pending_bytes[key] = self.pending_bytes.get(key, 0) + len(msg.body)
        if len(self.pending[key]) >= self.opts.batch_size or self.pending_bytes[key] >= MAX_BATCH_BYTES:
            self.flush(key)

    def _queue(self, topic: str, queue_id: int) -> MessageQueue:
        if topic not in self.queues:
            self.queues[topic] = sorted(self.producer.publish_queues(topic),
                                        key=lambda q: (q.broker_name, q.queue_id))
        for mq in self.queues[topic]:
            if mq.queue_id == queue_id:
                return mq
        raise SparkOptionError(f"topic {topic!r} has no writable queue {queue_id}: its queue ids are "
                               f"{sorted({q.queue_id for q in self.queues[topic]})}")

    def flush(self, key: tuple[str, int | None]) -> None:
        """Send the pending messages of ``key`` in the background: up to
        :data:`MAX_IN_FLIGHT` batches at once, one at a time per given queue id (its order)."""
        msgs = self.pending.pop(key, [])
        self.pending_bytes.pop(key, None)
        if not msgs:
            return
        topic, queue_id = key
        queue = None if queue_id is None else self._queue(topic, queue_id)
        if queue_id is not None:
            while any(k == key for _, k, _ in self.in_flight):
                self._settle_oldest()
        if len(msgs) == 1:
            future = self.producer.send_async(msgs[0], queue=queue)
        else:
            future = self.producer.send_batch_async(msgs, queue=queue)
        self.in_flight.append((future, key, len(msgs)))
        while len(self.in_flight) > MAX_IN_FLIGHT:
            self._settle_oldest()

    def _settle_oldest(self) -> None:
        """Wait for the oldest send; its failure fails the task (Spark retries it)."""
        future, (topic, _), count = self.in_flight.popleft()
        future.result()
        self.sent.count += count
        self.sent.per_topic[topic] = self.sent.per_topic.get(topic, 0) + count

    def write(self, batches: Iterator[pa.RecordBatch]) -> SentMessages:
        try:
            for batch in batches:
                for row in _rows(batch):
                    qid = row.get("queueId")
                    self.add(to_message(row, self.opts.topic), None if qid is None else int(qid))
            for key in list(self.pending):
                self.flush(key)
            while self.in_flight:
                self._settle_oldest()
        finally:
            for future, _, _ in self.in_flight:
                future.cancel()
            self.producer.close()
        return self.sent


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class RocketMQWriter(DataSourceArrowWriter):
    """Batch writes (``mode("append")``): at-least-once."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = write_options(options)
        check_schema(schema, self.opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        return _Sender(self.opts).write(iterator)

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
        return _Sender(self.opts).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.count for m in messages if isinstance(m, SentMessages))
        log.info("rocketmq stream write of batch %d committed: %d messages", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("rocketmq stream write of batch %d aborted: messages already sent stay "
                    "(at-least-once)", batchId)
