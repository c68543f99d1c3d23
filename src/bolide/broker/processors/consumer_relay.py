"""Requests an admin sends the broker for one online consumer, relayed down that consumer's
connection and answered with the consumer's own response: GET_CONSUMER_RUNNING_INFO (307,
``mqadmin consumerStatus``, ``consumerProgress -s``) and CONSUME_MESSAGE_DIRECTLY (309,
``mqadmin queryMsgById -g G -d clientId``: the broker adds the stored message as the body).
RocketMQ's remarks when the consumer is not connected, does not answer in time, or the call
fails."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.broker.processors.query import record_bytes
from bolide.common.msgid import decode_offset_msg_id
from bolide.errors import RemotingError, RemotingTimeoutError
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from bolide.remoting import Channel, RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

# How long the consumer has to answer: less than the 5 s an admin (mqadmin) waits for the
# broker, so a silent consumer gets a remark naming it rather than a timeout at the admin.
RELAY_TIMEOUT_MS = 3000


class ConsumerRelayProcessor:
    """Finds the consumer's connection and forwards the request to it."""

    CODES = (RequestCode.GET_CONSUMER_RUNNING_INFO, RequestCode.CONSUME_MESSAGE_DIRECTLY)

    def __init__(self, broker: BrokerController, timeout_ms: int = RELAY_TIMEOUT_MS) -> None:
        self.broker = broker
        self.timeout_ms = timeout_ms

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        ext, body = dict(request.ext_fields), request.body_bytes()
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            direct = request.read_header(ConsumeMessageDirectlyResultRequestHeader)
            group, client_id = direct.consumer_group, direct.client_id or ""
            record = self._stored(direct.msg_id or "")
            if isinstance(record, str):
                return request.make_response(ResponseCode.SYSTEM_ERROR, record)
            ext["brokerName"], body = self.broker.config.broker_name, record
        else:
            header = request.read_header(GetConsumerRunningInfoRequestHeader)
            group, client_id = header.consumer_group, header.client_id
        channel = self.broker.clients.consumer_channel(group, client_id)
        if not isinstance(channel, Channel) or not channel.is_active:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"The Consumer <{group}> <{client_id}> not online")
        relayed = RemotingCommand.request(request.code, ext_fields=ext, body=body)
        try:
            answer = await channel.invoke(relayed, self.timeout_ms)
        except RemotingTimeoutError as exc:
            return request.make_response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                         f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except RemotingError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        return request.make_response(answer.code, answer.remark, body=answer.body_bytes(),
                                     ext_fields=answer.ext_fields)

    def _stored(self, msg_id: str) -> bytes | str:
        """The record an offset message id names, or why there is none."""
        try:
            _, offset = decode_offset_msg_id(msg_id)
        except ValueError as exc:
            return f"msgId {msg_id!r} is not an offset message id of this broker: {exc}"
        record = record_bytes(self.broker.store, offset)
        if record is None:
            return f"can not find message by the offset, {offset}: no record starts there"
        return record
