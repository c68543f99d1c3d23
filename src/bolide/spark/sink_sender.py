"""The sending half of the ``rocketmq`` sink (:mod:`bolide.spark.sink`), run by each Spark
task: rows become messages, sent in batches per topic and queue by one blocking Producer."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from typing import Any

import pyarrow as pa

from bolide.client import Message, MessageQueue
from bolide.client.blocking import Producer
from bolide.common import properties as P
from bolide.spark.options import SparkOptionError, WriteOptions
from bolide.spark.sink import OPTIONAL_COLUMNS, SentMessages

MAX_BATCH_BYTES = 1024 * 1024
MAX_IN_FLIGHT = 4  # batches a task has sent and not yet seen answered


def rows(batch: pa.RecordBatch) -> Iterator[dict[str, Any]]:
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


class TaskSender:
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
                for row in rows(batch):
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
