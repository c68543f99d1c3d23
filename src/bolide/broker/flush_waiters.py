"""Loop-side waiters for SYNC_FLUSH group commits over :meth:`MessageStore.add_flush_listener`."""

from __future__ import annotations

import asyncio
import heapq

from bolide.common.waiting import wait_for
from bolide.store import MessageStore, PutStatus
from bolide.store.results import PutMessageResult


class FlushWaiters:
    """Futures resolved when the CommitLog is durable past an offset: one cross-thread wakeup
    per flush, not per put. Create on the loop that awaits them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, store: MessageStore) -> None:
        self.loop = loop
        self.store = store
        self.heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self.seq = 0
        store.add_flush_listener(self.on_flush)

    def on_flush(self, offset: int) -> None:  # on the flush thread
        if self.heap:
            self.loop.call_soon_threadsafe(self.resolve, offset)

    def resolve(self, offset: int) -> None:
        heap = self.heap
        while heap and heap[0][0] <= offset:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(None)

    def wait(self, end: int) -> asyncio.Future[None]:
        """A future done once the CommitLog is flushed up to ``end``."""
        fut = self.loop.create_future()
        if self.store.commit_log.flushed_offset >= end:
            fut.set_result(None)
        else:
            self.seq += 1
            heapq.heappush(self.heap, (end, self.seq, fut))
        return fut

    async def settle(self, result: PutMessageResult) -> None:
        """Under SYNC_FLUSH, wait until a successful put is durable; past syncFlushTimeout its
        status becomes FLUSH_DISK_TIMEOUT (stored, not yet safe), as RocketMQ answers."""
        config = self.store.config
        if not result.ok or not config.sync_flush:
            return
        try:
            await wait_for(self.wait(result.end_offset), config.sync_flush_timeout_ms / 1000)
        except TimeoutError:
            result.status = PutStatus.FLUSH_DISK_TIMEOUT
            result.remark = "the disk did not confirm the write within syncFlushTimeout"
