"""RECALL_MESSAGE (370, RocketMQ 5): recall a timer message before it is due, by the recall
handle its send answered (:mod:`bolide.broker.timer_recall`). Every answer carries
``MSG_REGION``, as RocketMQ's, which the Java client's recall trace hook needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.common.properties import MSG_REGION
from bolide.common.recall_handle import RecallError
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.send import DEFAULT_REGION, RecallMessageRequestHeader
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
        code, remark, msg_id = await self._recall(request.read_header(RecallMessageRequestHeader))
        ext = {MSG_REGION: DEFAULT_REGION}
        if msg_id is not None:
            ext["msgId"] = msg_id
        return request.make_response_ext(code, ext, remark)

    async def _recall(self, header: RecallMessageRequestHeader) -> tuple[int, str | None, str | None]:
        """(response code, remark, message id recalled)."""
        broker = self.broker
        if broker.role is BrokerRole.SLAVE:
            return (ResponseCode.SLAVE_NOT_AVAILABLE,
                    "recall failed, broker service not available: recall on the master", None)
        if broker.topics.get(header.topic) is None:
            return ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist", None
        try:
            uniq_key = await broker.recall_timer_message(header.topic, header.recall_handle)
        except RecallError as exc:
            return ResponseCode.ILLEGAL_OPERATION, str(exc), None
        return ResponseCode.SUCCESS, None, uniq_key
