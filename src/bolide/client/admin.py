"""Admin (asyncio): what RocketMQ's mqadmin does, over the remoting protocol (spec 3.3, 3.7).

::

    async with Admin("127.0.0.1:9876") as admin:
        await admin.create_topic("Orders", read_queue_nums=4, write_queue_nums=4)
        progress = await admin.consumer_progress("orders-cg")
        print(progress.total_lag, progress.max_lag_ms)

NameServer calls try each address in turn. Broker calls go to masters: those of a cluster
(``cluster=``), one address (``broker_addr=``), or by default every master the NameServer
knows. Every method starts the client on first use; ``close()`` releases the connections.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Self

from bolide.client.admin_acl import AclAdminCalls
from bolide.client.admin_auth import AuthAdminCalls
from bolide.client.admin_cold_data import ColdDataAdminCalls
from bolide.client.admin_config import ConfigAdminCalls
from bolide.client.admin_controller import ControllerAdminCalls
from bolide.client.admin_lists import ListAdminCalls
from bolide.client.admin_metrics import MetricsAdminCalls
from bolide.client.admin_ops import OpsAdminCalls
from bolide.client.admin_static import StaticTopicAdminCalls
from bolide.client.admin_stats import StatsAdminCalls
from bolide.client.admin_trace import TraceAdminCalls
from bolide.client.admin_types import GroupProgress, OffsetChange, QueueProgress, ResetPlan
from bolide.client.api import request
from bolide.client.config import ClientConfig, as_config
from bolide.client.errors import (
    ClientConfigError,
    MessageNotFoundError,
    MQBrokerError,
    NoRouteError,
    TopicNotExistError,
)
from bolide.client.filtering import subscription
from bolide.client.instance import ClientInstance
from bolide.client.pulling import pull, pull_raw_many
from bolide.client.results import PullResult, PullStatus
from bolide.client.route import build_route
from bolide.common import properties as P
from bolide.common.compression import decompress_message
from bolide.common.message import MessageExt
from bolide.common.msgid import decode_offset_msg_id
from bolide.common.records import decode_records
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.errors import RemotingError
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies.admin import (
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    GetConsumerStatusBody,
    KVTable,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    ResetOffsetBody,
    TopicList,
    TopicOffset,
    TopicStatsTable,
)
from bolide.protocol.bodies.broker import SubscriptionGroupConfig, SubscriptionGroupWrapper
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.bodies.ha import HARuntimeInfo
from bolide.protocol.bodies.pop import SetMessageRequestModeRequestBody
from bolide.protocol.bodies.route import MASTER_ID, PERM_READ, PERM_WRITE, ClusterInfo, TopicRouteData
from bolide.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
)
from bolide.protocol.headers.admin import (
    RESET_TO_END,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsInBrokerHeader,
    QueryConsumeQueueRequestHeader,
    ResetOffsetRequestHeader,
)
from bolide.protocol.headers.base import Header

LATEST = RESET_TO_END  # reset_offset_by_time's time for "past each queue's last message"
TOOLS_GROUP = "TOOLS_CONSUMER"  # the group mqadmin's reads use (built into every broker)
DEFAULT_TOPIC = "TBW102"


class Admin(AclAdminCalls, AuthAdminCalls, ColdDataAdminCalls, ConfigAdminCalls, ControllerAdminCalls,
            ListAdminCalls, MetricsAdminCalls, OpsAdminCalls, StaticTopicAdminCalls, StatsAdminCalls,
            TraceAdminCalls):
    """Topics, groups, progress and message lookups; asyncio API (blocking twin in
    :mod:`bolide.client.blocking`)."""

    def __init__(self, namesrv: str | ClientConfig, *, timeout_ms: int | None = None) -> None:
        config = as_config(namesrv)
        if timeout_ms is not None:
            config = config.replace(api_timeout_ms=timeout_ms)
        self.config = config
        self._instance = ClientInstance(config)

    @property
    def client_id(self) -> str:
        """This client's id (``ip@instance``), as brokers list it."""
        return self._instance.client_id

    async def start(self) -> Admin:
        """Connect to the NameServer; idempotent (every call starts the client when needed)."""
        await self._instance.start()
        return self

    async def close(self) -> None:
        """Close every connection of this client."""
        await self._instance.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- plumbing -----------------------------------------------------------------------------
    async def _call(self, addr: str, code: int, header: Header | None, what: str, body: bytes = b"",
                    ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        await self._instance.start()
        return await self._instance.api.call(addr, request(code, header, body), what, ok=ok)

    async def _namesrv(self, code: int, header: Header | None, what: str) -> RemotingCommand:
        """Ask the NameServers in turn until one answers (transport errors move on)."""
        last: RemotingError | None = None
        for addr in self.config.namesrv_addrs:
            try:
                return await self._call(addr, code, header, what)
            except RemotingError as exc:
                last = exc
        assert last is not None
        raise last

    # -- NameServer ---------------------------------------------------------------------------
    async def cluster_info(self) -> ClusterInfo:
        """The clusters and broker groups the NameServer knows (mqadmin clusterList)."""
        response = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO, None, "GET_BROKER_CLUSTER_INFO")
        return ClusterInfo.decode(response.body_bytes())

    async def topic_list(self) -> list[str]:
        """Every topic the NameServer knows (mqadmin topicList)."""
        response = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None,
                                       "GET_ALL_TOPIC_LIST_FROM_NAMESERVER")
        return sorted(TopicList.decode(response.body_bytes()).topic_list)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The NameServer's route of ``topic``; TopicNotExistError when it has none."""
        await self._instance.start()
        data = await self._instance.api.get_route(topic)
        if data is None:
            raise TopicNotExistError(
                f"the NameServer at {self.config.namesrv_addr} has no route for topic {topic!r}: "
                "create it with updateTopic (or check the name)", ResponseCode.TOPIC_NOT_EXIST)
        return data

    async def master_addrs(self, cluster: str | None = None) -> list[str]:
        """Master addresses of ``cluster`` (of every cluster when None)."""
        info = await self.cluster_info()
        if cluster is None:
            names = set(info.broker_addr_table)
        elif cluster in info.cluster_addr_table:
            names = set(info.cluster_addr_table[cluster])
        else:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise ClientConfigError(f"cluster {cluster!r} is unknown to the NameServer (known: {known}): "
                                    "check the name, or give a broker address with -b")
        return sorted(bd.broker_addrs[MASTER_ID] for name, bd in info.broker_addr_table.items()
                      if name in names and MASTER_ID in bd.broker_addrs)

    async def _targets(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        if broker_addr:
            return [broker_addr]
        addrs = await self.master_addrs(cluster)
        if not addrs:
            raise ClientConfigError("no master broker is registered with the NameServer at "
                                    f"{self.config.namesrv_addr}: start a broker, or give one with -b")
        return addrs

    @staticmethod
    def _route_addrs(route: TopicRouteData) -> dict[str, str]:
        """Broker name -> address to ask (the master, else any) of a route."""
        out = {}
        for bd in route.broker_datas:
            addr = bd.broker_addrs.get(MASTER_ID) or next(iter(bd.broker_addrs.values()), None)
            if addr:
                out[bd.broker_name] = addr
        return out

    # -- brokers and topics -------------------------------------------------------------------
    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        """The broker's runtime figures as RocketMQ names them (mqadmin brokerStatus)."""
        response = await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO, None,
                                    "GET_BROKER_RUNTIME_INFO")
        return KVTable.decode(response.body_bytes()).table

    async def broker_consume_stats(self, addr: str, *, order_only: bool = False) -> ConsumeStatsList:
        """Every consumer group's progress on a broker (mqadmin brokerConsumeStats); with
        ``order_only`` only ordered topics."""
        response = await self._call(addr, RequestCode.GET_BROKER_CONSUME_STATS,
                                    GetConsumeStatsInBrokerHeader(is_order=order_only),
                                    "GET_BROKER_CONSUME_STATS")
        return ConsumeStatsList.decode(response.body_bytes())

    async def producer_table(self, addr: str) -> dict[str, list[ProducerInfo]]:
        """A broker's producer connections by group (mqadmin producer)."""
        response = await self._call(addr, RequestCode.GET_ALL_PRODUCER_INFO, None, "GET_ALL_PRODUCER_INFO")
        return ProducerTableInfo.decode(response.body_bytes()).data

    async def consume_queue(self, addr: str, topic: str, queue_id: int, index: int, count: int = 10,
                            group: str | None = None) -> QueryConsumeQueueResponseBody:
        """``count`` ConsumeQueue entries of a queue from ``index`` on a broker, with the
        queue's bounds and ``group``'s subscription (mqadmin queryCq)."""
        header = QueryConsumeQueueRequestHeader(topic=topic, queue_id=queue_id, index=index, count=count,
                                                consumer_group=group)
        response = await self._call(addr, RequestCode.QUERY_CONSUME_QUEUE, header, "QUERY_CONSUME_QUEUE")
        return QueryConsumeQueueResponseBody.decode(response.body_bytes())

    async def clean_expired_cq(self, *, unused_topics_only: bool = False,
                               broker_addr: str | None = None,
                               cluster: str | None = None) -> dict[str, str]:
        """Have the target masters delete the ConsumeQueues whose messages are all gone
        (mqadmin cleanExpiredCQ; with ``unused_topics_only``, cleanUnusedTopic: every queue
        of the topics the broker no longer has, messages and all); each broker's answer by
        address."""
        code = (RequestCode.CLEAN_UNUSED_TOPIC if unused_topics_only
                else RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        what = "cleanUnusedTopic" if unused_topics_only else "cleanExpiredCQ"
        return {addr: (await self._call(addr, code, None, what)).remark or ""
                for addr in await self._targets(broker_addr, cluster)}

    async def delete_expired_commit_log(self, *, broker_addr: str | None = None,
                                        cluster: str | None = None) -> list[str]:
        """Have the target masters delete their expired CommitLog files (older than
        fileReservedTime) now, whatever deleteWhen says (DELETE_EXPIRED_COMMITLOG 329, mqadmin
        deleteExpiredCommitLog); returns their addresses."""
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.DELETE_EXPIRED_COMMITLOG, None, "deleteExpiredCommitLog")
        return addrs

    async def ha_status(self, broker_addr: str) -> HARuntimeInfo:
        """A broker's replication status (GET_BROKER_HA_STATUS 907, mqadmin haStatus): a
        master's slaves and their lag, or a slave's view of its master."""
        response = await self._call(broker_addr, RequestCode.GET_BROKER_HA_STATUS, None,
                                    "GET_BROKER_HA_STATUS")
        return HARuntimeInfo.decode(response.body_bytes())

    async def topic_stats(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        """Min and max offset and last store time of every queue of ``topic`` (topicStatus)."""
        out: dict[MessageQueue, TopicOffset] = {}
        for addr in self._route_addrs(await self.topic_route(topic)).values():
            response = await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO,
                                        GetTopicStatsInfoRequestHeader(topic=topic), "GET_TOPIC_STATS_INFO")
            out.update(TopicStatsTable.decode(response.body_bytes()).offset_table)
        return dict(sorted(out.items()))

    async def create_topic(self, topic: str, *, read_queue_nums: int = 8, write_queue_nums: int = 8,
                           perm: int = PERM_READ | PERM_WRITE, order: bool = False,
                           broker_addr: str | None = None, cluster: str | None = None,
                           attributes: str | None = None) -> list[str]:
        """Create or update ``topic`` on the target masters; returns their addresses.

        ``attributes``: RocketMQ 5 topic attribute changes, ``"+key=value,-key"``; Bolide
        brokers act on ``+retention.hours=N`` (a per-topic retention floor),
        ``+cleanup.policy=COMPACTION`` (a compacted topic, set at creation) and ``+message.type``."""
        header = CreateTopicRequestHeader(topic=topic, default_topic=DEFAULT_TOPIC,
                                          read_queue_nums=read_queue_nums, write_queue_nums=write_queue_nums,
                                          perm=perm, topic_filter_type="SINGLE_TAG", topic_sys_flag=0,
                                          order=order, attributes=attributes)
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header, f"updateTopic {topic!r}")
        return addrs

    async def update_topic_perm(self, topic: str, perm: int, *, broker_addr: str | None = None,
                                cluster: str | None = None) -> list[str]:
        """Set ``topic``'s permission (2 write, 4 read, 6 both) on the masters of its route, or
        of ``cluster``, or ``broker_addr`` alone, keeping its queue counts (mqadmin
        updateTopicPerm); returns their addresses."""
        route = await self.topic_route(topic)
        counts = {qd.broker_name: qd for qd in route.queue_datas}
        masters = {addr: name for name, addr in self._route_addrs(route).items()}
        addrs = [broker_addr] if broker_addr else (
            [a for a in await self.master_addrs(cluster) if a in masters] if cluster else sorted(masters))
        for addr in addrs:
            qd = counts.get(masters.get(addr, ""))
            if qd is None:
                raise ClientConfigError(f"{addr} does not serve topic {topic!r}: give one of "
                                        f"{', '.join(sorted(masters)) or 'its brokers'}")
            await self.create_topic(topic, read_queue_nums=qd.read_queue_nums,
                                    write_queue_nums=qd.write_queue_nums, perm=perm, broker_addr=addr)
        return addrs

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from the masters of ``cluster`` (all when None), then from every
        NameServer; returns the broker addresses. Each broker deletes the topic's queues (its
        messages are no longer served; a topic created again under the name starts empty)
        and the consumer offsets on it."""
        addrs = await self._targets(None, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic=topic),
                             f"deleteTopic {topic!r}")
        for ns in self.config.namesrv_addrs:
            await self._call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV,
                             DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster),
                             f"deleteTopic {topic!r} on the NameServer")
        return addrs

    async def create_subscription_group(self, config: SubscriptionGroupConfig, *,
                                        broker_addr: str | None = None,
                                        cluster: str | None = None) -> list[str]:
        """Create or update a consumer group on the target masters (mqadmin updateSubGroup);
        returns their addresses."""
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                             f"updateSubGroup {config.group_name!r}", body=config.encode())
        return addrs

    async def subscription_group(self, group: str, *, broker_addr: str | None = None,
                                 cluster: str | None = None) -> dict[str, SubscriptionGroupConfig | None]:
        """``group``'s settings on the target masters, None where it has none (mqadmin
        getConsumerConfig; GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201)."""
        out: dict[str, SubscriptionGroupConfig | None] = {}
        for addr in await self._targets(broker_addr, cluster):
            response = await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None,
                                        f"getConsumerConfig {group!r}")
            table = SubscriptionGroupWrapper.decode(response.body_bytes()).subscription_group_table
            out[addr] = table.get(group)
        return out

    async def topic_clusters(self, topic: str) -> list[str]:
        """The clusters whose brokers serve ``topic`` (mqadmin topicClusterList)."""
        names = {bd.broker_name for bd in (await self.topic_route(topic)).broker_datas}
        info = await self.cluster_info()
        return sorted(c for c, brokers in info.cluster_addr_table.items() if names & set(brokers))

    async def delete_subscription_group(self, group: str, *, broker_addr: str | None = None,
                                        cluster: str | None = None, remove_offset: bool = True) -> list[str]:
        """Delete a consumer group (and by default its offsets) on the target masters (mqadmin
        deleteSubGroup); returns their addresses."""
        header = DeleteSubscriptionGroupRequestHeader(group_name=group, remove_offset=remove_offset)
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header, f"deleteSubGroup {group!r}")
        return addrs

    async def set_consume_mode(self, topic: str, group: str, mode: str, pop_share_queue_num: int = 0, *,
                               broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """Whether ``group``'s RocketMQ 5 push consumers that let the broker allocate their
        queues (``setClientRebalance(false)``) pull or pop ``topic`` ("PULL" or "POP"; mqadmin
        setConsumeMode); returns the masters' addresses."""
        body = SetMessageRequestModeRequestBody(topic=topic, consumer_group=group, mode=mode,
                                                pop_share_queue_num=pop_share_queue_num)
        addrs = await self._targets(broker_addr, cluster)
        for addr in addrs:
            await self._call(addr, RequestCode.SET_MESSAGE_REQUEST_MODE, None,
                             f"setConsumeMode {group!r} on {topic!r}", body=body.encode())
        return addrs

    # -- consumer groups ----------------------------------------------------------------------
    async def _group_addrs(self, group: str) -> list[str]:
        """Brokers of the group's retry topic (as mqadmin), else every master."""
        await self._instance.start()
        route = await self._instance.api.get_route(RETRY_GROUP_TOPIC_PREFIX + group)
        if route is not None:
            return sorted(set(self._route_addrs(route).values()))
        return await self.master_addrs()

    async def consumer_progress(self, group: str, topic: str | None = None) -> GroupProgress:
        """Offsets and lag (messages and store time) of every queue the group has offsets on."""
        progress = GroupProgress(group)
        for addr in await self._group_addrs(group):
            response = await self._call(addr, RequestCode.GET_CONSUME_STATS,
                                        GetConsumeStatsRequestHeader(consumer_group=group, topic=topic),
                                        f"consumerProgress of {group!r}")
            stats = ConsumeStats.decode(response.body_bytes())
            progress.consume_tps += stats.consume_tps
            newest: dict[MessageQueue, TopicOffset] = {}
            for t in sorted({mq.topic for mq in stats.offset_table}):
                answer = await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO,
                                          GetTopicStatsInfoRequestHeader(topic=t), "GET_TOPIC_STATS_INFO",
                                          ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
                if answer.code == ResponseCode.SUCCESS:
                    newest.update(TopicStatsTable.decode(answer.body_bytes()).offset_table)
            for mq, w in stats.offset_table.items():
                q = QueueProgress(mq, w.broker_offset, w.consumer_offset, w.last_timestamp,
                                  newest[mq].last_update_timestamp if mq in newest else 0)
                if q.lag and q.last_consumed_ms <= 0:
                    q.earliest_ms = await self._earliest(addr, mq)
                progress.queues.append(q)
        progress.queues.sort(key=lambda q: q.queue)
        return progress

    async def clone_group_offset(self, source: str, dest: str, topic: str) -> dict[MessageQueue, int]:
        """Give group ``dest`` the offsets group ``source`` has on ``topic``'s queues (mqadmin
        cloneGroupOffset: GET_CONSUME_STATS, then UPDATE_CONSUMER_OFFSET per queue); the
        offsets set, by queue (none when ``source`` has no offsets on the topic)."""
        cloned: dict[MessageQueue, int] = {}
        for addr in await self._group_addrs(source):
            response = await self._call(addr, RequestCode.GET_CONSUME_STATS,
                                        GetConsumeStatsRequestHeader(consumer_group=source),
                                        f"cloneGroupOffset from {source!r}")  # the topics it has offsets on
            for mq, w in ConsumeStats.decode(response.body_bytes()).offset_table.items():
                if mq.topic == topic and w.consumer_offset >= 0:
                    await self._instance.api.update_consumer_offset(addr, dest, topic, mq.queue_id,
                                                                    w.consumer_offset)
                    cloned[mq] = w.consumer_offset
        return dict(sorted(cloned.items()))

    async def _earliest(self, addr: str, mq: MessageQueue) -> int:
        header = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(addr, RequestCode.GET_EARLIEST_MSG_STORETIME, header,
                                    "GET_EARLIEST_MSG_STORETIME")
        if "timestamp" not in response.ext_fields:
            return 0
        return max(GetEarliestMsgStoretimeResponseHeader.from_ext_fields(response.ext_fields).timestamp, 0)

    async def consumer_connection(self, group: str) -> ConsumerConnection:
        """The group's online consumers (CONSUMER_NOT_ONLINE 206 raises MQBrokerError)."""
        addrs = await self._group_addrs(group) or await self._targets(None, None)  # none: an error
        response = await self._call(addrs[0], RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                    GetConsumerConnectionListRequestHeader(consumer_group=group),
                                    f"consumerConnection of {group!r}")
        return ConsumerConnection.decode(response.body_bytes())

    async def queue_owners(self, group: str) -> dict[MessageQueue, str]:
        """Which online consumer of ``group`` holds each queue (mqadmin consumerProgress -s),
        from each one's report (GET_CONSUMER_RUNNING_INFO); empty when none is online. A
        consumer that does not answer is left out."""
        try:
            conn = await self.consumer_connection(group)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                return {}
            raise
        owners: dict[MessageQueue, str] = {}
        for client_id in sorted(c.client_id for c in conn.connection_set):
            try:
                info = await self.consumer_running_info(group, client_id)
            except MQBrokerError:
                continue
            owners.update(dict.fromkeys(info.mq_table, client_id))
        return owners

    async def consumer_offsets_by_client(self, topic: str, group: str, client_id: str | None = None,
                                         ) -> dict[str, dict[MessageQueue, int]]:
        """Each online consumer's own offsets of ``topic``'s queues (or only ``client_id``'s),
        by client id (mqadmin getConsumerStatus): the topic's first broker asks them
        (INVOKE_BROKER_TO_GET_CONSUMER_STATUS 223, relayed as 221); a consumer that does not
        answer is left out. MQBrokerError when no consumer of the group is online."""
        route = await self.topic_route(topic)
        addrs = list(self._route_addrs(route).values())
        if not addrs:
            return {}
        header = GetConsumerStatusRequestHeader(topic=topic, group=group, client_addr=client_id or "")
        response = await self._call(addrs[0], RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, header,
                                    f"getConsumerStatus of {group!r} on {topic!r}")
        return GetConsumerStatusBody.decode(response.body_bytes()).consumer_table

    async def consumer_running_info(self, group: str, client_id: str, *,
                                    jstack: bool = False) -> ConsumerRunningInfo:
        """What one online consumer reports of itself (mqadmin consumerStatus): the broker
        relays GET_CONSUMER_RUNNING_INFO to it. The group's brokers are asked in turn until
        one reaches the consumer; the last one's error is raised (MQBrokerError: a remark
        saying it is not online, or did not answer in time)."""
        header = GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id,
                                                     jstack_enable=jstack)
        last: MQBrokerError | None = None
        for addr in await self._group_addrs(group):
            try:
                response = await self._call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header,
                                            f"consumerStatus of {client_id!r} in {group!r}")
            except MQBrokerError as exc:
                last = exc
                continue
            return ConsumerRunningInfo.decode(response.body_bytes())
        if last is None:
            raise NoRouteError(f"no broker to ask about group {group!r}: none is registered "
                               "with the NameServer")
        raise last

    async def producer_connection(self, group: str, topic: str) -> ProducerConnection:
        """The group's producers on the brokers of ``topic``."""
        out = ProducerConnection()
        for addr in self._route_addrs(await self.topic_route(topic)).values():
            response = await self._call(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                        GetProducerConnectionListRequestHeader(producer_group=group),
                                        f"producerConnection of {group!r}")
            out.connection_set += ProducerConnection.decode(response.body_bytes()).connection_set
        return out

    async def online_consumers(self, group: str, topic: str) -> list[str]:
        """Client ids of the group's consumers on the brokers of ``topic``."""
        await self._instance.start()
        ids: set[str] = set()
        for addr in self._route_addrs(await self.topic_route(topic)).values():
            ids.update(await self._instance.api.consumer_ids(addr, group))
        return sorted(ids)

    async def queues(self, topic: str) -> list[tuple[MessageQueue, str]]:
        """Readable queues of ``topic`` with the address to ask for each."""
        route = await self.topic_route(topic)
        addrs = self._route_addrs(route)
        built = build_route(topic, route)
        return sorted((mq, addrs[built.broker_of(mq)]) for mq in built.subscribe_queues
                      if built.broker_of(mq) in addrs)

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int, *,
                                   dry_run: bool = False) -> ResetPlan:
        """Move ``group``'s offset on every queue of ``topic`` to the first message stored at or
        after ``timestamp_ms`` (:data:`LATEST`: past the last one, as mqadmin
        skipAccumulatedMessage does). Each broker of the topic is asked to carry the reset out,
        as mqadmin asks (INVOKE_BROKER_TO_RESET_OFFSET 222): Bolide's and RocketMQ 4.9's hand
        the offsets to the group's online consumers (push consumers and Bolide's pull consumer
        adopt them; Java's lite pull consumer does not), RocketMQ 5's keep them until the group's next
        pull; the offsets are also committed (UPDATE_CONSUMER_OFFSET), which covers brokers
        that did nothing because no consumer was online. A dry run only computes the plan."""
        online = await self.online_consumers(group, topic)
        api = self._instance.api
        queues = await self.queues(topic)
        changes = []
        for mq, addr in queues:
            new = (await api.max_offset(addr, topic, mq.queue_id) if timestamp_ms == LATEST
                   else await api.search_offset(addr, topic, mq.queue_id, timestamp_ms))
            old = await api.query_consumer_offset(addr, group, topic, mq.queue_id)
            changes.append(OffsetChange(mq, old, new))
        relayed: list[str] = []
        if not dry_run:
            header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms, is_force=True)
            for addr in sorted({addr for _, addr in queues}):
                response = await self._call(
                    addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header,
                    f"resetOffsetByTime of {group!r} on {topic!r}",
                    ok=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE, ResponseCode.SYSTEM_ERROR,
                        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST))
                if response.code == ResponseCode.SUCCESS:  # the broker reset it (and told the consumers)
                    relayed.append(addr)
                    table = ResetOffsetBody.decode(response.body_bytes()).offset_table
                    changes = [OffsetChange(c.queue, c.old_offset, table.get(c.queue, c.new_offset))
                               for c in changes]
                elif response.code != ResponseCode.CONSUMER_NOT_ONLINE and online:
                    raise MQBrokerError(f"resetOffsetByTime of {group!r} on {topic!r} failed at {addr}: "
                                        f"{response.remark}", response.code, response.remark)
                for change, (mq, queue_addr) in zip(changes, queues, strict=True):
                    if queue_addr == addr:
                        await api.update_consumer_offset(addr, group, topic, mq.queue_id, change.new_offset)
        return ResetPlan(group, topic, timestamp_ms, changes, applied=not dry_run,
                         online_consumers=online, relayed_by=relayed)

    # -- messages -----------------------------------------------------------------------------
    async def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """The message with ``msg_id``: an offset message id of a known broker (VIEW_MESSAGE_BY_ID),
        else, with ``topic``, a client id (UNIQ_KEY) looked up with QUERY_MESSAGE."""
        info = await self.cluster_info()
        known = {a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()}
        try:
            addr, offset = decode_offset_msg_id(msg_id)
        except ValueError:
            addr, offset = "", -1
        if addr in known:
            response = await self._call(addr, RequestCode.VIEW_MESSAGE_BY_ID,
                                        ViewMessageRequestHeader(offset=offset), "queryMsgById",
                                        ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
            if response.code == ResponseCode.SUCCESS:
                msg = decode_records(response.body_bytes())[0]
                decompress_message(msg)
                return msg
        if topic:
            found = [m for m in await self._query(topic, msg_id, 32, 0, None, unique=True)
                     if m.msg_id == msg_id]
            if found:
                return found[-1]
        hint = "" if topic else "; if it is a client message id (UNIQ_KEY), give its topic with -t"
        raise MessageNotFoundError(f"no message with id {msg_id!r} was found{hint}")

    async def consume_message_directly(self, group: str, client_id: str, msg_id: str,
                                       topic: str | None = None) -> ConsumeMessageDirectlyResult:
        """Have one online push consumer's listener consume the message ``msg_id`` (found as
        :meth:`view_message` finds it) once more, outside its queues: the broker that stored it
        relays CONSUME_MESSAGE_DIRECTLY with the message (mqadmin ``queryMsgById -g -d``). No
        offset moves. MQBrokerError when the consumer is not online, does not answer in time, or
        is not a push consumer of ``group``."""
        msg = await self.view_message(msg_id, topic)
        addr, _ = decode_offset_msg_id(msg.offset_msg_id)
        header = ConsumeMessageDirectlyResultRequestHeader(consumer_group=group, client_id=client_id,
                                                           msg_id=msg.offset_msg_id, topic=msg.topic)
        response = await self._call(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header,
                                    f"consume {msg_id!r} directly by {client_id!r} of {group!r}")
        return ConsumeMessageDirectlyResult.decode(response.body_bytes())

    async def query_by_key(self, topic: str, key: str, *, max_num: int = 64, begin_ms: int = 0,
                           end_ms: int | None = None) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS hold ``key``, stored within the time range."""
        found = await self._query(topic, key, max_num, begin_ms, end_ms, unique=False)
        return [m for m in found if key in m.keys][:max_num]

    async def _query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int | None, *,
                     unique: bool) -> list[MessageExt]:
        end = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
        header = QueryMessageRequestHeader(topic=topic, key=key, max_num=max_num, begin_timestamp=begin_ms,
                                           end_timestamp=end, unique_key_query=unique or None)
        out: list[MessageExt] = []
        for addr in self._route_addrs(await self.topic_route(topic)).values():
            response = await self._call(addr, RequestCode.QUERY_MESSAGE, header, "QUERY_MESSAGE",
                                        ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if response.code == ResponseCode.SUCCESS:
                out += [m for m in decode_records(response.body_bytes()) if m.topic == topic]
        for m in out:
            decompress_message(m)
        return sorted(out, key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))

    async def read_messages(self, mq: MessageQueue, offset: int, count: int, *,
                            end_offset: int | None = None, expression: str = "*") -> list[MessageExt]:
        """Up to ``count`` messages of ``mq`` from ``offset`` (before ``end_offset``), read with
        the tools group without committing anything (queryMsgByOffset, consumeMessage)."""
        await self._instance.start()
        sub = subscription(mq.topic, expression)
        out: list[MessageExt] = []
        while len(out) < count and (end_offset is None or offset < end_offset):
            result = await pull(self._instance, TOOLS_GROUP, mq, offset, sub,
                                max_nums=min(32, count - len(out)), suspend_ms=0,
                                timeout_ms=self.config.api_timeout_ms)
            if result.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL):
                break
            for m in result.messages:
                if end_offset is None or m.queue_offset < end_offset:
                    m.properties.pop(P.MIN_OFFSET, None)  # added by the pull, not stored
                    m.properties.pop(P.MAX_OFFSET, None)
                    out.append(m)
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
        return out[:count]

    async def pull_records(self, mq: MessageQueue, offsets: Sequence[int], *, max_nums: int = 32,
                           expression: str = "*") -> list[tuple[PullResult, bytes]]:
        """One pull of the tools group from each of ``offsets``, all in flight at once: each
        result and the records as the broker sent them (not decoded, decompressed or filtered
        by tag; see :func:`bolide.client.pulling.pull_raw`). Nothing is committed."""
        await self._instance.start()
        return await pull_raw_many(self._instance, TOOLS_GROUP, mq, offsets,
                                   subscription(mq.topic, expression), max_nums=max_nums,
                                   timeout_ms=self.config.api_timeout_ms)

    async def min_max_offset(self, mq: MessageQueue, addr: str) -> tuple[int, int]:
        """The lowest offset still stored in ``mq`` on the broker at ``addr`` and the next offset
        to be written."""
        api = self._instance.api
        return (max(await api.min_offset(addr, mq.topic, mq.queue_id), 0),
                await api.max_offset(addr, mq.topic, mq.queue_id))

    async def search_offset(self, mq: MessageQueue, addr: str, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms`` on the broker at ``addr``."""
        return await self._instance.api.search_offset(addr, mq.topic, mq.queue_id, timestamp_ms)
