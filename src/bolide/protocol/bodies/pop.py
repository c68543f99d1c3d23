"""Bodies of RocketMQ 5's broker-side allocation and pop: QUERY_ASSIGNMENT (400),
SET_MESSAGE_REQUEST_MODE (401), BATCH_ACK_MESSAGE (200151), and the broker's
``config/messageRequestMode.json``."""

from __future__ import annotations

import base64
import binascii

from bolide.errors import ProtocolError
from bolide.protocol.bodies.bean import Bean, bean, jfield
from bolide.protocol.bodies.client import CLUSTERING, MessageQueue

MODE_PULL = "PULL"  # MessageRequestMode: the consumer pulls its queues
MODE_POP = "POP"  # ... or pops them
MAX_BIT_SET_BYTES = 4096  # a batch ack's offsets span at most this many bytes of bits


@bean
class QueryAssignmentRequestBody(Bean):
    topic: str = ""
    consumer_group: str = ""
    client_id: str = ""
    strategy_name: str = ""
    message_model: str = CLUSTERING


@bean
class MessageQueueAssignment(Bean):
    message_queue: MessageQueue | None = None
    mode: str = MODE_PULL
    attachments: dict[str, str] | None = None


@bean
class QueryAssignmentResponseBody(Bean):
    message_queue_assignments: list[MessageQueueAssignment] | None = None  # None: keep what you have


@bean
class SetMessageRequestModeRequestBody(Bean):
    """A group's mode on a topic; in POP mode each consumer also pops the queues of the
    ``pop_share_queue_num`` consumers after it (0 or fewer: every consumer pops every queue)."""

    topic: str = ""
    consumer_group: str = ""
    mode: str = MODE_PULL
    pop_share_queue_num: int = 0


@bean
class MessageRequestModeTable(Bean):
    """``config/messageRequestMode.json``: topic -> group -> mode."""

    message_request_mode_map: dict[str, dict[str, SetMessageRequestModeRequestBody]] = jfield(factory=dict)


@bean
class BatchAck(Bean):
    """The acknowledgements of one pop's messages of one queue: bit ``i`` of ``bit_set`` (Java's
    BitSet bytes, little-endian, in base64) acknowledges offset ``start_offset + i``."""

    consumer_group: str = jfield(default="", name="c", aliases=("consumerGroup",))
    topic: str = jfield(default="", name="t", aliases=("topic",))
    retry: str = jfield(default="0", name="r", aliases=("retry",))
    start_offset: int = jfield(default=0, name="so", aliases=("startOffset",))
    queue_id: int = jfield(default=0, name="q", aliases=("queueId",))
    revive_queue_id: int = jfield(default=0, name="rq", aliases=("reviveQueueId",))
    pop_time: int = jfield(default=0, name="pt", aliases=("popTime",))
    invisible_time: int = jfield(default=0, name="it", aliases=("invisibleTime",))
    bit_set: str = jfield(default="", name="b", aliases=("bitSet",))

    def offsets(self) -> list[int]:
        """The acknowledged offsets; raises ProtocolError when ``bit_set`` is not base64."""
        try:
            raw = base64.b64decode(self.bit_set, validate=True)
        except (binascii.Error, ValueError):
            raise ProtocolError(f"batch ack bitSet {self.bit_set[:40]!r} is not base64") from None
        if len(raw) > MAX_BIT_SET_BYTES:
            raise ProtocolError(f"batch ack bitSet spans {len(raw) * 8} offsets; at most "
                                f"{MAX_BIT_SET_BYTES * 8} follow one pop's first offset")
        bits = int.from_bytes(raw, "little")
        return [self.start_offset + i for i in range(bits.bit_length()) if bits >> i & 1]


@bean
class BatchAckMessageRequestBody(Bean):
    broker_name: str = ""
    acks: list[BatchAck] = jfield(factory=list)
