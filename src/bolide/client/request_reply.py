"""Request-reply over RocketMQ (``DefaultMQProducer.request`` and ``MessageUtil.createReplyMessage``).

A requester's :meth:`~bolide.client.producer.Producer.request` sends a message carrying
``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (its client id) and ``TTL`` and waits for the reply. A
responder consuming that message answers with :func:`create_reply_message`, sent by any
producer: the message goes to ``<cluster>_REPLY_TOPIC`` (the cluster the broker stamped on the
request) as SEND_REPLY_MESSAGE, and the broker pushes it to the requester's connection
(PUSH_REPLY_MESSAGE_TO_CLIENT), where :class:`PendingReplies` hands it to the waiting request.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib

from bolide.client.errors import MessageError
from bolide.common import properties as P
from bolide.common import sysflag
from bolide.common.message import Message, MessageExt
from bolide.common.topic import reply_topic
from bolide.errors import HeaderFieldError
from bolide.protocol import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import ReplyMessageRequestHeader
from bolide.remoting import RequestContext

log = logging.getLogger(__name__)


def create_reply_message(request: Message, body: bytes) -> Message:
    """The reply to ``request`` (a message a consumer received) with ``body``: send it with
    any producer's ``send``. Raises MessageError when ``request`` is no request (it lacks the
    ``CLUSTER`` property the broker stamps on every stored message, or ``REPLY_TO_CLIENT``)."""
    props = request.properties
    cluster = props.get(P.CLUSTER)
    if not cluster:
        raise MessageError(f"create reply message fail, requestMessage error, property[{P.CLUSTER}] "
                           "is null: reply only to messages received from a broker")
    if not props.get(P.REPLY_TO_CLIENT):
        raise MessageError(f"message {props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, '')} is no "
                           f"request (no {P.REPLY_TO_CLIENT} property): it was not sent with "
                           "Producer.request")
    reply = Message(reply_topic(cluster), body)
    reply.properties[P.MESSAGE_TYPE] = P.REPLY_MESSAGE_FLAG
    for key in (P.CORRELATION_ID, P.REPLY_TO_CLIENT, P.MESSAGE_TTL):
        if key in props:
            reply.properties[key] = props[key]
    return reply


def is_reply(msg: Message) -> bool:
    """Whether ``msg`` is a reply (sent as SEND_REPLY_MESSAGE)."""
    return msg.properties.get(P.MESSAGE_TYPE) == P.REPLY_MESSAGE_FLAG


def reply_from_push(ext_fields: dict[str, str], body: bytes, arrived_ms: int) -> MessageExt:
    """The reply message of a PUSH_REPLY_MESSAGE_TO_CLIENT request; raises HeaderFieldError
    on a bad header, zlib.error on a bad compressed body."""
    header = ReplyMessageRequestHeader.from_ext_fields(ext_fields)
    if header.sys_flag & sysflag.COMPRESSED:
        body = zlib.decompress(body)
    props = P.decode_properties(header.properties or "")
    props[P.REPLY_MESSAGE_ARRIVE_TIME] = str(arrived_ms)
    return MessageExt(header.topic, body, flag=header.flag, properties=props,
                      queue_id=header.queue_id, sys_flag=header.sys_flag,
                      born_timestamp=header.born_timestamp, born_host=header.born_host,
                      store_timestamp=header.store_timestamp, store_host=header.store_host,
                      reconsume_times=header.reconsume_times or 0)


class PendingReplies:
    """The requests of one client waiting for their replies, by correlation id; answers the
    broker's pushes of replies."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[MessageExt]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def expect(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = fut
        return fut

    def forget(self, correlation_id: str) -> None:
        self._waiting.pop(correlation_id, None)

    async def on_push(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (326): complete the request the reply answers."""
        try:
            reply = reply_from_push(request.ext_fields, request.body_bytes(), int(time.time() * 1000))
        except (HeaderFieldError, zlib.error, ValueError) as exc:
            log.warning("a reply pushed by %s cannot be read: %s", ctx.remote_address, exc)
            return request.make_response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = reply.properties.get(P.CORRELATION_ID, "")
        fut = self._waiting.pop(correlation_id, None)
        if fut is None:
            log.warning("receive reply message, but not matched any request, CorrelationId: %s, "
                        "reply from host: %s (the request timed out?)", correlation_id,
                        reply.born_host)
        elif not fut.done():
            fut.set_result(reply)
        return request.make_response()
