"""What the ``rocketmq`` source asks the cluster, through the public blocking client: the
queues of topics and their offset bounds, offsets for store times, the messages of a range,
and consumer-group commits. Works against Bolide and Apache RocketMQ alike.

Spark runs these calls in forked Python workers; the blocking client objects are created
there, used and closed (their event-loop threads never cross a fork).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future

import pyarrow as pa

from bolide.client import ClientConfig, MessageQueue, PullConsumer
from bolide.client.blocking import Admin, LoopThread
from bolide.client.filtering import subscription
from bolide.client.results import PullResult, PullStatus
from bolide.spark.offsets import Bounds, Offsets, QueueKey, QueueRange, clamp_start
from bolide.spark.pulled_rows import pulled_batches

log = logging.getLogger(__name__)

PULL_BATCH = 32  # messages a pull asks for by default: what a RocketMQ broker returns at most
# Pulls sent at once for one queue: enough for about MESSAGES_IN_FLIGHT messages, within these
# bounds (32 pulls of RocketMQ's 32 messages; 8 of 256). One round trip of the client's loop
# thread per round: fewer, larger rounds keep the broker and the decoding busy.
MESSAGES_IN_FLIGHT = 1024
PULLS_IN_FLIGHT = (8, 64)
FLUSH_BYTES = 8 * 1024 * 1024  # record bytes decoded into one Arrow batch at most


class Cluster:
    """A blocking Admin client for one read; use as a context manager."""

    def __init__(self, nameserver: str | ClientConfig, timeout_ms: int = 10_000) -> None:
        self.nameserver = nameserver
        self.admin = Admin(nameserver, timeout_ms=timeout_ms)
        self._addrs: dict[QueueKey, str] = {}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.admin.close()

    def queues(self, topics: Sequence[str]) -> list[QueueKey]:
        """Every readable queue of ``topics``, sorted; the topics must exist."""
        out = []
        for topic in topics:
            for mq, addr in self.admin.queues(topic):
                key = (mq.topic, mq.broker_name, mq.queue_id)
                self._addrs[key] = addr
                out.append(key)
        return sorted(out)

    def _addr(self, key: QueueKey) -> str:
        if key not in self._addrs:
            self.queues([key[0]])
        return self._addrs[key]

    def bounds(self, keys: Sequence[QueueKey]) -> Bounds:
        """(min offset, max offset) of each queue: the messages stored are ``[min, max)``."""
        return {k: self.admin.min_max_offset(MessageQueue(*k), self._addr(k)) for k in keys}

    def offsets_for_time(self, keys: Sequence[QueueKey], timestamp_ms: int) -> Offsets:
        """The first offset of each queue stored at or after ``timestamp_ms``."""
        return {k: self.admin.search_offset(MessageQueue(*k), self._addr(k), timestamp_ms) for k in keys}

    def read_batches(self, part: QueueRange, *, expression: str = "*", batch_size: int = 65536,
                     pull_batch: int = PULL_BATCH, fail_on_data_loss: bool = True,
                     columns: tuple[str, ...] | None = None) -> Iterator[pa.RecordBatch]:
        """The rows of ``part`` matching the tag expression as Arrow batches of at most
        ``batch_size`` rows, in queue order. Pulls asking for ``pull_batch`` messages go out
        together (about :data:`MESSAGES_IN_FLIGHT` messages' worth, within
        :data:`PULLS_IN_FLIGHT`), at consecutive windows of the queue; the window
        follows what the broker returns per pull (its maxTransferCount/Bytes limits). The
        next round goes out as soon as a round's answers are in, before they are decoded. The
        records are decoded without a Python object per message, only ``columns`` when
        given. Deleted messages fail the read (DataLossError) or are skipped with a warning."""
        mq = MessageQueue(part.topic, part.broker_name, part.queue_id)
        sub = subscription(part.topic, expression)
        bodies: list[tuple[bytes, int]] = []
        held = rows = 0  # bytes in bodies, and at most that many messages

        def send_round(cursor: int, stride: int) -> tuple[range, Future[list[tuple[PullResult, bytes]]]]:
            pulls = max(PULLS_IN_FLIGHT[0], min(PULLS_IN_FLIGHT[1], MESSAGES_IN_FLIGHT // stride))
            windows = range(cursor, min(part.end, cursor + pulls * stride), stride)
            return windows, self.admin.pull_records_later(mq, list(windows), max_nums=pull_batch,
                                                          expression=expression)

        cursor, stride = part.start, pull_batch
        ahead: tuple[range, Future[list[tuple[PullResult, bytes]]]] | None = None
        while cursor < part.end:
            if ahead is None:  # (a round sent ahead starts at this cursor, with this stride)
                ahead = send_round(cursor, stride)
            windows, future = ahead
            answers, ahead = future.result(), None
            reached, stopped, spans = cursor, False, []
            for start, (result, body) in zip(windows, answers, strict=True):
                if start > reached:  # an earlier answer stopped short of this window
                    break
                if result.status is PullStatus.FOUND:
                    bodies.append((body, reached))
                    held += len(body)
                    spans.append(result.next_begin_offset - start)
                elif result.status is not PullStatus.NO_MATCHED_MSG:
                    stopped = True
                    break
                reached = max(reached, result.next_begin_offset)
            rows += reached - cursor
            if spans:  # answers shorter than the window: narrow it; longer: widen it
                stride = max(1, min(pull_batch, min(spans)))
            if reached > cursor and not stopped and reached < part.end:
                ahead = send_round(reached, stride)  # out before this round is decoded
            if held >= FLUSH_BYTES or rows >= batch_size:
                yield from _sliced(pulled_batches(bodies, part.end, sub, part.broker_name, columns),
                                   batch_size)
                bodies, held, rows = [], 0, 0
            if reached > cursor and not stopped:
                cursor = reached
                continue
            cursor = reached
            # a short read: the range is done, unless retention deleted what comes next
            if cursor >= part.end:
                break
            low, _ = self.admin.min_max_offset(mq, self._addr(part.key))
            if low <= cursor:
                break
            cursor = clamp_start(part.key, cursor, low, fail_on_data_loss=fail_on_data_loss)
        yield from _sliced(pulled_batches(bodies, part.end, sub, part.broker_name, columns), batch_size)


def _sliced(batches: Sequence[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for at in range(0, batch.num_rows, rows):
            yield batch.slice(at, rows)


class GroupCommitter:
    """Commits a consumer group's offsets on the brokers (lag for ``consumerProgress``).

    Before its first commit to a topic's brokers it sends them a HEART_BEAT naming the group
    and waits for the answer, as a started Java consumer does: RocketMQ 5 answers
    UPDATE_CONSUMER_OFFSET of a group it does not know with SUBSCRIPTION_GROUP_NOT_EXIST, and
    only a heartbeat or a pull creates the group (autoCreateSubscriptionGroup).
    """

    def __init__(self, nameserver: str | ClientConfig, group: str) -> None:
        self.group = group
        self._runner = LoopThread(f"bolide-spark-commit-{group}")
        self._consumer = PullConsumer(nameserver, group, auto_commit=False)
        self._topics: set[str] = set()

    def commit(self, offsets: Mapping[QueueKey, int]) -> None:
        self._runner.run(self._commit({MessageQueue(*k): off for k, off in offsets.items()}))

    async def _commit(self, offsets: dict[MessageQueue, int]) -> None:
        new = sorted({mq.topic for mq in offsets} - self._topics)
        for topic in new:
            await self._consumer.fetch_message_queues(topic)  # starts the client, caches the route
        if new:
            await self._consumer.start_instance()  # the answered heartbeat to the routes' brokers
            self._topics.update(new)
        await self._consumer.commit(offsets)

    def close(self) -> None:
        try:
            self._runner.run(self._consumer.close())
        finally:
            self._runner.stop()
