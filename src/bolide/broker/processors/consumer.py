"""Consumer-side codes: offsets (14, 15, 29, 30, 31, 32), HEART_BEAT (34), UNREGISTER_CLIENT (35)
and GET_CONSUMER_LIST_BY_GROUP (38)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bolide.broker import static_rewrite as sr
from bolide.broker.config import BrokerConfig
from bolide.broker.static_forward import ForwardFailed, forward
from bolide.common.sql92 import SelectorError
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.common.waiting import wait_for
from bolide.protocol.bodies.client import (
    EXPRESSION_SQL92,
    EXPRESSION_TAG,
    CheckClientRequestBody,
    ConsumerListBody,
    HeartbeatData,
)
from bolide.protocol.bodies.static_topic import LogicQueueMappingItem
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import consumer as h
from bolide.protocol.headers.base import Header
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)
REGISTER_WAIT_S = 2.0  # within the 3 s a Java client waits for its heartbeat answer


def property_filter_refusal(config: BrokerConfig, expression_type: str) -> str | None:
    """Why a subscription of ``expression_type`` (not TAG) is not served, or None for SQL92
    on a broker with enablePropertyFilter=true."""
    if expression_type != EXPRESSION_SQL92:
        return (f"The broker does not support consumer to filter message by {expression_type}: "
                "subscribe with a tag expression (TagA || TagB) or SQL92")
    if not config.enable_property_filter:
        return ("The broker does not support consumer to filter message by SQL92: set "
                "enablePropertyFilter=true in broker.conf, or subscribe with a tag expression")
    return None


class ConsumerProcessor:
    """Offsets and client registrations."""

    CODES = (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET,
             RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.HEART_BEAT,
             RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
             RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, RequestCode.GET_EARLIEST_MSG_STORETIME,
             RequestCode.CHECK_CLIENT_CONFIG)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        c = RequestCode
        self._handlers: dict[int, Callable[[RequestContext, RemotingCommand], RemotingCommand]] = {
            c.UNREGISTER_CLIENT: self.unregister_client,
            c.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
            c.CHECK_CLIENT_CONFIG: self.check_client_config,
        }
        # offsets: a static topic's may be asked of another broker
        self._offset_handlers: dict[int, Callable[[RequestContext, RemotingCommand],
                                                  Awaitable[RemotingCommand]]] = {
            c.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            c.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            c.GET_MAX_OFFSET: self.get_max_offset,
            c.GET_MIN_OFFSET: self.get_min_offset,
            c.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            c.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
        }

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        if code == RequestCode.HEART_BEAT:
            return await self.heart_beat(ctx, request)
        offsets = self._offset_handlers.get(code)
        if offsets is None:
            return self._handlers[code](ctx, request)
        try:
            return await offsets(ctx, request)
        except ForwardFailed as exc:  # a static topic's offsets on a broker that did not answer
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))

    async def _registered(self) -> None:
        """Wait (briefly) until the NameServers know the retry topics a heartbeat just created,
        as the Java broker registers before answering: the client's next route lookup of
        ``%RETRY%<group>`` then finds it instead of waiting for its next rebalance."""
        registration = self.broker.registration
        if registration is None:
            return
        try:
            await wait_for(registration.wait_pending(), REGISTER_WAIT_S)
        except Exception as exc:  # a NameServer down or slow: answer the heartbeat anyway
            log.warning("the new retry topics are not registered yet: %s", exc)

    def _logic(self, request: RemotingCommand, topic: str, queue_id: int) -> sr.LogicQueue | None:
        """The static topic's logic queue a request addresses (None: serve it as it is)."""
        statics = self.broker.static_topics.table
        return sr.logic_queue(statics, topic, queue_id, request.ext_fields) if statics else None

    async def _remote(self, item: LogicQueueMappingItem, code: int, header: Header,
                      field: str) -> int | None:
        """``field`` of the answer to ``header``'s request on the physical queue of ``item``,
        which is on another broker; None for QUERY_NOT_FOUND. Raises ForwardFailed."""
        header = dataclasses.replace(header, queue_id=item.queue_id)  # type: ignore[type-var]
        response = await forward(self.broker, item.bname, code, header)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        value = response.ext_fields.get(field)
        if response.code != ResponseCode.SUCCESS or value is None:
            raise ForwardFailed(f"broker {item.bname} answered {response.code} "
                                f"({response.remark or 'no remark'}) to a forwarded request")
        return int(value)

    async def query_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """The committed offset, or QUERY_NOT_FOUND (22) when the group has none (spec trap 8)."""
        header = request.read_header(h.QueryConsumerOffsetRequestHeader)
        offsets = self.broker.offsets
        lq = self._logic(request, header.topic, header.queue_id)
        if lq is None:
            offset = offsets.query(header.consumer_group, header.topic, header.queue_id)
        else:
            asked = dataclasses.replace(header, set_zero_if_not_found=False)

            async def stored(item: LogicQueueMappingItem) -> int | None:
                if lq.is_local(item):
                    return offsets.query(header.consumer_group, header.topic, item.queue_id)
                return await self._remote(item, RequestCode.QUERY_CONSUMER_OFFSET, asked, "offset")

            found = await sr.query_offset(lq, stored)
            if isinstance(found, sr.Refusal):
                return request.make_response(*found)
            offset = found
        if offset is None and lq is None and self._young_queue(header):
            offset = 0
        if offset is None:
            return request.make_response(ResponseCode.QUERY_NOT_FOUND,
                                         "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
        return request.make_response(header=h.QueryConsumerOffsetResponseHeader(offset=offset))

    def _young_queue(self, header: h.QueryConsumerOffsetRequestHeader) -> bool:
        """RocketMQ's answer for a group without an offset: 0 when the queue still starts at
        offset 0 and that message is in memory, so that a new group reads a young queue from
        its start whatever its consume-from-where (unless the client set
        ``setZeroIfNotFound=false``)."""
        if header.set_zero_if_not_found is False:
            return False
        store = self.broker.store
        return (store.get_min_offset_in_queue(header.topic, header.queue_id) <= 0
                and store.in_memory_at(header.topic, header.queue_id, 0))

    async def update_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(h.UpdateConsumerOffsetRequestHeader)
        queue_id, offset = header.queue_id, header.commit_offset
        lq = self._logic(request, header.topic, queue_id)
        if lq is not None:
            physical = sr.commit_offset(lq, offset)
            if isinstance(physical, sr.Refusal):
                return request.make_response(*physical)
            item, offset = physical
            queue_id = item.queue_id
            if not lq.is_local(item):
                asked = dataclasses.replace(header, queue_id=queue_id, commit_offset=offset)
                response = await forward(self.broker, item.bname, RequestCode.UPDATE_CONSUMER_OFFSET, asked)
                return request.make_response(response.code, response.remark)
        self.broker.offsets.commit(header.consumer_group, header.topic, queue_id, offset)
        return request.make_response()

    async def _queue_value(self, request: RemotingCommand, header: Header,
                           lookup: Callable[[str, int], int],
                           pick: Callable[[sr.LogicQueue], LogicQueueMappingItem | sr.Refusal],
                           convert: Callable[[LogicQueueMappingItem, int], int] | None = None,
                           field: str = "offset") -> int | RemotingCommand:
        """``lookup(topic, queue id)`` of the request's queue; of a static topic's logic queue,
        that of the item ``pick`` names (here, or asked of its broker), made a logic value by
        ``convert``; a refusal's response."""
        topic, queue_id = header.topic, header.queue_id  # type: ignore[attr-defined]
        lq = self._logic(request, topic, queue_id)
        if lq is None:
            return lookup(topic, queue_id)
        item = pick(lq)
        if isinstance(item, sr.Refusal):
            return request.make_response(*item)
        if lq.is_local(item):
            value = lookup(topic, item.queue_id)
        else:
            found = await self._remote(item, request.code, header, field)
            value = -1 if found is None else found
        return convert(item, value) if convert is not None else value

    async def get_max_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(h.GetMaxOffsetRequestHeader)
        found = await self._queue_value(request, header, self.broker.store.get_max_offset_in_queue,
                                        sr.last_item, LogicQueueMappingItem.static_offset_strictly)
        if isinstance(found, RemotingCommand):
            return found
        return request.make_response(header=h.GetMaxOffsetResponseHeader(offset=found))

    async def get_min_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(h.GetMinOffsetRequestHeader)
        found = await self._queue_value(request, header, self.broker.store.get_min_offset_in_queue,
                                        sr.first_item, LogicQueueMappingItem.static_offset_loosely)
        if isinstance(found, RemotingCommand):
            return found
        return request.make_response(header=h.GetMinOffsetResponseHeader(offset=found))

    async def search_offset_by_timestamp(self, ctx: RequestContext,
                                         request: RemotingCommand) -> RemotingCommand:
        """The first queue offset stored at or after ``timestamp`` (the max offset when every
        message is older); 5.x ``boundaryType=UPPER``: the last one stored at or before it."""
        header = request.read_header(h.SearchOffsetRequestHeader)
        store = self.broker.store
        upper = (header.boundary_type or "").upper() == "UPPER"

        def search(queue_id: int) -> int:
            if upper:
                after = store.get_offset_in_queue_by_time(header.topic, queue_id, header.timestamp + 1)
                return max(after - 1, store.get_min_offset_in_queue(header.topic, queue_id))
            return store.get_offset_in_queue_by_time(header.topic, queue_id, header.timestamp)

        lq = self._logic(request, header.topic, header.queue_id)
        if lq is None:
            offset = search(header.queue_id)
        else:
            async def searched(item: LogicQueueMappingItem) -> int | None:
                if lq.is_local(item):
                    return search(item.queue_id)
                return await self._remote(item, request.code, header, "offset")

            found = await sr.search_offset(lq, searched)
            if isinstance(found, sr.Refusal):
                return request.make_response(*found)
            offset = found
        return request.make_response(header=h.SearchOffsetResponseHeader(offset=offset))

    async def get_earliest_msg_storetime(self, ctx: RequestContext,
                                         request: RemotingCommand) -> RemotingCommand:
        """Store time of the queue's first retained message; -1 for an empty or unknown queue."""
        header = request.read_header(h.GetEarliestMsgStoretimeRequestHeader)
        found = await self._queue_value(request, header, self.broker.store.get_earliest_message_time,
                                        sr.first_item, field="timestamp")
        if isinstance(found, RemotingCommand):
            return found
        return request.make_response(header=h.GetEarliestMsgStoretimeResponseHeader(timestamp=found))

    async def heart_beat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """Record producer and consumer groups; create each consumer group's retry topic; tell
        a group whose members or subscriptions changed to rebalance."""
        data = HeartbeatData.decode(request.body_bytes())
        broker = self.broker
        clients = broker.clients
        language, version, addr = request.language.name, request.version, ctx.remote_address
        created = False
        for producer in data.producer_data_set:
            if not clients.register_producer(producer.group_name, ctx.channel, data.client_id,
                                             language=language, version=version, client_addr=addr):
                return request.make_response(ResponseCode.SYSTEM_BUSY, "too many producer groups")
        for consumer in data.consumer_data_set:
            group = consumer.group_name
            retry = RETRY_GROUP_TOPIC_PREFIX + group
            if broker.topics.get(retry) is None:
                broker.topics.create_for_group(retry)
                created = True
            before = clients.membership(group)
            if not clients.register_consumer(group, ctx.channel, data.client_id,
                                             consumer.subscription_data_set, consumer.consume_type,
                                             consumer.message_model, consumer.consume_from_where,
                                             language=language, version=version, client_addr=addr):
                return request.make_response(ResponseCode.SYSTEM_BUSY, "too many consumer groups")
            if clients.membership(group) != before:
                broker.consumer_group_changed(group)
        if created:
            await self._registered()
        return request.make_response()  # its version (4.9.8) tells Java clients SQL92 is known

    def check_client_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """A consumer's start() asks whether its non-tag subscription is served: SQL92 with
        enablePropertyFilter=true when the expression compiles (else 23 with the parse error),
        nothing else (1, as a RocketMQ broker without the property filter answers)."""
        body = CheckClientRequestBody.decode(request.body_bytes())
        sub = body.subscription_data
        if sub is None or sub.expression_type == EXPRESSION_TAG:
            return request.make_response()
        refused = property_filter_refusal(self.broker.config, sub.expression_type)
        if refused is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, refused)
        try:
            self.broker.selectors.get(sub.sub_string)
        except SelectorError as exc:
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return request.make_response()

    def unregister_client(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(h.UnregisterClientRequestHeader)
        for group in self.broker.clients.unregister(ctx.channel, header.producer_group or "",
                                                    header.consumer_group or ""):
            self.broker.consumer_group_changed(group)
        return request.make_response()

    def get_consumer_list_by_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(h.GetConsumerListByGroupRequestHeader)
        ids = self.broker.clients.consumer_ids(header.consumer_group)
        if not ids:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"no consumer for this group, {header.consumer_group}")
        return request.make_response(body=ConsumerListBody(consumer_id_list=ids).encode())
