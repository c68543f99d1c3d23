"""Consumer-side headers: pulls, offsets, send-back, consumer lists and client registration."""

from __future__ import annotations

from typing import ClassVar

from bolide.protocol.headers.base import Header, header

# PULL_MESSAGE sysFlag bits
PULL_COMMIT_OFFSET = 0x1  # commitOffset holds an offset to store for the group
PULL_SUSPEND = 0x2  # the broker may hold the pull (long polling)
PULL_SUBSCRIPTION = 0x4  # subscription/expressionType are in the header
PULL_CLASS_FILTER = 0x8  # removed feature
PULL_LITE = 0x10  # lite pull consumer


@header
class PullMessageRequestHeader(Header):
    """PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361)."""

    WIRE_NAMES: ClassVar[dict[str, str]] = {"proxy_forward_client_id": "proxyFrowardClientId"}
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    subscription: str | None = None
    sub_version: int
    expression_type: str | None = None
    max_msg_bytes: int | None = None
    request_source: int | None = None
    proxy_forward_client_id: str | None = None  # sic, as in Java
    bname: str | None = None

    @property
    def has_commit_offset(self) -> bool:
        return bool(self.sys_flag & PULL_COMMIT_OFFSET)

    @property
    def suspend(self) -> bool:
        return bool(self.sys_flag & PULL_SUSPEND)

    @property
    def has_subscription(self) -> bool:
        """Honour the bit, not the field: Go sends an empty subscription with the bit clear."""
        return bool(self.sys_flag & PULL_SUBSCRIPTION)


@header
class PullMessageResponseHeader(Header):
    """Pull response: all four offsets on every response code."""

    suggest_which_broker_id: int = 0
    next_begin_offset: int
    min_offset: int
    max_offset: int
    offset_delta: int | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None
    forbidden_type: int | None = None


@header
class QueryConsumerOffsetRequestHeader(Header):
    """QUERY_CONSUMER_OFFSET (14); answer QUERY_NOT_FOUND (22) when nothing is stored."""

    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None
    bname: str | None = None


@header
class QueryConsumerOffsetResponseHeader(Header):
    offset: int


@header
class UpdateConsumerOffsetRequestHeader(Header):
    """UPDATE_CONSUMER_OFFSET (15); ``commit_offset`` is the next offset to consume."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int
    bname: str | None = None


@header
class GetMaxOffsetRequestHeader(Header):
    """GET_MAX_OFFSET (30)."""

    topic: str
    queue_id: int
    committed: bool | None = None
    bname: str | None = None


@header
class GetMaxOffsetResponseHeader(Header):
    offset: int


@header
class GetMinOffsetRequestHeader(Header):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queue_id: int
    bname: str | None = None


@header
class GetMinOffsetResponseHeader(Header):
    offset: int


@header
class GetEarliestMsgStoretimeRequestHeader(Header):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int
    bname: str | None = None


@header
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: int


@header
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29); 5.x may add boundaryType LOWER/UPPER."""

    topic: str
    queue_id: int
    timestamp: int
    boundary_type: str | None = None
    bname: str | None = None


@header
class SearchOffsetResponseHeader(Header):
    offset: int


@header
class ConsumerSendMsgBackRequestHeader(Header):
    """CONSUMER_SEND_MSG_BACK (36); ``offset`` is the failed message's CommitLog offset."""

    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    bname: str | None = None


@header
class GetConsumerListByGroupRequestHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP (38); the body of the answer is ConsumerListBody."""

    consumer_group: str
    bname: str | None = None


@header
class NotifyConsumerIdsChangedRequestHeader(Header):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), a oneway request from broker to consumer."""

    consumer_group: str


@header
class UnregisterClientRequestHeader(Header):
    """UNREGISTER_CLIENT (35)."""

    WIRE_NAMES: ClassVar[dict[str, str]] = {"client_id": "clientID"}
    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None
