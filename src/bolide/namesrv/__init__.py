"""The NameServer: broker registrations, topic routes and KV config as pure state, and the
request handlers over them (the transport lives in :mod:`bolide.remoting`)."""

from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from bolide.namesrv.processors import NamesrvProcessor
from bolide.namesrv.route_info import (
    BROKER_CHANNEL_EXPIRED_TIME_MS,
    BrokerLiveInfo,
    ExpiredBroker,
    RegisterBrokerResult,
    RouteInfoManager,
)

__all__ = [
    "BROKER_CHANNEL_EXPIRED_TIME_MS",
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "BrokerLiveInfo",
    "ExpiredBroker",
    "KVConfigManager",
    "NamesrvConfig",
    "NamesrvProcessor",
    "RegisterBrokerResult",
    "RouteInfoManager",
]
