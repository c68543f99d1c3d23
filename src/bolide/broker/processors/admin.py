"""Admin codes of this slice: UPDATE_AND_CREATE_TOPIC (17) and GET_ALL_TOPIC_CONFIG (21)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.broker.topic_config import SYSTEM_TOPICS
from bolide.common.topic import validate_topic
from bolide.protocol.bodies.broker import TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import CreateTopicRequestHeader
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


class AdminProcessor:
    """Topic administration."""

    CODES = (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.GET_ALL_TOPIC_CONFIG)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_ALL_TOPIC_CONFIG:
            return request.make_response(body=self.broker.topics.wrapper().encode())
        header = request.read_header(CreateTopicRequestHeader)
        why = validate_topic(header.topic)
        if why is None and header.topic in SYSTEM_TOPICS:
            why = f"The topic[{header.topic}] is conflict with system topic."
        if why is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, why)
        self.broker.topics.update(TopicConfig(
            topic_name=header.topic, read_queue_nums=header.read_queue_nums,
            write_queue_nums=header.write_queue_nums, perm=header.perm,
            topic_filter_type=header.topic_filter_type, topic_sys_flag=header.topic_sys_flag or 0,
            order=header.order))
        return request.make_response()
