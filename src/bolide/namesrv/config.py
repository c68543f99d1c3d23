"""NameServer configuration: RocketMQ's NamesrvConfig and the NettyServerConfig keys a
``namesrv.conf`` carries, with snake_case names and units.

``NamesrvConfig.from_properties`` reads a RocketMQ ``namesrv.conf`` unchanged; unknown keys are
ignored. Keys starting with ``bolide`` are Bolide's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bolide.common.config_file import PropertiesConfig, config_field
from bolide.errors import ConfigError

DEFAULT_PORT = 9876
_HOME = Path.home() / "namesrv"
# Never changed through UPDATE_NAMESRV_CONFIG (Java's built-in black list).
FIXED_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"})


_key = config_field


@dataclass(frozen=True, slots=True)
class NamesrvConfig(PropertiesConfig):
    """Settings of a NameServer; defaults are RocketMQ's (4.9.8, with 5.x switches)."""

    listen_port: int = _key("listenPort", DEFAULT_PORT)
    bind_address: str = _key("bindAddress", "0.0.0.0")
    # close connections that read and wrote nothing for this long (0: never), as RocketMQ
    server_channel_max_idle_s: int = _key("serverChannelMaxIdleTimeSeconds", 120)
    # accept a PROXY protocol header (v1/v2) at the start of a connection and take the client's
    # address from it, as RocketMQ does (always); off: such a connection is closed (docs/operations.md)
    proxy_protocol_enable: bool = _key("bolideProxyProtocolEnable", True)
    rocketmq_home: str = _key("rocketmqHome", os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = _key("kvConfigPath", str(_HOME / "kvConfig.json"))
    config_store_path: str = _key("configStorePath", str(_HOME / "namesrv.properties"))
    product_env_name: str = _key("productEnvName", "center")
    cluster_test: bool = _key("clusterTest", False)
    order_message_enable: bool = _key("orderMessageEnable", False)
    config_black_list: str = _key("configBlackList", "configBlackList;configStorePath;kvConfigPath")
    return_order_topic_config_to_broker: bool = _key("returnOrderTopicConfigToBroker", True)
    scan_not_active_broker_interval_ms: int = _key("scanNotActiveBrokerInterval", 5000)
    enable_all_topic_list: bool = _key("enableAllTopicList", True)
    enable_topic_list: bool = _key("enableTopicList", True)
    delete_topic_with_broker_registration: bool = _key("deleteTopicWithBrokerRegistration", False)
    need_wait_for_service: bool = _key("needWaitForService", False)
    wait_seconds_for_service: int = _key("waitSecondsForService", 45)
    server_channel_max_idle_time_seconds: int = _key("serverChannelMaxIdleTimeSeconds", 120)
    broker_channel_expired_time_ms: int = _key("bolideBrokerChannelExpiredTime", 120_000)
    # 5.x slave acting master: routes of a group without master (registered with
    # enableActingMaster) show its lowest-id live slave as brokerId 0, read-only
    support_acting_master: bool = _key("supportActingMaster", False)
    # 5.x: tell a group's brokers when its lowest live broker id changes (NOTIFY_MIN_BROKER_ID_CHANGE)
    notify_min_broker_id_changed: bool = _key("notifyMinBrokerIdChanged", False)
    # 5.x: run a controller (its own port, from controllerDLegerPeers) beside the NameServer
    enable_controller_in_namesrv: bool = _key("enableControllerInNamesrv", False)

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort={self.listen_port} is out of range; use 0 to 65535 "
                              f"(RocketMQ's NameServer listens on {DEFAULT_PORT})")
        if self.broker_channel_expired_time_ms <= 0 or self.scan_not_active_broker_interval_ms <= 0:
            raise ConfigError("scanNotActiveBrokerInterval and bolideBrokerChannelExpiredTime must be "
                              "positive; RocketMQ uses 5000 and 120000 ms")

    @property
    def black_list(self) -> frozenset[str]:
        """Keys UPDATE_NAMESRV_CONFIG refuses to change."""
        extra = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return FIXED_BLACK_LIST | extra

