"""Numbers of the remoting protocol: request and response codes, languages, header codecs,
versions and the flag bits (RocketMQ 4.9.8 and 5.3.3; see docs/protocol.md)."""

from __future__ import annotations

from enum import IntEnum

# -- header flag bits --------------------------------------------------------------------
RESPONSE_FLAG = 1  # bit 0: the frame is a response
ONEWAY_FLAG = 2  # bit 1: a request that gets no response

# -- MQVersion ordinals (the ``version`` header field) ------------------------------------
V3_0_11 = 37  # NameServer parses RegisterBrokerBody (not a bare wrapper) from this version
V3_4_9 = 121  # ali-ons
V4_1_0_SNAPSHOT = 232  # clients allow SQL92 pulls only from brokers at or above this
V4_5_2 = 317  # Go client v2
V4_9_4 = 401  # NameServer sends standard JSON routes to requests at or above this
V4_9_8 = 409
V5_0_0 = 413
V5_3_3 = 479
DEFAULT_VERSION = V4_9_8  # what Bolide puts in every command it builds
DEFAULT_VERSION_DESC = "V4_9_8"  # its MQVersion name (brokerVersionDesc, PROP_CLIENT_VERSION)
V4_0_0_SNAPSHOT = 212  # MQVersion ordinals run in pairs (x_y_z_SNAPSHOT, x_y_z) from here


def version_name(ordinal: int) -> str:
    """RocketMQ's MQVersion name of a client's ``version`` (4.x and 5.x; older ones by number)."""
    index = ordinal - V4_0_0_SNAPSHOT
    if ordinal == 0:
        return "V3_0_0_SNAPSHOT"  # no version given (RocketMQ 5's gRPC clients in its tables)
    if not 0 <= index < 400:
        return str(ordinal)
    release, snapshot = divmod(index, 2)[0], index % 2 == 0
    major, rest = divmod(release, 100)
    return f"V{4 + major}_{rest // 10}_{rest % 10}" + ("_SNAPSHOT" if snapshot else "")


class SerializeType(IntEnum):
    """Header codec, carried in the top byte of the frame's header-length word."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(IntEnum):
    """Sender language: a byte in binary headers, the member name in JSON headers."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13  # 5.x only

    @classmethod
    def from_name(cls, name: str) -> LanguageCode:
        """The member called ``name``; OTHER for names this codec does not know."""
        member = cls.__members__.get(name)
        return member if member is not None else cls.OTHER

    @classmethod
    def from_byte(cls, value: int) -> LanguageCode:
        """The member numbered ``value``; OTHER for unknown numbers."""
        try:
            return cls(value)
        except ValueError:
            return cls.OTHER


class RequestCode(IntEnum):
    """Request codes (spec section 3.2); the same numbers in 4.9.8 and 5.3.3 unless noted."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    UPDATE_AND_CREATE_TOPIC_LIST = 18  # 5.x: mqadmin updateTopicList
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    GET_TIMER_CHECK_POINT = 60  # RocketMQ 5: a slave reads its master's timer checkpoint
    GET_TIMER_METRICS = 61  # 5.x: timer messages waiting per topic (a slave copies them)
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217  # 5.x; ali-ons' table names it GET_KV_CONFIG_BY_VALUE
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225  # 5.x: mqadmin updateSubGroupList
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323  # check a half message again (its check count reset)
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    QUERY_TOPICS_BY_CONSUMER = 343  # 5.x
    QUERY_SUBSCRIPTION_BY_CONSUMER = 345  # 5.x
    GET_TOPIC_CONFIG = 351  # 5.x: mqadmin topicStatus/consumerProgress look for static topics
    UPDATE_AND_CREATE_STATIC_TOPIC = 513  # 5.x: mqadmin updateStaticTopic
    GET_SUBSCRIPTIONGROUP_CONFIG = 352  # 5.x: one group's SubscriptionGroupConfig
    UPDATE_AND_GET_GROUP_FORBIDDEN = 353  # 5.x: a group's read-forbidden flag per topic
    CHECK_ROCKSDB_CQ_WRITE_PROGRESS = 354  # 5.3: RocksDB ConsumeQueue double-write check
    EXPORT_ROCKSDB_CONFIG_TO_JSON = 355  # 5.3: RocksDB-kept configs written as JSON files
    LITE_PULL_MESSAGE = 361  # 5.x
    RECALL_MESSAGE = 370  # 5.x: recall a timer message before it is due
    QUERY_ASSIGNMENT = 400  # 5.x: the broker allocates a push consumer's queues (and picks pop)
    SET_MESSAGE_REQUEST_MODE = 401  # 5.x: mqadmin setConsumeMode (PULL or POP per topic and group)
    GET_ALL_MESSAGE_REQUEST_MODE = 402  # 5.x: a slave copies its master's modes
    GET_BROKER_MEMBER_GROUP = 901  # 5.x NameServer: the brokers of a broker group
    BROKER_HEARTBEAT = 904  # 5.x
    NOTIFY_MIN_BROKER_ID_CHANGE = 905  # 5.x NameServer -> broker: its group's lowest live id changed
    EXCHANGE_BROKER_HA_INFO = 906  # 5.x: a master's HA address to its slave, or asked of it
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001  # 5.x controller mode: a master reports its in-sync replicas
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007  # a broker in controller mode: its epoch entries
    NOTIFY_BROKER_ROLE_CHANGED = 1008  # controller -> broker
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013
    UPDATE_COLD_DATA_FLOW_CTR_CONFIG = 2001  # 5.x: cold data flow control thresholds of groups
    REMOVE_COLD_DATA_FLOW_CTR_CONFIG = 2002
    GET_COLD_DATA_FLOW_CTR_INFO = 2003
    SET_COMMITLOG_READ_MODE = 2004  # 5.x: the CommitLog's read-ahead (madvise NORMAL or RANDOM)
    AUTH_CREATE_USER = 3001  # 5.3: ACL 2.0 users (mqadmin createUser ... listUser)
    AUTH_UPDATE_USER = 3002
    AUTH_DELETE_USER = 3003
    AUTH_GET_USER = 3004
    AUTH_LIST_USER = 3005
    AUTH_CREATE_ACL = 3006  # 5.3: ACL 2.0 ACLs (mqadmin createAcl ... listAcl)
    AUTH_UPDATE_ACL = 3007
    AUTH_DELETE_ACL = 3008
    AUTH_GET_ACL = 3009
    AUTH_LIST_ACL = 3010
    POP_MESSAGE = 200050  # 5.x: consumption by pop, ack and invisible time over remoting
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    BATCH_ACK_MESSAGE = 200151
    GET_BROKER_HA_STATUS = 907  # 5.x: mqadmin haStatus (HARuntimeInfo)


class ResponseCode(IntEnum):
    """Response codes (spec section 3.1). 209-211 mean different things in 4.9.x and 5.x."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    INVALID_PARAMETER = 29  # 5.x
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209  # 4.9.x
    DELETE_ACL_CONFIG_FAILED = 210  # 4.9.x
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211  # 4.9.x
    POLLING_FULL = 209  # 5.x name of 209 (an alias of the 4.9.x member)
    POLLING_TIMEOUT = 210  # 5.x
    BROKER_NOT_EXIST = 211  # 5.x
    FLOW_CONTROL = 215
    NOT_LEADER_FOR_QUEUE = 501  # 5.x: a static topic's logic queue led by another broker
    ILLEGAL_OPERATION = 604  # 5.x: e.g. a recall with a handle of another topic or broker
    GO_AWAY = 1500  # 5.x
    CONTROLLER_FENCED_MASTER_EPOCH = 2000  # 5.x controller mode
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014


def code_name(code: int, response: bool) -> str:
    """A readable name for ``code``, e.g. ``"SEND_MESSAGE_V2(310)"``, for logs and errors."""
    table = ResponseCode if response else RequestCode
    try:
        return f"{table(code).name}({code})"
    except ValueError:
        return str(code)
