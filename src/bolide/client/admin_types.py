"""Results of :class:`bolide.client.admin.Admin`: consumer progress with its lag computations,
offset-reset plans and message views as plain JSON-ready dicts. Pure: no I/O."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from bolide.common import properties as P
from bolide.common.message import MessageExt
from bolide.protocol.bodies.client import MessageQueue


def queue_lag(broker_offset: int, consumer_offset: int, last_consumed_ms: int, newest_ms: int,
              earliest_ms: int = 0) -> tuple[int, int | None]:
    """(messages behind, milliseconds behind) of one queue.

    Messages: ``broker_offset - consumer_offset`` (never negative). Time: store time of the
    queue's newest message minus store time of the last consumed one, or of the oldest retained
    one when the group consumed nothing yet (or that message is gone); 0 when nothing is
    behind; None when a store time needed is unknown (0).
    """
    lag = max(broker_offset - consumer_offset, 0)
    if lag == 0:
        return 0, 0
    reference = last_consumed_ms if last_consumed_ms > 0 else earliest_ms
    if reference <= 0 or newest_ms <= 0:
        return lag, None
    return lag, max(newest_ms - reference, 0)


@dataclass(slots=True)
class QueueProgress:
    """One queue of a consumer group: offsets and the store times the lag is computed from."""

    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_consumed_ms: int = 0  # store time of the message at consumer_offset - 1 (0: unknown)
    newest_ms: int = 0  # store time of the queue's last message (0: empty or unknown)
    earliest_ms: int = 0  # store time of the oldest retained message (asked only when needed)
    client: str | None = None  # the consumer holding the queue (consumerProgress -s), if asked

    @property
    def lag(self) -> int:
        return queue_lag(self.broker_offset, self.consumer_offset, 0, 0)[0]

    @property
    def lag_ms(self) -> int | None:
        return queue_lag(self.broker_offset, self.consumer_offset, self.last_consumed_ms,
                         self.newest_ms, self.earliest_ms)[1]

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.queue.topic, "brokerName": self.queue.broker_name,
                "queueId": self.queue.queue_id, "brokerOffset": self.broker_offset,
                "consumerOffset": self.consumer_offset, "lag": self.lag, "lagMs": self.lag_ms,
                "lastConsumedTimestamp": self.last_consumed_ms, "newestTimestamp": self.newest_ms,
                "client": self.client}


@dataclass(slots=True)
class GroupProgress:
    """A consumer group's progress over every queue it has offsets on (consumerProgress)."""

    group: str
    queues: list[QueueProgress] = field(default_factory=list)
    consume_tps: float = 0.0

    @property
    def total_lag(self) -> int:
        return sum(q.lag for q in self.queues)

    @property
    def max_lag_ms(self) -> int | None:
        """The largest time lag of a queue (None when a lagging queue's is unknown)."""
        values = [q.lag_ms for q in self.queues]
        if any(v is None for v in values):
            return None
        return max((v for v in values if v is not None), default=0)

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "consumeTps": self.consume_tps, "totalLag": self.total_lag,
                "maxLagMs": self.max_lag_ms, "queues": [q.to_dict() for q in self.queues]}


@dataclass(frozen=True, slots=True)
class OffsetChange:
    """One queue of an offset reset: the committed offset before (None: none) and after."""

    queue: MessageQueue
    old_offset: int | None
    new_offset: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.queue.topic, "brokerName": self.queue.broker_name,
                "queueId": self.queue.queue_id, "oldOffset": self.old_offset,
                "newOffset": self.new_offset}


@dataclass(slots=True)
class ResetPlan:
    """resetOffsetByTime's outcome: what was (or, on a dry run, would be) committed."""

    group: str
    topic: str
    timestamp_ms: int
    changes: list[OffsetChange]
    applied: bool
    online_consumers: list[str] = field(default_factory=list)
    relayed_by: list[str] = field(default_factory=list)  # brokers that carried the reset out (222)

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "topic": self.topic, "timestamp": self.timestamp_ms,
                "dryRun": not self.applied, "applied": self.applied,
                "onlineConsumers": self.online_consumers, "relayedBy": self.relayed_by,
                "queues": [c.to_dict() for c in self.changes]}


def body_text(body: bytes) -> tuple[str, str]:
    """(text, encoding): the body as UTF-8 text, or base64 when it is not valid UTF-8."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


# tags and keys have fields of their own; MIN_OFFSET/MAX_OFFSET are added by pulls, not stored
_HIDDEN = {P.TAGS, P.KEYS, P.MIN_OFFSET, P.MAX_OFFSET}


def message_dict(msg: MessageExt, *, with_body: bool = True) -> dict[str, Any]:
    """A stored message as a JSON object (the shape ``bolide consume`` prints, one per line)."""
    out: dict[str, Any] = {
        "topic": msg.topic, "queueId": msg.queue_id, "queueOffset": msg.queue_offset,
        "msgId": msg.msg_id or msg.offset_msg_id, "offsetMsgId": msg.offset_msg_id,
        "tags": msg.tags, "keys": msg.keys, "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp, "bornHost": msg.born_host, "storeHost": msg.store_host,
        "commitLogOffset": msg.commit_log_offset, "reconsumeTimes": msg.reconsume_times,
        "bodySize": len(msg.body),
        "properties": {k: v for k, v in msg.properties.items() if k not in _HIDDEN},
    }
    if with_body:
        out["body"], out["bodyEncoding"] = body_text(msg.body)
    return out
