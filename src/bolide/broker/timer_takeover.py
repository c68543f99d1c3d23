"""Timer messages a RocketMQ 5 broker left waiting in its timer wheel, delivered by Bolide.

RocketMQ 5 stores a timer message in the topic ``rmq_sys_wheel_timer``, queue 0, with its due
time in TIMER_OUT_MS and its topic and queue in REAL_TOPIC / REAL_QID, and keeps when each is
due in files of its own (``timerwheel``, ``timerlog``). ``config/timercheck``
(:mod:`bolide.store.timer_checkpoint`) says how far it got: the messages of that queue before
``lastTimerQueueOffset`` are in its wheel, and those due before ``lastReadTimeMs`` were
delivered. A recall is a message of that queue whose TIMER_DEL_UNIQKEY is
``<topic>+<UNIQ_KEY>``; a message due beyond the wheel's window is stored in the queue again
when the window reaches it (the same UNIQ_KEY, TIMER_ROLL_TIMES one higher).

A Bolide master opening such a store reads that queue once, at start: every message neither
delivered nor recalled goes into Bolide's own timers (the delay levels, :mod:`bolide.broker.timer`),
or into its topic when it is due already. ``config/timerWheelTakeover.json`` then records the
queue's end, so a later start takes over only what RocketMQ stored after it. RocketMQ's files
are left as they are. Delivery is at least once: a crash between the puts and that record
takes them over again. Without ``timercheck`` the messages due in the future are taken over:
those due already cannot be told apart from delivered ones. RocketMQ's ``config/timermetrics``
counted the taken-over messages as waiting already: those put into their topic at once count
down (:mod:`bolide.store.timer_metrics`). The checkpoints and acknowledgements of RocketMQ's pops
that wait there for the revive topic are left to :mod:`bolide.broker.pop_takeover`, which reads
them before this runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bolide.broker.timer import timer_hop
from bolide.common import properties as P
from bolide.common.message import Message
from bolide.common.topic import TIMER_TOPIC
from bolide.errors import ConfigError
from bolide.store import GetStatus, MessageStore, PutStatus
from bolide.store.config_files import JsonConfigFile
from bolide.store.pop_revive_log import REVIVE_TOPIC_PREFIX
from bolide.store.timer_checkpoint import FILE_NAME as CHECKPOINT_FILE
from bolide.store.timer_checkpoint import TimerCheckpoint
from bolide.store.timer_metrics import TimerMetrics

log = logging.getLogger(__name__)

TIMER_QUEUE = 0
READ_BATCH = 256
DISPATCH_WAIT_S = 60
_HOPELESS = (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED)


class TakeoverMark(JsonConfigFile):
    """``timerWheelTakeover.json``: ``{"queueOffset": N}``, the first offset of RocketMQ's timer
    queue not taken over yet."""

    FILE_NAME = "timerWheelTakeover.json"
    WHAT = "how far RocketMQ's timer messages were taken over"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.queue_offset = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {"queueOffset": self.queue_offset}

    def _apply(self, obj: dict[str, Any] | None) -> None:
        value = (obj or {}).get("queueOffset", 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"queueOffset {value!r} is not an offset")
        self.queue_offset = value


@dataclass(slots=True)
class WheelScan:
    """Sorts the messages of RocketMQ's timer queue into delivered, recalled and waiting."""

    last_read_ms: int  # due before this: delivered (if in the wheel)
    last_queue_offset: int  # queue offsets before this were in the wheel
    waiting: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> (due ms, CommitLog offset)
    recalls: set[str] = field(default_factory=set)  # "<topic>+<UNIQ_KEY>"
    delivered: int = 0
    unreadable: int = 0

    def add(self, queue_offset: int, commit_log_offset: int, props: dict[str, str]) -> None:
        recall = props.get(P.TIMER_DEL_UNIQKEY)
        if recall is not None:
            self.recalls.add(recall)
            return
        due_text, topic = props.get(P.TIMER_OUT_MS, ""), props.get(P.REAL_TOPIC)
        if not due_text.isdecimal() or not topic or not props.get(P.REAL_QUEUE_ID, "").isdecimal():
            self.unreadable += 1
            return
        due = int(due_text)
        if queue_offset < self.last_queue_offset and due < self.last_read_ms:
            self.delivered += 1
            return
        uniq_key = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        key = f"{topic}+{uniq_key}" if uniq_key else f"@{commit_log_offset}"
        self.waiting[key] = (due, commit_log_offset)  # a rolled copy replaces the one before

    def to_deliver(self) -> list[tuple[int, int]]:
        """(due ms, CommitLog offset) of the waiting messages not recalled, by due time (not
        those for RocketMQ's pop revive topic: :mod:`bolide.broker.pop_takeover` reads them)."""
        return sorted(v for k, v in self.waiting.items()
                      if k not in self.recalls and not k.startswith(REVIVE_TOPIC_PREFIX))

    def revive_entries(self) -> list[tuple[int, int]]:
        """(due ms, CommitLog offset) of the waiting pop checkpoints and acknowledgements."""
        return sorted(v for k, v in self.waiting.items() if k.startswith(REVIVE_TOPIC_PREFIX))

    @property
    def recalled(self) -> int:
        return sum(1 for k in self.waiting if k in self.recalls)


@dataclass(frozen=True, slots=True)
class TakeoverReport:
    scanned: int
    taken_over: int
    recalled: int
    delivered_before: int
    skipped: int


async def take_over_timer_wheel(
    store: MessageStore, mark: TakeoverMark, *, now_ms: int | None = None,
    metrics: TimerMetrics | None = None
) -> TakeoverReport | None:
    """Take over the timer messages RocketMQ left waiting in ``store`` (on the event loop,
    before the schedule service starts); None when there are none to look at. Raises
    TakeoverRefused when the store refuses a put for a reason that may pass (the mark then
    stays: the next start tries again)."""
    if store.get_max_offset_in_queue(TIMER_TOPIC, TIMER_QUEUE) <= mark.queue_offset:
        return None
    if not await asyncio.to_thread(store.wait_dispatched, DISPATCH_WAIT_S, False):
        log.warning("RocketMQ's timer queue: the store's ConsumeQueues are not caught up after %d s; "
                    "taking over what they hold now", DISPATCH_WAIT_S)
    end = store.get_max_offset_in_queue(TIMER_TOPIC, TIMER_QUEUE)
    start = max(mark.queue_offset, store.get_min_offset_in_queue(TIMER_TOPIC, TIMER_QUEUE))
    if start >= end:
        return None
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    scan = new_wheel_scan(store, end, now)
    scanned = await scan_wheel(store, scan, start, end)
    skipped = scan.unreadable
    taken = 0
    for i, (due, phys) in enumerate(scan.to_deliver()):
        if _put(store, phys, due, now, metrics):
            taken += 1
        else:
            skipped += 1
        if i % READ_BATCH == READ_BATCH - 1:
            await asyncio.sleep(0)
    await asyncio.wrap_future(store.durable(store.max_phy_offset))
    mark.queue_offset = end
    await asyncio.to_thread(mark.persist)
    report = TakeoverReport(scanned, taken, scan.recalled, scan.delivered, skipped)
    log.info("RocketMQ's timer wheel: %d timer messages taken over into the delay levels (%d recalled, "
             "%d delivered by RocketMQ already, %d skipped) of %d in its queue", taken, report.recalled,
             report.delivered_before, skipped, scanned)
    return report


def new_wheel_scan(store: MessageStore, end: int, now: int) -> WheelScan:
    """A scan that tells delivered from waiting by RocketMQ's ``config/timercheck`` (without
    it: the messages due after ``now`` wait, logged)."""
    checkpoint = TimerCheckpoint.read(Path(store.config.config_dir) / CHECKPOINT_FILE)
    if checkpoint is None:
        log.warning("RocketMQ's timer queue has messages but config/%s is missing: taking over "
                    "those due after now only", CHECKPOINT_FILE)
        return WheelScan(now, end)
    return WheelScan(checkpoint.last_read_time_ms, checkpoint.last_timer_queue_offset)


async def scan_wheel(store: MessageStore, scan: WheelScan, start: int, end: int) -> int:
    """Hand the messages of RocketMQ's timer queue from ``start`` to ``end`` to ``scan`` (in
    batches, yielding to the loop); how many there were."""
    offset, scanned = start, 0
    while offset < end:
        result = store.get_message("", TIMER_TOPIC, TIMER_QUEUE, offset, READ_BATCH)
        try:
            if result.status is GetStatus.FOUND:
                for queue_offset, msg in zip(result.queue_offsets, result.messages, strict=True):
                    scan.add(queue_offset, msg.commit_log_offset, msg.properties)
                    scanned += 1
            offset = max(result.next_begin_offset, offset + 1)
        finally:
            result.release()
        await asyncio.sleep(0)
    return scanned


def _put(store: MessageStore, phys: int, due: int, now: int, metrics: TimerMetrics | None) -> bool:
    """Put the timer message at ``phys`` into its first delay level (its topic when due); False
    when it is gone or cannot be stored (logged)."""
    msg = store.look_message_by_offset(phys)
    if msg is None:
        log.warning("RocketMQ's timer wheel: no message at CommitLog offset %d any more; skipped", phys)
        return False
    props = dict(msg.properties)
    topic, queue_id = props.pop(P.REAL_TOPIC), int(props.pop(P.REAL_QUEUE_ID))
    props.pop(P.DELAY_TIME_LEVEL, None)
    props = timer_hop(props, due, now, store.delay_millis)
    level = props.get(P.DELAY_TIME_LEVEL)
    result = store.put_message(
        Message(topic, msg.body, flag=msg.flag, properties=props), queue_id, sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_host=msg.born_host, reconsume_times=msg.reconsume_times,
        wait_store=False)
    if result.ok:
        if level is None and metrics is not None:  # due already: delivered
            metrics.add(topic, -1)
        return True
    if result.status in _HOPELESS:
        log.warning("RocketMQ's timer wheel: the message at %d to %s cannot be stored (%s: %s); skipped",
                    phys, topic, result.status.value, result.remark)
        return False
    raise TakeoverRefused(f"the store refused a timer message taken over from RocketMQ's timer wheel "
                          f"({result.status.value}: {result.remark}); the next start tries again")


class TakeoverRefused(Exception):
    """The store refused a put that may succeed later (disk full, read-only)."""
