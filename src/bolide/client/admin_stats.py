"""The statistics calls of :class:`~bolide.client.admin.Admin`: one broker stats item
(VIEW_BROKER_STATS_DATA, 315) and mqadmin statsAll's table of every topic and consumer group
(messages in and out per second over the last minute and in the last 24 hours, and the messages
each group has yet to consume), against Bolide's servers or Apache RocketMQ's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bolide.client.errors import BrokerSystemError
from bolide.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from bolide.protocol import RequestCode, ResponseCode
from bolide.protocol.bodies.admin import BrokerStatsData, ConsumeStats, GroupList
from bolide.protocol.headers.admin import (
    GetConsumeStatsRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)

if TYPE_CHECKING:
    from bolide.protocol import RemotingCommand
    from bolide.protocol.bodies.route import TopicRouteData
    from bolide.protocol.headers.base import Header

TOPIC_PUT_NUMS, GROUP_GET_NUMS = "TOPIC_PUT_NUMS", "GROUP_GET_NUMS"


def day_sum(data: BrokerStatsData) -> int:
    """Messages of the last 24 hours, as statsAll counts them: the day's sum, else the hour's,
    else the minute's (a young broker's day window may be empty)."""
    for window in (data.stats_day, data.stats_hour, data.stats_minute):
        if window.sum:
            return window.sum
    return 0


@dataclass(slots=True)
class TopicGroupStats:
    """One row of statsAll: a topic and one of its consumer groups (None: the topic has none)."""

    topic: str
    group: str | None
    accumulation: int
    in_tps: float
    out_tps: float | None
    in_24h: int
    out_24h: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "group": self.group, "accumulation": self.accumulation,
                "inTps": self.in_tps, "outTps": self.out_tps, "inMsg24Hour": self.in_24h,
                "outMsg24Hour": self.out_24h}


class StatsAdminCalls:
    """Mixed into Admin: needs its ``_call``, ``topic_list``, ``topic_route`` and ``_route_addrs``."""

    if TYPE_CHECKING:
        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

        async def topic_list(self) -> list[str]: ...

        async def topic_route(self, topic: str) -> TopicRouteData: ...

        @staticmethod
        def _route_addrs(route: TopicRouteData) -> dict[str, str]: ...

    async def broker_stats(self, broker_addr: str, name: str, key: str) -> BrokerStatsData | None:
        """A broker's stats item ``name`` / ``key`` over the last minute, hour and day (e.g.
        ``TOPIC_PUT_NUMS`` of a topic, ``GROUP_GET_NUMS`` of ``topic@group``); None when the
        broker has no such item (nothing counted under that key since it started)."""
        response = await self._call(broker_addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                    ViewBrokerStatsDataRequestHeader(stats_name=name, stats_key=key),
                                    "VIEW_BROKER_STATS_DATA",
                                    ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
        if response.code != ResponseCode.SUCCESS:
            if "not exist" in (response.remark or ""):
                return None
            raise BrokerSystemError(f"VIEW_BROKER_STATS_DATA at {broker_addr}: {response.remark}",
                                    response.code, response.remark)
        return BrokerStatsData.decode(response.body_bytes())

    async def stats_all(self, topic: str | None = None, *, active_only: bool = False,
                        ) -> list[TopicGroupStats]:
        """mqadmin statsAll: for each topic (``topic`` only, when given; retry and dead letter
        topics left out) and each group consuming it, the group's accumulation and the
        messages per second in and out over the last minute and in the last 24 hours, summed over
        the topic's brokers. ``active_only`` keeps the rows with messages in the last 24 hours."""
        topics = [topic] if topic else [
            t for t in await self.topic_list()
            if not t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))]
        rows: list[TopicGroupStats] = []
        for name in topics:
            rows.extend(await self._topic_stats(name, active_only))
        return rows

    async def _topic_stats(self, topic: str, active_only: bool) -> list[TopicGroupStats]:
        addrs = sorted(self._route_addrs(await self.topic_route(topic)).values())
        in_tps, in_24h = 0.0, 0
        groups: set[str] = set()
        for addr in addrs:
            data = await self.broker_stats(addr, TOPIC_PUT_NUMS, topic)
            if data is not None:
                in_tps += data.stats_minute.tps
                in_24h += day_sum(data)
            response = await self._call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                        QueryTopicConsumeByWhoRequestHeader(topic=topic),
                                        "QUERY_TOPIC_CONSUME_BY_WHO")
            groups.update(GroupList.decode(response.body_bytes()).group_list)
        if not groups:
            if active_only and not in_24h:
                return []
            return [TopicGroupStats(topic, None, 0, in_tps, None, in_24h, None)]
        rows = []
        for group in sorted(groups):
            out_tps, out_24h, behind = 0.0, 0, 0
            for addr in addrs:
                data = await self.broker_stats(addr, GROUP_GET_NUMS, f"{topic}@{group}")
                if data is not None:
                    out_tps += data.stats_minute.tps
                    out_24h += day_sum(data)
                response = await self._call(
                    addr, RequestCode.GET_CONSUME_STATS,
                    GetConsumeStatsRequestHeader(consumer_group=group, topic=topic), "GET_CONSUME_STATS",
                    ok=(ResponseCode.SUCCESS, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                        ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SYSTEM_ERROR))
                if response.code == ResponseCode.SUCCESS:
                    table = ConsumeStats.decode(response.body_bytes()).offset_table
                    behind += sum(w.broker_offset - w.consumer_offset for w in table.values())
            if active_only and not in_24h and not out_24h:
                continue
            rows.append(TopicGroupStats(topic, group, max(behind, 0), in_tps, out_tps, in_24h, out_24h))
        return rows
