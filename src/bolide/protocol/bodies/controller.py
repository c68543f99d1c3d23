"""RocketMQ 5 controller mode bodies, as the Java side writes them with fastjson.

- :class:`SyncStateSet`: a group's in-sync replica ids and the set's epoch; the body of
  ALTER_SYNC_STATE_SET (1001, broker -> controller), of REGISTER_BROKER / GET_REPLICA_INFO
  answers (1003, 1004) and of NOTIFY_BROKER_ROLE_CHANGED (1008, controller -> broker).
- :class:`ElectMasterResponseBody`: ELECT_MASTER's answer (1002), the new syncStateSet and the
  group's members (:class:`~bolide.protocol.bodies.route.BrokerMemberGroup`).
- :class:`BrokerReplicasInfo`: GET_SYNC_STATE_DATA's answer (1006, mqadmin getSyncStateSet);
  its request body is a JSON array of broker names (:func:`encode_broker_names`).
- :class:`EpochEntryCache`: GET_BROKER_EPOCH_CACHE's answer (a broker's epoch file).
"""

from __future__ import annotations

from bolide.errors import ProtocolError
from bolide.protocol import fastjson
from bolide.protocol.bodies.bean import Bean, bean, jfield
from bolide.protocol.bodies.route import BrokerMemberGroup

__all__ = ["BrokerMemberGroup", "BrokerReplicasInfo", "ElectMasterResponseBody", "EpochEntry",
           "EpochEntryCache", "ReplicaIdentity", "ReplicasInfo", "SyncStateSet",
           "decode_broker_names", "encode_broker_names"]

JAVA_LONG_MAX = (1 << 63) - 1


@bean
class SyncStateSet(Bean):
    """The in-sync replicas (broker controller ids) of a group and the set's epoch."""

    sync_state_set: set[int] = jfield(factory=set)
    sync_state_set_epoch: int = 0


@bean
class ElectMasterResponseBody(Bean):
    """ELECT_MASTER's body: the group's members (on a new election) and its syncStateSet."""

    broker_member_group: BrokerMemberGroup | None = None
    sync_state_set: set[int] = jfield(factory=set)


@bean
class ReplicaIdentity(Bean):
    """One replica of a group in GET_SYNC_STATE_DATA's answer."""

    broker_name: str = ""
    broker_id: int = 0
    broker_address: str = ""
    alive: bool = False


@bean
class ReplicasInfo(Bean):
    """A group's master, epochs and replicas, split into in-sync and not in-sync."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    in_sync_replicas: list[ReplicaIdentity] = jfield(factory=list)
    not_in_sync_replicas: list[ReplicaIdentity] = jfield(factory=list)


@bean
class BrokerReplicasInfo(Bean):
    """GET_SYNC_STATE_DATA's answer: the replicas of each broker name asked for."""

    replicas_info_table: dict[str, ReplicasInfo] = jfield(factory=dict)


@bean
class EpochEntry(Bean):
    """A master epoch and the CommitLog range written under it (end: Long.MAX_VALUE while
    open)."""

    epoch: int = 0
    start_offset: int = 0
    end_offset: int = JAVA_LONG_MAX


@bean
class EpochEntryCache(Bean):
    """GET_BROKER_EPOCH_CACHE's answer: a broker's epoch entries and CommitLog max offset."""

    cluster_name: str | None = None
    broker_name: str | None = None
    broker_id: int = 0
    epoch_list: list[EpochEntry] = jfield(factory=list)
    max_offset: int = 0


def encode_broker_names(names: list[str]) -> bytes:
    """GET_SYNC_STATE_DATA's request body: a JSON array of broker names."""
    return fastjson.dumps(list(names))


def decode_broker_names(data: bytes) -> list[str]:
    """Parse GET_SYNC_STATE_DATA's request body; ProtocolError unless a JSON array of names."""
    value = fastjson.loads(data)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError("GET_SYNC_STATE_DATA's body must be a JSON array of broker names, "
                            f"e.g. [\"broker-a\"]; got {bytes(data)[:60]!r}")
    return value
