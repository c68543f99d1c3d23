"""What the ``rocketmq`` source asks the cluster, through the public blocking client: the
queues of topics and their offset bounds, offsets for store times, the messages of a range,
and consumer-group commits. Works against Bolide and Apache RocketMQ alike.

Spark runs these calls in forked Python workers; the blocking client objects are created
there, used and closed (their event-loop threads never cross a fork).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence

from bolide.client import MessageExt, MessageQueue
from bolide.client.blocking import Admin, PullConsumer
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
    """Commits a consumer group's offsets on the brokers (lag for ``consumerProgress``)."""

    def __init__(self, nameserver: str, group: str) -> None:
        self.group = group
        self.consumer = PullConsumer(nameserver, group, auto_commit=False)
        self._topics: set[str] = set()

    def commit(self, offsets: Mapping[QueueKey, int]) -> None:
        for topic in sorted({k[0] for k in offsets} - self._topics):
            self.consumer.fetch_message_queues(topic)  # starts the client and caches the route
            self._topics.add(topic)
        self.consumer.commit({MessageQueue(*k): off for k, off in offsets.items()})

    def close(self) -> None:
        self.consumer.close()
