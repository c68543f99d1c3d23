"""RocketMQ 5 controller mode headers: the controller's codes (1001-1013), a broker's heartbeat
to it (904) and its role-change notice to a broker (1008).

Field names follow RocketMQ 5.3's header classes (``remoting/protocol/header/controller``); a
Java field left null is left out of extFields, so every field the Java side may leave unset is
optional here.
"""

from __future__ import annotations

from bolide.protocol.headers.base import Header, header


@header
class BrokerHeartbeatRequestHeader(Header):
    """BROKER_HEARTBEAT (904): liveness, and in controller mode the broker's replication state."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None
    election_priority: int | None = None


@header
class AlterSyncStateSetRequestHeader(Header):
    """CONTROLLER_ALTER_SYNC_STATE_SET (1001); the body is a SyncStateSet."""

    broker_name: str | None = None
    master_broker_id: int | None = None
    master_epoch: int | None = None
    invoke_time: int = 0


@header
class AlterSyncStateSetResponseHeader(Header):
    new_sync_state_set_epoch: int = 0


@header
class ElectMasterRequestHeader(Header):
    """CONTROLLER_ELECT_MASTER (1002): a broker asks for an election, or mqadmin
    ``electMaster`` designates one (``designateElect``)."""

    cluster_name: str = ""
    broker_name: str = ""
    broker_id: int = -1
    designate_elect: bool = False
    invoke_time: int | None = None


@header
class ElectMasterResponseHeader(Header):
    """The new master; the body is an ElectMasterResponseBody."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None


@header
class RegisterBrokerToControllerRequestHeader(Header):
    """CONTROLLER_REGISTER_BROKER (1003): a broker whose id is applied joins its group."""

    cluster_name: str | None = None
    broker_name: str | None = None
    broker_id: int | None = None
    broker_address: str | None = None
    invoke_time: int = 0


@header
class RegisterBrokerToControllerResponseHeader(Header):
    """The group's master; the body is the SyncStateSet."""

    cluster_name: str | None = None
    broker_name: str | None = None
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None


@header
class GetReplicaInfoRequestHeader(Header):
    """CONTROLLER_GET_REPLICA_INFO (1004)."""

    broker_name: str | None = None


@header
class GetReplicaInfoResponseHeader(Header):
    """The group's master; the body is the SyncStateSet."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None


@header
class GetMetaDataResponseHeader(Header):
    """CONTROLLER_GET_METADATA_INFO (1005): which controller leads."""

    group: str | None = None
    controller_leader_id: str | None = None
    controller_leader_address: str | None = None
    is_leader: bool = False
    peers: str | None = None


@header
class NotifyBrokerRoleChangedRequestHeader(Header):
    """NOTIFY_BROKER_ROLE_CHANGED (1008), controller -> broker; the body is the SyncStateSet."""

    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    master_broker_id: int | None = None


@header
class CleanControllerBrokerDataRequestHeader(Header):
    """CLEAN_BROKER_DATA (1011): mqadmin ``cleanBrokerMetadata``."""

    broker_name: str
    cluster_name: str | None = None
    broker_controller_ids_to_clean: str | None = None
    is_clean_living_broker: bool = False
    invoke_time: int = 0


@header
class GetNextBrokerIdRequestHeader(Header):
    """CONTROLLER_GET_NEXT_BROKER_ID (1012)."""

    cluster_name: str | None = None
    broker_name: str | None = None


@header
class GetNextBrokerIdResponseHeader(Header):
    cluster_name: str | None = None
    broker_name: str | None = None
    next_broker_id: int | None = None


@header
class ApplyBrokerIdRequestHeader(Header):
    """CONTROLLER_APPLY_BROKER_ID (1013): a broker claims an id with its check code."""

    cluster_name: str | None = None
    broker_name: str | None = None
    applied_broker_id: int | None = None
    register_check_code: str | None = None


@header
class ApplyBrokerIdResponseHeader(Header):
    cluster_name: str | None = None
    broker_name: str | None = None
