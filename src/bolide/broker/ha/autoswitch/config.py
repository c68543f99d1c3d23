"""Settings of AutoSwitch (controller mode) replication, RocketMQ 5's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bolide.store.config import BrokerRole


@dataclass(frozen=True, slots=True)
class AutoSwitchHAConfig:
    """What :class:`~bolide.broker.ha.autoswitch.AutoSwitchHA` needs; ``from_broker_config``
    takes the values a broker already has (its broker.conf keys in brackets)."""

    ha_host: str = "0.0.0.0"
    ha_port: int = 0  # haListenPort; 0 picks a free port (tests)
    local_broker_id: int = -1  # brokerId the controller assigned this replica
    master_role: BrokerRole = BrokerRole.ASYNC_MASTER  # the store role when this is master
    ha_send_heartbeat_interval_ms: int = 5000  # haSendHeartbeatInterval
    ha_housekeeping_interval_ms: int = 20_000  # haHousekeepingInterval
    ha_transfer_batch_size: int = 32 * 1024  # haTransferBatchSize
    ha_max_time_slave_not_catchup_ms: int = 15_000  # haMaxTimeSlaveNotCatchup
    all_ack_in_sync_state_set: bool = False  # allAckInSyncStateSet
    sync_from_last_file: bool = False  # syncFromLastFile (an empty slave starts at the last file)
    async_learner: bool = False  # asyncLearner (never joins the sync state set)
    in_sync_replicas: int = 1  # inSyncReplicas: acks a SYNC send needs (master included)
    min_in_sync_replicas: int = 1  # minInSyncReplicas
    enable_auto_in_sync_replicas: bool = False  # enableAutoInSyncReplicas
    slave_timeout_ms: int = 3000  # syncFlushTimeout/slaveTimeout: SYNC sends' wait
    reconnect_interval_ms: int = 5000  # wait between connection attempts to a master
    check_sync_state_set_interval_ms: int = 2000  # how often the master looks for laggards

    @classmethod
    def from_broker_config(cls, config: Any, **overrides: Any) -> AutoSwitchHAConfig:
        """Read the fields a ``BrokerConfig`` has (those it lacks keep their defaults)."""
        names = {
            "ha_port": "ha_listen_port", "local_broker_id": "broker_id",
            "ha_send_heartbeat_interval_ms": "ha_send_heartbeat_interval_ms",
            "ha_housekeeping_interval_ms": "ha_housekeeping_interval_ms",
            "ha_transfer_batch_size": "ha_transfer_batch_size",
            "ha_max_time_slave_not_catchup_ms": "ha_max_time_slave_not_catchup_ms",
            "all_ack_in_sync_state_set": "all_ack_in_sync_state_set",
            "sync_from_last_file": "sync_from_last_file", "async_learner": "async_learner",
            "min_in_sync_replicas": "min_in_sync_replicas",
            "in_sync_replicas": "in_sync_replicas",
            "enable_auto_in_sync_replicas": "enable_auto_in_sync_replicas",
            "slave_timeout_ms": "slave_timeout_ms",
            "reconnect_interval_ms": "ha_reconnect_interval_ms",
        }
        values: dict[str, Any] = {}
        for field, attr in names.items():
            if hasattr(config, attr):
                values[field] = getattr(config, attr)
        if values.get("ha_port", 0) < 0:
            values["ha_port"] = int(getattr(config, "listen_port", 10911)) + 1
        values.update(overrides)
        return cls(**values)
