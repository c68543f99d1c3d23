"""The controller's replicas state (RocketMQ's BrokerReplicaInfo + SyncStateInfo per broker
name), changed only by :meth:`ReplicasState.apply` of an event: a pure state machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bolide.controller.events import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ElectMaster,
    Event,
    Snapshot,
    UpdateBrokerAddress,
)

FIRST_BROKER_CONTROLLER_ID = 1  # MixAll.FIRST_BROKER_CONTROLLER_ID


@dataclass(slots=True)
class BrokerGroup:
    """One broker name: its replicas (id -> address and register check code), the next id to
    hand out, the master and the in-sync set with their epochs."""

    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    addresses: dict[int, str] = field(default_factory=dict)
    check_codes: dict[int, str] = field(default_factory=dict)
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0

    @property
    def first_time_for_elect(self) -> bool:
        return self.master_epoch == 0

    @property
    def master_address(self) -> str | None:
        return None if self.master_broker_id is None else self.addresses.get(self.master_broker_id)

    def to_json(self) -> dict[str, Any]:
        return {"clusterName": self.cluster_name, "brokerName": self.broker_name,
                "nextAssignBrokerId": self.next_assign_broker_id,
                "brokers": [[i, self.addresses[i], self.check_codes.get(i, "")]
                            for i in sorted(self.addresses)],
                "masterBrokerId": self.master_broker_id, "masterEpoch": self.master_epoch,
                "syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> BrokerGroup:
        group = cls(obj["clusterName"], obj["brokerName"], int(obj["nextAssignBrokerId"]),
                    master_broker_id=obj["masterBrokerId"], master_epoch=int(obj["masterEpoch"]),
                    sync_state_set={int(i) for i in obj["syncStateSet"]},
                    sync_state_set_epoch=int(obj["syncStateSetEpoch"]))
        for broker_id, address, code in obj["brokers"]:
            group.addresses[int(broker_id)] = address
            group.check_codes[int(broker_id)] = code
        return group


class ReplicasState:
    """Every broker group by broker name."""

    def __init__(self) -> None:
        self.groups: dict[str, BrokerGroup] = {}

    def get(self, broker_name: str | None) -> BrokerGroup | None:
        return None if broker_name is None else self.groups.get(broker_name)

    def to_json(self) -> list[dict[str, Any]]:
        return [self.groups[name].to_json() for name in sorted(self.groups)]

    def snapshot(self) -> Snapshot:
        return Snapshot(self.to_json())

    def apply(self, event: Event) -> None:
        """Change the state as RocketMQ's ReplicasInfoManager.applyEvent does."""
        match event:
            case ApplyBrokerId():
                group = self.groups.get(event.broker_name)
                if group is None:
                    group = BrokerGroup(event.cluster_name, event.broker_name)
                    self.groups[event.broker_name] = group
                if event.broker_id not in group.addresses:
                    group.addresses[event.broker_id] = event.broker_address
                    group.check_codes[event.broker_id] = event.register_check_code
                    group.next_assign_broker_id += 1
            case UpdateBrokerAddress():
                group = self.groups.get(event.broker_name)
                if group is not None and event.broker_id in group.addresses:
                    group.addresses[event.broker_id] = event.broker_address
            case ElectMaster():
                group = self.groups.get(event.broker_name)
                if group is not None:
                    group.master_broker_id = event.new_master
                    group.master_epoch += 1
                    if event.new_master is not None:
                        group.sync_state_set = {event.new_master}
                        group.sync_state_set_epoch += 1
            case AlterSyncStateSet():
                group = self.groups.get(event.broker_name)
                if group is not None:
                    group.sync_state_set = set(event.sync_state_set)
                    group.sync_state_set_epoch += 1
            case CleanBrokerData():
                self._clean(event)
            case Snapshot():
                self.groups = {g["brokerName"]: BrokerGroup.from_json(g) for g in event.groups}

    def _clean(self, event: CleanBrokerData) -> None:
        if not event.broker_ids:
            self.groups.pop(event.broker_name, None)
            return
        group = self.groups.get(event.broker_name)
        if group is None:
            return
        for broker_id in event.broker_ids:
            group.addresses.pop(broker_id, None)
            group.check_codes.pop(broker_id, None)
            group.sync_state_set.discard(broker_id)
        # RocketMQ drops each half when it empties; a group missing either half is gone
        if not group.addresses or not group.sync_state_set:
            del self.groups[event.broker_name]
