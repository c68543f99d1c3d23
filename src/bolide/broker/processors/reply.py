"""Request-reply (``DefaultMQProducer.request``): SEND_REPLY_MESSAGE (324) and its short-name
form (325) carry a responder's reply; the broker pushes it to the requesting producer named by
the reply's ``REPLY_TO_CLIENT`` property with PUSH_REPLY_MESSAGE_TO_CLIENT (326), down that
producer's connection, and (``storeReplyMessageEnable``, the default) stores it in
``<cluster>_REPLY_TOPIC`` too. As RocketMQ: the answer is SYSTEM_ERROR when the push fails
(requester gone, or it did not answer), whatever the store did.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from bolide.broker.processors.send import PUT_STATUS_CODES, born_host
from bolide.broker.topic_config import NOT_SENDABLE, PERM_WRITE
from bolide.common import properties as P
from bolide.errors import RemotingError
from bolide.protocol.bodies.broker import TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.send import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    decode_send_request_header,
    send_response_ext,
)
from bolide.remoting import Channel, RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

PUSH_TIMEOUT_MS = 3000  # how long the requester has to take the reply


class ReplyProcessor:
    """Pushes replies to their requesters and stores them."""

    CODES = (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)

    def __init__(self, broker: BrokerController, push_timeout_ms: int = PUSH_TIMEOUT_MS) -> None:
        self.broker = broker
        self.push_timeout_ms = push_timeout_ms

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = decode_send_request_header(request.code, request.ext_fields)
        tc = self._writable_topic(header)
        if isinstance(tc, str):
            return request.make_response(ResponseCode.SYSTEM_ERROR, tc)
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))
        body = request.body_bytes()
        props = P.decode_properties(header.properties or "")
        pushed = await self._push(ctx, header, props, body)
        if pushed is not None:
            response = request.make_response(ResponseCode.SYSTEM_ERROR, pushed)
        else:
            response = request.make_response_ext(ResponseCode.SUCCESS,
                                                 send_response_ext("0", queue_id, 0))
        if self.broker.config.store_reply_message_enable:
            result = self.broker.store.put_encoded(
                header.topic, body, (header.properties or "").encode(), queue_id,
                flag=header.flag, sys_flag=header.sys_flag, born_timestamp=header.born_timestamp,
                born_host=born_host(ctx.peer_address),
                reconsume_times=header.reconsume_times or 0, wait_store=False)
            code = PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
            if code == ResponseCode.SUCCESS:
                self.broker.stats.on_put(result.msg_num, result.wrote_bytes)
                self.broker.stats_items.on_put(header.topic, result.msg_num, result.wrote_bytes)
                if pushed is None:
                    response.ext_fields.update(send_response_ext(
                        result.offset_msg_ids[0], queue_id, result.queue_offset))
            else:
                log.warning("reply to %s not stored in %s: %s: %s", props.get(P.REPLY_TO_CLIENT),
                            header.topic, result.status.value, result.remark)
        return response

    def _writable_topic(self, header: SendMessageRequestHeader) -> TopicConfig | str:
        """The reply topic's config, or why the reply cannot go to it."""
        topic = header.topic
        if topic in NOT_SENDABLE:
            return f"sending message to topic {topic} is forbidden"
        tc = self.broker.topics.get(topic)
        if tc is None:
            return (f"topic[{topic}] not exist, apply first please! (replies go to "
                    f"{self.broker.config.broker_cluster_name}_REPLY_TOPIC, which every broker has)")
        if not tc.perm & PERM_WRITE or not self.broker.config.broker_permission & PERM_WRITE:
            return f"the topic {topic} or this broker is not writable"
        if header.queue_id >= max(tc.read_queue_nums, tc.write_queue_nums):
            return (f"request queueId[{header.queue_id}] is illegal, topic {topic} has "
                    f"{max(tc.read_queue_nums, tc.write_queue_nums)} queues")
        return tc

    async def _push(self, ctx: RequestContext, header: SendMessageRequestHeader,
                    props: dict[str, str], body: bytes) -> str | None:
        """Push the reply to its requester; None when it took it, else why not (RocketMQ's
        remarks)."""
        client_id = props.get(P.REPLY_TO_CLIENT)
        if client_id is None:
            log.warning("a reply from %s has no %s property: it cannot be pushed",
                        ctx.remote_address, P.REPLY_TO_CLIENT)
            return f"reply message properties[{P.REPLY_TO_CLIENT}] is null"
        channel = self.broker.clients.producer_channel(client_id)
        if not isinstance(channel, Channel) or not channel.is_active:
            return (f"push reply message fail, channel of <{client_id}> not found. (the "
                    "requester is gone, or never sent a heartbeat to this broker)")
        props[P.PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        push = ReplyMessageRequestHeader(
            producer_group=header.producer_group, topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums, queue_id=header.queue_id,
            sys_flag=header.sys_flag, born_timestamp=header.born_timestamp, flag=header.flag,
            properties=P.encode_properties(props).decode(), reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode, born_host=ctx.peer_address,
            store_host=self.broker.broker_addr, store_timestamp=int(time.time() * 1000))
        try:
            answer = await channel.invoke(RemotingCommand.request(
                RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext_fields=push.to_ext_fields(),
                body=body), self.push_timeout_ms)
        except RemotingError as exc:
            log.warning("push reply message to <%s> fail: %s", client_id, exc)
            return f"push reply message to {client_id} fail: {exc}"
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", client_id,
                        answer.remark)
            return f"push reply message to {client_id} fail: {answer.remark}"
        return None
