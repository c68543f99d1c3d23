"""Broker configuration: the BrokerConfig keys of RocketMQ's ``broker.conf`` (the store part is
read by :meth:`bolide.store.StoreConfig.from_properties` from the same file)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bolide.common.config_file import PropertiesConfig, config_field
from bolide.errors import ConfigError
from bolide.metrics import settings as metrics_settings

_key = config_field

STORE_CONFIG_FILE = "broker.properties"  # in <storePathRootDir>/config when there is no -c file


@dataclass(frozen=True, slots=True)
class BrokerConfig(PropertiesConfig):
    """Settings of a broker; defaults are RocketMQ 4.9.8's. Keys starting ``bolide`` are ours."""

    broker_cluster_name: str = _key("brokerClusterName", "DefaultCluster")
    broker_name: str = _key("brokerName", "broker-a")
    broker_id: int = _key("brokerId", 0)
    namesrv_addr: str = _key("namesrvAddr", "")
    listen_port: int = _key("listenPort", 10911)
    vip_channel_enabled: bool = _key("bolideVipChannelEnabled", True)  # also serve listenPort - 2
    broker_ip1: str = _key("brokerIP1", "127.0.0.1")
    # RocketMQ 5's gRPC API (what its proxy serves on 8081) for the 5.x clients; -1: off
    grpc_server_port: int = _key("grpcServerPort", -1)
    # messages popped (gRPC receives and remoting POP_MESSAGE) and not acknowledged, at most
    grpc_max_in_flight: int = _key("bolideGrpcMaxInFlight", 100_000)
    # RocketMQ 5's broker-side allocation (QUERY_ASSIGNMENT): the mode of groups that have none set
    # with setConsumeMode (PULL or POP), and how many other consumers' queues each pops
    default_message_request_mode: str = _key("defaultMessageRequestMode", "PULL")
    default_pop_share_queue_num: int = _key("defaultPopShareQueueNum", -1)
    bind_address: str = _key("bolideBindAddress", "0.0.0.0")
    # where UPDATE_BROKER_CONFIG writes its changes (RocketMQ's key): set to the -c file by
    # `bolide broker` and `bolide start`; empty: <storePathRootDir>/config/broker.properties
    broker_config_path: str = _key("brokerConfigPath", "")
    # RocketMQ 5's metrics: PROM (or 2) serves Prometheus' text on metricsPromExporterPort;
    # DISABLE (0) none. OTLP_GRPC and LOG are RocketMQ's other exporters, not offered here.
    metrics_exporter_type: str = _key("metricsExporterType", "DISABLE")
    metrics_prom_exporter_host: str = _key("metricsPromExporterHost", "")  # "": brokerIP1
    metrics_prom_exporter_port: int = _key("metricsPromExporterPort", 5557)
    metrics_label: str = _key("metricsLabel", "")  # more labels on every series: "k1:v1,k2:v2"
    metrics_otel_cardinality_limit: int = _key("metricsOtelCardinalityLimit", 50_000)
    broker_permission: int = _key("brokerPermission", 6)
    lite_pull_message_enable: bool = _key("litePullMessageEnable", True)  # LITE_PULL_MESSAGE served
    forward_timeout: int = _key("forwardTimeout", 3000)  # ms: static topic requests forwarded
    auto_create_topic_enable: bool = _key("autoCreateTopicEnable", True)
    default_topic_queue_nums: int = _key("defaultTopicQueueNums", 8)
    # the built-in topics named after the cluster and the broker take sends and pulls
    # (mqadmin clusterRT and sendMsgStatus send to them); off: inherit-only, as templates
    cluster_topic_enable: bool = _key("clusterTopicEnable", True)
    broker_topic_enable: bool = _key("brokerTopicEnable", True)
    # the topic clients with message trace on send their traces to, created at start when enabled
    trace_topic_enable: bool = _key("traceTopicEnable", False)
    msg_trace_topic_name: str = _key("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC")
    trace_on: bool = _key("traceOn", True)  # reported for mqadmin; Bolide has no broker-side trace hooks
    use_tls: bool = _key("useTLS", False)  # the broker's own connections use TLS (tls.server.* for clients')
    filter_server_nums: int = _key("filterServerNums", 0)  # filter servers are not offered: 0 only
    auto_create_subscription_group: bool = _key("autoCreateSubscriptionGroup", True)
    # consumers may subscribe with SQL92 expressions over message properties (off, as in RocketMQ)
    enable_property_filter: bool = _key("enablePropertyFilter", False)
    # plain ACL: check every request against the accounts of bolideAclFile (RocketMQ's
    # plain_acl.yml; empty: $ROCKETMQ_HOME/conf/plain_acl.yml) and the .yml files in acl/ beside it
    acl_enable: bool = _key("aclEnable", False)
    acl_file: str = _key("bolideAclFile", "")
    # ACL 2.0 (RocketMQ 5.3): users sign every request; their ACLs decide what each may touch
    authentication_enabled: bool = _key("authenticationEnabled", False)
    authorization_enabled: bool = _key("authorizationEnabled", False)
    authentication_whitelist: str = _key("authenticationWhitelist", "")  # request codes, comma-separated
    authorization_whitelist: str = _key("authorizationWhitelist", "")
    init_authentication_user: str = _key("initAuthenticationUser", "")  # {"username":..,"password":..}
    inner_client_authentication_credentials: str = _key("innerClientAuthenticationCredentials", "")
    # at start, make users and ACLs of the plain-ACL accounts (bolideAclFile) that are no users yet
    migrate_auth_from_v1_enabled: bool = _key("migrateAuthFromV1Enabled", False)
    register_name_server_period_ms: int = _key("registerNameServerPeriod", 30_000)
    register_broker_timeout_ms: int = _key("registerBrokerTimeoutMills", 6000)
    long_polling_enable: bool = _key("longPollingEnable", True)
    # pulls answer suggestWhichBrokerId from the group's settings (else always the master, 0)
    slave_read_enable: bool = _key("slaveReadEnable", False)
    max_held_pulls: int = _key("bolideMaxHeldPulls", 10_000)
    # RocketMQ 5's cold data flow control (broker/cold_data.py): throttle the pulls of groups that
    # read more than these bytes per 5 s from the cold area (accessMessageInMemoryHotRatio)
    cold_data_flow_control_enable: bool = _key("coldDataFlowControlEnable", False)
    cg_cold_read_threshold: int = _key("cgColdReadThreshold", 3 * 1024 * 1024)
    global_cold_read_threshold: int = _key("globalColdReadThreshold", 100 * 1024 * 1024)
    cold_ctr_strategy_enable: bool = _key("coldCtrStrategyEnable", False)  # adapt group thresholds
    use_pid_cold_ctr_strategy: bool = _key("usePIDColdCtrStrategy", True)
    max_pull_suspend_ms: int = _key("bolideMaxPullSuspendMillis", 25_000)
    max_client_groups: int = _key("bolideMaxClientGroups", 10_000)
    channel_expired_timeout_ms: int = _key("channelExpiredTimeout", 120_000)
    # close client connections that read and wrote nothing for this long (0: never)
    server_channel_max_idle_s: int = _key("serverChannelMaxIdleTimeSeconds", 120)
    # accept a PROXY protocol header (v1/v2) at the start of a connection and take the client's
    # address from it, as RocketMQ does (always); off: such a connection is closed (docs/operations.md)
    proxy_protocol_enable: bool = _key("bolideProxyProtocolEnable", True)
    flush_consumer_offset_interval_ms: int = _key("flushConsumerOffsetInterval", 5000)
    reject_transaction_message: bool = _key("rejectTransactionMessage", False)
    # timer messages (TIMER_DELIVER_MS, ...): accepted, and how far ahead (RocketMQ's keys)
    timer_wheel_enable: bool = _key("timerWheelEnable", True)
    timer_max_delay_sec: int = _key("timerMaxDelaySec", 3 * 24 * 3600)
    # replies to requests (SEND_REPLY_MESSAGE) are also stored in <cluster>_REPLY_TOPIC
    store_reply_message_enable: bool = _key("storeReplyMessageEnable", True)
    transaction_timeout_ms: int = _key("transactionTimeOut", 6000)
    transaction_check_max: int = _key("transactionCheckMax", 15)
    transaction_check_interval_ms: int = _key("transactionCheckInterval", 60_000)
    flush_delay_offset_interval_ms: int = _key("flushDelayOffsetInterval", 10_000)
    # HA replication (RocketMQ's MessageStoreConfig keys); -1: listenPort + 1, 0: a free port
    ha_listen_port: int = _key("haListenPort", -1)
    ha_master_address: str = _key("haMasterAddress", "")
    ha_send_heartbeat_interval_ms: int = _key("haSendHeartbeatInterval", 5000)
    ha_housekeeping_interval_ms: int = _key("haHousekeepingInterval", 20_000)
    ha_transfer_batch_size: int = _key("haTransferBatchSize", 32 * 1024)
    ha_slave_fallbehind_max: int = _key("haSlaveFallbehindMax", 256 * 1024 * 1024)
    slave_timeout_ms: int = _key("slaveTimeout", 3000)
    # controller mode's AutoSwitch HA (RocketMQ's MessageStoreConfig keys)
    all_ack_in_sync_state_set: bool = _key("allAckInSyncStateSet", False)  # SYNC sends: every in-sync one
    in_sync_replicas: int = _key("inSyncReplicas", 1)  # else for this many (the master counts)
    min_in_sync_replicas: int = _key("minInSyncReplicas", 1)  # fewer in sync: SLAVE_NOT_AVAILABLE
    enable_auto_in_sync_replicas: bool = _key("enableAutoInSyncReplicas", False)
    ha_max_time_slave_not_catchup_ms: int = _key("haMaxTimeSlaveNotCatchup", 15_000)
    sync_from_last_file: bool = _key("syncFromLastFile", False)  # a new replica copies the last segment on
    async_learner: bool = _key("asyncLearner", False)  # a replica never asked into the in-sync set
    ha_reconnect_interval_ms: int = _key("bolideHaReconnectInterval", 5000)
    # a slave copies its master's topics, offsets and groups this often (4.9.x: every 10 s)
    slave_sync_interval_ms: int = _key("bolideSlaveSyncInterval", 10_000)
    # RocketMQ 5's controller mode (automatic failover, bolide.broker.replicas): the broker gets
    # its id and its role (master or slave) from a controller and changes role when the
    # controller elects another master; brokerRole and brokerId are then ignored
    enable_controller_mode: bool = _key("enableControllerMode", False)
    controller_addr: str = _key("controllerAddr", "")  # host:port;host:port (or a DNS name)
    # controllerAddr is a domain name whose addresses (with its port) are the controllers
    fetch_controller_addr_by_dns_lookup: bool = _key("fetchControllerAddrByDnsLookup", False)
    # the controller drops a broker that sent no heartbeat for this long (sent in each one)
    controller_heart_beat_timeout_ms: int = _key("controllerHeartBeatTimeoutMills", 10_000)
    # how often the broker heartbeats to the controllers (BROKER_HEARTBEAT, 904)
    broker_heartbeat_interval_ms: int = _key("brokerHeartbeatInterval", 1000)
    send_heartbeat_timeout_ms: int = _key("sendHeartbeatTimeoutMillis", 1000)
    # how often the broker asks the controller for its group's master (GET_REPLICA_INFO), the
    # master checks its in-sync replicas, and the controller leader is looked up again
    sync_broker_metadata_period_ms: int = _key("syncBrokerMetadataPeriod", 5000)
    check_sync_state_set_period_ms: int = _key("checkSyncStateSetPeriod", 5000)
    sync_controller_metadata_period_ms: int = _key("syncControllerMetadataPeriod", 10_000)
    # the controller prefers brokers with a lower value when it elects a master
    broker_election_priority: int = _key("brokerElectionPriority", 2**31 - 1)
    # RocketMQ 5's slave acting master (master/slave groups without controller): the group's
    # lowest-id live slave runs the schedule and transaction check while the master is away
    # (bolide.broker.acting_master); their writes go to another group's master with
    # enableRemoteEscape, else wait
    enable_slave_acting_master: bool = _key("enableSlaveActingMaster", False)
    enable_remote_escape: bool = _key("enableRemoteEscape", False)
    # the NameServer drops a broker whose heartbeats stop for this long (sent when registering)
    broker_not_active_timeout_ms: int = _key("brokerNotActiveTimeoutMillis", 10_000)
    sync_broker_member_group_period_ms: int = _key("syncBrokerMemberGroupPeriod", 1000)
    # heartbeats as QUERY_DATA_VERSION and the member group from a route (any NameServer), as
    # RocketMQ's default; false: BROKER_HEARTBEAT and GET_BROKER_MEMBER_GROUP (5.x NameServers)
    compatible_with_old_name_srv: bool = _key("compatibleWithOldNameSrv", True)
    # with totalReplicas > 1, a returning master takes its slaves' offsets before it registers
    # (bolide.broker.pre_online)
    skip_pre_online: bool = _key("skipPreOnline", False)
    total_replicas: int = _key("totalReplicas", 1)  # the group's brokers, master included
    # queue locks taken on a quorum of the group's live brokers (bolide.broker.strict_locks)
    lock_in_strict_mode: bool = _key("lockInStrictMode", False)

    def metrics_exporter(self) -> str:
        """metricsExporterType by name (RocketMQ takes its ordinal too)."""
        return metrics_settings.exporter_name(self.metrics_exporter_type)

    def metrics_labels(self) -> dict[str, str]:
        """metricsLabel's pairs."""
        return metrics_settings.parse_labels(self.metrics_label)

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort={self.listen_port} is out of range; use 0 to 65535")
        if self.default_topic_queue_nums <= 0:
            raise ConfigError("defaultTopicQueueNums must be positive; RocketMQ uses 8")
        if self.default_message_request_mode not in ("PULL", "POP"):
            raise ConfigError(f"defaultMessageRequestMode={self.default_message_request_mode} is "
                              "neither PULL nor POP")
        if self.channel_expired_timeout_ms <= 0:
            raise ConfigError("channelExpiredTimeout must be positive; RocketMQ uses 120000 (ms)")
        if self.flush_delay_offset_interval_ms <= 0:
            raise ConfigError("flushDelayOffsetInterval must be positive; RocketMQ uses 10000 (ms)")
        if self.flush_consumer_offset_interval_ms <= 0:
            raise ConfigError("flushConsumerOffsetInterval must be positive; RocketMQ uses 5000 (ms)")
        if self.transaction_check_interval_ms <= 0:
            raise ConfigError("transactionCheckInterval must be positive; RocketMQ uses 60000 (ms)")
        if self.slave_sync_interval_ms <= 0:
            raise ConfigError("bolideSlaveSyncInterval must be positive; RocketMQ uses 10000 (ms)")
        if self.ha_transfer_batch_size <= 0 or self.ha_send_heartbeat_interval_ms <= 0:
            raise ConfigError("haTransferBatchSize and haSendHeartbeatInterval must be positive; "
                              "RocketMQ uses 32768 (bytes) and 5000 (ms)")
        if self.enable_controller_mode and not self.controller_addrs:
            raise ConfigError("enableControllerMode=true needs controllerAddr=host:port[;host:port] "
                              "(the controllers, or the NameServers with enableControllerInNamesrv)")
        for key, value in (("controllerHeartBeatTimeoutMills", self.controller_heart_beat_timeout_ms),
                           ("brokerHeartbeatInterval", self.broker_heartbeat_interval_ms),
                           ("syncBrokerMetadataPeriod", self.sync_broker_metadata_period_ms),
                           ("checkSyncStateSetPeriod", self.check_sync_state_set_period_ms),
                           ("syncControllerMetadataPeriod", self.sync_controller_metadata_period_ms),
                           ("sendHeartbeatTimeoutMillis", self.send_heartbeat_timeout_ms),
                           ("brokerNotActiveTimeoutMillis", self.broker_not_active_timeout_ms),
                           ("syncBrokerMemberGroupPeriod", self.sync_broker_member_group_period_ms)):
            if value <= 0:
                raise ConfigError(f"{key}={value} must be positive (ms)")
        if self.enable_slave_acting_master and self.enable_controller_mode:
            raise ConfigError("enableSlaveActingMaster=true and enableControllerMode=true exclude "
                              "each other: the controller elects a new master itself; set one to false")
        metrics_settings.check(self.metrics_exporter_type, self.metrics_prom_exporter_port,
                               self.metrics_label)
        if self.metrics_otel_cardinality_limit <= 0:
            raise ConfigError("metricsOtelCardinalityLimit must be positive; RocketMQ uses 50000")
        if self.cg_cold_read_threshold < 0 or self.global_cold_read_threshold < 0:
            raise ConfigError("cgColdReadThreshold and globalColdReadThreshold are bytes per 5 s and "
                              "cannot be negative; RocketMQ uses 3145728 and 104857600")
        if self.filter_server_nums != 0:
            raise ConfigError("filterServerNums must be 0: Bolide has no filter servers; use tag "
                              "expressions")
        if not self.msg_trace_topic_name:
            raise ConfigError("msgTraceTopicName is empty; RocketMQ uses RMQ_SYS_TRACE_TOPIC")
        if not 10_000 <= self.register_name_server_period_ms <= 60_000:
            object.__setattr__(self, "register_name_server_period_ms",
                               min(max(self.register_name_server_period_ms, 10_000), 60_000))

    def acl_file_path(self) -> Path:
        """The main plain-ACL file; ConfigError when neither bolideAclFile nor ROCKETMQ_HOME
        says where it is, or it does not exist."""
        if self.acl_file:
            path = Path(self.acl_file).expanduser()
        elif os.environ.get("ROCKETMQ_HOME"):
            path = Path(os.environ["ROCKETMQ_HOME"]) / "conf" / "plain_acl.yml"
        else:
            raise ConfigError("aclEnable=true needs the accounts file: set bolideAclFile="
                              "/path/to/plain_acl.yml (RocketMQ's format) or ROCKETMQ_HOME")
        if not path.is_file():
            raise ConfigError(f"aclEnable=true but the ACL file {path} does not exist: create it "
                              "with at least one account (docs/operations.md, Plain ACL) or set "
                              "bolideAclFile")
        return path

    def config_file(self, store_root: Path) -> Path:
        """The file UPDATE_BROKER_CONFIG writes: brokerConfigPath, else ``broker.properties`` in
        the store's ``config/`` (where RocketMQ writes it when started without ``-c``)."""
        if self.broker_config_path:
            return Path(self.broker_config_path)
        return store_root / "config" / STORE_CONFIG_FILE

    @property
    def controller_addrs(self) -> list[str]:
        """The controller addresses of ``controllerAddr`` (``;``-separated; with
        fetchControllerAddrByDnsLookup, a ``domain:port`` resolved by the caller)."""
        return [a.strip() for a in self.controller_addr.split(";") if a.strip()]

    @property
    def namesrv_addrs(self) -> list[str]:
        """The NameServer addresses of ``namesrvAddr`` (``;``-separated)."""
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)
