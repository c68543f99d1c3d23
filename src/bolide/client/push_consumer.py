"""PushConsumer (asyncio): the group shares the queues, each member long-polls its own and
hands messages to a listener (Java DefaultMQPushConsumer, concurrently consuming).

::

    async def on_messages(msgs, ctx):
        for m in msgs:
            print(m.topic, m.tags, m.body)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("127.0.0.1:9876", "cg", listener=on_messages)
    consumer.subscribe("Orders", "TagA || TagB")
    await consumer.start()
    ...
    await consumer.close()

A listener is a coroutine function (run on the event loop) or a plain function (run in the
loop's thread pool). It returns ``ConsumeStatus.CONSUME_SUCCESS`` (or None) when done, or
``RECONSUME_LATER`` (or raises) to have the messages delivered again later: they go back to the
broker (CONSUMER_SEND_MSG_BACK), or, if that fails, are sent to ``%RETRY%<group>`` with the
retry properties; if both fail they are consumed again locally after 5 s.

``orderly=True`` consumes each queue in order, one batch at a time, under a broker lock
(LOCK_BATCH_MQ): see :mod:`bolide.client.orderly`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from bolide.client.callbacks import require_arguments
from bolide.client.config import ClientConfig
from bolide.client.consumer_base import ConsumerBase
from bolide.client.errors import ClientConfigError
from bolide.client.filtering import subscription
from bolide.client.orderly import OrderlyService
from bolide.client.process_queue import MIB, ProcessQueue
from bolide.client.producer import Producer
from bolide.client.pulling import pull, restore_retry_topic
from bolide.client.results import ConsumeFrom, ConsumeStatus, MessageModel, PullStatus
from bolide.common import properties as P
from bolide.common.compression import decompress_message
from bolide.common.message import Message, MessageExt
from bolide.common.records import decode_records
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.common.waiting import cancel_and_wait, wait_for
from bolide.errors import BolideError
from bolide.protocol import RequestCode, ResponseCode
from bolide.protocol.allocate import AllocateStrategy, allocate_averagely
from bolide.protocol.bodies.admin import (
    CR_LATER,
    CR_RETURN_NULL,
    CR_SUCCESS,
    CR_THROW_EXCEPTION,
    PROP_CONSUME_ORDERLY,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumeMessageDirectlyResult,
    ProcessQueueInfo,
    ResetOffsetBody,
)
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import ConsumerSendMsgBackRequestHeader
from bolide.protocol.headers.admin import ConsumeMessageDirectlyResultRequestHeader, ResetOffsetRequestHeader
from bolide.remoting import RequestContext

log = logging.getLogger(__name__)

INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
FIRST_RETRY_LEVEL = 3  # the broker's first retry delay level (10 s with the default levels)


@dataclass(slots=True)
class ConsumeContext:
    """Passed to the listener with each batch. Set ``delay_level`` (> 0) to choose the retry
    delay of a failed batch; 0 lets the broker choose (longer with every retry). Orderly
    consumers: set ``suspend_queue_ms`` (> 0) to choose how long a failed batch's queue waits
    before the batch is consumed again (0: the consumer's ``suspend_current_queue_ms``)."""

    queue: MessageQueue
    delay_level: int = 0
    suspend_queue_ms: int = 0


Listener: TypeAlias = Callable[[list[MessageExt], ConsumeContext],
                               "ConsumeStatus | Awaitable[ConsumeStatus | None] | None"]


class PushConsumer(ConsumerBase):
    """Clustering (default) or broadcasting push consumer, concurrent (default) or orderly;
    asyncio API."""

    CONSUME_TYPE = "CONSUME_PASSIVELY"

    def __init__(self, namesrv: str | ClientConfig, group: str, *, listener: Listener | None = None,
                 message_model: MessageModel = MessageModel.CLUSTERING,
                 consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET, consume_timestamp_ms: int | None = None,
                 consume_concurrency: int = 20, consume_batch_max_size: int = 1, pull_batch_size: int = 32,
                 pull_threshold_for_queue: int = 1000, pull_threshold_size_for_queue_mib: int = 100,
                 max_reconsume_times: int = 16, suspend_ms: int = 15_000, pull_timeout_ms: int = 30_000,
                 pull_retry_delay_ms: int = 3000, reconsume_local_delay_ms: int = 5000,
                 rebalance_interval_ms: int = 20_000, persist_offset_interval_ms: int = 5_000,
                 offset_store_dir: str | Path | None = None, orderly: bool = False,
                 suspend_current_queue_ms: int = 1000, lock_interval_ms: int = 20_000,
                 allocate: AllocateStrategy = allocate_averagely) -> None:
        super().__init__(namesrv, group, message_model=message_model, consume_from=consume_from,
                         consume_timestamp_ms=consume_timestamp_ms,
                         rebalance_interval_ms=rebalance_interval_ms,
                         persist_offset_interval_ms=persist_offset_interval_ms,
                         offset_store_dir=offset_store_dir, allocate=allocate)
        if consume_concurrency <= 0 or consume_batch_max_size <= 0 or pull_batch_size <= 0:
            raise ClientConfigError("consume_concurrency, consume_batch_max_size and pull_batch_size "
                                    "must be positive")
        if pull_threshold_for_queue <= 0 or pull_threshold_size_for_queue_mib <= 0:
            raise ClientConfigError("pull_threshold_for_queue and pull_threshold_size_for_queue_mib "
                                    "must be positive")
        if suspend_current_queue_ms <= 0 or lock_interval_ms <= 0:
            raise ClientConfigError("suspend_current_queue_ms and lock_interval_ms must be positive")
        if pull_timeout_ms <= suspend_ms:
            raise ClientConfigError(f"pull_timeout_ms ({pull_timeout_ms}) must exceed suspend_ms "
                                    f"({suspend_ms}), or held pulls time out on the client")
        self.listener = listener
        self.consume_concurrency = consume_concurrency
        self.consume_batch_max_size = consume_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue_mib * 1024 * 1024
        self.max_reconsume_times = max_reconsume_times
        self.suspend_ms = suspend_ms
        self.pull_timeout_ms = pull_timeout_ms
        self.pull_retry_delay_ms = pull_retry_delay_ms
        self.reconsume_local_delay_ms = reconsume_local_delay_ms
        self.orderly = orderly
        self.suspend_current_queue_ms = suspend_current_queue_ms
        self.lock_interval_ms = lock_interval_ms
        self._orderly: OrderlyService | None = OrderlyService(self) if orderly else None
        self._queues: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._consume_tasks: set[asyncio.Task[None]] = set()
        self._sem: asyncio.Semaphore | None = None
        self._rebalance_wanted: asyncio.Event | None = None
        self._rebalance_lock: asyncio.Lock | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._inner_producer: Producer | None = None
        self.rebalances = 0  # completed rebalance rounds (observable by tests and monitoring)

    def register_listener(self, listener: Listener) -> None:
        """Deliver messages to ``listener(msgs, context)``; before start()."""
        self.listener = listener

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer owns now (retry topic included)."""
        return set(self._queues)

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> PushConsumer:
        """Register with the brokers, take a share of the queues and start pulling."""
        if self.started:
            return self
        if self.listener is None:
            raise ClientConfigError("register a listener before start(): PushConsumer(..., listener=fn)")
        require_arguments(self.listener, 2, "the listener",
                          "the messages and a ConsumeContext, def on_messages(msgs, ctx)")
        if not self.subscriptions:
            raise ClientConfigError("subscribe to at least one topic before start()")
        if self.message_model is MessageModel.CLUSTERING:
            retry = RETRY_GROUP_TOPIC_PREFIX + self.group
            self.subscriptions.setdefault(retry, subscription(retry, "*"))
        self._sem = asyncio.Semaphore(self.consume_concurrency)
        self._stop = asyncio.Event()
        self._rebalance_wanted = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        self._instance.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_ids_changed)
        self._instance.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        await self.start_instance()
        self.started = True
        self._instance.every(self.persist_offset_interval_ms, self.offsets.persist, "offset commit")
        if self._orderly is not None:
            self._instance.every(self.lock_interval_ms, self._orderly.lock_all, "queue lock renewal")
        await self.rebalance()
        self._rebalance_task = asyncio.ensure_future(self._rebalance_loop())
        return self

    async def close(self) -> None:
        """Stop pulling, commit offsets, unregister and close connections."""
        if not await self._begin_close():
            return
        tasks = [t for t in (self._rebalance_task,) if t is not None]
        for mq in list(self._queues):
            pq = self._queues.pop(mq)
            pq.drop()
            task = self._pull_tasks.pop(mq, None)
            if task is not None:
                tasks.append(task)
        tasks += list(self._consume_tasks)
        await cancel_and_wait(tasks)
        locked = await self._orderly.close() if self._orderly is not None else set()
        if self.started:
            await self.offsets.persist()
        if self._orderly is not None:
            await self._orderly.unlock(locked)
        if self._inner_producer is not None:
            await self._inner_producer.close()
        if self._tracer is not None:
            await self._tracer.close()
        await self._instance.close(consumer_group=self.group)

    async def __aenter__(self) -> PushConsumer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- GET_CONSUMER_RUNNING_INFO --------------------------------------------------------------
    def _settings(self) -> dict[str, str]:
        return {"consumeThreadMax": str(self.consume_concurrency),
                "consumeMessageBatchMaxSize": str(self.consume_batch_max_size),
                "pullBatchSize": str(self.pull_batch_size),
                "pullThresholdForQueue": str(self.pull_threshold_for_queue),
                "pullThresholdSizeForQueue": str(self.pull_threshold_size_for_queue // MIB),
                "maxReconsumeTimes": str(self.max_reconsume_times),
                "suspendCurrentQueueTimeMillis": str(self.suspend_current_queue_ms),
                PROP_CONSUME_ORDERLY: str(self.orderly).lower(),
                PROP_THREADPOOL_CORE_SIZE: str(self.consume_concurrency)}

    async def _consume_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """Hand one message to the listener outside the queues' flow (CONSUME_MESSAGE_DIRECTLY,
        an admin's ``queryMsgById -g G -d clientId``): no offset moves and nothing is retried;
        the answer says what the listener did."""
        ctx = ConsumeContext(MessageQueue(msg.topic, broker_name, msg.queue_id))
        restore_retry_topic(msg, self.group)
        result = ConsumeMessageDirectlyResult(order=self.orderly)
        began = time.monotonic()
        try:
            status = await self._run_listener([msg], ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            result.consume_result, result.remark = CR_THROW_EXCEPTION, f"{type(exc).__name__}: {exc}"
        else:
            if status is None or status is ConsumeStatus.CONSUME_SUCCESS:
                result.consume_result = CR_SUCCESS
            elif status is ConsumeStatus.RECONSUME_LATER:
                result.consume_result = CR_LATER
            else:
                result.consume_result = CR_RETURN_NULL
                result.remark = f"the listener returned {status!r}, not a ConsumeStatus"
        result.spent_time_mills = int((time.monotonic() - began) * 1000)
        return result

    async def _on_consume_directly(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(ConsumeMessageDirectlyResultRequestHeader)
        if header.consumer_group != self.group or not self.started:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer")
        try:
            [msg] = decode_records(request.body_bytes())
        except (ValueError, BolideError):
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         "the request's body is not one stored message")
        decompress_message(msg)
        result = await self._consume_directly(msg, header.broker_name or "")
        return request.make_response(body=result.encode())

    def _queue_infos(self) -> dict[MessageQueue, ProcessQueueInfo]:
        out = {}
        for mq, pq in self._queues.items():
            locked, granted_ms = self._orderly.lock_state(mq) if self._orderly is not None else (False, 0)
            out[mq] = pq.info(self.offsets.memory(mq), locked, granted_ms)
        return out

    # -- rebalance ------------------------------------------------------------------------------
    async def _on_ids_changed(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """NOTIFY_CONSUMER_IDS_CHANGED (40): a member joined or left; rebalance now."""
        if self._rebalance_wanted is not None:
            self._rebalance_wanted.set()
        return None

    async def _on_reset_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """RESET_CONSUMER_CLIENT_OFFSET (220): an admin moved this group's offsets
        (``mqadmin resetOffsetByTime``): give up the queues concerned, commit their new offsets
        and take them again from there."""
        header = request.read_header(ResetOffsetRequestHeader)
        if header.group != self.group or self._rebalance_lock is None:
            return None
        table = ResetOffsetBody.decode(request.body_bytes()).offset_table
        async with self._rebalance_lock:
            for mq in [q for q in table if q in self._queues]:
                await self._release(mq)
            for mq, offset in table.items():
                self.offsets.update(mq, offset)
            await self.offsets.persist(list(table))
            for mq in table:
                self.offsets.remove(mq)
        if self._rebalance_wanted is not None:
            self._rebalance_wanted.set()
        return None

    async def _rebalance_loop(self) -> None:
        assert self._rebalance_wanted is not None and self._stop is not None
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await wait_for(self._rebalance_wanted.wait(), self.rebalance_interval_ms / 1000)
            self._rebalance_wanted.clear()
            if self._stop.is_set():
                return
            try:
                await self.rebalance()
            except BolideError as exc:
                log.warning("rebalance of group %s failed: %s", self.group, exc)

    async def rebalance(self) -> None:
        """Take this member's share of every subscribed topic; release queues no longer in it."""
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            target = await self.target_assignment(list(self.subscriptions))
            for topic, share in target.items():
                for mq in [q for q in self._queues if q.topic == topic and q not in share]:
                    await self._release(mq)
                new = share - self._queues.keys()
                if self._orderly is not None:
                    new = await self._orderly.lock_new(new)  # no pull before the lock is held
                for mq in sorted(new):
                    self._take(mq)
            self.rebalances += 1

    def _take(self, mq: MessageQueue) -> None:
        pq = ProcessQueue()
        self._queues[mq] = pq
        self._pull_tasks[mq] = asyncio.ensure_future(self._pull_loop(mq, pq))

    async def _release(self, mq: MessageQueue) -> None:
        pq = self._queues.pop(mq)
        pq.drop()
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            await cancel_and_wait([task])
        if self._orderly is not None:
            await self._orderly.release(mq)  # its batch in progress ends and commits first
        await self.offsets.persist([mq])  # the next owner starts where this one stopped
        self.offsets.remove(mq)
        if self._orderly is not None:
            await self._orderly.unlock({mq})

    # -- pulling --------------------------------------------------------------------------------
    async def _pause(self, ms: int) -> None:
        assert self._stop is not None
        with contextlib.suppress(TimeoutError):
            await wait_for(self._stop.wait(), ms / 1000)

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        try:
            offset = await self.initial_offset(mq)
        except Exception as exc:
            log.warning("no start offset for %s (%s): the next rebalance retries", mq, exc)
            if self._queues.get(mq) is pq:  # forget it so the next rebalance takes it again
                del self._queues[mq]
                self._pull_tasks.pop(mq, None)
            return
        self.offsets.update(mq, offset)
        sub = self._subscription_of(mq)
        while not pq.dropped:
            if self._orderly is not None and not self._orderly.is_locked(mq):
                await self._orderly.wait_locked(mq, self.pull_retry_delay_ms / 1000)
                continue
            if (pq.count >= self.pull_threshold_for_queue
                    or pq.size_bytes >= self.pull_threshold_size_for_queue):
                pq.space.clear()
                await pq.space.wait()  # flow control: wait until consumption frees room
                continue
            began = time.monotonic()
            try:
                result = await pull(self._instance, self.group, mq, offset, sub,
                                    max_nums=self.pull_batch_size, suspend_ms=self.suspend_ms,
                                    timeout_ms=self.pull_timeout_ms, commit_offset=self.offsets.memory(mq))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("pull from %s failed (%s); retrying in %d ms", mq, exc, self.pull_retry_delay_ms)
                await self._pause(self.pull_retry_delay_ms)
                continue
            if pq.dropped:
                return
            pq.last_pull_ms = int(time.time() * 1000)
            offset = result.next_begin_offset
            if result.status is PullStatus.FOUND and result.messages:
                self.stats.pulled(mq.topic, (time.monotonic() - began) * 1000, len(result.messages))
                pq.add(result.messages)
                self._submit(mq, pq, result.messages)
            elif pq.count == 0:
                # nothing held: everything below the next offset is consumed (or filtered out)
                self.offsets.update(mq, offset, increase_only=result.status is not PullStatus.OFFSET_ILLEGAL)
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning("offset of %s moved; continuing from %d", mq, offset)
                await self.offsets.persist([mq])

    # -- consuming ------------------------------------------------------------------------------
    def _submit(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self._orderly is not None:
            self._orderly.wake(mq, pq)
            return
        n = self.consume_batch_max_size
        for i in range(0, len(msgs), n):
            task = asyncio.ensure_future(self._consume(mq, pq, msgs[i:i + n]))
            self._consume_tasks.add(task)
            task.add_done_callback(self._consume_tasks.discard)

    async def _call_listener(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        tracer = self._tracer
        traced = tracer.before_consume(msgs) if tracer is not None else None
        began = time.monotonic()
        status = await self._listener_status(msgs, ctx)
        ok = status is ConsumeStatus.CONSUME_SUCCESS
        spent_ms = (time.monotonic() - began) * 1000
        self.stats.consumed(ctx.queue.topic, spent_ms, len(msgs) if ok else 0, 0 if ok else len(msgs))
        if tracer is not None and traced is not None:
            tracer.after_consume(traced, ok, spent_ms, len(msgs))
        return status

    async def _run_listener(self, msgs: list[MessageExt], ctx: ConsumeContext) -> Any:
        """What the listener returns (on the loop, or in the loop's thread pool); raises what
        it raises."""
        listener = self.listener
        assert listener is not None
        if inspect.iscoroutinefunction(listener):
            return await listener(msgs, ctx)
        call = functools.partial(listener, msgs, ctx)
        result = await asyncio.get_running_loop().run_in_executor(None, call)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _listener_status(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        try:
            result = await self._run_listener(msgs, ctx)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the listener of group %s raised; the messages will be delivered again", self.group)
            return ConsumeStatus.RECONSUME_LATER
        if result is None:
            return ConsumeStatus.CONSUME_SUCCESS
        if not isinstance(result, ConsumeStatus):
            log.error("the listener returned %r, not a ConsumeStatus; treated as RECONSUME_LATER", result)
            return ConsumeStatus.RECONSUME_LATER
        return result

    async def _consume(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        assert self._sem is not None
        async with self._sem:
            if pq.dropped:
                return
            ctx = ConsumeContext(mq)
            status = await self._call_listener(msgs, ctx)
            done = msgs
            if status is ConsumeStatus.RECONSUME_LATER:
                if self.message_model is MessageModel.BROADCASTING:
                    log.warning("broadcast consume of %d message(s) failed; they are dropped", len(msgs))
                else:
                    kept = [m for m in msgs if not await self._send_back(m, mq, ctx.delay_level)]
                    if kept:
                        done = [m for m in msgs if m not in kept]
                        self._consume_later(mq, pq, kept)
            offset = pq.remove(done)
            if offset >= 0 and not pq.dropped:
                self.offsets.update(mq, offset, increase_only=True)

    def _consume_later(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        async def later() -> None:
            await self._pause(self.reconsume_local_delay_ms)
            if not pq.dropped and self._stop is not None and not self._stop.is_set():
                await self._consume(mq, pq, msgs)

        task = asyncio.ensure_future(later())
        self._consume_tasks.add(task)
        task.add_done_callback(self._consume_tasks.discard)

    async def _send_back(self, msg: MessageExt, mq: MessageQueue, delay_level: int) -> bool:
        """Hand a failed message back for a later delivery; False when that failed both ways."""
        addr = self._instance.master_addr(self._instance.broker_of(mq)) or msg.store_host
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset, group=self.group, delay_level=delay_level,
            origin_msg_id=msg.msg_id or msg.offset_msg_id, origin_topic=msg.topic,
            max_reconsume_times=self.max_reconsume_times, bname=mq.broker_name)
        try:
            await self._instance.api.send_back(addr, header)
            return True
        except BolideError as exc:
            log.info("CONSUMER_SEND_MSG_BACK to %s failed (%s); sending to the retry topic instead",
                     addr, exc)
        try:
            await self._send_to_retry_topic(msg, delay_level)
            return True
        except BolideError as exc:
            log.warning("message %s could not be sent back (%s); consuming it again in %d ms",
                        msg.msg_id or msg.offset_msg_id, exc, self.reconsume_local_delay_ms)
            return False

    async def _send_to_retry_topic(self, msg: MessageExt, delay_level: int) -> None:
        """The Java client's fallback: a plain send to ``%RETRY%<group>`` with retry properties."""
        if self._inner_producer is None:
            self._inner_producer = Producer(self.config, INNER_PRODUCER_GROUP)
        props = dict(msg.properties)
        props.setdefault(P.RETRY_TOPIC, msg.topic)
        if not props.get(P.ORIGIN_MESSAGE_ID):
            props[P.ORIGIN_MESSAGE_ID] = msg.msg_id or msg.offset_msg_id
        props[P.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        props[P.MAX_RECONSUME_TIMES] = str(self.max_reconsume_times)
        props.pop(P.TRANSACTION_PREPARED, None)
        for transient in (P.MIN_OFFSET, P.MAX_OFFSET):
            props.pop(transient, None)
        level = delay_level if delay_level > 0 else FIRST_RETRY_LEVEL + msg.reconsume_times
        props[P.DELAY_TIME_LEVEL] = str(level)
        retry = Message(RETRY_GROUP_TOPIC_PREFIX + self.group, msg.body, flag=msg.flag, properties=props)
        await self._inner_producer.send(retry)

