"""Broker configuration bodies: REGISTER_BROKER's RegisterBrokerBody (JSON, or the zlib form
brokers send with ``compressed=true``), TopicConfig, DataVersion and subscription groups."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from bolide.errors import ProtocolError
from bolide.protocol import fastjson
from bolide.protocol.bodies.bean import Bean, bean, jfield
from bolide.protocol.bodies.static_topic import TopicQueueMappingDetail, TopicQueueMappingInfo

SINGLE_TAG = "SINGLE_TAG"
MULTI_TAG = "MULTI_TAG"

_I32 = struct.Struct(">i")


@bean
class DataVersion(Bean):
    """Version of a broker's topic set: bumped on every change (5.x adds stateVersion)."""

    timestamp: int = 0
    counter: int = 0
    state_version: int | None = None


@bean
class TopicConfig(Bean):
    topic_name: str = ""
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] | None = None  # 5.x


@bean
class TopicConfigSerializeWrapper(Bean):
    """All topic configs of a broker (GET_ALL_TOPIC_CONFIG 21, and inside registration, where
    5.x's TopicConfigAndMappingSerializeWrapper adds the static topics' mapping infos)."""

    topic_config_table: dict[str, TopicConfig] = jfield(factory=dict)
    data_version: DataVersion = jfield(factory=DataVersion)
    topic_queue_mapping_info_map: dict[str, TopicQueueMappingInfo] | None = None


@bean
class TopicQueueMappingSerializeWrapper(Bean):
    """``config/topicQueueMapping.json``: the broker's static topics and their data version."""

    topic_queue_mapping_info_map: dict[str, TopicQueueMappingDetail] | None = None
    data_version: DataVersion = jfield(factory=DataVersion)


@bean
class TopicConfigAndQueueMapping(TopicConfig):
    """GET_TOPIC_CONFIG's answer: the TopicConfig and, asked with ``lo=true``, the mapping."""

    mapping_detail: TopicQueueMappingDetail | None = None


@bean
class RegisterBrokerBody(Bean):
    """REGISTER_BROKER (103) body."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = jfield(
        factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = jfield(factory=list)

    def encode_compressed(self) -> bytes:
        """The ``compressed=true`` form: zlib of length-prefixed DataVersion, topic lines,
        filter servers and (5.x) the static topics' mapping infos. Topic lines carry only name,
        queue counts, perm and filter type."""
        wrapper = self.topic_config_serialize_wrapper
        parts = [_block(wrapper.data_version.encode()), _I32.pack(len(wrapper.topic_config_table))]
        for topic in wrapper.topic_config_table.values():
            line = (f"{topic.topic_name} {topic.read_queue_nums} {topic.write_queue_nums} "
                    f"{topic.perm} {topic.topic_filter_type}")
            parts.append(_block(line.encode()))
        parts.append(_block(fastjson.dumps(self.filter_server_list)))
        infos = wrapper.topic_queue_mapping_info_map or {}
        parts.append(_I32.pack(len(infos)))
        parts.extend(_block(info.encode()) for info in infos.values())
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode_compressed(cls, data: bytes) -> RegisterBrokerBody:
        """Parse the ``compressed=true`` form; raises ProtocolError."""
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise ProtocolError(f"compressed RegisterBrokerBody does not inflate: {exc}") from None
        reader = _Reader(raw)
        version = DataVersion.decode(reader.block())
        table: dict[str, TopicConfig] = {}
        for _ in range(reader.int32()):
            fields = reader.block().decode("utf-8", "replace").split(" ")
            if len(fields) < 5:
                raise ProtocolError(f"compressed topic config {' '.join(fields)!r} lacks fields")
            try:
                topic = TopicConfig(topic_name=fields[0], read_queue_nums=int(fields[1]),
                                    write_queue_nums=int(fields[2]), perm=int(fields[3]),
                                    topic_filter_type=fields[4])
            except ValueError:
                raise ProtocolError(f"bad compressed topic config {' '.join(fields)!r}") from None
            table[topic.topic_name] = topic
        servers = fastjson.loads(reader.block())
        if not isinstance(servers, list):
            servers = []
        infos: dict[str, TopicQueueMappingInfo] | None = None
        if reader.pos < len(reader.data):  # 5.x brokers add the static topics' mappings
            infos = {}
            for _ in range(reader.int32()):
                info = TopicQueueMappingInfo.decode(reader.block())
                infos[info.topic or ""] = info
        wrapper = TopicConfigSerializeWrapper(topic_config_table=table, data_version=version,
                                              topic_queue_mapping_info_map=infos or None)
        return cls(topic_config_serialize_wrapper=wrapper, filter_server_list=[str(s) for s in servers])

    @classmethod
    def decode_body(cls, data: bytes, compressed: bool) -> RegisterBrokerBody:
        """Parse either form, as the request header's ``compressed`` flag says."""
        return cls.decode_compressed(data) if compressed else cls.decode(data)


def _block(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int32(self) -> int:
        if self.pos + 4 > len(self.data):
            raise ProtocolError("compressed RegisterBrokerBody is cut short")
        value: int = _I32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return value

    def block(self) -> bytes:
        size = self.int32()
        if size < 0 or self.pos + size > len(self.data):
            raise ProtocolError(f"compressed RegisterBrokerBody block of {size} bytes does not fit")
        self.pos += size
        return self.data[self.pos - size:self.pos]


@bean
class SubscriptionGroupConfig(Bean):
    """A consumer group's settings (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200)."""

    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False  # 5.x: the group's gRPC consumers receive FIFO
    attributes: dict[str, Any] | None = None  # 5.x


@bean
class SubscriptionGroupWrapper(Bean):
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) answer."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = jfield(factory=dict)
    data_version: DataVersion = jfield(factory=DataVersion)


@bean
class TimerMetric(Bean):
    """Timer messages of one topic waiting in a broker's timers, and when that count changed."""

    count: int = 0
    time_stamp: int = 0


@bean
class TimerMetricsSerializeWrapper(Bean):
    """GET_TIMER_METRICS (61, 5.x) answer, as RocketMQ 5 writes ``config/timermetrics``."""

    timing_count: dict[str, TimerMetric] = jfield(factory=dict)
    data_version: DataVersion = jfield(factory=DataVersion)
