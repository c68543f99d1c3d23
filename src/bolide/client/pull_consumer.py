"""PullConsumer (asyncio): the application polls for messages (Java DefaultLitePullConsumer).

::

    consumer = PullConsumer("127.0.0.1:9876", "cg")
    consumer.subscribe("Orders", "*")        # share the queues with the group, or
    # consumer.assign(await consumer.fetch_message_queues("Orders"))
    await consumer.start()
    msgs = await consumer.poll(timeout_ms=1000)
    await consumer.close()                   # commits what poll() returned

Each owned queue has a background long-polling pull that fills a buffer; it pauses while the
queue holds ``pull_threshold_for_queue`` messages or ``pull_threshold_size_for_queue_mib`` MiB
of bodies that ``poll`` has not returned yet (flow control). ``poll`` returns the next batch. The offset to
commit for a queue moves past a batch when ``poll`` returns it; offsets are committed every
``auto_commit_interval_ms`` and at close when ``auto_commit``, else by :meth:`commit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bolide.client.config import ClientConfig
from bolide.client.consumer_base import ConsumerBase
from bolide.client.errors import ClientConfigError, ClientStateError, NoRouteError
from bolide.client.filtering import MessageSelector
from bolide.client.process_queue import MIB
from bolide.client.pulling import pull
from bolide.client.results import ConsumeFrom, MessageModel, PullStatus
from bolide.common.message import MessageExt
from bolide.common.waiting import cancel_and_wait, wait_for
from bolide.errors import BolideError
from bolide.protocol.allocate import AllocateStrategy, allocate_averagely
from bolide.protocol.bodies.admin import ProcessQueueInfo, ResetOffsetBody
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import ResetOffsetRequestHeader
from bolide.remoting import RequestContext

log = logging.getLogger(__name__)


# A queue's state gets a new generation when created or sought: batches pulled for an older
# one (before a seek, or before the queue was given up and taken back) are dropped by poll().
_GENERATIONS = itertools.count(1)


@dataclass(slots=True)
class _QueueState:
    offset: int  # next offset to pull
    consumed: int  # next offset after the messages poll() has returned
    generation: int = field(default_factory=lambda: next(_GENERATIONS))
    buffered: int = 0  # messages pulled and not yet returned by poll()
    buffered_bytes: int = 0  # their body bytes
    space: asyncio.Event = field(default_factory=asyncio.Event)
    firsts: deque[int] = field(default_factory=deque)  # first offset of each buffered batch
    last_buffered: int = 0  # offset of the newest buffered message
    last_pull_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    last_poll_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def info(self, commit_offset: int | None) -> ProcessQueueInfo:
        """This queue as GET_CONSUMER_RUNNING_INFO reports it: the messages pulled and not
        yet returned by poll()."""
        return ProcessQueueInfo(
            commit_offset=-1 if commit_offset is None else commit_offset,
            cached_msg_min_offset=self.firsts[0] if self.firsts else 0,
            cached_msg_max_offset=self.last_buffered if self.firsts else 0,
            cached_msg_count=self.buffered, cached_msg_size_in_mi_b=self.buffered_bytes // MIB,
            last_pull_timestamp=self.last_pull_ms, last_consume_timestamp=self.last_poll_ms)


_Batch = tuple[MessageQueue, int, list[MessageExt], int]  # queue, generation, messages, next offset


class PullConsumer(ConsumerBase):
    """Subscribe (the group shares the queues) or assign queues, then poll; asyncio API."""

    CONSUME_TYPE = "CONSUME_ACTIVELY"

    def __init__(self, namesrv: str | ClientConfig, group: str, *, auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, pull_batch_size: int = 10,
                 pull_threshold_for_queue: int = 1000, pull_threshold_size_for_queue_mib: int = 100,
                 poll_timeout_ms: int = 5000,
                 suspend_ms: int = 20_000, pull_timeout_ms: int = 30_000, pull_retry_delay_ms: int = 3000,
                 message_model: MessageModel = MessageModel.CLUSTERING,
                 consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET, consume_timestamp_ms: int | None = None,
                 rebalance_interval_ms: int = 20_000, offset_store_dir: str | Path | None = None,
                 allocate: AllocateStrategy = allocate_averagely) -> None:
        super().__init__(namesrv, group, message_model=message_model, consume_from=consume_from,
                         consume_timestamp_ms=consume_timestamp_ms,
                         rebalance_interval_ms=rebalance_interval_ms,
                         persist_offset_interval_ms=auto_commit_interval_ms,
                         offset_store_dir=offset_store_dir, allocate=allocate)
        if pull_timeout_ms <= suspend_ms:
            raise ClientConfigError(f"pull_timeout_ms ({pull_timeout_ms}) must exceed "
                                    f"suspend_ms ({suspend_ms})")
        if pull_batch_size <= 0 or pull_threshold_for_queue <= 0 or pull_threshold_size_for_queue_mib <= 0:
            raise ClientConfigError("pull_batch_size, pull_threshold_for_queue and "
                                    "pull_threshold_size_for_queue_mib must be positive")
        self.auto_commit = auto_commit
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue_mib * 1024 * 1024
        self.poll_timeout_ms = poll_timeout_ms
        self.suspend_ms = suspend_ms
        self.pull_timeout_ms = pull_timeout_ms
        self.pull_retry_delay_ms = pull_retry_delay_ms
        self._assigned: set[MessageQueue] | None = None  # None: subscribe mode
        self._states: dict[MessageQueue, _QueueState] = {}
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._buffer: asyncio.Queue[_Batch] | None = None
        self._lock: asyncio.Lock | None = None
        self._assign_task: asyncio.Task[None] | None = None

    # -- configuration ------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` (messages whose tag matches ``expression``, or that a
        ``MessageSelector.by_sql(...)`` selects), sharing its queues with the group."""
        if self._assigned is not None:
            raise ClientStateError("this consumer has assigned queues: use subscribe() or assign(), not both")
        super().subscribe(topic, expression)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues`` (no group rebalance); may be called again while running."""
        if self.subscriptions and self._assigned is None:
            raise ClientStateError("this consumer subscribed to topics: "
                                   "use subscribe() or assign(), not both")
        self._assigned = set(queues)
        self._instance.consumer_data = None  # assign mode takes no part in the group's rebalance
        if self.started:
            self._assign_task = asyncio.ensure_future(self._apply(self._assigned))

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer owns now."""
        return set(self._states)

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> PullConsumer:
        """Take the assigned queues, or this member's share of the subscribed ones, and start
        pulling; idempotent."""
        if self.started:
            return self
        if self._assigned is None and not self.subscriptions:
            raise ClientConfigError("subscribe() to a topic or assign() queues before start()")
        self._buffer = asyncio.Queue()
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        if self._assigned is None:  # a member of the group: the broker relays offset resets to it
            self._instance.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        await self.start_instance()
        self.started = True
        if self.auto_commit:
            self._instance.every(self.persist_offset_interval_ms, self.commit, "auto commit")
        if self._assigned is not None:
            await self._apply(self._assigned)
        else:
            await self.rebalance()
            self._instance.every(self.rebalance_interval_ms, self.rebalance, "rebalance")
        return self

    async def close(self) -> None:
        """Stop pulling, commit (when ``auto_commit``), unregister and close connections."""
        if not await self._begin_close():
            return
        tasks = list(self._tasks.values())
        self._tasks.clear()
        await cancel_and_wait(tasks)
        if self.started and self.auto_commit:
            try:
                await self.commit()
            except BolideError as exc:  # closing goes on: the positions were at-least-once
                log.warning("committing the offsets of group %s at close failed: %s", self.group, exc)
        if self._tracer is not None:
            await self._tracer.close()
        await self._instance.close(consumer_group=self.group)

    async def __aenter__(self) -> PullConsumer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- queues ---------------------------------------------------------------------------------
    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``; raises NoRouteError when it has no route."""
        await self._instance.start()
        route = await self._instance.update_route(topic)
        if route is None:
            raise NoRouteError(f"topic {topic!r} has no route: create it or send to it first")
        return sorted(route.subscribe_queues)

    async def rebalance(self) -> None:
        """Subscribe mode: take this member's share of the subscribed topics' queues."""
        if self._assigned is not None:
            return
        target = await self.target_assignment(list(self.subscriptions))
        wanted = {mq for mq in self._states if mq.topic not in target}
        for share in target.values():
            wanted |= share
        await self._apply(wanted)

    async def _apply(self, wanted: set[MessageQueue]) -> None:
        assert self._lock is not None
        async with self._lock:
            for mq in [q for q in self._states if q not in wanted]:
                await self._stop_task(mq)
                st = self._states.pop(mq)
                self.offsets.update(mq, st.consumed)
                await self.offsets.persist([mq])
                self.offsets.remove(mq)
            for mq in sorted(wanted - self._states.keys()):
                try:
                    offset = await self.initial_offset(mq)
                except BolideError as exc:
                    log.warning("no start offset for %s (%s): retried at the next rebalance", mq, exc)
                    continue
                self._states[mq] = _QueueState(offset, offset)
                self._start_task(mq)

    def _start_task(self, mq: MessageQueue) -> None:
        self._tasks[mq] = asyncio.ensure_future(self._pull_loop(mq, self._states[mq]))

    async def _stop_task(self, mq: MessageQueue) -> None:
        task = self._tasks.pop(mq, None)
        if task is not None:
            await cancel_and_wait([task])

    async def _pull_loop(self, mq: MessageQueue, st: _QueueState) -> None:
        assert self._buffer is not None and self._stop is not None
        generation = st.generation
        sub = self._subscription_of(mq)
        while not self._stop.is_set():
            if (st.buffered >= self.pull_threshold_for_queue
                    or st.buffered_bytes >= self.pull_threshold_size_for_queue):
                st.space.clear()  # flow control: wait until poll() takes messages
                await st.space.wait()
                continue
            began = time.monotonic()
            try:
                result = await pull(self._instance, self.group, mq, st.offset, sub,
                                    max_nums=self.pull_batch_size, suspend_ms=self.suspend_ms,
                                    timeout_ms=self.pull_timeout_ms)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("pull from %s failed (%s); retrying in %d ms", mq, exc, self.pull_retry_delay_ms)
                with contextlib.suppress(TimeoutError):
                    await wait_for(self._stop.wait(), self.pull_retry_delay_ms / 1000)
                continue
            st.offset = result.next_begin_offset
            st.last_pull_ms = int(time.time() * 1000)
            if result.messages:
                self.stats.pulled(mq.topic, (time.monotonic() - began) * 1000, len(result.messages))
                st.buffered += len(result.messages)
                st.buffered_bytes += sum(len(m.body) for m in result.messages)
                st.firsts.append(result.messages[0].queue_offset)
                st.last_buffered = result.messages[-1].queue_offset
                self._buffer.put_nowait((mq, generation, result.messages, result.next_begin_offset))
            elif st.buffered == 0:
                st.consumed = result.next_begin_offset
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning("offset of %s moved; continuing from %d", mq, st.offset)

    # -- GET_CONSUMER_RUNNING_INFO --------------------------------------------------------------
    def _settings(self) -> dict[str, str]:
        return {"pullBatchSize": str(self.pull_batch_size), "autoCommit": str(self.auto_commit).lower(),
                "autoCommitIntervalMillis": str(self.persist_offset_interval_ms),
                "pullThresholdForQueue": str(self.pull_threshold_for_queue),
                "pullThresholdSizeForQueue": str(self.pull_threshold_size_for_queue // MIB),
                "pollTimeoutMillis": str(self.poll_timeout_ms)}

    def _queue_infos(self) -> dict[MessageQueue, ProcessQueueInfo]:
        return {mq: st.info(self.offsets.memory(mq)) for mq, st in self._states.items()}

    # -- polling and offsets -------------------------------------------------------------------
    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The next batch of messages (of one queue), or ``[]`` when none came within the timeout."""
        if not self.started or self._buffer is None:
            raise ClientStateError("start() the consumer before poll()")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.poll_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        while True:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    mq, generation, msgs, next_offset = self._buffer.get_nowait()
                else:
                    async with asyncio.timeout(remaining):
                        mq, generation, msgs, next_offset = await self._buffer.get()
            except (TimeoutError, asyncio.QueueEmpty):
                return []
            st = self._states.get(mq)
            if st is None or st.generation != generation:
                continue  # from before a seek or from a queue this consumer gave up
            st.buffered -= len(msgs)
            st.buffered_bytes -= sum(len(m.body) for m in msgs)
            st.firsts.popleft()
            st.last_poll_ms = int(time.time() * 1000)
            st.space.set()
            st.consumed = next_offset
            if self._tracer is not None and (traced := self._tracer.before_consume(msgs)) is not None:
                self._tracer.after_consume(traced, True, 0.0, len(msgs))  # as Java's lite pull: at once
            return msgs

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue ``mq`` (an owned queue) from ``offset``; buffered messages are discarded."""
        st = self._states.get(mq)
        if st is None:
            raise ClientStateError(f"{mq} is not assigned to this consumer: assign() it or wait for "
                                   "the rebalance to give it to this consumer")
        await self._stop_task(mq)
        st.generation = next(_GENERATIONS)
        st.offset = st.consumed = offset
        st.buffered = st.buffered_bytes = 0
        st.firsts.clear()
        st.space.set()
        self._start_task(mq)

    async def _on_reset_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """RESET_CONSUMER_CLIENT_OFFSET (220): an admin moved this group's offsets (``bolide admin
        resetOffsetByTime``, ``mqadmin``): the queues concerned that this member owns go on from
        the new offsets (buffered messages dropped), which its next commit keeps."""
        header = request.read_header(ResetOffsetRequestHeader)
        if header.group != self.group or self._lock is None:
            return None
        table = ResetOffsetBody.decode(request.body_bytes()).offset_table
        async with self._lock:
            for mq, offset in table.items():
                if mq in self._states:
                    await self.seek(mq, offset)
        return None

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """Continue ``mq`` from the lowest offset still stored."""
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """Continue ``mq`` from the next offset to be written: only messages stored from now on."""
        await self.seek(mq, await self.max_offset(mq))

    async def _addr(self, mq: MessageQueue) -> str:
        addr = self._instance.master_addr(self._instance.broker_of(mq))
        if addr is None:
            await self._instance.route(mq.topic)
            addr = self._instance.master_addr(self._instance.broker_of(mq))
        if addr is None:
            raise ClientStateError(f"broker {self._instance.broker_of(mq)!r} has no master address "
                                   "in the route "
                                   f"of {mq.topic!r}: wait for it to register with the NameServer")
        return addr

    async def min_offset(self, mq: MessageQueue) -> int:
        """The lowest offset of ``mq`` still stored on its broker."""
        return await self._instance.api.min_offset(await self._addr(mq), mq.topic, mq.queue_id)

    async def max_offset(self, mq: MessageQueue) -> int:
        """The next offset to be written in ``mq`` (its message count, retention aside)."""
        return await self._instance.api.max_offset(await self._addr(mq), mq.topic, mq.queue_id)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        addr = await self._addr(mq)
        return await self._instance.api.search_offset(addr, mq.topic, mq.queue_id, timestamp_ms)

    async def committed(self, mq: MessageQueue) -> int | None:
        """The offset the broker (or the local file) holds for ``mq``; None when none."""
        return await self.offsets.read_stored(mq)

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit ``offsets`` (next offsets to consume), or by default every owned queue's
        position after the last batch poll() returned. Every queue is tried; then the first
        failure is raised (a broker error, no route to the queue's broker, a timeout)."""
        if offsets is None:
            offsets = {mq: st.consumed for mq, st in self._states.items()}
        for mq, offset in offsets.items():
            self.offsets.update(mq, offset)
        await self.offsets.persist(list(offsets), raise_errors=True)
