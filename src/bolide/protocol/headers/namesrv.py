"""NameServer headers: broker registration, routes, KV config and topic/permission admin."""

from __future__ import annotations

from bolide.protocol.headers.base import Header, header


@header
class RegisterBrokerRequestHeader(Header):
    """REGISTER_BROKER (103); the body is RegisterBrokerBody (zlib form when compressed)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    heartbeat_timeout_millis: int | None = None
    enable_acting_master: bool | None = None
    compressed: bool = False
    body_crc32: int = 0


@header
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@header
class UnregisterBrokerRequestHeader(Header):
    """UNREGISTER_BROKER (104)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@header
class QueryDataVersionRequestHeader(Header):
    """QUERY_DATA_VERSION (322); the body is the broker's DataVersion."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@header
class QueryDataVersionResponseHeader(Header):
    changed: bool


@header
class GetRouteInfoRequestHeader(Header):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str
    accept_standard_json_only: bool | None = None


@header
class PutKVConfigRequestHeader(Header):
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str


@header
class GetKVConfigRequestHeader(Header):
    """GET_KV_CONFIG (101)."""

    namespace: str
    key: str


@header
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@header
class DeleteKVConfigRequestHeader(Header):
    """DELETE_KV_CONFIG (102)."""

    namespace: str
    key: str


@header
class GetKVListByNamespaceRequestHeader(Header):
    """GET_KVLIST_BY_NAMESPACE (219); the answer's body is a KVTable."""

    namespace: str


@header
class DeleteTopicFromNamesrvRequestHeader(Header):
    """DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str
    cluster_name: str | None = None


@header
class GetTopicsByClusterRequestHeader(Header):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str


@header
class WipeWritePermOfBrokerRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str


@header
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: int


@header
class AddWritePermOfBrokerRequestHeader(Header):
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str


@header
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: int


@header
class NotifyMinBrokerIdChangeRequestHeader(Header):
    """NOTIFY_MIN_BROKER_ID_CHANGE (905, 5.x): the NameServer tells a group's brokers that its
    lowest live broker id changed (slave acting master)."""

    min_broker_id: int | None = None
    broker_name: str | None = None
    min_broker_addr: str | None = None
    offline_broker_addr: str | None = None
    ha_broker_addr: str | None = None


@header
class ExchangeHAInfoRequestHeader(Header):
    """EXCHANGE_BROKER_HA_INFO (906, 5.x, slave acting master): a returning master tells a
    slave where it is (the three fields set), or a starting slave asks its master (none set)."""

    master_ha_address: str | None = None
    master_flush_offset: int | None = None
    master_address: str | None = None


@header
class ExchangeHAInfoResponseHeader(Header):
    """A master's answer to EXCHANGE_BROKER_HA_INFO without a ``masterHaAddress``: its HA
    address, its CommitLog's end when its store opened and its broker address."""

    master_ha_address: str | None = None
    master_flush_offset: int | None = None
    master_address: str | None = None


@header
class GetBrokerMemberGroupRequestHeader(Header):
    """GET_BROKER_MEMBER_GROUP (901, 5.x NameServer); the answer's body is a
    GetBrokerMemberGroupResponseBody."""

    cluster_name: str
    broker_name: str
