"""Controller configuration: RocketMQ's ControllerConfig keys (and the NettyServerConfig ones a
``controller.conf`` carries), snake_case here, camelCase in the file.

The controller listens on the port of its own entry in ``controllerDLegerPeers``
(``n0-127.0.0.1:9878;n1-...``, ``controllerDLegerSelfId`` naming which), as RocketMQ's DLedger
controller does. With no peers configured it forms the one-peer group ``n0-<host>:<listenPort>``.
A group of several peers replicates its state with Raft (:mod:`bolide.controller.raft`).

``metricsExporterType=PROM`` serves RocketMQ's controller metrics (:mod:`bolide.controller.metrics`)
in Prometheus' text on ``metricsPromExporterHost:metricsPromExporterPort`` (all interfaces and
5557 by default, as RocketMQ's).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from bolide.common.config_file import PropertiesConfig, config_field
from bolide.errors import ConfigError
from bolide.metrics import settings as metrics_settings

DEFAULT_PORT = 9878  # the port RocketMQ's docs give controllers
DEFAULT_SELF_ID = "n0"
DEFAULT_GROUP = "DefaultControllerGroup"
# Never changed through UPDATE_CONTROLLER_CONFIG (ControllerRequestProcessor's fixed list).
FIXED_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "rocketmqHome"})

_key = config_field


class Peer(NamedTuple):
    """One ``id-host:port`` entry of ``controllerDLegerPeers``."""

    peer_id: str
    address: str

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])


def parse_peers(text: str) -> list[Peer]:
    """``n0-127.0.0.1:9878;n1-...`` as peers; ConfigError naming the expected form."""
    peers = []
    for item in (p.strip() for p in text.split(";")):
        if not item:
            continue
        peer_id, sep, address = item.partition("-")
        host, colon, port = address.rpartition(":")
        if not sep or not peer_id or not colon or not host or not port.isdigit() \
                or not 0 <= int(port) <= 65535:
            raise ConfigError(f"controllerDLegerPeers entry {item!r} is not id-host:port; "
                              "write e.g. controllerDLegerPeers=n0-127.0.0.1:9878")
        peers.append(Peer(peer_id, address))
    return peers


@dataclass(frozen=True, slots=True)
class ControllerConfig(PropertiesConfig):
    """Settings of a controller; defaults are RocketMQ 5.3's."""

    listen_port: int = _key("listenPort", DEFAULT_PORT)
    bind_address: str = _key("bindAddress", "0.0.0.0")
    # accept a PROXY protocol header (v1/v2) at the start of a connection and take the client's
    # address from it, as RocketMQ does (always); off: such a connection is closed (docs/operations.md)
    proxy_protocol_enable: bool = _key("bolideProxyProtocolEnable", True)
    rocketmq_home: str = _key("rocketmqHome", os.environ.get("ROCKETMQ_HOME", ""))
    config_store_path: str = _key("configStorePath",
                                  str(Path.home() / "controller" / "controller.properties"))
    controller_type: str = _key("controllerType", "DLedger")
    scan_not_active_broker_interval_ms: int = _key("scanNotActiveBrokerInterval", 5000)
    controller_thread_pool_nums: int = _key("controllerThreadPoolNums", 16)
    controller_request_thread_pool_queue_capacity: int = _key(
        "controllerRequestThreadPoolQueueCapacity", 50000)
    controller_dleger_group: str = _key("controllerDLegerGroup", "")
    controller_dleger_peers: str = _key("controllerDLegerPeers", "")
    controller_dleger_self_id: str = _key("controllerDLegerSelfId", "")
    mapped_file_size: int = _key("mappedFileSize", 1024 * 1024 * 1024)
    # "" means ~/<controllerType>Controller, as RocketMQ resolves it
    controller_store_path: str = _key("controllerStorePath", "")
    elect_master_max_retry_count: int = _key("electMasterMaxRetryCount", 3)
    enable_elect_unclean_master: bool = _key("enableElectUncleanMaster", False)
    is_process_read_event: bool = _key("isProcessReadEvent", False)
    notify_broker_role_changed: bool = _key("notifyBrokerRoleChanged", True)
    scan_inactive_master_interval_ms: int = _key("scanInactiveMasterInterval", 5000)
    config_black_list: str = _key("configBlackList", "configBlackList;configStorePath")
    # RocketMQ's metrics exporter: DISABLE, or PROM (Prometheus' text; OTLP_GRPC and LOG are not
    # offered); "" host: every interface; metricsLabel: more labels on every series, k1:v1,k2:v2
    metrics_exporter_type: str = _key("metricsExporterType", "DISABLE")
    metrics_prom_exporter_host: str = _key("metricsPromExporterHost", "")
    metrics_prom_exporter_port: int = _key("metricsPromExporterPort", metrics_settings.DEFAULT_PROM_PORT)
    metrics_label: str = _key("metricsLabel", "")

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort={self.listen_port} is out of range; use 0 to 65535 "
                              f"(controllers usually listen on {DEFAULT_PORT})")
        if self.scan_not_active_broker_interval_ms <= 0 or self.scan_inactive_master_interval_ms <= 0:
            raise ConfigError("scanNotActiveBrokerInterval and scanInactiveMasterInterval must be "
                              "positive; RocketMQ uses 5000 ms")
        if self.elect_master_max_retry_count < 1:
            raise ConfigError("electMasterMaxRetryCount must be at least 1; RocketMQ uses 3")
        if self.controller_type.lower() not in ("dledger", "jraft"):
            raise ConfigError(f"controllerType={self.controller_type!r} is not DLedger or jRaft; "
                              "leave it out (Bolide's controller keeps its own event log)")
        metrics_settings.check(self.metrics_exporter_type, self.metrics_prom_exporter_port,
                               self.metrics_label)
        peers = parse_peers(self.controller_dleger_peers)
        ids = [p.peer_id for p in peers]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"controllerDLegerPeers names a peer twice ({self.controller_dleger_peers}); "
                              "give each controller its own id, e.g. n0-host0:9878;n1-host1:9878")
        if len(peers) > 1 and not self.controller_dleger_self_id:
            raise ConfigError(f"controllerDLegerPeers lists {len(peers)} controllers; say which one this "
                              f"is with controllerDLegerSelfId (one of {', '.join(ids)})")
        if peers and self.controller_dleger_self_id and self.controller_dleger_self_id not in ids:
            raise ConfigError(f"controllerDLegerSelfId={self.controller_dleger_self_id} is not the id "
                              f"of a peer in controllerDLegerPeers ({', '.join(ids)}); make it one of them")

    @property
    def self_id(self) -> str:
        peers = parse_peers(self.controller_dleger_peers)
        return self.controller_dleger_self_id or (peers[0].peer_id if peers else DEFAULT_SELF_ID)

    @property
    def group(self) -> str:
        return self.controller_dleger_group or DEFAULT_GROUP

    @property
    def peers(self) -> list[Peer]:
        """The group's peers (empty: a one-peer group at listenPort)."""
        return parse_peers(self.controller_dleger_peers)

    def self_peer(self, host: str) -> Peer:
        """This controller's peer entry; ``host`` when no peers are configured."""
        own = [p for p in self.peers if p.peer_id == self.self_id]
        return own[0] if own else Peer(self.self_id, f"{host}:{self.listen_port}")

    @property
    def port(self) -> int:
        """The port to listen on: the own peer's, else listenPort."""
        own = [p for p in self.peers if p.peer_id == self.self_id]
        return own[0].port if own else self.listen_port

    @property
    def store_dir(self) -> Path:
        """Where the state lives: controllerStorePath, else ~/<controllerType>Controller."""
        if self.controller_store_path:
            return Path(self.controller_store_path).expanduser()
        return Path.home() / f"{self.controller_type}Controller"

    @property
    def black_list(self) -> frozenset[str]:
        """Keys UPDATE_CONTROLLER_CONFIG refuses to change."""
        extra = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return FIXED_BLACK_LIST | extra
