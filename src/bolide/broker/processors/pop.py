"""POP_MESSAGE (200050), ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and
CHANGE_MESSAGE_INVISIBLETIME (200053): RocketMQ 5's consumption by pop over remoting, served by
the broker's :class:`~bolide.broker.pop.PopService` (the gRPC endpoint's receives share it).

A pop answers the stored records as a pull does (each record's reconsume times set to its
delivery attempt - 1) with the pop's time, invisible time and ``reviveQid`` and, per queue, the
first offset and the offsets of its messages: from those the client builds each message's
``POP_CK`` (:mod:`bolide.protocol.pop_info`), which names the lease (``popTime`` and
``reviveQid`` carry its generation) when the client acknowledges it or changes its invisible
time. Bolide writes no checkpoint or revive messages: leases live in memory (see
:mod:`bolide.broker.pop`), as for the gRPC clients. A pop also takes from the group's pop retry
topics of the topic when they exist (what RocketMQ 5 revived before Bolide took its store over):
their records are answered as stored, under their topic's retry mark in the offset infos, as
RocketMQ does with ``popResponseReturnActualRetryTopic``; the client acknowledges them in the
retry topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bolide.broker.pop import (
    MAX_INVISIBLE_MS,
    Delivery,
    ReceiptHandleError,
    StoredRecord,
    make_handle,
    parse_handle,
)
from bolide.broker.processors.consumer import property_filter_refusal
from bolide.broker.processors.pull import sql_filter
from bolide.broker.topic_config import PERM_READ
from bolide.common.sql92 import SelectorError
from bolide.common.waiting import wait_for
from bolide.errors import ProtocolError
from bolide.protocol.bodies.client import EXPRESSION_TAG, SubscriptionData
from bolide.protocol.bodies.pop import BatchAckMessageRequestBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.pop import (
    CONSUME_INIT_MAX,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from bolide.protocol.pop_info import (
    NORMAL_TOPIC,
    QueueKey,
    msg_offset_info,
    parse_extra_info,
    real_topic,
    retry_flag,
    start_offset_info,
)
from bolide.remoting import NOT_NOW, NotNow, RequestContext
from bolide.store import BrokerRole
from bolide.store.record import reconsume_times_at

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController
    from bolide.broker.pop import RecordFilter

MAX_POP_NUMS = 32
MIN_INVISIBLE_MS = 1000
MAX_POLL_MS = 30_000
_I32 = struct.Struct(">i")


def gen_of(pop_time: int, revive_qid: int) -> int | None:
    """The lease generation a handle's ``popTime`` and ``reviveQid`` carry (None: not one of
    this broker's: RocketMQ's own revive queues, or an orderly pop's 999)."""
    return pop_time * 1000 + revive_qid if 0 <= revive_qid < 999 else None


def pop_retry_topics(broker: BrokerController, group: str, topic: str) -> list[str]:
    """The group's pop retry topics of ``topic`` that exist on the broker (RocketMQ 5 names
    them ``%RETRY%<group>_<topic>``, or ``%RETRY%<group>+<topic>`` with enableRetryTopicV2)."""
    names = (real_topic("1", topic, group), real_topic("2", topic, group))
    return [name for name in names if broker.topics.get(name) is not None]


def _id(queue: QueueKey) -> int:
    return queue if isinstance(queue, int) else queue[1]


def _queue_id(record: bytearray) -> int:
    return _I32.unpack_from(record, 12)[0]


def delivered_record(record: bytearray, attempt: int) -> bytearray:
    """A stored record with its reconsume times set to ``attempt - 1`` (how the clients count)."""
    at = reconsume_times_at(record)
    _I32.pack_into(record, at, max(attempt - 1, _I32.unpack_from(record, at)[0]))
    return record


class PopProcessor:
    """Pop, acknowledge and change invisible time over remoting."""

    CODES = (
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.BATCH_ACK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
    )

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def process_now(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | NotNow:
        """Acknowledgements and invisible-time changes at once; pops (which may wait) later."""
        if self.broker.role is BrokerRole.SLAVE and not self.broker.acting:
            return request.make_response(
                ResponseCode.SLAVE_NOT_AVAILABLE, "this broker is a slave: pop from its master"
            )
        code = request.code
        if code == RequestCode.ACK_MESSAGE:
            return self._ack(request)
        if code == RequestCode.BATCH_ACK_MESSAGE:
            return self._batch_ack(request)
        if code == RequestCode.CHANGE_MESSAGE_INVISIBLETIME:
            return self._change_invisible(request)
        return NOT_NOW

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        answer = self.process_now(ctx, request)
        if not isinstance(answer, NotNow):
            return answer
        return await self._pop(ctx, request)

    # -- POP_MESSAGE ----------------------------------------------------------------------
    async def _pop(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = request.read_header(PopMessageRequestHeader)
        refused = self._check_pop(request, header)
        if refused is not None:
            return refused
        broker, pop = self.broker, self.broker.pop
        tc = broker.topics.get(header.topic)
        assert tc is not None
        if header.queue_id < 0:  # any queue: start at a random one so consumers spread
            start = random.randrange(max(1, tc.read_queue_nums))
            queue_ids = [(start + i) % tc.read_queue_nums for i in range(tc.read_queue_nums)]
        else:
            queue_ids = [header.queue_id]
        selection = self._selection(request, header)
        if isinstance(selection, RemotingCommand):
            return selection
        tags, record_filter = selection
        retry_topics = pop_retry_topics(broker, header.consumer_group, header.topic)
        # from its arrival, not from the client's bornTime: a client whose clock is behind would
        # otherwise be answered at once, again and again (its own timeout is pollTime + 10 s)
        wait_ms = min(header.poll_time, MAX_POLL_MS)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, wait_ms) / 1000
        while True:
            fut = pop.watch(header.topic)
            try:
                found = pop.pop(
                    header.consumer_group,
                    header.topic,
                    queue_ids,
                    header.max_msg_nums,
                    header.invisible_time,
                    tags=tags,
                    record_filter=record_filter,
                    from_end=header.init_mode == CONSUME_INIT_MAX,
                    raw=True,
                    orderly=bool(header.order),
                    retry_topics=retry_topics,
                )
                if found:
                    return self._found(request, header, found)
                if fut is None:
                    return self._nothing(request, header, ResponseCode.POLLING_FULL, "too many pops wait")
                left = deadline - loop.time()
                if left <= 0:
                    return self._nothing(request, header, ResponseCode.POLLING_TIMEOUT, "no new message")
                stop_watching = ctx.channel.wake_on_close(fut)
                try:
                    with contextlib.suppress(TimeoutError):
                        await wait_for(asyncio.shield(fut), left)
                finally:
                    stop_watching()
                if not ctx.channel.is_active:  # the client went away: hand nothing out to nobody
                    return None
            finally:
                if fut is not None:
                    pop.unwatch(header.topic, fut)

    def _check_pop(self, request: RemotingCommand, header: PopMessageRequestHeader) -> RemotingCommand | None:
        broker = self.broker
        if not broker.config.broker_permission & PERM_READ:
            return request.make_response(ResponseCode.NO_PERMISSION, "this broker is not readable now")
        if not 0 < header.max_msg_nums <= MAX_POP_NUMS:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"maxMsgNums {header.max_msg_nums}: a pop takes 1 to {MAX_POP_NUMS} messages",
            )
        if not MIN_INVISIBLE_MS <= header.invisible_time <= MAX_INVISIBLE_MS:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime {header.invisible_time} ms is outside "
                f"[{MIN_INVISIBLE_MS}, {MAX_INVISIBLE_MS}] ms",
            )
        tc = broker.topics.get(header.topic)
        if tc is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not tc.perm & PERM_READ:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] peeking message is forbidden"
            )
        if header.queue_id >= tc.read_queue_nums:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        group = broker.subscription_groups.find(header.consumer_group)
        if group is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist: create it with "
                "updateSubGroup, or set autoCreateSubscriptionGroup=true",
            )
        if not group.consume_enable:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"subscription group [{header.consumer_group}] has consumeEnable=false: enable it "
                "with updateSubGroup to consume",
            )
        return None

    def _selection(
        self, request: RemotingCommand, header: PopMessageRequestHeader
    ) -> tuple[list[str] | None, RecordFilter | None] | RemotingCommand:
        kind = header.exp_type or EXPRESSION_TAG
        sub = SubscriptionData.of(header.topic, header.exp or "*", 0, kind)
        if kind == EXPRESSION_TAG:
            return (None if sub.matches_all else sub.tags_set), None
        refused = property_filter_refusal(self.broker.config, kind)
        if refused is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, refused)
        try:
            return None, sql_filter(self.broker.selectors.get(sub.sub_string))
        except SelectorError as exc:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"the pop's SQL92 filter does not parse: {exc}"
            )

    def _found(
        self, request: RemotingCommand, header: PopMessageRequestHeader, found: Sequence[Delivery]
    ) -> RemotingCommand:
        store = self.broker.store
        records: list[bytearray] = []
        per_queue: dict[QueueKey, list[int]] = {}
        topics: dict[QueueKey, str] = {}
        for d in found:
            stored = d.message
            assert isinstance(stored, StoredRecord)  # popped with raw=True
            records.append(delivered_record(stored.record, d.attempt))
            queue_id = _queue_id(stored.record)
            key: QueueKey = (retry_flag(d.stored_topic), queue_id) if d.stored_topic else queue_id
            per_queue.setdefault(key, []).append(stored.queue_offset)
            topics[key] = d.stored_topic or header.topic
        gen = found[0].gen
        rest = sum(
            max(0, store.get_max_offset_in_queue(topics[q], _id(q)) - offsets[-1] - 1)
            for q, offsets in per_queue.items()
        )
        answer = PopMessageResponseHeader(
            pop_time=gen // 1000,
            invisible_time=header.invisible_time,
            revive_qid=gen % 1000,
            rest_num=rest,
            start_offset_info=start_offset_info([(q, offsets[0]) for q, offsets in per_queue.items()]),
            msg_offset_info=msg_offset_info(list(per_queue.items())),
        )
        self.broker.stats.on_get(len(records))
        size = sum(len(r) for r in records)
        self.broker.stats_items.on_get(header.consumer_group, header.topic, len(records), size)
        if self.broker.metrics is not None:
            self.broker.metrics.on_get(header.topic, header.consumer_group, len(records), size)
        return request.make_response(ResponseCode.SUCCESS, "FOUND", answer, records)

    @staticmethod
    def _nothing(
        request: RemotingCommand, header: PopMessageRequestHeader, code: int, remark: str
    ) -> RemotingCommand:
        answer = PopMessageResponseHeader(
            pop_time=int(time.time() * 1000), invisible_time=header.invisible_time, revive_qid=0, rest_num=0
        )
        return request.make_response(code, remark, answer)

    # -- after a pop ----------------------------------------------------------------------
    def _handle(self, extra_info: str, queue_id: int, offset: int) -> str:
        """The receipt handle of the lease an ``extraInfo`` names; raises ProtocolError."""
        info = parse_extra_info(extra_info)
        gen = gen_of(info.pop_time, info.revive_qid)
        if gen is None:
            raise ProtocolError(f"extraInfo {extra_info!r} names no pop of this broker")
        return make_handle(queue_id, offset, gen, info.retry if info.retry in ("1", "2") else NORMAL_TOPIC)

    def _ack(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(AckMessageRequestHeader)
        try:
            handle = self._handle(header.extra_info, header.queue_id, header.offset)
            self.broker.pop.ack(header.consumer_group, header.topic, handle)
        except ProtocolError as exc:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        except ReceiptHandleError as exc:
            return request.make_response(ResponseCode.NO_MESSAGE, str(exc))
        return request.make_response(ResponseCode.SUCCESS)

    def _batch_ack(self, request: RemotingCommand) -> RemotingCommand:
        try:
            body = BatchAckMessageRequestBody.decode(request.body_bytes())
            offsets = [ack.offsets() for ack in body.acks]
        except ProtocolError as exc:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        failed: list[str] = []
        for ack, acked in zip(body.acks, offsets, strict=True):
            gen = gen_of(ack.pop_time, ack.revive_queue_id)
            topic = ack.topic  # the pop retry topic's name for a message stored there
            if ack.retry != NORMAL_TOPIC and retry_flag(topic) == NORMAL_TOPIC:
                topic = real_topic(ack.retry, topic, ack.consumer_group)
            for offset in acked:
                if gen is None:
                    failed.append(f"{ack.topic}:{ack.queue_id}:{offset} (not a pop of this broker)")
                    continue
                try:
                    self.broker.pop.ack(ack.consumer_group, topic, make_handle(ack.queue_id, offset, gen))
                except ReceiptHandleError:
                    failed.append(f"{ack.topic}:{ack.queue_id}:{offset}")
        if failed:  # the others are acknowledged: RocketMQ answers a batch's refusals the same way
            return request.make_response(
                ResponseCode.NO_MESSAGE, f"{len(failed)} not acknowledged (handed out again or unknown): "
                + ", ".join(failed[:10])
            )
        return request.make_response(ResponseCode.SUCCESS)

    def _change_invisible(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(ChangeInvisibleTimeRequestHeader)
        if not 0 <= header.invisible_time <= MAX_INVISIBLE_MS:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime {header.invisible_time} ms is outside [0, {MAX_INVISIBLE_MS}] ms",
            )
        try:
            handle = self._handle(header.extra_info, header.queue_id, header.offset)
            new = self.broker.pop.change_invisible(
                header.consumer_group, header.topic, handle, header.invisible_time
            )
        except ProtocolError as exc:
            return request.make_response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
        except ReceiptHandleError as exc:
            return request.make_response(ResponseCode.NO_MESSAGE, str(exc))
        gen = parse_handle(new)[2]
        answer = ChangeInvisibleTimeResponseHeader(
            pop_time=gen // 1000, invisible_time=header.invisible_time, revive_qid=gen % 1000
        )
        return request.make_response(ResponseCode.SUCCESS, None, answer)
