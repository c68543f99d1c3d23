"""Consumer offsets: on the broker (clustering) or in a local file (broadcasting).

Both keep the latest offset of each queue in memory (``update``) and write them out on
``persist`` (the consumer calls it every 5 s, when a queue leaves it, and at close). An
offset is the next queue offset to consume.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

from bolide.client.errors import NoRouteError, SubscriptionGroupNotExistError
from bolide.client.instance import ClientInstance
from bolide.protocol.bodies.client import ConsumerData, HeartbeatData, MessageQueue

log = logging.getLogger(__name__)



def default_offset_dir() -> Path:
    """``~/.rocketmq_offsets`` of the user running the consumer (looked up when one is created)."""
    return Path.home() / ".rocketmq_offsets"


class OffsetStore:
    """The in-memory table both kinds share."""

    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    def memory(self, mq: MessageQueue) -> int | None:
        return self.table.get(mq)

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    async def load(self) -> None:
        """Read stored offsets (the local store's file); the remote store reads per queue."""

    async def read_stored(self, mq: MessageQueue) -> int | None:
        raise NotImplementedError

    async def persist(self, queues: list[MessageQueue] | None = None, *,
                      raise_errors: bool = False) -> None:
        """Store the offsets of ``queues`` (all by default). Failures are logged, or with
        ``raise_errors`` the first is raised once every queue has been tried."""
        raise NotImplementedError


class RemoteOffsetStore(OffsetStore):
    """Offsets kept by the broker (QUERY_CONSUMER_OFFSET 14 / UPDATE_CONSUMER_OFFSET 15)."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group
        # one persist at a time: the broker may apply concurrent commits of a queue in any order
        self._persisting: asyncio.Lock | None = None

    async def _addr(self, mq: MessageQueue) -> str | None:
        """The master's address; while the route has none (master down), a slave's, as the
        Java client does (the slave keeps the offsets until the master is back)."""
        broker_name = self.instance.broker_of(mq)
        addr = self.instance.master_addr(broker_name)
        if addr is None:
            await self.instance.route(mq.topic)
            found = self.instance.subscribe_addr(self.instance.broker_of(mq))
            addr = found[0] if found is not None else None
        return addr

    async def read_stored(self, mq: MessageQueue) -> int | None:
        """The broker's committed offset (None when there is none); transport errors propagate."""
        addr = await self._addr(mq)
        if addr is None:
            return None
        offset = await self.instance.api.query_consumer_offset(addr, self.group, mq.topic, mq.queue_id)
        if offset is not None and offset >= 0:
            self.update(mq, offset)
            return offset
        return None

    async def persist(self, queues: list[MessageQueue] | None = None, *,
                      raise_errors: bool = False) -> None:
        todo = [(mq, off) for mq, off in list(self.table.items())
                if off >= 0 and (queues is None or mq in queues)]

        async def one(mq: MessageQueue, offset: int) -> None:
            addr = await self._addr(mq)
            if addr is None:  # said, not skipped quietly: the offset stays for the next commit
                raise NoRouteError(f"no address of broker {mq.broker_name} in the route of "
                                   f"{mq.topic}: offset {offset} not committed yet")
            api = self.instance.api
            try:
                await api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, offset)
            except SubscriptionGroupNotExistError:
                # RocketMQ 5 refuses offsets of a group it does not know (never named by a
                # heartbeat or a pull, or deleted since); a heartbeat naming the group creates it
                # (autoCreateSubscriptionGroup), then the commit goes again
                await api.heartbeat(addr, self._group_heartbeat())
                await api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, offset)

        async def topic_commits(pairs: list[tuple[MessageQueue, int]]) -> list[BaseException | None]:
            # RocketMQ 4.9's broker creates a topic@group's offset map without a lock: commits
            # of a group's first offsets on a topic that arrive together lose all but one.
            # The first goes alone, the others together once the map exists.
            first = await asyncio.gather(one(*pairs[0]), return_exceptions=True)
            rest = await asyncio.gather(*(one(mq, off) for mq, off in pairs[1:]),
                                        return_exceptions=True)
            return [*first, *rest]

        by_topic: dict[str, list[tuple[MessageQueue, int]]] = {}
        for mq, off in todo:
            by_topic.setdefault(mq.topic, []).append((mq, off))
        todo = [pair for pairs in by_topic.values() for pair in pairs]
        if self._persisting is None:
            self._persisting = asyncio.Lock()
        async with self._persisting:
            per_topic = await asyncio.gather(*(topic_commits(p) for p in by_topic.values()))
        results = [r for rs in per_topic for r in rs]
        failed = [(mq, r) for (mq, _), r in zip(todo, results, strict=True) if isinstance(r, Exception)]
        for mq, exc in failed[1:] if raise_errors else failed:
            log.warning("committing the offset of %s for group %s failed: %s", mq, self.group, exc)
        if raise_errors and failed:
            raise failed[0][1]


    def _group_heartbeat(self) -> HeartbeatData:
        """The client's heartbeat, naming this group even when the consumer does not take part
        in its rebalance (an assign-mode PullConsumer), as a Java consumer's always does."""
        data = self.instance.heartbeat_data()
        if not any(c.group_name == self.group for c in data.consumer_data_set):
            data.consumer_data_set.append(ConsumerData(
                group_name=self.group, consume_type="CONSUME_ACTIVELY", message_model="CLUSTERING",
                consume_from_where="CONSUME_FROM_LAST_OFFSET"))
        return data


class LocalOffsetStore(OffsetStore):
    """Offsets in ``<directory>/<group>/offsets.json`` (broadcasting: each consumer its own),
    ``directory`` defaulting to :func:`default_offset_dir`. Consumers of one group on one host
    share the file unless each is given a directory of its own."""

    def __init__(self, directory: str | Path | None, group: str) -> None:
        super().__init__()
        base = Path(directory) if directory is not None else default_offset_dir()
        self.path = base / group / "offsets.json"

    async def load(self) -> None:
        try:
            text = await asyncio.to_thread(self.path.read_text)
        except FileNotFoundError:
            return
        try:
            data = json.loads(text)
            for item in data["offsetTable"]:
                mq = MessageQueue(item["topic"], item["brokerName"], int(item["queueId"]))
                self.table[mq] = int(item["offset"])
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("offset file %s is unreadable (%s): starting without stored offsets; "
                        "delete or fix the file", self.path, exc)

    async def read_stored(self, mq: MessageQueue) -> int | None:
        return self.table.get(mq)

    async def persist(self, queues: list[MessageQueue] | None = None, *,
                      raise_errors: bool = False) -> None:
        items = [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
                 for mq, off in sorted(self.table.items())]
        await asyncio.to_thread(self._write, json.dumps({"offsetTable": items}, indent=1))

    def _write(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
