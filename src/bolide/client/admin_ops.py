"""Calls of :class:`~bolide.client.admin.Admin` that RocketMQ's MQAdminExt offers without an
mqadmin command: a broker's timer metrics (GET_TIMER_METRICS 61, RocketMQ 5), correction
offsets (QUERY_CORRECTION_OFFSET 308), checking a half message again
(RESUME_CHECK_HALF_MESSAGE 323), a group's read ban on a topic (UPDATE_AND_GET_GROUP_FORBIDDEN
353, RocketMQ 5) and the brokers of a broker group (GET_BROKER_MEMBER_GROUP 901, a RocketMQ 5
NameServer). They work against Bolide's servers and Apache RocketMQ's alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.protocol import RequestCode
from bolide.protocol.bodies.admin import GroupForbidden, QueryCorrectionOffsetBody
from bolide.protocol.bodies.broker import TimerMetricsSerializeWrapper
from bolide.protocol.bodies.route import BrokerMemberGroup, GetBrokerMemberGroupResponseBody
from bolide.protocol.headers.admin import (
    QueryCorrectionOffsetHeader,
    ResumeCheckHalfMessageRequestHeader,
    UpdateGroupForbiddenRequestHeader,
)
from bolide.protocol.headers.namesrv import GetBrokerMemberGroupRequestHeader

if TYPE_CHECKING:
    from collections.abc import Iterable

    from bolide.common.message import MessageExt
    from bolide.protocol import RemotingCommand
    from bolide.protocol.headers.base import Header


class OpsAdminCalls:
    """Mixed into Admin: needs its ``_call``, ``_namesrv`` and ``view_message``."""

    if TYPE_CHECKING:
        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

        async def _namesrv(self, code: int, header: Header | None, what: str) -> RemotingCommand: ...

        async def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt: ...

    async def timer_metrics(self, broker_addr: str) -> TimerMetricsSerializeWrapper:
        """The timer messages waiting per topic in the broker at ``broker_addr`` (RocketMQ 5's
        ``config/timermetrics``); BrokerSystemError when its timers are off."""
        response = await self._call(broker_addr, RequestCode.GET_TIMER_METRICS, None, "GET_TIMER_METRICS")
        return TimerMetricsSerializeWrapper.decode(response.body_bytes())

    async def query_correction_offset(self, broker_addr: str, topic: str, compare_group: str,
                                      filter_groups: Iterable[str] = ()) -> dict[int, int]:
        """Per queue id of ``topic`` on the broker, the smallest committed offset of every group
        but ``filter_groups`` (offsets behind the queue's first message left out), or Java's
        Long.MAX_VALUE where ``compare_group``'s offset is below it. Note that a RocketMQ broker
        deletes the offsets of the ``filter_groups`` while answering."""
        header = QueryCorrectionOffsetHeader(compare_group=compare_group, topic=topic,
                                             filter_groups=",".join(filter_groups) or None)
        response = await self._call(broker_addr, RequestCode.QUERY_CORRECTION_OFFSET, header,
                                    f"QUERY_CORRECTION_OFFSET of {topic!r}")
        if not response.body_bytes():
            return {}
        return QueryCorrectionOffsetBody.decode(response.body_bytes()).correction_offsets

    async def resume_check_half_message(self, topic: str, msg_id: str) -> str:
        """Have the broker check the half message ``msg_id`` again from its first check (a
        transaction whose checks ran out and whose half message went to
        TRANS_CHECK_MAX_TIME_TOPIC: give that topic; an offset message id, or a client id
        found in ``topic``). Returns the broker address asked; MQBrokerError when it refuses."""
        msg = await self.view_message(msg_id, topic)
        addr, offset_id = msg.store_host, msg.offset_msg_id
        await self._call(addr, RequestCode.RESUME_CHECK_HALF_MESSAGE,
                         ResumeCheckHalfMessageRequestHeader(topic=topic, msg_id=offset_id),
                         f"RESUME_CHECK_HALF_MESSAGE of {msg_id}")
        return addr

    async def update_and_get_group_read_forbidden(self, broker_addr: str, group: str, topic: str,
                                                  readable: bool | None = None) -> GroupForbidden:
        """Forbid (``readable=False``) or allow ``group`` to read ``topic`` on the broker, or only
        ask (None); the broker's answer says whether it may read now (RocketMQ 5)."""
        header = UpdateGroupForbiddenRequestHeader(group=group, topic=topic, readable=readable)
        response = await self._call(broker_addr, RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN, header,
                                    f"UPDATE_AND_GET_GROUP_FORBIDDEN of {group!r} on {topic!r}")
        return GroupForbidden.decode(response.body_bytes())

    async def broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup:
        """The brokers of the group ``broker_name`` by broker id, as the NameServer has them
        registered (RocketMQ 5; empty when it knows no such group)."""
        header = GetBrokerMemberGroupRequestHeader(cluster_name=cluster, broker_name=broker_name)
        response = await self._namesrv(RequestCode.GET_BROKER_MEMBER_GROUP, header,
                                       f"GET_BROKER_MEMBER_GROUP of {broker_name!r}")
        found = GetBrokerMemberGroupResponseBody.decode(response.body_bytes()).broker_member_group
        return found if found is not None else BrokerMemberGroup(cluster=cluster, broker_name=broker_name)
