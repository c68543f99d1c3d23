"""RocketMQ 5's pop bookkeeping strings (``ExtraInfoUtil``), pure functions.

A popped message's ``POP_CK`` property, which the client sends back as an ack's or invisible
time change's ``extraInfo``, is eight space-separated fields::

    ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId queueOffset

RocketMQ's proxy adds a ninth, the message's CommitLog offset (its receipt handles carry it);
fields past the eighth are ignored, as ``ExtraInfoUtil`` reads them by position. ``retry`` is 0
for the topic itself, 1 and 2 for the group's pop retry topics ``%RETRY%<group>_<topic>`` and
``%RETRY%<group>+<topic>``. The client builds it from the pop answer's ``startOffsetInfo`` and
``msgOffsetInfo``: ``retry queueId offset`` and ``retry queueId o1,o2,...`` per queue, joined by ``;``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
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


QueueKey = int | tuple[str, int]  # a queue id of the topic, or (retry mark, queue id)


def _mark(key: QueueKey) -> str:
    return f"{NORMAL_TOPIC} {key}" if isinstance(key, int) else f"{key[0]} {key[1]}"


def start_offset_info(queues: Sequence[tuple[QueueKey, int]]) -> str:
    """``startOffsetInfo`` of (queue, first offset) pairs; a queue is a queue id of the topic
    or (retry mark, queue id) for a pop retry topic's queue."""
    return ";".join(f"{_mark(queue)} {start}" for queue, start in queues)


def msg_offset_info(queues: Sequence[tuple[QueueKey, Sequence[int]]]) -> str:
    """``msgOffsetInfo`` of (queue, offsets in body order) pairs (queues as in
    :func:`start_offset_info`)."""
    return ";".join(f"{_mark(queue)} {','.join(map(str, offsets))}" for queue, offsets in queues)


class Popped(Protocol):
    """What :func:`pop_handles` reads of a popped message (``MessageExt`` has it)."""

    topic: str
    queue_id: int
    queue_offset: int
    properties: dict[str, str]


def retry_flag(topic: str) -> str:
    """The ``retry`` field for a message stored in ``topic``: RocketMQ's pop retry topics
    ``%RETRY%group_topic`` (1) and ``%RETRY%group+topic`` (2), else 0."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return NORMAL_TOPIC
    return "2" if "+" in topic else "1"


def real_topic(retry: str, topic: str, group: str) -> str:
    """The topic a handle's message is stored in: ``topic`` itself, or ``group``'s pop retry
    topic of it (the other way round from :func:`retry_flag`)."""
    if retry == "1":
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"
    if retry == "2":
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"
    return topic


def _by_queue(text: str | None) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    for part in (text or "").split(";"):
        fields = part.split(" ")
        if len(fields) == 3:
            out[(fields[0], int(fields[1]))] = fields[2]
    return out


def pop_handles(
    messages: Sequence[Popped],
    start_info: str | None,
    msg_info: str | None,
    pop_time: int,
    invisible_time: int,
    revive_qid: int,
    broker_name: str,
) -> list[str]:
    """Each popped message's ``POP_CK``, as the Java client builds it from the pop's answer
    (a message that carries one already, revived from a retry topic, keeps its retry field)."""
    starts = _by_queue(start_info)
    listed = {key: [int(o) for o in text.split(",")] for key, text in _by_queue(msg_info).items()}
    seen: dict[tuple[str, int], int] = {}
    out = []
    for msg in messages:
        own = msg.properties.get("POP_CK", "").split(" ")
        key = (own[4] if len(own) > 4 else retry_flag(msg.topic), msg.queue_id)
        index = seen[key] = seen.get(key, -1) + 1
        offsets = listed.get(key, [])
        offset = offsets[index] if index < len(offsets) else msg.queue_offset
        start = int(starts.get(key, msg.queue_offset))
        out.append(build_extra_info(start, pop_time, invisible_time, revive_qid, broker_name, msg.queue_id,
                                    offset, retry=key[0]))
    return out
