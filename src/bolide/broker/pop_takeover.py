"""Messages RocketMQ 5's pops left out, handed out again by a Bolide master that takes its store.

A RocketMQ 5 pop moves the group's offset past what it hands out at once, and only its revive
log (``rmq_sys_REVIVE_LOG_<cluster>``, :mod:`bolide.store.pop_revive_log`) says which of those
messages were never acknowledged: without reading it, Bolide would never hand them out again.
The revive service of RocketMQ consumes that log as group ``CID_RMQ_SYS_REVIVE_GROUP`` (its offset
of each revive queue is the last checkpoint it handled), and the checkpoints and acknowledgements
not due yet still wait in the timer wheel (``rmq_sys_wheel_timer``,
:mod:`bolide.broker.timer_takeover`, which leaves them to this module).

At start, before the timer takeover, a master reads the revive queues from past that offset and
the waiting revive entries of the timer queue, pairs checkpoints with acknowledgements, and
gives each message left without its ack to the pop service as a lease of the group
(:meth:`bolide.broker.pop.PopService.adopt`): out until its revive time (the checkpoint's pop
time + invisible time), under the generation the consumer's handle carries (``popTime`` and
``reviveQid``), so the consumer may still acknowledge it or change its invisible time; then
handed out again, as RocketMQ would have. The group's committed offset moves back to the first
such message, so a later restart hands it out again too (and what was acknowledged after it:
at least once). Messages RocketMQ revived already are in the group's pop retry topic, which
Bolide's pops read. Orderly pops write no checkpoints (their offset waits for their acks):
nothing to do for them.

``config/popReviveTakeover.json`` then records how far the revive queues and the timer queue were
read, after the offsets it moved are persisted, so a later start reads only what came after; a
crash before that reads them again (at least once). The revive group's offsets are moved to the
ends too, as RocketMQ's revive service would.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bolide.broker.pop import PopService
from bolide.broker.timer_takeover import DISPATCH_WAIT_S, READ_BATCH, TIMER_QUEUE, new_wheel_scan, scan_wheel
from bolide.common import properties as P
from bolide.common.topic import TIMER_TOPIC
from bolide.errors import ConfigError
from bolide.store import GetStatus, MessageStore
from bolide.store.config_files import ConsumerOffsetManager, JsonConfigFile
from bolide.store.pop_revive_log import (
    REVIVE_GROUP,
    ReviveLedger,
    ReviveRecordError,
    decode_record,
    is_revive_topic,
)

log = logging.getLogger(__name__)


class ReviveTakeoverMark(JsonConfigFile):
    """``popReviveTakeover.json``: ``{"timerQueueOffset": N, "reviveOffsets": {topic: {queue: N}}}``,
    the first offsets of RocketMQ's timer queue and revive queues not read yet."""

    FILE_NAME = "popReviveTakeover.json"
    WHAT = "how far RocketMQ's pop revive log was taken over"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.timer_queue_offset = 0
        self.revive_offsets: dict[str, dict[int, int]] = {}

    def to_json_obj(self) -> dict[str, Any]:
        return {"timerQueueOffset": self.timer_queue_offset,
                "reviveOffsets": {t: {str(q): o for q, o in sorted(qs.items())}
                                  for t, qs in sorted(self.revive_offsets.items())}}

    def _apply(self, obj: dict[str, Any] | None) -> None:
        obj = obj or {}
        timer = obj.get("timerQueueOffset", 0)
        if not _offset(timer):
            raise ConfigError(f"timerQueueOffset {timer!r} is not an offset")
        revive = obj.get("reviveOffsets", {})
        if not isinstance(revive, dict):
            raise ConfigError(f"reviveOffsets {revive!r} is not a table of topics")
        table: dict[str, dict[int, int]] = {}
        for topic, queues in revive.items():
            if not isinstance(queues, dict) or not all(
                    str(q).isdecimal() and _offset(o) for q, o in queues.items()):
                raise ConfigError(f"reviveOffsets of {topic!r}: {queues!r} is not a table of queue offsets")
            table[str(topic)] = {int(q): o for q, o in queues.items()}
        self.timer_queue_offset, self.revive_offsets = timer, table

    def revive_offset(self, topic: str, queue_id: int) -> int:
        return self.revive_offsets.get(topic, {}).get(queue_id, 0)


def _offset(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True, slots=True)
class ReviveTakeoverReport:
    checkpoints: int  # read (in the revive queues and still in the timer wheel)
    acks: int  # acknowledged offsets read
    unacked: int  # messages of those checkpoints without their ack
    adopted: int  # of them, handed to the pop service as leases
    skipped: int  # of them, not adopted: group or topic gone, message gone, or at the group's offset
    unreadable: int  # revive-log messages that did not decode


async def take_over_pop_revive(
    store: MessageStore,
    pop: PopService,
    offsets: ConsumerOffsetManager,
    mark: ReviveTakeoverMark,
    *,
    broker_name: str,
    topic_exists: Callable[[str], bool],
    group_exists: Callable[[str], bool],
    now_ms: int | None = None,
) -> ReviveTakeoverReport | None:
    """Adopt the messages RocketMQ's pops left unacknowledged in ``store`` (on the event loop,
    before the timer takeover and before serving); None when there is nothing to read.
    ``broker_name`` stands for the checkpoints' broker name where they have none (as RocketMQ's
    revive service does); raises ConfigError when the offsets or the mark cannot be written."""
    queues = {t: q for t, q in store.topics().items() if is_revive_topic(t)}
    timer_end = store.get_max_offset_in_queue(TIMER_TOPIC, TIMER_QUEUE)
    if timer_end <= mark.timer_queue_offset and not any(
            store.get_max_offset_in_queue(t, q) > _start(store, offsets, mark, t, q)
            for t, qs in queues.items() for q in qs):
        return None
    if not await asyncio.to_thread(store.wait_dispatched, DISPATCH_WAIT_S, False):
        log.warning("RocketMQ's pop revive log: the store's ConsumeQueues are not caught up after %d s; "
                    "taking over what they hold now", DISPATCH_WAIT_S)
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    ledger = ReviveLedger()
    unreadable = 0
    ends: dict[tuple[str, int], int] = {}
    for topic, qs in sorted(queues.items()):
        for queue_id in sorted(qs):
            start = _start(store, offsets, mark, topic, queue_id)
            end = store.get_max_offset_in_queue(topic, queue_id)
            unreadable += await _read_revive_queue(store, ledger, topic, queue_id, start, end, broker_name)
            ends[(topic, queue_id)] = end
    timer_end = store.get_max_offset_in_queue(TIMER_TOPIC, TIMER_QUEUE)
    timer_start = max(mark.timer_queue_offset, store.get_min_offset_in_queue(TIMER_TOPIC, TIMER_QUEUE))
    if timer_start < timer_end:
        scan = new_wheel_scan(store, timer_end, now)
        await scan_wheel(store, scan, timer_start, timer_end)
        unreadable += _read_waiting(store, ledger, scan.revive_entries(), broker_name)
    unacked = ledger.unacked()
    adopted = 0
    for i, u in enumerate(unacked):
        gen = u.pop_time * 1000 + u.revive_qid  # what the consumer's handle carries
        if group_exists(u.group) and topic_exists(u.topic) and pop.adopt(
                u.group, u.topic, u.queue_id, u.offset, gen, u.revive_time - now):
            adopted += 1
        if i % READ_BATCH == READ_BATCH - 1:
            await asyncio.sleep(0)
    for (topic, queue_id), end in ends.items():
        if end > 0:  # as RocketMQ's revive service: the offset of the last message handled
            offsets.commit(REVIVE_GROUP, topic, queue_id, end - 1)
        mark.revive_offsets.setdefault(topic, {})[queue_id] = end
    mark.timer_queue_offset = max(mark.timer_queue_offset, timer_end)
    await asyncio.to_thread(offsets.persist)  # the moved offsets first: then the mark
    await asyncio.to_thread(mark.persist)
    report = ReviveTakeoverReport(len(ledger.checkpoints), ledger.acked_count(), len(unacked), adopted,
                                  len(unacked) - adopted, unreadable)
    log.info("RocketMQ's pop revive log: %d checkpoints, %d acknowledged offsets; %d messages without "
             "their ack handed out again at their revive time (%d skipped), %d records unreadable",
             report.checkpoints, report.acks, adopted, report.skipped, unreadable)
    return report


def _start(store: MessageStore, offsets: ConsumerOffsetManager, mark: ReviveTakeoverMark,
           topic: str, queue_id: int) -> int:
    """Where reading a revive queue starts: past what RocketMQ's revive service handled (its
    offset is the last message it handled) and what an earlier takeover read."""
    handled = offsets.query(REVIVE_GROUP, topic, queue_id)
    return max(mark.revive_offset(topic, queue_id), 0 if handled is None else handled + 1,
               store.get_min_offset_in_queue(topic, queue_id))


async def _read_revive_queue(store: MessageStore, ledger: ReviveLedger, topic: str, queue_id: int,
                             start: int, end: int, broker_name: str) -> int:
    """Add the records of one revive queue to ``ledger``; how many did not decode."""
    offset, unreadable = start, 0
    while offset < end:
        result = store.get_message("", topic, queue_id, offset, READ_BATCH)
        try:
            if result.status is GetStatus.FOUND:
                for msg in result.messages:
                    unreadable += _add(ledger, msg.properties.get(P.TAGS), msg.body, queue_id, broker_name)
            offset = max(result.next_begin_offset, offset + 1)
        finally:
            result.release()
        await asyncio.sleep(0)
    return unreadable


def _read_waiting(store: MessageStore, ledger: ReviveLedger, entries: list[tuple[int, int]],
                  broker_name: str) -> int:
    """Add the revive-log messages still waiting in the timer wheel (at these CommitLog offsets)."""
    unreadable = 0
    for _, phys in entries:
        msg = store.look_message_by_offset(phys)
        queue_text = msg.properties.get(P.REAL_QUEUE_ID, "") if msg is not None else ""
        if msg is None or not queue_text.isdecimal():
            unreadable += 1
            continue
        unreadable += _add(ledger, msg.properties.get(P.TAGS), msg.body, int(queue_text), broker_name)
    return unreadable


def _add(ledger: ReviveLedger, tag: str | None, body: bytes, queue_id: int, broker_name: str) -> int:
    try:
        record = decode_record(tag, body, broker_name)
    except ReviveRecordError as exc:
        log.warning("RocketMQ's pop revive log: a %s record of revive queue %d does not decode (%s); "
                    "skipped", tag, queue_id, exc)
        return 1
    if record is not None:
        ledger.add(record, queue_id)
    return 0
