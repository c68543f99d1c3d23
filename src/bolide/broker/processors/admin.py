"""Broker administration (mqadmin, spec 3.7): topics (17, 21, 215, 305, 5.x's 351), retention
(329), the broker's configuration (25, 26), its runtime figures (28) and subscription groups
(200, 201, 207). Statistics and connection lists are in
:mod:`bolide.broker.processors.admin_stats`."""

from __future__ import annotations

import dataclasses
import enum
import os
import time
from typing import TYPE_CHECKING, Any

from bolide.broker.admin_create import CreateRefused, checked_group, checked_topic, refuse_topic_name
from bolide.broker.config import BrokerConfig
from bolide.broker.runtime_info import runtime_info
from bolide.broker.static_topics import MappingRefused
from bolide.broker.topic_config import SYSTEM_TOPICS
from bolide.common.config_file import known_values, parse_properties, update_properties_file
from bolide.common.topic import reply_topic
from bolide.errors import BolideError, ProtocolError
from bolide.protocol import fastjson
from bolide.protocol.bodies.admin import KVTable, TopicList
from bolide.protocol.bodies.broker import DataVersion, TopicConfig, TopicConfigAndQueueMapping
from bolide.protocol.bodies.static_topic import TopicQueueMappingDetail
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetBrokerConfigResponseHeader,
    GetTopicConfigRequestHeader,
)
from bolide.remoting import RequestContext
from bolide.store.config import RUNTIME_KEYS as STORE_RUNTIME_KEYS
from bolide.store.config import StoreConfig

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

# keys UPDATE_BROKER_CONFIG refuses with NO_PERMISSION, as RocketMQ's configBlackList does
BLACK_LIST = frozenset({"brokerConfigPath", "configBlackList", "rocketmqHome"})
# BrokerConfig keys UPDATE_BROKER_CONFIG may not change: they fix the broker's identity, its
# sockets, sizes or built-in topics chosen at start
RESTART_KEYS = frozenset({"brokerClusterName", "brokerName", "brokerId", "listenPort", "brokerIP1",
                          "bolideBindAddress", "bolideMaxHeldPulls", "bolideMaxClientGroups",
                          "flushConsumerOffsetInterval", "flushDelayOffsetInterval",
                          "clusterTopicEnable", "brokerTopicEnable", "traceTopicEnable",
                          "msgTraceTopicName", "useTLS", "filterServerNums", "aclEnable",
                          "bolideAclFile", "metricsExporterType", "metricsPromExporterHost",
                          "metricsPromExporterPort", "metricsLabel", "metricsOtelCardinalityLimit"})


def config_properties(*configs: Any) -> dict[str, str]:
    """The RocketMQ properties of config dataclasses (``key`` metadata), as Java prints them."""
    props: dict[str, str] = {}
    for config in configs:
        for f in dataclasses.fields(config):
            key = f.metadata.get("key")
            value = getattr(config, f.name)
            if key is None or value is None:
                continue
            if isinstance(value, bool):
                props[key] = "true" if value else "false"
            elif isinstance(value, enum.Enum):
                props[key] = str(value.value)
            else:
                props[key] = str(value)
    return props


def _config_keys(cls: type) -> set[str]:
    return {f.metadata["key"] for f in dataclasses.fields(cls) if "key" in f.metadata}


class AdminProcessor:
    """Topic, configuration and subscription-group administration."""

    CODES = (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.GET_ALL_TOPIC_CONFIG,
             RequestCode.GET_BROKER_CONFIG,
             RequestCode.UPDATE_BROKER_CONFIG, RequestCode.GET_BROKER_RUNTIME_INFO,
             RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
             RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, RequestCode.DELETE_SUBSCRIPTIONGROUP,
             RequestCode.GET_TOPIC_CONFIG, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
             RequestCode.DELETE_EXPIRED_COMMITLOG, RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.config_version = DataVersion(timestamp=int(time.time() * 1000))
        c = RequestCode
        self._handlers = {
            c.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            c.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            c.GET_TOPIC_CONFIG: self.get_topic_config,
            c.UPDATE_AND_CREATE_STATIC_TOPIC: self.update_and_create_static_topic,
            c.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topics,
            c.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            c.GET_BROKER_CONFIG: self.get_broker_config,
            c.UPDATE_BROKER_CONFIG: self.update_broker_config,
            c.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            c.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_subscription_group,
            c.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_groups,
            c.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
        }

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self._handlers[request.code](request)

    # -- topics -------------------------------------------------------------------------------
    def update_and_create_topic(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(CreateTopicRequestHeader)
        wanted = TopicConfig(topic_name=header.topic, read_queue_nums=header.read_queue_nums,
                             write_queue_nums=header.write_queue_nums, perm=header.perm,
                             topic_filter_type=header.topic_filter_type,
                             topic_sys_flag=header.topic_sys_flag or 0, order=header.order)
        try:
            tc = checked_topic(self.broker.topics, wanted, header.attributes)
        except CreateRefused as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        self.broker.topics.update(tc)
        return request.make_response()

    def get_all_topic_config(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=self.broker.topics.wrapper().encode())

    def get_topic_config(self, request: RemotingCommand) -> RemotingCommand:
        """One topic's config (5.x) as TopicConfigAndQueueMapping, with the static topic's
        ``mappingDetail`` when asked with ``lo=true``; 17 when the broker does not have it."""
        header = request.read_header(GetTopicConfigRequestHeader)
        tc = self.broker.topics.get(header.topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST,
                                         f"No topic in this broker. topic: {header.topic}")
        detail = self.broker.static_topics.get(header.topic) if header.lo else None
        answer = TopicConfigAndQueueMapping(**{f.attr: getattr(tc, f.attr) for f in tc.JSON_FIELDS},
                                            mapping_detail=detail)
        return request.make_response(body=answer.encode())

    def update_and_create_static_topic(self, request: RemotingCommand) -> RemotingCommand:
        """mqadmin updateStaticTopic (513, 5.x): the topic's config from the header and this
        broker's TopicQueueMappingDetail from the body, kept in ``topicQueueMapping.json`` and
        registered with the NameServers."""
        header = request.read_header(CreateTopicRequestHeader)
        why = refuse_topic_name(header.topic)
        if why is not None:
            return request.make_response(ResponseCode.INVALID_PARAMETER, why)
        try:
            detail = TopicQueueMappingDetail.decode(request.body_bytes())
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"the body is no TopicQueueMappingDetail: {exc}")
        wanted = TopicConfig(topic_name=header.topic, read_queue_nums=header.read_queue_nums,
                             write_queue_nums=header.write_queue_nums, perm=header.perm,
                             topic_filter_type=header.topic_filter_type,
                             topic_sys_flag=header.topic_sys_flag or 0)
        if detail.topic != header.topic:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"the mapping is of topic {detail.topic!r}, not {header.topic!r}")
        try:
            tc = checked_topic(self.broker.topics, wanted, None)
            self.broker.static_topics.update(detail, force=bool(header.force))
        except (CreateRefused, MappingRefused) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        self.broker.topics.update(tc)
        return request.make_response()

    def get_system_topics(self, request: RemotingCommand) -> RemotingCommand:
        """The broker's system topics (305; mqadmin exportMetrics leaves them out), with the
        built-in ones named after its cluster (the cluster's and its reply topic) and itself,
        and the trace topic when enabled."""
        config = self.broker.config
        topics = SYSTEM_TOPICS | {config.broker_cluster_name, config.broker_name,
                                  reply_topic(config.broker_cluster_name)}
        if config.trace_topic_enable:
            topics |= {config.msg_trace_topic_name}
        return request.make_response(body=TopicList(topic_list=sorted(topics)).encode())

    def delete_expired_commit_log(self, request: RemotingCommand) -> RemotingCommand:
        """mqadmin deleteExpiredCommitLog (329): the store's clean thread deletes expired
        CommitLog files in its next runs whatever deleteWhen says (answered at once)."""
        self.broker.store.delete_expired_files_now()
        return request.make_response()

    # -- broker configuration -------------------------------------------------------------------
    def get_broker_config(self, request: RemotingCommand) -> RemotingCommand:
        """The broker's and the store's settings as ``key=value`` lines; ext ``version``. The
        store's copy goes last: its ``listenPort`` is the bound port (``listenPort=0`` picks one);
        ``grpcServerPort`` too is the bound one (other brokers' gRPC routes point there)."""
        props = config_properties(self.broker.config, self.broker.store.config)
        # RocketMQ's default of a key Bolide has no use for: mqadmin exportMetrics reads the
        # machine's processors from it
        props.setdefault("clientCallbackExecutorThreads", str(os.cpu_count() or 1))
        grpc = self.broker.grpc
        if grpc is not None and grpc.port > 0:
            props["grpcServerPort"] = str(grpc.port)
        text = "".join(f"{key}={value}\n" for key, value in sorted(props.items()))
        answer = GetBrokerConfigResponseHeader(version=self.config_version.encode().decode())
        return request.make_response(header=answer, body=text.encode())

    def update_broker_config(self, request: RemotingCommand) -> RemotingCommand:
        """Apply BrokerConfig keys and the store's ``RUNTIME_KEYS`` (``key=value`` lines) to the
        running broker, then write them into its config file (``BrokerConfig.config_file``),
        as RocketMQ persists them. Keys that need a restart or that Bolide does not have are
        refused and nothing changes; a failed write is answered with the file and the cause."""
        props = parse_properties(request.body_bytes().decode("utf-8", "replace"))
        if props.keys() & BLACK_LIST:
            return request.make_response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        broker_keys, store_keys = _config_keys(BrokerConfig), _config_keys(StoreConfig)
        unknown = sorted(set(props) - broker_keys - store_keys)
        if unknown:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"Bolide has no setting {', '.join(unknown)}: check the "
                "spelling (GET_BROKER_CONFIG, mqadmin getBrokerConfig, lists them)")
        runtime = set(props) & STORE_RUNTIME_KEYS
        fixed = sorted((set(props) & RESTART_KEYS) | (set(props) - broker_keys - runtime))
        if fixed:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"cannot change {', '.join(fixed)} at runtime: edit broker.conf and restart the broker")
        broker = self.broker
        try:
            config = broker.config.replace(
                **known_values(BrokerConfig, {k: v for k, v in props.items() if k not in runtime}))
            store_changes = known_values(StoreConfig, {k: v for k, v in props.items() if k in runtime})
            if store_changes:
                broker.store.reconfigure(**store_changes)  # checks the values before any change
        except (BolideError, TypeError, ValueError) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        self._apply_config(config)
        self.config_version.counter += 1
        self.config_version.timestamp = int(time.time() * 1000)
        if "brokerPermission" in props and broker.registration is not None:
            broker.registration.request_register()
        path = config.config_file(broker.store.root)
        try:
            update_properties_file(path, props)
        except OSError as exc:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"applied to the running broker, but not written to {path} ({exc.strerror or exc}), "
                "so a restart undoes it: make the file writable, or set brokerConfigPath")
        return request.make_response()

    def _apply_config(self, config: BrokerConfig) -> None:
        broker = self.broker
        broker.config = config
        broker.topics.config = config
        broker.subscription_groups.config = config
        if broker.registration is not None:
            broker.registration.config = config

    def get_broker_runtime_info(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=KVTable(table=runtime_info(self.broker)).encode())

    # -- subscription groups -------------------------------------------------------------------
    def update_subscription_group(self, request: RemotingCommand) -> RemotingCommand:
        """Create or replace a group from a SubscriptionGroupConfig body (5.x fields kept)."""
        try:
            config = checked_group(fastjson.loads(request.body_bytes()), "the body")
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"the body is not a SubscriptionGroupConfig: {exc}")
        except CreateRefused as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        self.broker.subscription_groups.update(config)
        return request.make_response()

    def get_all_subscription_groups(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=self.broker.subscription_groups.encode())

    def delete_subscription_group(self, request: RemotingCommand) -> RemotingCommand:
        """Forget a group (0 even when unknown, as Java); ``removeOffset=true`` also drops its
        consumer offsets."""
        header = request.read_header(DeleteSubscriptionGroupRequestHeader)
        self.broker.subscription_groups.delete(header.group_name)
        if header.remove_offset:
            self.broker.offsets.remove_group(header.group_name)
        return request.make_response()
