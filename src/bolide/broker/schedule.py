"""Delivery of delayed messages (RocketMQ's ScheduleMessageService).

The store writes a message sent with ``DELAY=<level>`` to ``SCHEDULE_TOPIC_XXXX`` queue
``level - 1``, with its real topic and queue in ``REAL_TOPIC``/``REAL_QID``; the dispatcher gives
its ConsumeQueue entry the delivery time as tags code. This service walks each level's queue from
its offset in ``config/delayOffset.json`` and, once an entry is due, appends the message again to
its real topic and queue (``DELAY`` removed), on the event loop like every other append. A timer
message not due yet goes to its next level instead (:mod:`bolide.broker.timer`);
one recalled (:mod:`bolide.broker.timer_recall`) is dropped when it comes due. A timer message
delivered, recalled or dropped counts down its topic's timer metrics
(:mod:`bolide.store.timer_metrics`).

It sleeps until the earliest head entry is due, or until dispatch reports new schedule entries.

On a slave acting as master (:mod:`bolide.broker.acting_master`), :attr:`ScheduleService.escape`
writes the deliveries instead of the store (:class:`~bolide.broker.escape.EscapeBridge`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from bolide.broker.loop_service import LoopService
from bolide.broker.retry import group_of_retry_topic
from bolide.broker.timer import next_hop, timer_due
from bolide.broker.timer_recall import TimerRecalls
from bolide.common import properties as P
from bolide.common.message import Message
from bolide.common.topic import SCHEDULE_TOPIC
from bolide.common.waiting import wait_for
from bolide.store import MessageStore, PutMessageResult, PutStatus
from bolide.store.config_files import DelayOffsetManager
from bolide.store.consume_queue import EXT_ADDRESS_MAX
from bolide.store.record import RecordInfo, compute_tags_code, parse_record
from bolide.store.timer_metrics import TimerMetrics

log = logging.getLogger(__name__)

BATCH = 256  # deliveries per level before yielding to other work on the loop
IDLE_S = 1.0  # longest sleep: picks up entries whose dispatch wake-up was missed
RETRY_S = 1.0  # wait after the store refused a delivery (disk full, read-only)
# Refusals that will never succeed for this message: report and skip it.
_HOPELESS = (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


Escape = Callable[..., Awaitable[PutMessageResult]]  # EscapeBridge.put


class ScheduleService(LoopService):
    """Moves due messages from SCHEDULE_TOPIC_XXXX to their real topics."""

    TASK_NAME = "bolide-schedule"

    def __init__(self, loop: asyncio.AbstractEventLoop, store: MessageStore,
                 offsets: DelayOffsetManager, recalls: TimerRecalls | None = None,
                 on_recalled: Callable[[], None] = lambda: None,
                 timer_metrics: TimerMetrics | None = None) -> None:
        self.loop = loop
        self.store = store
        self.offsets = offsets
        self.recalls = recalls  # timer messages recalled before they were due: not delivered
        self.on_recalled = on_recalled
        self.timer_metrics = timer_metrics
        self.delivered = 0
        self.rescheduled = 0  # timer messages moved on to their next level
        self.recalled = 0
        self._wake = asyncio.Event()
        self._listening = False
        self.escape: Escape | None = None  # set while a slave acts as master
        self._escape_failing = False  # warn once per streak of failed escapes

    def start(self) -> None:
        """Start delivering (again, after :meth:`close`, when a controller-mode broker becomes
        master once more)."""
        if self.running:
            return
        self._clamp_offsets()
        if not self._listening:
            self._listening = True
            self.store.add_dispatch_listener(self.on_dispatch)
        super().start()

    def _clamp_offsets(self) -> None:
        """Bring loaded offsets into each queue's [min, max] (files may have been deleted)."""
        for level in self.store.delay_millis:
            offset = self.offsets.get(level)
            if offset is None:
                continue
            lo = self.store.get_min_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            hi = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            if not lo <= offset <= hi:
                self.offsets.update(level, min(max(offset, lo), hi))

    def on_dispatch(self, keys: Iterable[tuple[str, int]]) -> None:
        """Dispatch listener (dispatch thread): wake up when schedule entries arrive."""
        if any(topic == SCHEDULE_TOPIC for topic, _ in keys):
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to wake
                self.loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait_s = await self.deliver_due()
            except Exception:  # keep delivering later; never let the service die silently
                log.exception("delivering delayed messages failed; retrying in %.0f s", RETRY_S)
                wait_s = RETRY_S
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await wait_for(self._wake.wait(), wait_s)

    async def deliver_due(self) -> float:
        """Deliver every due message; seconds until the next one is due (at most IDLE_S)."""
        wait_s = IDLE_S
        for level, delay_ms in self.store.delay_millis.items():
            while True:
                outcome = await self._deliver_level(level, delay_ms)
                if outcome is not None:
                    wait_s = min(wait_s, outcome)
                    break
                await asyncio.sleep(0)  # a full batch: let sends and pulls in, then go on
        return wait_s

    async def _deliver_level(self, level: int, delay_ms: int) -> float | None:
        """Deliver up to BATCH due messages of one level. Seconds until its head is due (or
        until a refused delivery is retried); None when the batch was full."""
        queue_id = level - 1
        end = self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, queue_id)
        if end == 0:
            return IDLE_S
        cq = self.store.find_consume_queue(SCHEDULE_TOPIC, queue_id)
        offset = self.offsets.get(level)
        if offset is None or offset < cq.min_offset:
            offset = cq.min_offset
        now = _now_ms()
        for _ in range(BATCH):
            if offset >= end:
                return IDLE_S
            entry = cq.entry(offset)
            if entry is None:
                return IDLE_S
            phys, size, deliver_at = entry
            if deliver_at <= EXT_ADDRESS_MAX:  # a ConsumeQueueExt address, not the time
                deliver_at = self._deliver_time(phys, size, now)
            # a deliver time past now + delay comes from a clock change: deliver it now
            if now < deliver_at <= now + delay_ms:
                return (deliver_at - now) / 1000
            if not await self._deliver(phys, level):
                return RETRY_S
            offset += 1
            self.offsets.update(level, offset)
        return None

    def _deliver_time(self, phys: int, size: int, now: int) -> int:
        """The delivery time of the record at ``phys``, the tags code the dispatcher would
        give it, for an entry that holds a ConsumeQueueExt address instead (a store RocketMQ
        wrote with enableConsumeQueueExt); ``now`` when the record is gone or unreadable."""
        raw = self.store.record_bytes(phys, size)
        info = None if raw is None else parse_record(raw, 0, False)
        if not isinstance(info, RecordInfo):
            return now
        return compute_tags_code(info, self.store.delay_millis)

    async def _deliver(self, phys: int, level: int) -> bool:
        """Append the scheduled message at ``phys`` to its real topic; False to retry later."""
        msg = self.store.look_message_by_offset(phys)
        if msg is None:  # deleted by retention, or not a record: nothing left to deliver
            log.warning("delay level %d: no message at CommitLog offset %d; skipped", level, phys)
            return True
        props = dict(msg.properties)
        props.pop(P.DELAY_TIME_LEVEL, None)
        hop = next_hop(props, _now_ms(), self.store.delay_millis)
        if hop is not None:  # a timer message: on to its next level, or due, to its topic
            props = hop
        waiting = P.DELAY_TIME_LEVEL in props
        topic = props.get(P.REAL_TOPIC)
        queue_text = props.get(P.REAL_QUEUE_ID, "")
        if not topic or not queue_text.isdecimal():
            log.warning("delay level %d: message at %d has no REAL_TOPIC/REAL_QID; skipped",
                        level, phys)
            return True
        # a timer message's last hop (a consumer's retry of one keeps TIMER_OUT_MS: not counted)
        timer_done = not waiting and P.TIMER_OUT_MS in props and group_of_retry_topic(topic) is None
        if (timer_done and self.recalls is not None
                and self.recalls.take(topic, props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX))):
            log.info("timer message %s of %s was recalled: not delivered",
                     props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), topic)
            self.recalled += 1
            self._count_down(topic)
            self.on_recalled()
            return True
        message = Message(topic, msg.body, flag=msg.flag, properties=props)
        if self.escape is not None:  # an acting master: to another group's master
            result = await self.escape(message, sys_flag=msg.sys_flag,
                                       born_timestamp=msg.born_timestamp,
                                       reconsume_times=msg.reconsume_times)
        else:
            result = self.store.put_message(
                message, int(queue_text), sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
                born_host=msg.born_host, reconsume_times=msg.reconsume_times, wait_store=False)
        if result.ok:
            self._escape_failing = False
            if timer_done:
                self._count_down(topic)
            if waiting:
                self.rescheduled += 1
            else:
                self.delivered += 1
            return True
        if result.status in _HOPELESS:
            log.warning("delayed message at %d to %s cannot be stored (%s: %s); skipped",
                        phys, topic, result.status.value, result.remark)
            if timer_due(props) is not None and group_of_retry_topic(topic) is None:
                self._count_down(topic)
            return True
        level_log = log.debug if self.escape is not None and self._escape_failing else log.warning
        self._escape_failing = self.escape is not None
        level_log("delayed message at %d to %s refused (%s: %s); retrying",
                  phys, topic, result.status.value, result.remark)
        return False

    def _count_down(self, topic: str) -> None:
        if self.timer_metrics is not None:
            self.timer_metrics.add(topic, -1)

    def persist(self) -> None:
        """Write delayOffset.json (persister thread) once the deliveries it records are durable,
        so a crash cannot lose a delivered message whose schedule entry is marked done."""
        data = self.offsets.encode()
        self.store.durable(self.store.max_phy_offset).result(
            self.store.config.sync_flush_timeout_ms / 1000)
        self.offsets.write(data)
