"""INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, ``mqadmin getConsumerStatus``): the broker asks
each online consumer of the group (or only the one whose client id is ``clientAddr``) for its
offsets of the topic's queues with GET_CONSUMER_STATUS_FROM_CLIENT (221), down that consumer's
connection as INVOKE_BROKER_TO_RESET_OFFSET's notices go, and answers their tables by client id
(GetConsumerStatusBody ``consumerTable``). A consumer that fails or does not answer in time is
left out, as RocketMQ does; with no consumer online the answer is SYSTEM_ERROR."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bolide.broker.processors.consumer_relay import RELAY_TIMEOUT_MS
from bolide.errors import BolideError
from bolide.protocol.bodies.admin import GetConsumerStatusBody
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import GetConsumerStatusRequestHeader
from bolide.remoting import Channel, RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)


class ConsumerStatusProcessor:
    """Gathers the offset tables of a group's online consumers."""

    CODES = (RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,)

    def __init__(self, broker: BrokerController, timeout_ms: int = RELAY_TIMEOUT_MS) -> None:
        self.broker = broker
        self.timeout_ms = timeout_ms

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = request.read_header(GetConsumerStatusRequestHeader)
        clients = self.broker.clients
        online = [(cid, clients.consumer_channel(header.group, cid))
                  for cid in clients.consumer_ids(header.group)]
        members = [(cid, ch) for cid, ch in online if isinstance(ch, Channel) and ch.is_active]
        if not members:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"No Any Consumer online in the consumer group: [{header.group}]")
        if header.client_addr:
            members = [(cid, ch) for cid, ch in members if cid == header.client_addr]
        ask = GetConsumerStatusRequestHeader(topic=header.topic, group=header.group)
        tables = await asyncio.gather(*(self._ask(cid, ch, ask) for cid, ch in members))
        found = {cid: table for (cid, _), table in zip(members, tables, strict=True) if table is not None}
        answer = GetConsumerStatusBody(consumer_table=found)
        return request.make_response(body=answer.encode())

    async def _ask(self, client_id: str, channel: Channel,
                   header: GetConsumerStatusRequestHeader) -> dict[MessageQueue, int] | None:
        """One consumer's offsets of the topic's queues, or None when it does not give them."""
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, header)
        try:
            response = await channel.invoke(request, self.timeout_ms)
        except BolideError as exc:
            log.warning("[get-consumer-status] consumer %s of %s did not answer: %s", client_id,
                        header.group, exc)
            return None
        if response.code != ResponseCode.SUCCESS or not response.body_bytes():
            return None
        try:
            return GetConsumerStatusBody.decode(response.body_bytes()).message_queue_table
        except BolideError as exc:
            log.warning("[get-consumer-status] consumer %s of %s answered an unreadable body: %s",
                        client_id, header.group, exc)
            return None
