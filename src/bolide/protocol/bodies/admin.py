"""Admin bodies: KV tables, topic and group lists, connections and queue statistics.

TopicStatsTable and ConsumeStats are Java ``Map<MessageQueue, ...>``: fastjson writes each key
as a bare JSON object (``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``). Java also
parses the key as a string holding that object, which ``encode(standard=True)`` writes.
"""

from __future__ import annotations

from bolide.protocol.bodies.bean import Bean, bean, jfield
from bolide.protocol.bodies.broker import SubscriptionGroupConfig, TopicConfig
from bolide.protocol.bodies.client import MessageQueue, SubscriptionData
from bolide.protocol.codes import DEFAULT_VERSION


@bean
class KVTable(Bean):
    """String map: GET_KVLIST_BY_NAMESPACE, GET_BROKER_RUNTIME_INFO, REGISTER_BROKER answer."""

    table: dict[str, str] = jfield(factory=dict)


@bean
class TopicList(Bean):
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER / GET_TOPICS_BY_CLUSTER answer."""

    topic_list: list[str] = jfield(factory=list)
    broker_addr: str | None = None


@bean
class GroupList(Bean):
    """QUERY_TOPIC_CONSUME_BY_WHO answer."""

    group_list: list[str] = jfield(factory=list)


@bean
class Connection(Bean):
    """One client connection as the broker saw it in heartbeats."""

    client_id: str = ""
    client_addr: str = ""
    language: str = "JAVA"
    version: int = DEFAULT_VERSION


@bean
class ConsumerConnection(Bean):
    """GET_CONSUMER_CONNECTION_LIST (203) answer."""

    connection_set: list[Connection] = jfield(factory=list)
    subscription_table: dict[str, SubscriptionData] = jfield(factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None


@bean
class ProducerConnection(Bean):
    """GET_PRODUCER_CONNECTION_LIST (204) answer."""

    connection_set: list[Connection] = jfield(factory=list)


@bean
class TopicOffset(Bean):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@bean
class TopicStatsTable(Bean):
    """GET_TOPIC_STATS_INFO (202) answer: offsets of every queue of a topic on a broker."""

    offset_table: dict[MessageQueue, TopicOffset] = jfield(factory=dict)


@bean
class OffsetWrapper(Bean):
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0
    pull_offset: int | None = None  # 5.x


@bean
class ConsumeStats(Bean):
    """GET_CONSUME_STATS (208) answer: a group's progress per queue."""

    offset_table: dict[MessageQueue, OffsetWrapper] = jfield(factory=dict)
    consume_tps: float = 0.0

    @property
    def total_diff(self) -> int:
        """Messages behind, summed over all queues (Java's computeTotalDiff)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@bean
class ResetOffsetBody(Bean):
    """INVOKE_BROKER_TO_RESET_OFFSET answer and RESET_CONSUMER_CLIENT_OFFSET body: the new
    offset of every queue."""

    offset_table: dict[MessageQueue, int] = jfield(factory=dict)


@bean
class ProcessQueueInfo(Bean):
    """What a consumer holds of one queue (a ConsumerRunningInfo ``mqTable`` value). Java
    spells the dropped flag ``droped``; Go ``dropped``."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mi_b: int = jfield(default=0, name="cachedMsgSizeInMiB")
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = jfield(default=False, aliases=("dropped",))
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@bean
class TopicConsumeStatus(Bean):
    """A consumer's figures for one topic over the last minute (Java ConsumeStatus): pull and
    consume round trips in ms, messages per second, and messages failed in the last hour."""

    pull_rt: float = jfield(default=0.0, name="pullRT")
    pull_tps: float = jfield(default=0.0, name="pullTPS")
    consume_rt: float = jfield(default=0.0, name="consumeRT")
    consume_ok_tps: float = jfield(default=0.0, name="consumeOKTPS")
    consume_failed_tps: float = jfield(default=0.0, name="consumeFailedTPS")
    consume_failed_msgs: int = 0


# ConsumerRunningInfo property keys (Java's names and values)
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


@bean
class ConsumerRunningInfo(Bean):
    """GET_CONSUMER_RUNNING_INFO (307) answer, written by the consumer the broker relayed the
    request to: its settings (``properties``), subscriptions, the queues it holds and its
    per-topic figures; ``jstack`` (its threads' stacks) when asked for."""

    properties: dict[str, str] = jfield(factory=dict)
    subscription_set: list[SubscriptionData] = jfield(factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = jfield(factory=dict)
    status_table: dict[str, TopicConsumeStatus] = jfield(factory=dict)
    jstack: str | None = None


# ConsumeMessageDirectlyResult.consumeResult (Java CMResult)
CR_SUCCESS = "CR_SUCCESS"
CR_LATER = "CR_LATER"
CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
CR_RETURN_NULL = "CR_RETURN_NULL"


@bean
class ConsumeMessageDirectlyResult(Bean):
    """CONSUME_MESSAGE_DIRECTLY (309) answer: what the consumer's listener did with the
    message (``consumeResult`` one of the CR_ names) and how long it took."""

    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None
    remark: str | None = None
    spent_time_mills: int = 0


@bean
class ConsumeStatsList(Bean):
    """GET_BROKER_CONSUME_STATS (317) answer: every consumer group's ConsumeStats on the broker,
    one per topic it has offsets on, and the messages behind in all of them."""

    consume_stats_list: list[dict[str, list[ConsumeStats]]] = jfield(factory=list)
    broker_addr: str | None = None
    total_diff: int = 0


@bean
class BrokerStatsItem(Bean):
    """One window of a stats item: the sum of its values, values per second, values per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


@bean
class BrokerStatsData(Bean):
    """VIEW_BROKER_STATS_DATA (315) answer: a stats item over the last minute, hour and day."""

    stats_minute: BrokerStatsItem = jfield(factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = jfield(factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = jfield(factory=BrokerStatsItem)


@bean
class ProducerInfo(Bean):
    """One producer connection in a ProducerTableInfo."""

    client_id: str = ""
    remote_ip: str = jfield(default="", name="remoteIP")
    language: str = "JAVA"
    version: int = 0
    last_update_timestamp: int = 0


@bean
class ProducerTableInfo(Bean):
    """GET_ALL_PRODUCER_INFO (328) answer: the broker's producer connections by group."""

    data: dict[str, list[ProducerInfo]] = jfield(factory=dict)


@bean
class ConsumeQueueData(Bean):
    """One ConsumeQueue entry in a QueryConsumeQueueResponseBody."""

    physic_offset: int = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None


@bean
class QueryConsumeQueueResponseBody(Bean):
    """QUERY_CONSUME_QUEUE (321) answer: entries of one ConsumeQueue from an index, its bounds,
    and the subscription of ``consumerGroup`` when asked."""

    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None
    queue_data: list[ConsumeQueueData] = jfield(factory=list)
    max_queue_index: int = 0
    min_queue_index: int = 0


@bean
class PlainAccessConfig(Bean):
    """One plain-ACL account, as ``plain_acl.yml`` and GET_BROKER_CLUSTER_ACL_CONFIG hold it."""

    access_key: str | None = None
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None


@bean
class BrokerClusterAclConfig(Bean):
    """GET_BROKER_CLUSTER_ACL_CONFIG (54) answer (Java's GetBrokerClusterAclConfigResponseBody)."""

    global_white_addrs: list[str] = jfield(factory=list)
    plain_access_configs: list[PlainAccessConfig] = jfield(factory=list)


@bean
class CreateTopicListRequestBody(Bean):
    """UPDATE_AND_CREATE_TOPIC_LIST (18, 5.x) body: the topics to create or update."""

    topic_config_list: list[TopicConfig] = jfield(factory=list)


@bean
class SubscriptionGroupList(Bean):
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225, 5.x) body: the groups to create or update."""

    group_config_list: list[SubscriptionGroupConfig] = jfield(factory=list)


@bean
class QuerySubscriptionResponseBody(Bean):
    """QUERY_SUBSCRIPTION_BY_CONSUMER (345) answer: the group's online subscription of the
    topic (none when no consumer of the group subscribes to it)."""

    subscription_data: SubscriptionData | None = None
    group: str | None = None
    topic: str | None = None


@bean
class QueueTimeSpan(Bean):
    """One queue in a QueryConsumeTimeSpanBody: store times (ms) of its first and last message
    and of the group's last consumed one, and how long the next unconsumed one has waited.
    The ``...Str`` fields are Java's getters (``yyyy-MM-dd#HH:mm:ss:SSS``, local time)."""

    message_queue: MessageQueue | None = None
    min_time_stamp: int = 0
    max_time_stamp: int = 0
    consume_time_stamp: int = 0
    delay_time: int = 0
    min_time_stamp_str: str | None = None
    max_time_stamp_str: str | None = None
    consume_time_stamp_str: str | None = None


@bean
class QueryConsumeTimeSpanBody(Bean):
    """QUERY_CONSUME_TIME_SPAN (303) answer: one QueueTimeSpan per write queue."""

    consume_time_span_set: list[QueueTimeSpan] = jfield(factory=list)


@bean
class GetConsumerStatusBody(Bean):
    """GET_CONSUMER_STATUS_FROM_CLIENT (221) answer of one consumer (``messageQueueTable``: its
    offsets of the topic's queues) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) answer
    (``consumerTable``: those tables by client id)."""

    message_queue_table: dict[MessageQueue, int] = jfield(factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = jfield(factory=dict)


@bean
class ColdReadAcc(Bean):
    """One group of GET_COLD_DATA_FLOW_CTR_INFO's ``runtimeTable`` (RocketMQ's AccAndTimeStamp):
    its cold bytes this window (5 s), when it last read cold data and when it entered the table
    (epoch milliseconds)."""

    cold_acc: int = 0
    last_cold_read_ms: int = jfield(default=0, name="lastColdReadTimeMills")
    create_ms: int = jfield(default=0, name="createTimeMills")


@bean
class QueryCorrectionOffsetBody(Bean):
    """QUERY_CORRECTION_OFFSET (308) answer: queue id -> the smallest committed offset of the
    other groups (Java's Long.MAX_VALUE where the compared group is behind the queue's start)."""

    correction_offsets: dict[int, int] = jfield(factory=dict)


@bean
class GroupForbidden(Bean):
    """UPDATE_AND_GET_GROUP_FORBIDDEN (353) answer: whether ``group`` may read ``topic`` now."""

    topic: str | None = None
    group: str | None = None
    readable: bool | None = None
