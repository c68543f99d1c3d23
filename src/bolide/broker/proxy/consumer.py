"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue over
the broker's :class:`~bolide.broker.pop.PopService`, and the offset calls.

A receive that finds nothing waits (long polling) until a message arrives or one is due again,
at most the time the client asked for and never past its call's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from google.protobuf.timestamp_pb2 import Timestamp

from bolide.broker.dead_letter import DLQ_ORIGIN_MESSAGE_ID, DLQ_ORIGIN_TOPIC
from bolide.broker.pop import (
    AUTO_RENEW_MS,
    MAX_INVISIBLE_MS,
    Delivery,
    PopService,
    ReceiptHandleError,
    RecordFilter,
)
from bolide.broker.processors.consumer import property_filter_refusal
from bolide.broker.processors.pop import pop_retry_topics
from bolide.broker.processors.pull import sql_filter
from bolide.broker.proxy.call import Call
from bolide.broker.proxy.convert import (
    Refused,
    delivered,
    duration_ms,
    status,
    timestamp_ms,
)
from bolide.broker.proxy.routes import find_topic
from bolide.broker.topic_config import PERM_READ
from bolide.common.message import MessageExt
from bolide.common.sql92 import SelectorError
from bolide.common.waiting import wait_for
from bolide.protocol.bodies.client import SubscriptionData
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.store.topic_config import SubscriptionGroupConfig

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

MAX_BATCH = 32  # messages per receive, as RocketMQ's pop
MAX_POLL_S = 20.0
MIN_INVISIBLE_MS = 1000


def orderly(group: SubscriptionGroupConfig | None) -> bool:
    """Whether a group consumes FIFO (RocketMQ 5's ``consumeMessageOrderly``)."""
    return bool(group is not None and group.extra.get("consumeMessageOrderly"))


class GrpcConsumer:
    """The consumer side of the gRPC endpoint."""

    def __init__(self, broker: BrokerController, pop: PopService) -> None:
        self.broker = broker
        self.pop = pop

    def group(self, call: Call, resource: pb.Resource) -> tuple[str, SubscriptionGroupConfig]:
        name = call.name(resource)
        if not resource.name:
            raise Refused(pb.ILLEGAL_CONSUMER_GROUP, "the call names no consumer group")
        settings = self.broker.subscription_groups.find(name)
        if settings is None:
            raise Refused(
                pb.CONSUMER_GROUP_NOT_FOUND,
                f"consumer group {name} does not exist: create it "
                "with `bolide admin updateSubGroup` or set autoCreateSubscriptionGroup=true",
            )
        if not settings.consume_enable:
            raise Refused(
                pb.FORBIDDEN,
                f"consumer group {name} has consumeEnable=false: enable it with updateSubGroup to consume",
            )
        return name, settings

    # -- receive --------------------------------------------------------------------------
    async def receive(
        self,
        call: Call,
        request: pb.ReceiveMessageRequest,
        time_left: float | None,
    ) -> AsyncIterator[pb.ReceiveMessageResponse]:
        """The responses of one ReceiveMessage: a status, the messages, the broker's time."""
        try:
            got = await self._receive(call, request, time_left)
            first = status() if got else status(pb.MESSAGE_NOT_FOUND, "no new message")
        except Refused as refused:
            got, first = [], status(refused.code, refused.message)
        yield pb.ReceiveMessageResponse(status=first)
        for message in got:
            yield pb.ReceiveMessageResponse(message=message)
        now = time.time_ns()
        yield pb.ReceiveMessageResponse(delivery_timestamp=Timestamp(seconds=now // 10**9, nanos=now % 10**9))

    async def _receive(
        self, call: Call, request: pb.ReceiveMessageRequest, time_left: float | None
    ) -> list[pb.Message]:
        broker = self.broker
        group, _ = self.group(call, request.group)
        topic = call.name(request.message_queue.topic)
        tc = find_topic(broker, topic)
        if not tc.perm & broker.config.broker_permission & PERM_READ:
            raise Refused(pb.FORBIDDEN, f"topic {topic} is not readable on this broker now")
        # every readable queue of the broker, whichever the request names (as RocketMQ's proxy:
        # the clients pick one of the route's queues only to choose the broker)
        start = random.randrange(max(1, tc.read_queue_nums))
        queue_ids = [(start + i) % tc.read_queue_nums for i in range(tc.read_queue_nums)]
        tags, record_filter = self._selection(topic, request.filter_expression)
        if request.auto_renew or not request.HasField("invisible_duration"):
            invisible_ms, renew_for = AUTO_RENEW_MS, call.client_id
        else:
            invisible_ms, renew_for = duration_ms(request.invisible_duration), None
            if not MIN_INVISIBLE_MS <= invisible_ms <= MAX_INVISIBLE_MS:
                raise Refused(
                    pb.ILLEGAL_INVISIBLE_TIME,
                    f"invisible time {invisible_ms} ms is outside "
                    f"[{MIN_INVISIBLE_MS}, {MAX_INVISIBLE_MS}] ms",
                )
        batch = min(max(request.batch_size, 1), MAX_BATCH)
        poll = (
            duration_ms(request.long_polling_timeout) / 1000
            if request.HasField("long_polling_timeout")
            else MAX_POLL_S
        )
        poll = min(poll, MAX_POLL_S)
        if time_left is not None:  # answer before the client's deadline passes
            poll = min(poll, time_left - 0.5)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, poll)
        pop = self.pop
        retry_topics = pop_retry_topics(broker, group, topic)  # what RocketMQ revived before a takeover
        while True:
            fut = pop.watch(topic)
            try:
                found = pop.pop(
                    group,
                    topic,
                    queue_ids,
                    batch,
                    invisible_ms,
                    tags=tags,
                    record_filter=record_filter,
                    renew_for=renew_for,
                    retry_topics=retry_topics,
                )
                left = deadline - loop.time()
                if found or left <= 0 or fut is None:
                    break
                with contextlib.suppress(TimeoutError):
                    await wait_for(asyncio.shield(fut), left)
            finally:
                if fut is not None:
                    pop.unwatch(topic, fut)
        if found:
            broker.stats.on_get(len(found))
            # the records' stored size, as pulls and pops count them
            size = sum(d.message.store_size for d in found if isinstance(d.message, MessageExt))
            broker.stats_items.on_get(group, topic, len(found), size)
            if broker.metrics is not None:
                broker.metrics.on_get(topic, group, len(found), size)
        return [self._message(d, group) for d in found]

    def _selection(
        self,
        topic: str,
        expression: pb.FilterExpression,
    ) -> tuple[list[str] | None, RecordFilter | None]:
        text = expression.expression.strip() or "*"
        if expression.type != pb.SQL:
            sub = SubscriptionData.of(topic, text)
            return (None if sub.matches_all else sub.tags_set), None
        refused = property_filter_refusal(self.broker.config, "SQL92")
        if refused is not None:
            raise Refused(pb.ILLEGAL_FILTER_EXPRESSION, refused)
        try:
            return None, sql_filter(self.broker.selectors.get(text))
        except SelectorError as exc:
            raise Refused(pb.ILLEGAL_FILTER_EXPRESSION, f"the SQL92 filter does not parse: {exc}") from None

    @staticmethod
    def _message(d: Delivery, group: str) -> pb.Message:
        origin = None
        assert isinstance(d.message, MessageExt)  # popped decoded
        props = d.message.properties
        if DLQ_ORIGIN_TOPIC in props:
            origin = (props[DLQ_ORIGIN_TOPIC], props.get(DLQ_ORIGIN_MESSAGE_ID, ""))
        return delivered(
            d.message, handle=d.handle, attempt=d.attempt, invisible_ms=d.invisible_ms, dead_letter_of=origin
        )

    # -- after a receive ------------------------------------------------------------------
    def ack(self, call: Call, request: pb.AckMessageRequest) -> pb.AckMessageResponse:
        group, _ = self.group(call, request.group)
        topic = call.name(request.topic)
        entries = []
        for entry in request.entries:
            try:
                self.pop.ack(group, topic, entry.receipt_handle)
                result = status()
            except ReceiptHandleError as exc:
                result = status(pb.INVALID_RECEIPT_HANDLE, str(exc))
            entries.append(
                pb.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=result
                )
            )
        codes = {e.status.code for e in entries}
        top = (
            entries[0].status
            if len(codes) == 1
            else status(pb.MULTIPLE_RESULTS, "the entries had different results")
        )
        return pb.AckMessageResponse(status=top if entries else status(), entries=entries)

    def change_invisible(
        self,
        call: Call,
        request: pb.ChangeInvisibleDurationRequest,
    ) -> pb.ChangeInvisibleDurationResponse:
        group, _ = self.group(call, request.group)
        invisible_ms = duration_ms(request.invisible_duration)
        if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
            raise Refused(
                pb.ILLEGAL_INVISIBLE_TIME,
                f"invisible time {invisible_ms} ms is outside [0, {MAX_INVISIBLE_MS}] ms",
            )
        try:
            handle = self.pop.change_invisible(
                group, call.name(request.topic), request.receipt_handle, invisible_ms
            )
        except ReceiptHandleError as exc:  # the clients keep the handle answered: give the old one back
            return pb.ChangeInvisibleDurationResponse(
                status=status(pb.INVALID_RECEIPT_HANDLE, str(exc)), receipt_handle=request.receipt_handle
            )
        return pb.ChangeInvisibleDurationResponse(status=status(), receipt_handle=handle)

    def forward_to_dlq(
        self,
        call: Call,
        request: pb.ForwardMessageToDeadLetterQueueRequest,
    ) -> pb.ForwardMessageToDeadLetterQueueResponse:
        group, _ = self.group(call, request.group)
        try:
            moved = self.pop.dead_letter_now(group, call.name(request.topic), request.receipt_handle)
        except ReceiptHandleError as exc:
            raise Refused(pb.INVALID_RECEIPT_HANDLE, str(exc)) from None
        if not moved:
            raise Refused(
                pb.INTERNAL_SERVER_ERROR, f"the dead letter queue of {group} did not take the message"
            )
        return pb.ForwardMessageToDeadLetterQueueResponse(status=status())

    # -- offsets ----------------------------------------------------------------------------
    def get_offset(self, call: Call, request: pb.GetOffsetRequest) -> pb.GetOffsetResponse:
        group, _ = self.group(call, request.group)
        offset = self.broker.offsets.query(
            group, call.name(request.message_queue.topic), request.message_queue.id
        )
        if offset is None:
            raise Refused(pb.OFFSET_NOT_FOUND, f"group {group} has no offset on this queue yet")
        return pb.GetOffsetResponse(status=status(), offset=offset)

    def update_offset(self, call: Call, request: pb.UpdateOffsetRequest) -> pb.UpdateOffsetResponse:
        group, _ = self.group(call, request.group)
        self.broker.offsets.commit(
            group, call.name(request.message_queue.topic), request.message_queue.id, request.offset
        )
        return pb.UpdateOffsetResponse(status=status())

    def query_offset(self, call: Call, request: pb.QueryOffsetRequest) -> pb.QueryOffsetResponse:
        topic, queue_id = call.name(request.message_queue.topic), request.message_queue.id
        find_topic(self.broker, topic)
        store = self.broker.store
        if request.query_offset_policy == pb.BEGINNING:
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif request.query_offset_policy == pb.END:
            offset = store.get_max_offset_in_queue(topic, queue_id)
        else:
            offset = store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms(request.timestamp))
        return pb.QueryOffsetResponse(status=status(), offset=offset)
