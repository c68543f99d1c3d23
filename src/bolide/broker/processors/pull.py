"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361, what RocketMQ 5's lite pull consumer sends;
refused when ``litePullMessageEnable`` is false) with long polling (spec 3.5)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from bolide.broker.processors.consumer import property_filter_refusal
from bolide.broker.static_forward import ForwardFailed, forward
from bolide.broker.static_rewrite import (
    LogicQueue,
    PullPlan,
    Refusal,
    logic_queue,
    pull_request,
    pull_response,
)
from bolide.broker.static_rewrite import commit_offset as logic_commit_offset
from bolide.broker.subscription_groups import INDEX_PERM_READ
from bolide.broker.topic_config import PERM_READ
from bolide.common.properties import decode_properties
from bolide.common.sql92 import Selector, SelectorError
from bolide.common.waiting import wait_for
from bolide.protocol.bodies.client import CONSUME_ACTIVELY, EXPRESSION_TAG, SubscriptionData
from bolide.protocol.bodies.route import MASTER_ID
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.consumer import PullMessageRequestHeader, PullMessageResponseHeader
from bolide.remoting import NOT_NOW, NotNow, RequestContext
from bolide.store import BrokerRole, GetStatus
from bolide.store.record import record_properties_blob
from bolide.store.results import GetMessageResult

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
SUBSCRIPTION_FORBIDDEN = "5"  # RocketMQ 5's ForbiddenType of a group forbidden to read a topic

_RETRY = frozenset({GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING})
_MOVED = frozenset({GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY})


def pull_code(result: GetMessageResult, offset: int) -> int:
    """The response code of a get result, as the Java broker maps it (spec 3.5 step 3)."""
    status = result.status
    if status is GetStatus.FOUND:
        return ResponseCode.SUCCESS if result.queue_offsets else ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in _RETRY:
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in _MOVED:
        return ResponseCode.PULL_OFFSET_MOVED
    if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_NOT_FOUND  # OFFSET_OVERFLOW_ONE, OFFSET_FOUND_NULL


RecordFilter = Callable[[memoryview], bool]
# tags, SQL92 filter of the records; a static topic's logic queue and where its pull reads
_Logic = tuple[LogicQueue, PullPlan] | None
_Selection = tuple[list[str] | None, RecordFilter | None, _Logic]
# the response (None: a pull consumer's pull of cold data to hold first), the header (None: refused)
_Read = tuple[RemotingCommand | None, PullMessageRequestHeader | None, _Selection]
COLD_HOLD_S = 3.0  # RocketMQ's ColdDataPullRequestHoldService holds such a pull 3 s (and up to 5 more)
COLD_HOLD_KEY = ("", -1)  # held where no dispatch wakes it
COLD_BUSY = "This consumer group is reading cold data. It has been flow control"


def _refusal(request: RemotingCommand, code: int, remark: str) -> _Read:
    return request.make_response(code, remark), None, (None, None, None)


def sql_filter(selector: Selector) -> RecordFilter:
    """Records whose properties the SQL92 ``selector`` matches."""
    def selected(record: memoryview) -> bool:
        return selector.matches(decode_properties(record_properties_blob(record)))
    return selected


class PullProcessor:
    """Reads the store for a pull; holds a pull that finds nothing until a message arrives."""

    CODES = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)  # 5.x lite pull consumers

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def process_now(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | NotNow:
        """A pull answered at once; NOT_NOW when it finds nothing and may wait (long polling)."""
        response, header, _ = self._first_read(request)
        return NOT_NOW if response is None or self._may_hold(response, header) else response

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        response, header, selection = self._first_read(request)
        if response is None:
            assert header is not None
            logic = selection[2]
            if logic is not None and not logic[0].is_local(logic[1].item):
                return await self._forwarded(request, header, *logic)
            return await self._cold_hold(request, header, selection)
        if not self._may_hold(response, header):
            return response
        assert header is not None
        broker = self.broker
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(header.suspend_timeout_millis, 0),
                                     broker.config.max_pull_suspend_ms) / 1000
        holds = broker.pull_holds
        while True:
            fut = holds.hold(header.topic, header.queue_id)
            if fut is None:  # the hold table is full, or the broker is closing: pull again
                return response
            # dispatched between the read and the hold: its wake-up may have found no hold
            if broker.store.get_max_offset_in_queue(header.topic, header.queue_id) > header.queue_offset:
                fut.set_result(None)
            stop_watching = ctx.channel.wake_on_close(fut)
            try:
                await wait_for(asyncio.shield(fut), deadline - loop.time())
            except TimeoutError:
                pass
            finally:
                stop_watching()
                holds.release(header.topic, header.queue_id, fut)
                fut.cancel()
            if not ctx.channel.is_active:  # the client went away: nobody to answer
                return None
            # a wake-up for messages this pull already had before it was held waits on
            if (broker.store.get_max_offset_in_queue(header.topic, header.queue_id) > header.queue_offset
                    or loop.time() >= deadline):
                return self._read(request, header, selection)

    async def _forwarded(self, request: RemotingCommand, header: PullMessageRequestHeader,
                         lq: LogicQueue, plan: PullPlan) -> RemotingCommand:
        """A pull of logic offsets whose item is on another broker: read there as a physical
        pull (not held, committing nothing), the answer's offsets made logic ones."""
        asked = dataclasses.replace(
            header, queue_id=plan.queue_id, queue_offset=plan.queue_offset,
            max_msg_nums=plan.max_msg_nums,
            sys_flag=header.sys_flag & ~(FLAG_SUSPEND | FLAG_COMMIT_OFFSET))
        bname = plan.item.bname
        try:
            response = await forward(self.broker, bname, RequestCode.PULL_MESSAGE, asked)
            ext = response.ext_fields
            read = (int(ext["nextBeginOffset"]), int(ext["minOffset"]), int(ext["maxOffset"]))
        except ForwardFailed as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        except (KeyError, ValueError):
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"broker {bname} answered the forwarded pull with "
                                         f"{response.code} ({response.remark or 'no remark'})")
        offsets = pull_response(lq, plan.item, plan.queue_offset, response.code, *read)
        answer = PullMessageResponseHeader(
            next_begin_offset=offsets.next_begin_offset, min_offset=offsets.min_offset,
            max_offset=offsets.max_offset, suggest_which_broker_id=MASTER_ID,
            offset_delta=offsets.offset_delta)
        body = response.body_bytes() if offsets.code == ResponseCode.SUCCESS else b""
        return request.make_response(offsets.code, response.remark, answer, body)

    async def _cold_hold(self, request: RemotingCommand, header: PullMessageRequestHeader,
                         selection: _Selection) -> RemotingCommand:
        """Cold data flow control of a pull consumer: hold the pull, then read one message."""
        holds = self.broker.pull_holds
        fut = holds.hold(*COLD_HOLD_KEY)  # None: the table is full or the broker closing
        if fut is not None:
            try:
                await wait_for(asyncio.shield(fut), COLD_HOLD_S)
            except TimeoutError:
                pass
            finally:
                holds.release(*COLD_HOLD_KEY, fut)
                fut.cancel()
        header.max_msg_nums = 1
        return self._read(request, header, selection)

    def _cold_check(self, request: RemotingCommand, header: PullMessageRequestHeader,
                    selection: _Selection) -> _Read | None:
        """RocketMQ 5's cold data flow control: a group past its cold read threshold that pulls
        from the cold area is held (pull consumers) or gets SYSTEM_BUSY (push consumers, and
        groups with no consumer online, which RocketMQ fails on); None: read."""
        broker = self.broker
        if (not broker.cold_data.needs_flow_control(header.consumer_group)
                or not broker.store.in_cold_area(header.topic, header.queue_id, header.queue_offset)):
            return None
        info = broker.clients.consumers.get(header.consumer_group)
        if info is not None and info.consume_type == CONSUME_ACTIVELY:
            return None, header, selection
        return _refusal(request, ResponseCode.SYSTEM_BUSY, COLD_BUSY)

    def _may_hold(self, response: RemotingCommand, header: PullMessageRequestHeader | None) -> bool:
        """Whether a pull that found nothing waits for messages."""
        return (header is not None and response.code == ResponseCode.PULL_NOT_FOUND
                and bool(header.sys_flag & FLAG_SUSPEND) and self.broker.config.long_polling_enable)

    def _first_read(self, request: RemotingCommand) -> _Read:
        """Check the pull and read the queue: (response, header, selection); no header when the
        pull was refused."""
        header = request.read_header(PullMessageRequestHeader)
        broker = self.broker
        if not broker.config.broker_permission & PERM_READ:
            return _refusal(request, ResponseCode.NO_PERMISSION, "this broker is not readable now")
        if request.code == RequestCode.LITE_PULL_MESSAGE and not broker.config.lite_pull_message_enable:
            return _refusal(request, ResponseCode.NO_PERMISSION,
                            f"the broker[{broker.config.broker_ip1}] for lite pull consumer is "
                            "forbidden: set litePullMessageEnable=true to serve lite pull consumers")
        group = broker.subscription_groups.find(header.consumer_group)
        if group is None:
            return _refusal(request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist: create it with "
                "updateSubGroup, or set autoCreateSubscriptionGroup=true")
        if not group.consume_enable:
            return _refusal(request,
                ResponseCode.NO_PERMISSION,
                f"subscription group [{header.consumer_group}] has consumeEnable=false: enable it "
                "with updateSubGroup to consume")
        tc = broker.topics.get(header.topic)
        if tc is None:
            return _refusal(request, ResponseCode.TOPIC_NOT_EXIST,
                                         f"topic[{header.topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return _refusal(request, ResponseCode.NO_PERMISSION,
                                         f"the topic[{header.topic}] pulling message is forbidden")
        logic: _Logic = None
        commit_at: tuple[int, int] | None = None
        statics = broker.static_topics.table
        if statics and (lq := logic_queue(statics, header.topic, header.queue_id,
                                          request.ext_fields)) is not None:
            plan = pull_request(lq, header.queue_offset, header.max_msg_nums)
            if isinstance(plan, Refusal):
                return _refusal(request, *plan)
            logic = (lq, plan)
            if not lq.is_local(plan.item):  # read on the item's broker (see process)
                return None, header, (None, None, logic)
            if header.sys_flag & FLAG_COMMIT_OFFSET:  # committed as UPDATE_CONSUMER_OFFSET does
                committed = logic_commit_offset(lq, header.commit_offset)
                if isinstance(committed, Refusal) or not lq.is_local(committed[0]):
                    header.sys_flag &= ~FLAG_COMMIT_OFFSET  # the client commits it again later
                else:
                    commit_at = committed[0].queue_id, committed[1]
            header.queue_id, header.queue_offset = plan.queue_id, plan.queue_offset
            header.max_msg_nums = plan.max_msg_nums
        if not 0 <= header.queue_id < tc.read_queue_nums:
            return _refusal(request,
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
        if header.sys_flag & FLAG_SUBSCRIPTION:
            sub = SubscriptionData.of(header.topic, header.subscription, header.sub_version,
                                      header.expression_type or EXPRESSION_TAG)
        else:
            if broker.subscription_groups.forbidden(group.group_name, header.topic, INDEX_PERM_READ):
                # RocketMQ 5 (UPDATE_AND_GET_GROUP_FORBIDDEN) refuses these pulls only
                remark = (f"the consumer group[{header.consumer_group}] is forbidden for "
                          f"topic[{header.topic}]")
                return (request.make_response(ResponseCode.NO_PERMISSION, remark,
                                              ext_fields={"forbiddenType": SUBSCRIPTION_FORBIDDEN}),
                        None, (None, None, None))
            found = broker.clients.subscription(header.consumer_group, header.topic)
            if found is None:
                return _refusal(request,
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's subscription of {header.topic} not exist: send HEART_BEAT "
                    "first or post the subscription with the pull")
            sub = found
        selection: _Selection = (None if sub.matches_all else sub.tags_set, None, logic)
        if sub.expression_type != EXPRESSION_TAG:
            refused = property_filter_refusal(broker.config, sub.expression_type)
            if refused is not None:
                return _refusal(request, ResponseCode.SYSTEM_ERROR, refused)
            try:
                selection = (None, sql_filter(broker.selectors.get(sub.sub_string)), logic)
            except SelectorError as exc:
                return _refusal(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                f"the consumer's SQL92 subscription of {header.topic} does not "
                                f"parse: {exc}")
        if broker.config.cold_data_flow_control_enable:  # throttled pulls commit no offset
            throttled = self._cold_check(request, header, selection)
            if throttled is not None:
                return throttled
        if header.sys_flag & FLAG_COMMIT_OFFSET and (broker.role is not BrokerRole.SLAVE or broker.acting):
            queue_id, offset = commit_at or (header.queue_id, header.commit_offset)
            broker.offsets.commit(header.consumer_group, header.topic, queue_id, offset)
        return self._read(request, header, selection), header, selection

    def _read(self, request: RemotingCommand, header: PullMessageRequestHeader,
              selection: _Selection) -> RemotingCommand:
        broker = self.broker
        tags, record_filter, logic = selection
        result = broker.store.get_message(header.consumer_group, header.topic, header.queue_id,
                                          header.queue_offset, header.max_msg_nums, tags,
                                          joined=True, record_filter=record_filter)
        code = pull_code(result, header.queue_offset)
        suggest = (self._suggest(header.consumer_group, result) if broker.config.slave_read_enable
                   else MASTER_ID)
        if (code == ResponseCode.PULL_OFFSET_MOVED and broker.role is BrokerRole.SLAVE
                and not broker.store.config.offset_check_in_slave):
            code = ResponseCode.PULL_RETRY_IMMEDIATELY  # only the master moves offsets
            suggest = self._group_broker_id(header.consumer_group)
        answer = PullMessageResponseHeader(next_begin_offset=result.next_begin_offset,
                                           min_offset=result.min_offset, max_offset=result.max_offset,
                                           suggest_which_broker_id=suggest)
        if logic is not None:  # a static topic: logic offsets (RocketMQ rewriteResponseForStaticTopic)
            lq, plan = logic
            offsets = pull_response(lq, plan.item, header.queue_offset, code,
                                    result.next_begin_offset, result.min_offset, result.max_offset)
            code = offsets.code
            answer.next_begin_offset, answer.min_offset = offsets.next_begin_offset, offsets.min_offset
            answer.max_offset, answer.offset_delta = offsets.max_offset, offsets.offset_delta
        # the store copies the records into one buffer as it selects them: one copy costs less
        # than a view per record written as separate buffers (a pull's body is at most
        # maxTransferBytesOnMessageInMemory, 256 KiB)
        found = code == ResponseCode.SUCCESS
        body = result.body if found else b""
        if found and broker.config.cold_data_flow_control_enable:
            broker.cold_data.cold_acc(header.consumer_group, broker.store.cold_bytes(body))
        broker.stats.on_get(result.message_count if found else 0)
        if found:
            broker.stats_items.on_get(header.consumer_group, header.topic, result.message_count, len(body))
        if broker.metrics is not None:
            broker.metrics.on_pull(header.consumer_group, header.topic, header.queue_id,
                                   result.next_begin_offset)
            if found:
                broker.metrics.on_get(header.topic, header.consumer_group, result.message_count, len(body))
        return request.make_response(code, result.status.value, answer, body)

    def _suggest(self, group: str, result: GetMessageResult) -> int:
        """With slaveReadEnable, the broker id the consumer should pull from next (RocketMQ's
        rule): the group's whichBrokerWhenConsumeSlowly when the store says the read is far
        behind the CommitLog's end, else the group's brokerId."""
        settings = self.broker.subscription_groups.get(group)
        if settings is None:
            return MASTER_ID
        if result.suggest_pulling_from_slave:
            return settings.which_broker_when_consume_slowly
        return settings.broker_id

    def _group_broker_id(self, group: str) -> int:
        settings = self.broker.subscription_groups.get(group)
        return settings.broker_id if settings is not None else MASTER_ID
