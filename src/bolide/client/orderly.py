"""Orderly consumption for :class:`~bolide.client.push_consumer.PushConsumer` (``orderly=True``),
as Java's ConsumeMessageOrderlyService.

- Clustering: a queue is pulled and consumed only while this client holds its lock on the
  broker (LOCK_BATCH_MQ when a rebalance gives it the queue, renewed for all owned queues every
  ``lock_interval_ms``; UNLOCK_BATCH_MQ when the queue is given up and at close). A lock not
  renewed for 30 s counts as lost, as in Java. Broadcasting consumers take no locks.
- Each queue has one consuming task: the listener gets the queue's messages in queue order,
  ``consume_batch_max_size`` at a time, and the next batch only after the previous one ended.
- A failed batch (``RECONSUME_LATER`` or an exception) suspends the queue for
  ``context.suspend_queue_ms`` (default ``suspend_current_queue_ms``) and is consumed again,
  ``reconsume_times`` + 1; a message whose ``reconsume_times`` reached ``max_reconsume_times``
  is sent to ``%RETRY%<group>`` with that count, which the broker turns into ``%DLQ%<group>``,
  and the queue moves on.
- A queue given up by a rebalance waits for its batch in progress, commits it and only then
  unlocks, so the next owner starts right after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bolide.client.process_queue import ProcessQueue
from bolide.client.results import ConsumeStatus, MessageModel
from bolide.common.message import MessageExt
from bolide.common.waiting import cancel_and_wait, wait_for
from bolide.errors import BolideError
from bolide.protocol.bodies.client import MessageQueue

if TYPE_CHECKING:
    from bolide.client.push_consumer import PushConsumer

log = logging.getLogger(__name__)

LOCK_MAX_LIVE_S = 30.0  # Java REBALANCE_LOCK_MAX_LIVE_TIME: a lock not renewed since is lost


@dataclass(slots=True)
class QueueLock:
    """This client's view of its lock on one queue."""

    locked: bool = False
    renewed_at: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # set on every lock answer
    busy: asyncio.Lock = field(default_factory=asyncio.Lock)  # held while a batch is consumed
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # new messages or a new lock
    task: asyncio.Task[None] | None = None

    def held(self) -> bool:
        return self.locked and time.monotonic() - self.renewed_at <= LOCK_MAX_LIVE_S

    def set(self, locked: bool) -> None:
        self.locked = locked
        if locked:
            self.renewed_at = time.monotonic()
            self.wake.set()
        self.changed.set()


class OrderlyService:
    """Queue locks and one consuming task per queue for an orderly push consumer."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self.locking = consumer.message_model is MessageModel.CLUSTERING
        self.locks: dict[MessageQueue, QueueLock] = {}

    # -- locks ----------------------------------------------------------------------------------
    async def _lock(self, queues: set[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ per broker; the queues now held (a failed broker holds none)."""
        if not self.locking:
            return set(queues)
        c = self.consumer
        by_broker: dict[str, set[MessageQueue]] = defaultdict(set)
        for mq in queues:
            by_broker[c._instance.broker_of(mq)].add(mq)
        held: set[MessageQueue] = set()
        for broker, mqs in by_broker.items():
            addr = c._instance.master_addr(broker)
            if addr is None:
                log.info("no master address for broker %s yet: its queues stay unlocked", broker)
                continue
            try:
                held |= await c._instance.api.lock_batch(addr, c.group, c.client_id, mqs) & mqs
            except BolideError as exc:
                log.warning("LOCK_BATCH_MQ to %s for group %s failed: %s", addr, c.group, exc)
        return held

    async def lock_new(self, queues: set[MessageQueue]) -> set[MessageQueue]:
        """Lock queues a rebalance gives this member; only those locked may be taken now (the
        others, still held by their previous owner, are tried at the next rebalance)."""
        if not queues:
            return set()
        held = await self._lock(queues)
        for mq in held:
            self.locks.setdefault(mq, QueueLock()).set(True)
        return held

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue (the ``lock_interval_ms`` timer)."""
        if not self.locking or not self.locks:
            return
        owned = set(self.locks)
        held = await self._lock(owned)
        for mq in owned:
            lock = self.locks.get(mq)
            if lock is not None:
                if mq not in held and lock.locked:
                    log.warning("group %s lost the lock of %s: its consumption pauses",
                                self.consumer.group, mq)
                lock.set(mq in held)

    async def unlock(self, queues: set[MessageQueue]) -> None:
        """UNLOCK_BATCH_MQ per broker (errors are logged: the broker's lock expires anyway)."""
        if not self.locking or not queues:
            return
        c = self.consumer
        by_broker: dict[str, set[MessageQueue]] = defaultdict(set)
        for mq in queues:
            by_broker[c._instance.broker_of(mq)].add(mq)
        for broker, mqs in by_broker.items():
            addr = c._instance.master_addr(broker)
            if addr is None:
                continue
            try:
                await c._instance.api.unlock_batch(addr, c.group, c.client_id, mqs)
            except BolideError as exc:
                log.info("UNLOCK_BATCH_MQ to %s for group %s failed: %s", addr, c.group, exc)

    def is_locked(self, mq: MessageQueue) -> bool:
        lock = self.locks.get(mq)
        return lock is not None and (not self.locking or lock.held())

    def lock_state(self, mq: MessageQueue) -> tuple[bool, int]:
        """Whether ``mq``'s lock is held and when it was last granted (ms since the epoch, 0:
        never), for GET_CONSUMER_RUNNING_INFO."""
        lock = self.locks.get(mq)
        if lock is None or not lock.renewed_at:
            return self.is_locked(mq), 0
        granted_ms = int((time.time() - (time.monotonic() - lock.renewed_at)) * 1000)
        return self.is_locked(mq), granted_ms

    async def wait_locked(self, mq: MessageQueue, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for the next lock answer about ``mq``."""
        lock = self.locks.setdefault(mq, QueueLock())
        lock.changed.clear()
        with contextlib.suppress(TimeoutError):
            await wait_for(lock.changed.wait(), timeout_s)

    # -- consuming ------------------------------------------------------------------------------
    def wake(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """New messages of ``mq`` are held: start or wake its consuming task."""
        lock = self.locks.setdefault(mq, QueueLock(locked=not self.locking))
        if lock.task is None or lock.task.done():
            lock.task = asyncio.ensure_future(self._run(mq, pq, lock))
        lock.wake.set()

    async def release(self, mq: MessageQueue) -> None:
        """``mq`` was dropped: let its batch in progress finish (and commit), stop its task."""
        lock = self.locks.pop(mq, None)
        if lock is None:
            return
        async with lock.busy:
            pass
        if lock.task is not None:
            await cancel_and_wait([lock.task])

    async def close(self) -> set[MessageQueue]:
        """Stop every consuming task (a batch in progress is abandoned and delivered again);
        the queues whose locks are to be given back."""
        await cancel_and_wait(lock.task for lock in self.locks.values() if lock.task is not None)
        queues = set(self.locks)
        self.locks.clear()
        return queues

    async def _run(self, mq: MessageQueue, pq: ProcessQueue, lock: QueueLock) -> None:
        c = self.consumer
        while not pq.dropped:
            await lock.wake.wait()
            lock.wake.clear()
            while pq.msgs and not pq.dropped:
                if self.locking and not lock.held():
                    break  # wait for the renewal timer (or a rebalance) to lock it again
                suspend_ms = await self._consume_batch(mq, pq, lock)
                if suspend_ms:
                    await c._pause(suspend_ms)

    async def _consume_batch(self, mq: MessageQueue, pq: ProcessQueue, lock: QueueLock) -> int:
        """Consume the first messages held; how long to suspend the queue (0: go on)."""
        from bolide.client.push_consumer import ConsumeContext

        c = self.consumer
        assert c._sem is not None
        async with lock.busy:
            if pq.dropped:
                return 0
            batch = [m for _, m in zip(range(c.consume_batch_max_size), pq.msgs.values(), strict=False)]
            ctx = ConsumeContext(mq)
            async with c._sem:
                status = await c._call_listener(batch, ctx)
            done = batch
            if status is not ConsumeStatus.CONSUME_SUCCESS:
                done = []
                for m in batch:
                    if m.reconsume_times >= c.max_reconsume_times and await self._give_up(m):
                        done.append(m)
                    else:
                        m.reconsume_times += 1
            if done:
                offset = pq.remove(done)
                if offset >= 0:
                    c.offsets.update(mq, offset, increase_only=True)
            if len(done) < len(batch):
                return ctx.suspend_queue_ms or c.suspend_current_queue_ms
            return 0

    async def _give_up(self, msg: MessageExt) -> bool:
        """Send a message out of local retries to the retry topic with its count (the broker
        stores it in the DLQ); False when that failed (it is retried locally again)."""
        c = self.consumer
        try:
            await c._send_to_retry_topic(msg, 0)
            return True
        except BolideError as exc:
            log.warning("message %s of group %s could not go to the DLQ (%s); consuming it again",
                        msg.msg_id or msg.offset_msg_id, c.group, exc)
            return False
