"""What the ``rocketmq`` source asks the cluster, through the public blocking client: the
queues of topics and their offset bounds, offsets for store times, the messages of a range,
and consumer-group commits. Works against Bolide and Apache RocketMQ alike.

Spark runs these calls in forked Python workers; the blocking client objects are created
there, used and closed (their event-loop threads never cross a fork).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence

from bolide.client import MessageExt, MessageQueue, PullConsumer
from bolide.client.blocking import Admin, LoopThread
from bolide.spark.offsets import Bounds, Offsets, QueueKey, QueueRange, clamp_start

log = logging.getLogger(__name__)


class Cluster:
    """A blocking Admin client for one read; use as a context manager."""

    def __init__(self, nameserver: str, timeout_ms: int = 10_000) -> None:
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

    def read(self, part: QueueRange, *, expression: str = "*", batch_size: int = 1024,
             fail_on_data_loss: bool = True) -> Iterator[list[MessageExt]]:
        """The messages of ``part`` matching the tag expression, in lists of at most
        ``batch_size``. Deleted messages fail the read (DataLossError) or are skipped with a
        warning, per ``fail_on_data_loss``."""
        mq = MessageQueue(part.topic, part.broker_name, part.queue_id)
        offset = part.start
        while offset < part.end:
            msgs = self.admin.read_messages(mq, offset, batch_size, end_offset=part.end,
                                            expression=expression)
            if msgs:
                yield msgs
                offset = msgs[-1].queue_offset + 1
            if len(msgs) == batch_size:
                continue
            # a short read: the range is done, unless retention deleted what comes next
            if offset >= part.end:
                return
            low, _ = self.admin.min_max_offset(mq, self._addr(part.key))
            if low <= offset:
                return
            offset = clamp_start(part.key, offset, low, fail_on_data_loss=fail_on_data_loss)


class GroupCommitter:
    """Commits a consumer group's offsets on the brokers (lag for ``consumerProgress``).

    Before its first commit to a topic's brokers it sends them a HEART_BEAT naming the group
    and waits for the answer, as a started Java consumer does: RocketMQ 5 answers
    UPDATE_CONSUMER_OFFSET of a group it does not know with SUBSCRIPTION_GROUP_NOT_EXIST, and
    only a heartbeat or a pull creates the group (autoCreateSubscriptionGroup).
    """

    def __init__(self, nameserver: str, group: str) -> None:
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
