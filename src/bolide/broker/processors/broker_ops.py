"""Operations RocketMQ's AdminBrokerProcessor serves for admins and slaves, answered the same way:

- GET_TIMER_METRICS (61, 5.x): the timer messages waiting per topic (``config/timermetrics``,
  :mod:`bolide.store.timer_metrics`); SYSTEM_ERROR with ``timerWheelEnable=false``, as RocketMQ
  has no timer store then.
- QUERY_CORRECTION_OFFSET (308): per queue of a topic, the smallest committed offset of every
  group but the ``filterGroups`` that is not behind the queue's first message; where
  ``compareGroup`` has an offset below that smallest one (it is behind the queue's start), Java's
  Long.MAX_VALUE. RocketMQ also deletes the filter groups' offsets while answering (its
  iterator removes from the offset table); Bolide leaves them.
- RESUME_CHECK_HALF_MESSAGE (323): the message at an offset message id (a half message, or
  its copy moved to TRANS_CHECK_MAX_TIME_TOPIC after too many checks) goes into the half
  queue again with TRANSACTION_CHECK_TIMES=0, so the transaction check asks its producer
  again (:mod:`bolide.broker.transaction`).
- UPDATE_AND_GET_GROUP_FORBIDDEN (353, 5.x): set, when ``readable`` is given, and answer
  whether a group may read a topic (subscriptionGroup.json's ``forbiddenTable``); a pull
  without its subscription from a group forbidden to read is refused (NO_PERMISSION,
  forbiddenType 5), as in RocketMQ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bolide.broker.subscription_groups import INDEX_PERM_READ
from bolide.common import properties as P
from bolide.common.msgid import decode_offset_msg_id
from bolide.protocol.bodies.admin import GroupForbidden, QueryCorrectionOffsetBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import (
    QueryCorrectionOffsetHeader,
    ResumeCheckHalfMessageRequestHeader,
    UpdateGroupForbiddenRequestHeader,
)
from bolide.remoting import RequestContext
from bolide.store.config_files import TOPIC_GROUP_SEPARATOR

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

JAVA_LONG_MAX = (1 << 63) - 1


class BrokerOpsProcessor:
    """Timer metrics, correction offsets, resumed half-message checks and group read bans."""

    CODES = (RequestCode.GET_TIMER_METRICS, RequestCode.QUERY_CORRECTION_OFFSET,
             RequestCode.RESUME_CHECK_HALF_MESSAGE, RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        c = RequestCode
        self._handlers: dict[int, Callable[[RemotingCommand], RemotingCommand]] = {
            c.GET_TIMER_METRICS: self.timer_metrics,
            c.QUERY_CORRECTION_OFFSET: self.correction_offset,
            c.RESUME_CHECK_HALF_MESSAGE: self.resume_check_half_message,
            c.UPDATE_AND_GET_GROUP_FORBIDDEN: self.group_forbidden,
        }

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self._handlers[request.code](request)

    def timer_metrics(self, request: RemotingCommand) -> RemotingCommand:
        if not self.broker.config.timer_wheel_enable:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "The timer message store is null: "
                                         "this broker runs with timerWheelEnable=false")
        return request.make_response(body=self.broker.timer_metrics.encode())

    def correction_offset(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(QueryCorrectionOffsetHeader)
        topic, store = header.topic, self.broker.store
        names = header.filter_groups or ""
        filtered = set(names.split(",")) if names.strip() else set()
        smallest: dict[int, int] = {}
        for key, queues in self.broker.offsets.snapshot().items():
            key_topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            if key_topic != topic or group in filtered:
                continue
            for queue_id, offset in queues.items():
                if offset >= store.get_min_offset_in_queue(topic, queue_id):
                    smallest[queue_id] = min(offset, smallest.get(queue_id, offset))
        if header.compare_group not in filtered:  # RocketMQ has just deleted a filtered one's
            for queue_id, offset in self.broker.offsets.query_all(header.compare_group, topic).items():
                if queue_id in smallest and smallest[queue_id] > offset:
                    smallest[queue_id] = JAVA_LONG_MAX
        return request.make_response(body=QueryCorrectionOffsetBody(correction_offsets=smallest).encode())

    def resume_check_half_message(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(ResumeCheckHalfMessageRequestHeader)
        if not header.msg_id:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         "msgId is missing: give the offset message id of the half message")
        try:
            _, offset = decode_offset_msg_id(header.msg_id)
        except ValueError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"msgId {exc}")
        store = self.broker.store
        msg = (store.look_message_by_offset(offset)
               if store.min_phy_offset <= offset < store.max_phy_offset else None)
        if msg is None or msg.commit_log_offset != offset:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"no message at CommitLog offset {offset} (msgId {header.msg_id})")
        if P.REAL_TOPIC not in msg.properties or not msg.properties.get(P.REAL_QUEUE_ID, "").isdigit():
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"the message {header.msg_id} of {msg.topic} is no half message "
                                         "(it has no REAL_TOPIC and REAL_QID)")
        result = self.broker.transactions.resume_check(msg)
        if not result.ok:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed: "
                                         f"{result.status.value} {result.remark or ''}".rstrip())
        return request.make_response()

    def group_forbidden(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(UpdateGroupForbiddenRequestHeader)
        groups = self.broker.subscription_groups
        if header.readable is not None:
            groups.update_forbidden(header.group, header.topic, INDEX_PERM_READ, not header.readable)
        readable = not groups.forbidden(header.group, header.topic, INDEX_PERM_READ)
        body = GroupForbidden(topic=header.topic, group=header.group, readable=readable)
        return request.make_response(remark="", body=body.encode())
