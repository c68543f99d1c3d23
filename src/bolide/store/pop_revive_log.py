"""RocketMQ 5's pop revive log: the checkpoints and acknowledgements its pops leave behind,
decoded and paired (pure functions, no store access).

A RocketMQ 5 pop advances the group's offset at once and writes a checkpoint (``PopCheckPoint``,
tag ``ck``) into queue ``reviveQid`` of the revive topic ``rmq_sys_REVIVE_LOG_<cluster>``: the
popped messages of one queue as ``so`` (start offset) plus ``d`` (each one's distance from it;
absent in old checkpoints: ``n`` consecutive offsets), ``pt`` (pop time) and ``it`` (invisible
time), ``c`` the group, ``t`` the topic (a pop retry topic when popped from one), ``q`` the queue,
``bn`` the broker name. An acknowledgement is an ``AckMsg`` (tag ``ack``: ``ao`` the offset) or a
``BatchAckMsg`` (tag ``bAck``: ``aol`` the offsets) naming its checkpoint by ``t c q so pt bn``;
an invisible-time change acknowledges the old checkpoint and writes a new one (one message, the
new pop time). Both go through the timer: a checkpoint is due at ``pt + it - 1 s``, an ack at
``pt + it``. RocketMQ's PopReviveService pairs them by that key and puts each message of a
checkpoint left without its ack into the pop retry topic.

:class:`ReviveLedger` does the same pairing over everything handed to it, in any order, and
lists the messages no ack covers, each with the latest checkpoint that holds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bolide.common.fastjson import JSONError, loads

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"
ACK_TIME_INTERVAL_MS = 1000  # a checkpoint is due this long before its revive time
ORDER_REVIVE_QID = 999  # orderly pops write no checkpoints (their offset waits for the acks)
# PopCheckPoint's num is a byte (a pop takes at most 32 messages); more is a damaged record
MAX_CHECKPOINT_MESSAGES = 255


def revive_topic(cluster: str) -> str:
    """The revive topic of a RocketMQ cluster."""
    return REVIVE_TOPIC_PREFIX + cluster


def is_revive_topic(topic: str) -> bool:
    return topic.startswith(REVIVE_TOPIC_PREFIX)


class ReviveRecordError(ValueError):
    """A revive-log body that is not a checkpoint or acknowledgement RocketMQ writes."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A ``PopCheckPoint``: the messages one pop took from one queue."""

    group: str
    topic: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    offsets: tuple[int, ...]  # the popped messages' queue offsets, in the checkpoint's order
    broker_name: str
    acked_bits: int = 0  # the checkpoint's own ``bm``

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time


@dataclass(frozen=True, slots=True)
class Ack:
    """An ``AckMsg`` or ``BatchAckMsg``: offsets of one checkpoint acknowledged."""

    group: str
    topic: str
    queue_id: int
    start_offset: int
    pop_time: int
    offsets: tuple[int, ...]
    broker_name: str


def _field(obj: dict[str, Any], short: str, long: str | None = None) -> Any:
    value = obj.get(short)
    if value is None and long is not None:
        value = obj.get(long)
    return value


def _int(obj: dict[str, Any], short: str, long: str | None = None, default: int | None = None) -> int:
    value = _field(obj, short, long)
    if value is None and default is not None:
        return default
    if isinstance(value, str) and value.lstrip("-").isdecimal() and len(value) <= 20:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ReviveRecordError(f"field {short!r} is {value!r}, not a whole number")
    return value


def _str(obj: dict[str, Any], short: str, long: str | None = None) -> str:
    value = _field(obj, short, long)
    if not isinstance(value, str) or not value:
        raise ReviveRecordError(f"field {short!r} is {value!r}, not a name")
    return value


def _whole_numbers(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _json(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    try:
        obj = loads(body)
    except (JSONError, UnicodeDecodeError) as exc:
        raise ReviveRecordError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ReviveRecordError("not a JSON object")
    return obj


def _broker(obj: dict[str, Any], default: str) -> str:
    value = _field(obj, "bn", "brokerName")
    return value if isinstance(value, str) and value.strip() else default


def decode_checkpoint(body: bytes | bytearray | memoryview, default_broker: str) -> Checkpoint:
    """A ``ck`` body; raises ReviveRecordError (RocketMQ's in-memory buffer also writes ``ck``
    bodies ``<reviveQid>-<offset>`` that cancel a checkpoint: they are not checkpoints)."""
    obj = _json(body)
    start = _int(obj, "so")
    num = _int(obj, "n", default=0)
    if not 0 <= num <= MAX_CHECKPOINT_MESSAGES:
        raise ReviveRecordError(f"field 'n' is {num}: a checkpoint holds 0 to "
                                f"{MAX_CHECKPOINT_MESSAGES} messages")
    diffs = obj.get("d")
    if diffs:
        if not _whole_numbers(diffs):
            raise ReviveRecordError(f"field 'd' is {diffs!r}, not a list of whole numbers")
        offsets = tuple(start + d for d in diffs[:max(num, 0)])
    else:
        offsets = tuple(start + i for i in range(max(num, 0)))
    return Checkpoint(
        group=_str(obj, "c"), topic=_str(obj, "t"), queue_id=_int(obj, "q"), start_offset=start,
        pop_time=_int(obj, "pt"), invisible_time=_int(obj, "it"), offsets=offsets,
        broker_name=_broker(obj, default_broker), acked_bits=_int(obj, "bm", default=0),
    )


def decode_ack(body: bytes | bytearray | memoryview, default_broker: str, *, batch: bool) -> Ack:
    """An ``ack`` (``batch=False``) or ``bAck`` body; raises ReviveRecordError."""
    obj = _json(body)
    if batch:
        listed = _field(obj, "aol", "ackOffsetList")
        if not _whole_numbers(listed):
            raise ReviveRecordError(f"field 'aol' is {listed!r}, not a list of offsets")
        offsets = tuple(listed)
    else:
        offsets = (_int(obj, "ao", "ackOffset"),)
    return Ack(
        group=_str(obj, "c", "consumerGroup"), topic=_str(obj, "t", "topic"),
        queue_id=_int(obj, "q", "queueId"), start_offset=_int(obj, "so", "startOffset"),
        pop_time=_int(obj, "pt", "popTime"), offsets=offsets, broker_name=_broker(obj, default_broker),
    )


def decode_record(
    tag: str | None, body: bytes | bytearray | memoryview, default_broker: str
) -> Checkpoint | Ack | None:
    """The checkpoint or acknowledgement a revive-log message holds (by its tag); None for any
    other tag. Raises ReviveRecordError for a body that does not decode."""
    if tag == CK_TAG:
        return decode_checkpoint(body, default_broker)
    if tag == ACK_TAG:
        return decode_ack(body, default_broker, batch=False)
    if tag == BATCH_ACK_TAG:
        return decode_ack(body, default_broker, batch=True)
    return None


_Key = tuple[str, str, int, int, int, str]  # topic, group, queue, start offset, pop time, broker


@dataclass(frozen=True, slots=True)
class Unacked:
    """A popped message no ack covers, with the latest checkpoint that holds it."""

    group: str
    topic: str  # where it is stored (the group's pop retry topic when popped from there)
    queue_id: int
    offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int  # the revive queue of that checkpoint: with pop_time, the consumer's handle

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time


@dataclass(slots=True)
class ReviveLedger:
    """Checkpoints and acknowledgements paired as RocketMQ's PopReviveService pairs them
    (by topic, group, queue, start offset, pop time and broker name), in any order."""

    checkpoints: dict[_Key, tuple[Checkpoint, int]] = field(default_factory=dict)  # -> (ck, reviveQid)
    acked: dict[_Key, set[int]] = field(default_factory=dict)

    @staticmethod
    def _key(r: Checkpoint | Ack) -> _Key:
        return r.topic, r.group, r.queue_id, r.start_offset, r.pop_time, r.broker_name

    def add(self, record: Checkpoint | Ack, revive_qid: int) -> None:
        """One record of revive queue ``revive_qid`` (a checkpoint seen twice, in the revive
        topic and still in the timer wheel, counts once)."""
        key = self._key(record)
        if isinstance(record, Checkpoint):
            if revive_qid != ORDER_REVIVE_QID:
                self.checkpoints[key] = (record, revive_qid)
        else:
            self.acked.setdefault(key, set()).update(record.offsets)

    def add_all(self, records: Iterable[tuple[Checkpoint | Ack, int]]) -> None:
        for record, revive_qid in records:
            self.add(record, revive_qid)

    def unacked(self) -> list[Unacked]:
        """Every message whose latest checkpoint has no ack for it, once (an invisible-time
        change writes a new checkpoint and acknowledges the old one: the latest pop of a
        message says where it stands), sorted by group, topic, queue and offset."""
        latest: dict[tuple[str, str, int, int], tuple[int, Unacked | None]] = {}
        for key, (ck, revive_qid) in self.checkpoints.items():
            acked = self.acked.get(key, ())
            for index, offset in enumerate(ck.offsets):
                where = (ck.group, ck.topic, ck.queue_id, offset)
                seen = latest.get(where)
                if seen is not None and seen[0] >= ck.pop_time:
                    continue
                done = offset in acked or (index < 32 and ck.acked_bits >> index & 1)
                latest[where] = (ck.pop_time, None if done else Unacked(
                    ck.group, ck.topic, ck.queue_id, offset, ck.pop_time, ck.invisible_time, revive_qid))
        return [u for _, (_, u) in sorted(latest.items()) if u is not None]

    def acked_count(self) -> int:
        """How many acknowledged offsets were handed to it."""
        return sum(len(v) for v in self.acked.values())
