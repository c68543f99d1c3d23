"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.broker.retry import max_reconsume_times, redelivery, retry_topic
from bolide.broker.topic_config import PERM_WRITE
from bolide.common import properties as P
from bolide.common.message import Message
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


class SendBackProcessor:
    """Copies the failed message to ``%RETRY%<group>`` (delayed) or ``%DLQ%<group>``."""

    CODES = (RequestCode.CONSUMER_SEND_MSG_BACK,)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = request.read_header(ConsumerSendMsgBackRequestHeader)
        broker = self.broker
        if not broker.config.broker_permission & PERM_WRITE:
            return request.make_response(ResponseCode.NO_PERMISSION,
                                         f"the broker[{broker.config.broker_name}] sending message "
                                         "is forbidden")
        group = broker.subscription_groups.find(header.group)
        if group is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.group}] does not exist: create it with updateSubGroup, "
                "or set autoCreateSubscriptionGroup=true")
        store = broker.store
        msg = store.look_message_by_offset(header.offset)
        if msg is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"look message by offset failed, {header.offset}")
        limit = max_reconsume_times(request.version, header.max_reconsume_times, group.retry_max_times)
        where = redelivery(header.group, msg.reconsume_times, limit, header.delay_level)
        if where.dead and broker.metrics is not None:
            broker.metrics.on_dead_letter(header.group, header.origin_topic or msg.topic)
        broker.topics.create_for_group(retry_topic(header.group))
        broker.topics.create_for_group(where.topic)
        props = dict(msg.properties)
        props.setdefault(P.RETRY_TOPIC, msg.topic)
        if not props.get(P.ORIGIN_MESSAGE_ID):
            props[P.ORIGIN_MESSAGE_ID] = msg.offset_msg_id
        props.pop(P.DELAY_TIME_LEVEL, None)
        if where.delay_level:
            props[P.DELAY_TIME_LEVEL] = str(where.delay_level)
        result = store.put_message(Message(where.topic, msg.body, flag=msg.flag, properties=props),
                                   0, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
                                   born_host=msg.born_host,
                                   reconsume_times=msg.reconsume_times + 1, wait_store=False)
        await broker.flush_waiters.settle(result)
        if not result.ok:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"{result.status.value}: {result.remark}")
        broker.stats_items.on_send_back(header.group, msg.properties.get(P.RETRY_TOPIC) or msg.topic)
        return request.make_response()
