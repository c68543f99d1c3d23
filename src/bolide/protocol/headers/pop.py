"""Headers of RocketMQ 5's consumption by pop over remoting: POP_MESSAGE (200050), ACK_MESSAGE
(200051) and CHANGE_MESSAGE_INVISIBLETIME (200053)."""

from __future__ import annotations

from bolide.protocol.headers.base import Header, header

CONSUME_INIT_MIN = 0  # ConsumeInitMode: a new group starts at the queue's first message
CONSUME_INIT_MAX = 1  # ... or at its end


@header
class PopMessageRequestHeader(Header):
    """POP_MESSAGE: up to ``max_msg_nums`` messages of a queue (``queue_id`` -1: any queue),
    hidden from the group for ``invisible_time`` ms; waits up to ``poll_time`` ms for some."""

    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: int
    poll_time: int
    born_time: int
    init_mode: int
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None
    bname: str | None = None


@header
class PopMessageResponseHeader(Header):
    """The answer of a pop: when it was taken (``pop_time``), for how long, and per queue the
    first offset and the offsets of the messages in the body, from which the client builds
    each message's ``POP_CK`` (see :mod:`bolide.protocol.pop_info`)."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@header
class AckMessageRequestHeader(Header):
    """ACK_MESSAGE: acknowledge the message at ``offset``; ``extra_info`` is its ``POP_CK``."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int
    bname: str | None = None


@header
class ChangeInvisibleTimeRequestHeader(Header):
    """CHANGE_MESSAGE_INVISIBLETIME: hide the message at ``offset`` for ``invisible_time`` ms
    from now on."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int
    invisible_time: int
    bname: str | None = None


@header
class ChangeInvisibleTimeResponseHeader(Header):
    """The new lease: the client builds the message's next ``POP_CK`` from it."""

    pop_time: int
    invisible_time: int
    revive_qid: int
