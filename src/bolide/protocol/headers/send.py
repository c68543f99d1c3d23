"""Producer-side headers: SEND_MESSAGE (10) and its short-name form (310, 320, 325), the send
response, END_TRANSACTION (37), PUSH_REPLY_MESSAGE_TO_CLIENT (326) and CHECK_TRANSACTION_STATE
(39)."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import ClassVar, NoReturn

from bolide.common import sysflag
from bolide.errors import HeaderFieldError
from bolide.protocol.codes import DEFAULT_VERSION, RequestCode
from bolide.protocol.headers.base import Header, header, renamed

# commitOrRollback values of END_TRANSACTION
TRANSACTION_NOT_TYPE = sysflag.TRANSACTION_NOT_TYPE  # 0: unknown, wait for a check
TRANSACTION_COMMIT_TYPE = sysflag.TRANSACTION_COMMIT_TYPE  # 8
TRANSACTION_ROLLBACK_TYPE = sysflag.TRANSACTION_ROLLBACK_TYPE  # 12


@header
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE (10) and SEND_REPLY_MESSAGE (324) request, long field names."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = None
    bname: str | None = None

    def to_v1(self) -> SendMessageRequestHeader:
        """The same values as a long-name header."""
        return SendMessageRequestHeader(**{s.attr: getattr(self, s.attr) for s in self.FIELDS})

    def to_v2(self) -> SendMessageRequestHeaderV2:
        """The same values as a short-name header."""
        return SendMessageRequestHeaderV2(**{s.attr: getattr(self, s.attr) for s in self.FIELDS})


V2_NAMES = {
    "producer_group": "a",
    "topic": "b",
    "default_topic": "c",
    "default_topic_queue_nums": "d",
    "queue_id": "e",
    "sys_flag": "f",
    "born_timestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsume_times": "j",
    "unit_mode": "k",
    "max_reconsume_times": "l",
    "batch": "m",
    "bname": "n",
}


class SendMessageRequestHeaderV2(SendMessageRequestHeader):
    """SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), SEND_REPLY_MESSAGE_V2 (325): the same
    fields under one-letter names ``a`` to ``n``."""

    __slots__ = ()
    FIELDS = renamed(SendMessageRequestHeader.FIELDS, V2_NAMES)


_SHORT_NAME_CODES = frozenset(
    (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)
)


_INT32_FIELDS = ("default_topic_queue_nums", "queue_id", "sys_flag", "flag", "reconsume_times",
                 "max_reconsume_times")  # Java Integer; born_timestamp is a Long
_I32_MIN, _I32_MAX, _I64_MIN, _I64_MAX = -(2**31), 2**31 - 1, -(2**63), 2**63 - 1


def decode_send_request_header(code: int, ext: Mapping[str, str]) -> SendMessageRequestHeader:
    """The send header of a request with ``code``, in the naming that code uses; numbers outside
    their Java types' ranges raise HeaderFieldError, as Java's parseInt/parseLong refuse them
    (they do not fit the stored record's fields)."""
    cls = SendMessageRequestHeaderV2 if code in _SHORT_NAME_CODES else SendMessageRequestHeader
    h = cls.from_ext_fields(ext)
    if not (_I32_MIN <= h.queue_id <= _I32_MAX and _I32_MIN <= h.sys_flag <= _I32_MAX
            and _I32_MIN <= h.flag <= _I32_MAX and _I64_MIN <= h.born_timestamp <= _I64_MAX
            and _I32_MIN <= h.default_topic_queue_nums <= _I32_MAX
            and (h.reconsume_times is None or _I32_MIN <= h.reconsume_times <= _I32_MAX)
            and (h.max_reconsume_times is None or _I32_MIN <= h.max_reconsume_times <= _I32_MAX)):
        _out_of_range(h)
    return h


def _out_of_range(h: SendMessageRequestHeader) -> NoReturn:
    wires = {s.attr: s.wire for s in h.FIELDS}
    ranges = [(attr, _I32_MIN, _I32_MAX) for attr in _INT32_FIELDS]
    for attr, low, high in [*ranges, ("born_timestamp", _I64_MIN, _I64_MAX)]:
        value = getattr(h, attr)
        if value is not None and not low <= value <= high:
            raise HeaderFieldError(type(h).__name__, wires[attr],
                                   f"is {value}, outside the range {low}..{high} of its Java type")
    raise AssertionError("no field out of range")  # pragma: no cover


@header
class SendMessageResponseHeader(Header):
    """Send response. ``msg_id`` is the offset message id (comma-joined for batches).

    MSG_REGION and TRACE_ON are not fields of Java's class, but the Java broker always adds
    them and the Java client reads them.
    """

    WIRE_NAMES: ClassVar[dict[str, str]] = {"msg_region": "MSG_REGION", "trace_on": "TRACE_ON"}
    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None
    msg_region: str | None = "DefaultRegion"
    trace_on: bool | None = True


DEFAULT_REGION = "DefaultRegion"  # RocketMQ's regionId, answered in MSG_REGION and stored with each message


def send_response_ext(msg_id: str, queue_id: int, queue_offset: int) -> dict[str, str]:
    """``SendMessageResponseHeader(msg_id, queue_id, queue_offset).to_ext_fields()`` without
    the header object: the extFields of every successful send's response (the hot path)."""
    return {"msgId": msg_id, "queueId": int.__repr__(queue_id),
            "queueOffset": int.__repr__(queue_offset), "MSG_REGION": DEFAULT_REGION,
            "TRACE_ON": "true"}


# The JSON header of a successful send's response, as encode_command writes it (sorted keys)
_SEND_OK = ('{"code":0,"extFields":{"MSG_REGION":"DefaultRegion","TRACE_ON":"true","msgId":"%s",'
            '"queueId":"%d","queueOffset":"%d"},"flag":1,"language":"JAVA","opaque":%d,'
            '"serializeTypeCurrentRPC":"JSON","version":' + str(int(DEFAULT_VERSION)) + '}')
_LENGTHS = struct.Struct(">ii")


def send_ok_frame(opaque: int, msg_id: str, queue_id: int, queue_offset: int) -> bytes:
    """The whole frame of a successful send's response to a JSON request (no remark): the bytes
    ``encode_command`` gives for ``request.make_response_ext(SUCCESS, send_response_ext(...))``,
    without building the command (the hot path). ``msg_id`` holds offsetMsgIds (hex digits
    and commas): nothing in it needs escaping."""
    header = (_SEND_OK % (msg_id, queue_id, queue_offset, opaque)).encode()
    size = len(header)
    return _LENGTHS.pack(size + 4, size) + header


@header
class EndTransactionRequestHeader(Header):
    """END_TRANSACTION (37): commit (8), roll back (12) or leave (0) a half message."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    from_transaction_check: bool = False
    msg_id: str
    transaction_id: str | None = None
    topic: str | None = None
    bname: str | None = None


@header
class RecallMessageRequestHeader(Header):
    """RECALL_MESSAGE (370, RocketMQ 5): recall the timer message whose send answered
    ``recall_handle``; the response's ``msgId`` is its UNIQ_KEY."""

    producer_group: str | None = None
    topic: str
    recall_handle: str


@header
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker to the requesting producer; the body is the
    reply's body (compressed when sys_flag says so)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    born_host: str
    store_host: str
    store_timestamp: int


@header
class CheckTransactionStateRequestHeader(Header):
    """CHECK_TRANSACTION_STATE (39), broker to producer; the body is the half message."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    topic: str | None = None
    bname: str | None = None
