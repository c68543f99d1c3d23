"""Admin headers (mqadmin): topics, statistics, connections and message queries."""

from __future__ import annotations

from typing import ClassVar

from bolide.protocol.headers.base import Header, header


@header
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int | None = None
    order: bool = False
    attributes: str | None = None
    force: bool | None = None


@header
class DeleteTopicRequestHeader(Header):
    """DELETE_TOPIC_IN_BROKER (215)."""

    topic: str


@header
class GetTopicConfigRequestHeader(Header):
    """GET_TOPIC_CONFIG (351, 5.x); the answer's body is the TopicConfig (with 5.x's optional
    ``mappingDetail`` of static topics, which Bolide does not have)."""

    topic: str
    lo: bool | None = None


@header
class GetTopicStatsInfoRequestHeader(Header):
    """GET_TOPIC_STATS_INFO (202); the answer's body is a TopicStatsTable."""

    topic: str


@header
class GetConsumeStatsRequestHeader(Header):
    """GET_CONSUME_STATS (208); the answer's body is ConsumeStats."""

    consumer_group: str
    topic: str | None = None
    topic_list: str | None = None


@header
class GetConsumerConnectionListRequestHeader(Header):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@header
class GetProducerConnectionListRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str


@header
class QueryTopicConsumeByWhoRequestHeader(Header):
    """QUERY_TOPIC_CONSUME_BY_WHO (300); the answer's body is a GroupList."""

    topic: str


@header
class GetConsumerRunningInfoRequestHeader(Header):
    """GET_CONSUMER_RUNNING_INFO (307), relayed by the broker to one client."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@header
class ConsumeMessageDirectlyResultRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY (309): an admin has one stored message (``msgId``, an offset
    message id) consumed by one consumer; the broker adds ``brokerName`` and the record as the
    body when it relays it. The answer's body is a ConsumeMessageDirectlyResult."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None  # 5.x


@header
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (317): ``isOrder`` keeps only ordered topics."""

    is_order: bool = False


@header
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA (315): one stats item, e.g. ``TOPIC_PUT_NUMS`` of a topic or
    ``GROUP_GET_NUMS`` of ``topic@group``; the answer's body is BrokerStatsData."""

    stats_name: str
    stats_key: str


@header
class CheckRocksdbCqWriteProgressRequestHeader(Header):
    """CHECK_ROCKSDB_CQ_WRITE_PROGRESS (354, RocketMQ 5.3): compare RocksDB's ConsumeQueue with
    the files' for ``topic`` (all topics when empty) from ``checkStoreTime`` on."""

    topic: str
    check_store_time: int = 0


ROCKSDB_CONFIG_TYPES = ("topics", "subscriptionGroups", "consumerOffsets")  # RocketMQ's ConfigType names


@header
class ExportRocksDBConfigToJsonRequestHeader(Header):
    """EXPORT_ROCKSDB_CONFIG_TO_JSON (355, RocketMQ 5.3): ``configType`` names joined by ``;``:
    topics, subscriptionGroups, consumerOffsets."""

    config_type: str


@header
class SetCommitLogReadModeRequestHeader(Header):
    """SET_COMMITLOG_READ_MODE (2004, RocketMQ 5): an extFields key that is no field of a Java
    header, ``READ_AHEAD_MODE`` 0 (read-ahead, MADV_NORMAL) or 1 (random reads, MADV_RANDOM)."""

    WIRE_NAMES: ClassVar[dict[str, str]] = {"read_ahead_mode": "READ_AHEAD_MODE"}
    read_ahead_mode: int


@header
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE (321): ``count`` entries of a ConsumeQueue from ``index``."""

    topic: str
    queue_id: int
    index: int
    count: int
    consumer_group: str | None = None


@header
class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP (207)."""

    group_name: str
    remove_offset: bool = False


@header
class GetBrokerConfigResponseHeader(Header):
    """GET_BROKER_CONFIG (26) response; ``version`` is the DataVersion as JSON."""

    version: str


@header
class QueryMessageRequestHeader(Header):
    """QUERY_MESSAGE (12): by key, or by UNIQ_KEY when ``_UNIQUE_KEY_QUERY`` is true."""

    WIRE_NAMES: ClassVar[dict[str, str]] = {"unique_key_query": "_UNIQUE_KEY_QUERY"}
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int
    unique_key_query: bool | None = None


@header
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@header
class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the CommitLog offset from an offset message id."""

    offset: int
    topic: str | None = None


RESET_TO_END = -1  # ResetOffsetRequestHeader.timestamp for "past each queue's last message"


@header
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (222, mqadmin to broker) and RESET_CONSUMER_CLIENT_OFFSET
    (220, broker to each consumer of the group, with a :class:`ResetOffsetBody`)."""

    WIRE_NAMES: ClassVar[dict[str, str]] = {"is_force": "isForce"}
    topic: str
    group: str
    timestamp: int
    is_force: bool = False
    queue_id: int | None = None  # 5.x: one queue
    offset: int | None = None  # 5.x: to this offset instead of a time


@header
class CreateAccessConfigRequestHeader(Header):
    """UPDATE_AND_CREATE_ACL_CONFIG (50); perms lists are comma-joined ``name=PERM`` entries."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@header
class DeleteAccessConfigRequestHeader(Header):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str


@header
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): comma-joined patterns, and the file to change
    (the broker's main ACL file when empty)."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@header
class GetBrokerAclConfigResponseHeader(Header):
    """GET_BROKER_CLUSTER_ACL_INFO (52) answer: DataVersion JSON of the main file and, in
    ``allAclFileVersion``, of every file by path."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None


@header
class CloneGroupOffsetRequestHeader(Header):
    """CLONE_GROUP_OFFSET (314): copy ``srcGroup``'s committed offsets of ``topic`` (of every
    topic it has offsets on when blank) to ``destGroup``; ``offline`` copies even topics the
    source group's online consumers do not subscribe to."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@header
class QueryConsumeTimeSpanRequestHeader(Header):
    """QUERY_CONSUME_TIME_SPAN (303); the answer's body is a QueryConsumeTimeSpanBody."""

    topic: str
    group: str


@header
class QueryTopicsByConsumerRequestHeader(Header):
    """QUERY_TOPICS_BY_CONSUMER (343, 5.x); the answer's body is a TopicList."""

    group: str


@header
class QuerySubscriptionByConsumerRequestHeader(Header):
    """QUERY_SUBSCRIPTION_BY_CONSUMER (345, 5.x); the answer's body is a
    QuerySubscriptionResponseBody."""

    group: str
    topic: str | None = None


@header
class GetSubscriptionGroupConfigRequestHeader(Header):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352, 5.x); the answer's body is the SubscriptionGroupConfig."""

    group: str


@header
class GetConsumerStatusRequestHeader(Header):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223; ``clientAddr``, a client id, asks that consumer
    only) and GET_CONSUMER_STATUS_FROM_CLIENT (221, what the broker asks each consumer)."""

    topic: str
    group: str
    client_addr: str | None = None


@header
class QueryCorrectionOffsetHeader(Header):
    """QUERY_CORRECTION_OFFSET (308): per queue of ``topic``, the smallest committed offset of
    every group but ``filterGroups`` (comma-separated), compared with ``compareGroup``'s; the
    answer's body is a QueryCorrectionOffsetBody."""

    compare_group: str
    topic: str
    filter_groups: str | None = None


@header
class ResumeCheckHalfMessageRequestHeader(Header):
    """RESUME_CHECK_HALF_MESSAGE (323): ``msgId`` is the offset message id of a half message
    (or of its copy in TRANS_CHECK_MAX_TIME_TOPIC); ``topic`` is for ACL checks only."""

    topic: str | None = None
    msg_id: str | None = None


@header
class UpdateGroupForbiddenRequestHeader(Header):
    """UPDATE_AND_GET_GROUP_FORBIDDEN (353, 5.x): set whether ``group`` may read ``topic``
    (``readable`` absent: only ask); the answer's body is a GroupForbidden."""

    group: str
    topic: str
    readable: bool | None = None
