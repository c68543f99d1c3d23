"""RocketMQ 5's pop bookkeeping strings (``ExtraInfoUtil``), pure functions.

A popped message's ``POP_CK`` property, which the client sends back as an ack's or invisible
time change's ``extraInfo``, is eight space-separated fields::

    ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId queueOffset

RocketMQ's proxy adds a ninth, the message's CommitLog offset (its receipt handles carry it);
fields past the eighth are ignored, as ``ExtraInfoUtil`` reads them by position. ``retry`` is 0
for the topic itself (1 and 2 for RocketMQ's pop retry topics, which Bolide does
not use). The client builds it from the pop answer's ``startOffsetInfo`` and ``msgOffsetInfo``:
``retry queueId offset`` and ``retry queueId o1,o2,...`` per queue, joined by ``;``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from bolide.errors import ProtocolError

NORMAL_TOPIC = "0"


class ExtraInfo(NamedTuple):
    """A parsed ``POP_CK`` / ``extraInfo``."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int | None  # absent in the 7-field form


def parse_extra_info(text: str) -> ExtraInfo:
    """Raises ProtocolError naming what is wrong."""
    fields = text.split(" ")
    if len(fields) < 7:
        raise ProtocolError(f"extraInfo {text[:100]!r} has {len(fields)} fields, not 7 or more")
    try:
        return ExtraInfo(
            ck_queue_offset=int(fields[0]),
            pop_time=int(fields[1]),
            invisible_time=int(fields[2]),
            revive_qid=int(fields[3]),
            retry=fields[4],
            broker_name=fields[5],
            queue_id=int(fields[6]),
            queue_offset=int(fields[7]) if len(fields) > 7 else None,
        )
    except ValueError:
        raise ProtocolError(f"extraInfo {text[:100]!r} has a field that is not a number") from None


def build_extra_info(
    ck_queue_offset: int,
    pop_time: int,
    invisible_time: int,
    revive_qid: int,
    broker_name: str,
    queue_id: int,
    queue_offset: int,
    retry: str = NORMAL_TOPIC,
) -> str:
    """A ``POP_CK`` as the Java client builds it."""
    return (
        f"{ck_queue_offset} {pop_time} {invisible_time} {revive_qid} {retry} "
        f"{broker_name} {queue_id} {queue_offset}"
    )


def start_offset_info(queues: Sequence[tuple[int, int]]) -> str:
    """``startOffsetInfo`` of (queue id, first offset) pairs."""
    return ";".join(f"{NORMAL_TOPIC} {queue_id} {start}" for queue_id, start in queues)


def msg_offset_info(queues: Sequence[tuple[int, Sequence[int]]]) -> str:
    """``msgOffsetInfo`` of (queue id, offsets in body order) pairs."""
    return ";".join(
        f"{NORMAL_TOPIC} {queue_id} {','.join(map(str, offsets))}" for queue_id, offsets in queues
    )

