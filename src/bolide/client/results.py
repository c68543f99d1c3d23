"""Value types returned by the client: send results, pull results and consumer enums."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from bolide.common.message import MessageExt
from bolide.protocol.bodies.client import (
    BROADCASTING,
    CLUSTERING,
    CONSUME_FROM_FIRST_OFFSET,
    CONSUME_FROM_LAST_OFFSET,
    CONSUME_FROM_TIMESTAMP,
    MessageQueue,
)

__all__ = ["ConsumeFrom", "ConsumeStatus", "MessageModel", "MessageQueue", "PullResult",
           "PullStatus", "SendResult", "SendStatus"]


class SendStatus(enum.Enum):
    """How a send ended: stored and safe, or stored with a durability warning."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    """``msg_id`` is the client id (UNIQ_KEY; comma-joined for batches), ``offset_msg_id`` the
    broker's id (store address + CommitLog offset), ``queue_offset`` the (first) queue offset;
    ``recall_handle`` recalls a timer message before it is due (``Producer.recall_message``)."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    region_id: str = "DefaultRegion"
    recall_handle: str | None = None


class PullStatus(enum.Enum):
    """What a pull found: messages, nothing new yet, nothing matching the filter, or an offset
    outside the queue (the answer carries the offset to continue from)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    """A pull's outcome; ``messages`` are already filtered by tag and decompressed."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    offset_delta: int | None = None  # a static topic's: logic offset - physical offset


class ConsumeStatus(enum.Enum):
    """What a push listener reports: done, or deliver again later (through the retry topic)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeFrom(enum.Enum):
    """Where a group without a committed offset starts on a queue."""

    LAST_OFFSET = CONSUME_FROM_LAST_OFFSET
    FIRST_OFFSET = CONSUME_FROM_FIRST_OFFSET
    TIMESTAMP = CONSUME_FROM_TIMESTAMP


class MessageModel(enum.Enum):
    """CLUSTERING: the group shares the queues; BROADCASTING: every consumer gets everything."""

    CLUSTERING = CLUSTERING
    BROADCASTING = BROADCASTING
