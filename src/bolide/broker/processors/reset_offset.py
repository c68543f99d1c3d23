"""INVOKE_BROKER_TO_RESET_OFFSET (222): ``mqadmin resetOffsetByTime`` moves a consumer group's
offsets of a topic to a point in time. The broker works out each queue's new offset and tells
the group's online consumers (RESET_CONSUMER_CLIENT_OFFSET, 220), which adopt and commit it.
With no consumer online it answers CONSUMER_NOT_ONLINE, and mqadmin then commits the offsets
itself (UPDATE_CONSUMER_OFFSET) — RocketMQ's two paths."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.protocol.bodies.admin import ResetOffsetBody
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import RESET_TO_END, ResetOffsetRequestHeader
from bolide.remoting import Channel, RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController



class ResetOffsetProcessor:
    """Computes the reset and relays it to the group's consumers."""

    CODES = (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = request.read_header(ResetOffsetRequestHeader)
        table = self.offsets(header)
        if isinstance(table, str):
            return request.make_response(ResponseCode.SYSTEM_ERROR, table)
        channels = [c for c in self.broker.clients.consumer_channels(header.group)
                    if isinstance(c, Channel) and c.is_active]
        if not channels:
            return request.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {header.group} "
                f"Topic: {header.topic} Timestamp: {header.timestamp}")
        body = ResetOffsetBody(offset_table=table).encode()
        notice = ResetOffsetRequestHeader(topic=header.topic, group=header.group,
                                          timestamp=header.timestamp, is_force=header.is_force)
        for channel in channels:
            channel.oneway(RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, notice,
                                                   body))
        return request.make_response(body=body)

    def offsets(self, header: ResetOffsetRequestHeader) -> dict[MessageQueue, int] | str:
        """The new offset of each write queue, or why there is none. Without ``isForce`` an
        offset only moves back (a reset never skips unconsumed messages)."""
        broker = self.broker
        tc = broker.topics.get(header.topic)
        if tc is None:
            return f"[reset-offset] reset offset failed, no topic in this broker. topic={header.topic}"
        store = broker.store
        table: dict[MessageQueue, int] = {}
        for queue_id in range(tc.write_queue_nums):
            committed = broker.offsets.query(header.group, header.topic, queue_id)
            if committed is None:
                return (f"THe consumer group <{header.group}> not exist: it has no offsets of "
                        f"{header.topic}; reset it with updateConsumerOffset instead")
            if header.timestamp == RESET_TO_END:
                target = store.get_max_offset_in_queue(header.topic, queue_id)
            else:
                target = store.get_offset_in_queue_by_time(header.topic, queue_id, header.timestamp)
            target = max(target, 0)
            mq = MessageQueue(topic=header.topic, broker_name=broker.config.broker_name,
                              queue_id=queue_id)
            table[mq] = target if header.is_force or target < committed else committed
        return table
