"""Routing bodies from the NameServer: TopicRouteData (GET_ROUTEINFO_BY_TOPIC 105) and
ClusterInfo (GET_BROKER_CLUSTER_INFO 106).

``brokerAddrs`` is a Java ``Map<Long, String>``: fastjson writes its keys bare
(``{0:"10.0.0.1:10911"}``), which is not standard JSON. The Java NameServer writes them
quoted only to requests of version 4.9.4 or later (or asking ``acceptStandardJsonOnly``);
:meth:`TopicRouteData.encode_for` follows the same rule, so Go (317) and ali-ons (121) get
exactly what a Java NameServer sends them. Both spellings parse.
"""

from __future__ import annotations

from bolide.protocol.bodies.bean import Bean, bean, jfield
from bolide.protocol.bodies.static_topic import TopicQueueMappingInfo
from bolide.protocol.codes import V4_9_4

MASTER_ID = 0

# PermName bits
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


@bean
class QueueData(Bean):
    """A topic's queues on one broker (``topicSynFlag`` was the field's name before 4.9)."""

    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = jfield(default=0, aliases=("topicSynFlag",))


@bean
class BrokerData(Bean):
    """A broker group: its cluster, name and addresses by broker id (0 = master)."""

    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = jfield(factory=dict)
    enable_acting_master: bool | None = None
    zone_name: str | None = None

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@bean
class TopicRouteData(Bean):
    """GET_ROUTEINFO_BY_TOPIC answer. ``queueDatas``/``brokerDatas`` are always written;
    ``topicQueueMappingByBroker`` (5.x) only for a static topic, its mapping by broker name."""

    order_topic_conf: str | None = None
    queue_datas: list[QueueData] = jfield(factory=list)
    broker_datas: list[BrokerData] = jfield(factory=list)
    filter_server_table: dict[str, list[str]] = jfield(factory=dict)
    topic_queue_mapping_by_broker: dict[str, TopicQueueMappingInfo] | None = None

    def encode_for(self, request_version: int, accept_standard_json_only: bool = False) -> bytes:
        """The body for a requester, styled as the Java NameServer styles it."""
        standard = request_version >= V4_9_4 or accept_standard_json_only
        return self.encode(standard=standard)


@bean
class ClusterInfo(Bean):
    """GET_BROKER_CLUSTER_INFO answer; Java always writes bare integer keys here."""

    broker_addr_table: dict[str, BrokerData] = jfield(factory=dict)
    cluster_addr_table: dict[str, set[str]] = jfield(factory=dict)


@bean
class BrokerMemberGroup(Bean):
    """The brokers of one broker group by broker id (0 = master)."""

    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = jfield(factory=dict)


@bean
class GetBrokerMemberGroupResponseBody(Bean):
    """GET_BROKER_MEMBER_GROUP (901, 5.x NameServer) answer."""

    broker_member_group: BrokerMemberGroup | None = None
