"""Requests an admin sends the broker for one online consumer, relayed down that consumer's
connection and answered with the consumer's own response: GET_CONSUMER_RUNNING_INFO (307,
``mqadmin consumerStatus``, ``consumerProgress -s``). RocketMQ's remarks when the consumer is
not connected, does not answer in time, or the call fails."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.errors import RemotingError, RemotingTimeoutError
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import GetConsumerRunningInfoRequestHeader
from bolide.remoting import Channel, RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

# How long the consumer has to answer: less than the 5 s an admin (mqadmin) waits for the
# broker, so a silent consumer gets a remark naming it rather than a timeout at the admin.
RELAY_TIMEOUT_MS = 3000


class ConsumerRelayProcessor:
    """Finds the consumer's connection and forwards the request to it."""

    CODES = (RequestCode.GET_CONSUMER_RUNNING_INFO,)

    def __init__(self, broker: BrokerController, timeout_ms: int = RELAY_TIMEOUT_MS) -> None:
        self.broker = broker
        self.timeout_ms = timeout_ms

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = request.read_header(GetConsumerRunningInfoRequestHeader)
        group, client_id = header.consumer_group, header.client_id
        channel = self.broker.clients.consumer_channel(group, client_id)
        if not isinstance(channel, Channel) or not channel.is_active:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"The Consumer <{group}> <{client_id}> not online")
        relayed = RemotingCommand.request(request.code, ext_fields=request.ext_fields,
                                          body=request.body_bytes())
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
