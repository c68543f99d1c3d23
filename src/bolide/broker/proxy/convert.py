"""Messages between RocketMQ 5's gRPC form and the stored one (RocketMQ's proxy mapping).

A v5 message's system properties become the record's properties as RocketMQ's proxy writes
them (tag TAGS, keys KEYS, message id UNIQ_KEY, message group __SHARDINGKEY, delivery time
TIMER_DELIVER_MS, ...); a stored message becomes a v5 message with its user properties apart
from the system ones, an MD5 body digest and its delivery attempt. Pure functions.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from bolide.broker.dead_letter import DLQ_ORIGIN_MESSAGE_ID, DLQ_ORIGIN_TOPIC
from bolide.common import properties as P
from bolide.common.compression import decompress_body
from bolide.common.message import MessageExt
from bolide.protocol.v5 import messaging_pb2 as pb

SHARDING_KEY = "__SHARDINGKEY"
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
MAX_USER_PROPERTIES = 128
MAX_PROPERTIES_BYTES = 16 * 1024
MAX_MESSAGE_GROUP_BYTES = 64

# RocketMQ's MessageConst.STRING_HASH_SET: names a user property may not take, and the ones a
# delivered message does not show as user properties
SYSTEM_PROPERTIES = frozenset(
    {
        "TRACE_ON",
        "MSG_REGION",
        P.KEYS,
        P.TAGS,
        P.WAIT_STORE_MSG_OK,
        P.DELAY_TIME_LEVEL,
        P.RETRY_TOPIC,
        P.REAL_TOPIC,
        P.REAL_QUEUE_ID,
        P.TRANSACTION_PREPARED,
        P.PRODUCER_GROUP,
        P.MIN_OFFSET,
        P.MAX_OFFSET,
        "BUYER_ID",
        P.ORIGIN_MESSAGE_ID,
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        P.RECONSUME_TIME,
        P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        P.MAX_RECONSUME_TIMES,
        "CONSUME_START_TIME",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "DUP_INFO",
        "EXTEND_UNIQ_INFO",
        "INSTANCE_ID",
        P.CORRELATION_ID,
        P.REPLY_TO_CLIENT,
        P.MESSAGE_TTL,
        P.REPLY_MESSAGE_ARRIVE_TIME,
        P.PUSH_REPLY_TIME,
        P.CLUSTER,
        P.MESSAGE_TYPE,
        "INNER_MULTI_QUEUE_OFFSET",
        P.TIMER_DELAY_MS,
        P.TIMER_DELAY_SEC,
        P.TIMER_DELIVER_MS,
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        P.TIMER_OUT_MS,
        P.TIMER_DEL_UNIQKEY,
        "TIMER_DELAY_LEVEL",
        BORN_HOST,
        BORN_TIMESTAMP,
        DLQ_ORIGIN_TOPIC,
        DLQ_ORIGIN_MESSAGE_ID,
        "__CRC32#",
    }
)
_NOT_USER = SYSTEM_PROPERTIES | {SHARDING_KEY, TRACE_CONTEXT, CHECK_IMMUNITY}
_DELAY_KEYS = (P.DELAY_TIME_LEVEL, P.TIMER_DELIVER_MS, P.TIMER_DELAY_MS, P.TIMER_DELAY_SEC, P.TIMER_OUT_MS)

# the v5 message types and a topic's ``message.type`` attribute (RocketMQ's TopicMessageType)
TYPE_NAMES = {pb.NORMAL: "NORMAL", pb.FIFO: "FIFO", pb.DELAY: "DELAY", pb.TRANSACTION: "TRANSACTION"}
ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)


class Refused(Exception):
    """A request refused with a v5 status code; the message names the fix."""

    def __init__(self, code: pb.Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: pb.Code = pb.OK, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)


def accepted_types(topic_attributes: dict[str, str] | None) -> tuple[pb.MessageType, ...]:
    """The message types a topic takes: its ``message.type`` attribute (absent: NORMAL;
    MIXED: every type)."""
    name = (topic_attributes or {}).get("message.type", "NORMAL").upper()
    if name == "MIXED":
        return ALL_TYPES
    for number, type_name in TYPE_NAMES.items():
        if type_name == name:
            return (number,)
    return (pb.NORMAL,)


def message_type(props: dict[str, str]) -> pb.MessageType:
    """The v5 type of a message, from its properties (as RocketMQ's proxy derives it)."""
    if props.get(P.TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if any(key in props for key in _DELAY_KEYS):
        return pb.DELAY
    if SHARDING_KEY in props:
        return pb.FIFO
    return pb.NORMAL


def timestamp_ms(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def duration_ms(d: Duration) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def _timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def stored_form(msg: pb.Message, max_body: int) -> tuple[bytes, dict[str, str]]:
    """The body and properties a v5 message is stored with. Raises Refused with RocketMQ's
    codes for what its proxy refuses."""
    sp = msg.system_properties
    body = msg.body
    if sp.body_encoding == pb.GZIP:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error):
            raise Refused(
                pb.MESSAGE_CORRUPTED,
                "the body says GZIP encoding but does not decompress: send it uncompressed (IDENTITY)",
            ) from None
    if not body:
        raise Refused(pb.MESSAGE_BODY_EMPTY, "the message body is empty: send at least one byte")
    if len(body) > max_body:
        raise Refused(
            pb.MESSAGE_BODY_TOO_LARGE,
            f"the message body is {len(body)} bytes, more than "
            f"this broker's maxMessageSize {max_body}: send smaller messages",
        )
    if not sp.message_id:
        raise Refused(pb.ILLEGAL_MESSAGE_ID, "the message has no message_id: the client sets one")
    user = dict(msg.user_properties)
    if len(user) > MAX_USER_PROPERTIES:
        raise Refused(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"{len(user)} user properties: at most {MAX_USER_PROPERTIES} are allowed",
        )
    size = 0
    for key, value in user.items():
        if key in _NOT_USER:
            raise Refused(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property {key!r} is a system property name: rename it"
            )
        if not key or _has_control(key) or _has_control(value):
            raise Refused(
                pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property {key!r} is empty or holds control characters"
            )
        size += len(key.encode()) + len(value.encode())
    if size > MAX_PROPERTIES_BYTES:
        raise Refused(
            pb.MESSAGE_PROPERTIES_TOO_LARGE,
            f"user properties of {size} bytes: at most {MAX_PROPERTIES_BYTES} are allowed",
        )
    props = user
    if sp.HasField("tag"):
        if not sp.tag.strip() or "|" in sp.tag or _has_control(sp.tag):
            raise Refused(
                pb.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag!r} is blank or holds '|' or control characters"
            )
        props[P.TAGS] = sp.tag
    if sp.keys:
        for key in sp.keys:
            if not key.strip() or _has_control(key):
                raise Refused(
                    pb.ILLEGAL_MESSAGE_KEY, f"message key {key!r} is blank or holds control characters"
                )
        props[P.KEYS] = P.KEY_SEPARATOR.join(sp.keys)
    props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    if sp.HasField("message_group"):
        group = sp.message_group
        if not group or len(group.encode()) > MAX_MESSAGE_GROUP_BYTES or _has_control(group):
            raise Refused(
                pb.ILLEGAL_MESSAGE_GROUP,
                f"message group {group[:80]!r} is empty, longer "
                f"than {MAX_MESSAGE_GROUP_BYTES} bytes or holds control characters",
            )
        props[SHARDING_KEY] = group
    if sp.HasField("delivery_timestamp"):
        props[P.TIMER_DELIVER_MS] = str(timestamp_ms(sp.delivery_timestamp))
    if sp.message_type == pb.TRANSACTION:
        props[P.TRANSACTION_PREPARED] = "true"
        props[P.PRODUCER_GROUP] = msg.topic.name  # RocketMQ's proxy: the producer group is the topic
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[CHECK_IMMUNITY] = str(sp.orphaned_transaction_recovery_duration.seconds)
    if sp.HasField("trace_context"):
        props[TRACE_CONTEXT] = sp.trace_context
    if sp.born_host:
        props[BORN_HOST] = sp.born_host
    if sp.HasField("born_timestamp"):
        props[BORN_TIMESTAMP] = str(timestamp_ms(sp.born_timestamp))
    return body, props


def delivered(
    msg: MessageExt,
    *,
    handle: str,
    attempt: int,
    invisible_ms: int,
    dead_letter_of: tuple[str, str] | None = None,
) -> pb.Message:
    """A stored message as a v5 receive hands it out."""
    props = msg.properties
    try:
        body = decompress_body(msg.body, msg.sys_flag)
    except ValueError:
        body = msg.body
    sp = pb.SystemProperties(
        keys=[k for k in props.get(P.KEYS, "").split(P.KEY_SEPARATOR) if k],
        message_id=props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.offset_msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(body).hexdigest().upper()),
        body_encoding=pb.IDENTITY,
        message_type=message_type(props),
        born_timestamp=_timestamp(msg.born_timestamp),
        born_host=props.get(BORN_HOST) or _host(msg.born_host),
        store_timestamp=_timestamp(msg.store_timestamp),
        store_host=msg.store_host,
        receipt_handle=handle,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        invisible_duration=Duration(seconds=invisible_ms // 1000, nanos=(invisible_ms % 1000) * 1_000_000),
        delivery_attempt=attempt,
    )
    if P.TAGS in props:
        sp.tag = props[P.TAGS]
    due = props.get(P.TIMER_OUT_MS) or props.get(P.TIMER_DELIVER_MS)
    if due and due.isdecimal():
        sp.delivery_timestamp.CopyFrom(_timestamp(int(due)))
    if SHARDING_KEY in props:
        sp.message_group = props[SHARDING_KEY]
    if TRACE_CONTEXT in props:
        sp.trace_context = props[TRACE_CONTEXT]
    if dead_letter_of is not None:
        sp.dead_letter_queue.CopyFrom(
            pb.DeadLetterQueue(topic=dead_letter_of[0], message_id=dead_letter_of[1])
        )
    user = {k: v for k, v in props.items() if k not in _NOT_USER}
    return pb.Message(
        topic=pb.Resource(name=msg.topic), user_properties=user, system_properties=sp, body=body
    )


def _host(address: str) -> str:
    """``host`` of ``host:port`` (v5 messages carry the born host without its port)."""
    return address.rpartition(":")[0] or address
