"""mqadmin exportMetrics as a call of :class:`~bolide.client.admin.Admin`: for each broker group
of a cluster, its master's machine, message rates and counts of the last day, sizes and the
versions of the clients consuming from it, with the cluster's totals; against Bolide's servers
or Apache RocketMQ's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bolide.client.admin_stats import TOPIC_PUT_NUMS, day_sum
from bolide.client.errors import ClientConfigError, MQClientError
from bolide.common.topic import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from bolide.protocol.bodies.route import MASTER_ID
from bolide.protocol.codes import DEFAULT_VERSION_DESC, version_name

if TYPE_CHECKING:
    from bolide.protocol.bodies.admin import BrokerStatsData, ConsumerConnection
    from bolide.protocol.bodies.broker import SubscriptionGroupConfig, TopicConfig
    from bolide.protocol.bodies.route import ClusterInfo

TOTAL_TPS = ("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps")
DAY_NUMS = ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum")


def _first_rate(kv: dict[str, str], key: str) -> float:
    """The first of a runtime info rate's figures ("10.0 9.8 9.7": last 10 s, 1 min, 10 min)."""
    figures = kv.get(key, "").split()
    return float(figures[0]) if figures else 0.0


def _day(kv: dict[str, str], what: str) -> int:
    """Messages put or got since yesterday morning until this morning (msgPutTotal... keys)."""
    today = int(kv.get(f"msg{what}TotalTodayMorning", "0"))
    return today - int(kv.get(f"msg{what}TotalYesterdayMorning", "0"))


class MetricsAdminCalls:
    """Mixed into Admin: needs the calls named under TYPE_CHECKING."""

    if TYPE_CHECKING:
        async def cluster_info(self) -> ClusterInfo: ...

        async def broker_runtime_info(self, addr: str) -> dict[str, str]: ...

        async def broker_config(self, broker_addr: str) -> dict[str, str]: ...

        async def user_topics(self, broker_addr: str, *, special: bool = False) -> dict[str, TopicConfig]: ...

        async def user_subscription_groups(self, broker_addr: str) -> dict[str, SubscriptionGroupConfig]: ...

        async def broker_stats(self, broker_addr: str, name: str, key: str) -> BrokerStatsData | None: ...

        async def consumer_connection(self, group: str) -> ConsumerConnection: ...

    async def export_metrics(self, cluster: str) -> dict[str, Any]:
        """mqadmin exportMetrics' document: ``{"evaluateReport": {brokerName: {"runtimeEnv",
        "runtimeQuota", "runtimeVersion"}}, "totalData": {"totalTps", "totalOneDayNum"}}`` from
        each master's runtime info (28), settings (26), topics (21, 305), groups (201),
        transaction and delay statistics items (315) and its groups' connections (203)."""
        info = await self.cluster_info()
        if cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise ClientConfigError(f"cluster {cluster!r} is unknown to the NameServer (known: {known})")
        total_tps = dict.fromkeys(TOTAL_TPS, 0.0)
        total_day = dict.fromkeys(DAY_NUMS, 0)
        report: dict[str, dict[str, Any]] = {}
        for name in sorted(info.cluster_addr_table[cluster]):
            data = info.broker_addr_table.get(name)
            addr = data.broker_addrs.get(MASTER_ID) if data is not None else None
            if addr is None:
                continue
            kv = await self.broker_runtime_info(addr)
            settings = await self.broker_config(addr)
            groups = await self.user_subscription_groups(addr)
            quota = await self._runtime_quota(addr, kv, groups)
            for total, key in zip(TOTAL_TPS, ("normalInTps", "normalOutTps", "transInTps", "scheduleInTps"),
                                  strict=True):
                total_tps[total] += quota["tps"][key]
            for key in DAY_NUMS:
                total_day[key] += quota["oneDayNum"][key]
            report[name] = {
                "runtimeEnv": {"cpuNum": settings.get("clientCallbackExecutorThreads"),
                               "totalMemKBytes": kv.get("totalMemKBytes")},
                "runtimeQuota": quota,
                "runtimeVersion": {"rocketmqVersion": DEFAULT_VERSION_DESC,
                                   "clientInfo": await self._client_versions(groups)},
            }
        return {"evaluateReport": report, "totalData": {"totalTps": total_tps, "totalOneDayNum": total_day}}

    async def _runtime_quota(self, addr: str, kv: dict[str, str],
                             groups: dict[str, SubscriptionGroupConfig]) -> dict[str, Any]:
        trans = await self.broker_stats(addr, TOPIC_PUT_NUMS, TRANS_HALF_TOPIC)
        schedule = await self.broker_stats(addr, TOPIC_PUT_NUMS, SCHEDULE_TOPIC)
        return {
            "diskRatio": {"commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                          "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio")},
            "tps": {"normalInTps": _first_rate(kv, "putTps"),
                    "normalOutTps": _first_rate(kv, "getTransferredTps"),
                    "transInTps": trans.stats_minute.tps if trans else 0.0,
                    "scheduleInTps": schedule.stats_minute.tps if schedule else 0.0},
            "oneDayNum": {"normalOneDayInNum": _day(kv, "Put"), "normalOneDayOutNum": _day(kv, "Get"),
                          "transOneDayInNum": day_sum(trans) if trans else 0,
                          "scheduleOneDayInNum": day_sum(schedule) if schedule else 0},
            "messageAverageSize": kv.get("putMessageAverageSize"),
            "topicSize": len(await self.user_topics(addr)),
            "groupSize": len(groups),
        }

    async def _client_versions(self, groups: dict[str, SubscriptionGroupConfig]) -> list[str]:
        """``LANGUAGE%VERSION`` of every consumer online in ``groups`` (a group without any, or
        whose broker does not answer, is left out, as mqadmin does)."""
        seen: set[str] = set()
        for group in groups:
            try:
                connections = await self.consumer_connection(group)
            except MQClientError:
                continue
            seen.update(f"{c.language}%{version_name(c.version)}" for c in connections.connection_set)
        return sorted(seen)
