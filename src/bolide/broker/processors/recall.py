"""RECALL_MESSAGE (370, RocketMQ 5): recall a timer message before it is due, by the recall
handle its send answered (:mod:`bolide.broker.timer_recall`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.common.recall_handle import RecallError
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.send import RecallMessageRequestHeader
from bolide.remoting import RequestContext
from bolide.store import BrokerRole

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


class RecallProcessor:
    """Records the recall; the schedule service then drops the message when it comes due."""

    CODES = (RequestCode.RECALL_MESSAGE,)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = request.read_header(RecallMessageRequestHeader)
        broker = self.broker
        if broker.role is BrokerRole.SLAVE:
            return request.make_response(
                ResponseCode.SLAVE_NOT_AVAILABLE,
                "recall failed, broker service not available: recall on the master",
            )
        if broker.topics.get(header.topic) is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist"
            )
        try:
            uniq_key = await broker.recall_timer_message(header.topic, header.recall_handle)
        except RecallError as exc:
            return request.make_response(ResponseCode.ILLEGAL_OPERATION, str(exc))
        return request.make_response_ext(ResponseCode.SUCCESS, {"msgId": uniq_key})
