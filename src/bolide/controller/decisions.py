"""Each controller request's answer and the events it makes (RocketMQ's ReplicasInfoManager):
pure functions of the state, the request and the brokers' liveness. The caller makes the
events durable, applies them to the state, then sends the answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bolide.controller import elect as elect_policy
from bolide.controller.events import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ElectMaster,
    Event,
    UpdateBrokerAddress,
)
from bolide.controller.heartbeat import BrokerLiveInfo
from bolide.controller.replicas import FIRST_BROKER_CONTROLLER_ID, BrokerGroup, ReplicasState
from bolide.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
)
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.headers import controller as h
from bolide.protocol.headers.base import Header

Alive = Callable[[str, str, int | None], bool]  # cluster, broker name, broker id
LiveInfo = Callable[[str, str, int], BrokerLiveInfo | None]


@dataclass(slots=True)
class Result:
    """A response code, remark, header and body, and the events to make durable first."""

    code: int = RC.SUCCESS
    remark: str | None = None
    header: Header | None = None
    body: bytes = b""
    events: list[Event] = field(default_factory=list)

    def fail(self, code: int, remark: str) -> Result:
        self.code, self.remark = code, remark
        return self


def _contains(state: ReplicasState, broker_name: str | None) -> BrokerGroup | None:
    return state.get(broker_name)


def alter_sync_state_set(state: ReplicasState, req: h.AlterSyncStateSetRequestHeader,
                         new: SyncStateSet, alive: Alive) -> Result:
    result = Result(header=h.AlterSyncStateSetResponseHeader())
    group = _contains(state, req.broker_name)
    if group is None:
        return result.fail(RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
    new_set = set(new.sync_state_set)
    if new_set == group.sync_state_set:
        return result.fail(RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                           "The newSyncStateSet is equal with oldSyncStateSet, "
                           "no needed to update syncStateSet")
    if group.master_broker_id is None or group.master_broker_id != req.master_broker_id:
        return result.fail(RC.CONTROLLER_INVALID_MASTER,
                           f"Rejecting alter syncStateSet request because the current leader is:"
                           f"{{{group.master_broker_id}}}, not {{{req.master_broker_id}}}")
    if req.master_epoch != group.master_epoch:
        return result.fail(RC.CONTROLLER_FENCED_MASTER_EPOCH,
                           f"Rejecting alter syncStateSet request because the current master epoch is:"
                           f"{{{group.master_epoch}}}, not {{{req.master_epoch}}}")
    if new.sync_state_set_epoch != group.sync_state_set_epoch:
        return result.fail(RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                           f"Rejecting alter syncStateSet request because the current syncStateSet epoch "
                           f"is:{{{group.sync_state_set_epoch}}}, not {{{new.sync_state_set_epoch}}}")
    for replica in sorted(new_set):
        if replica not in group.addresses:
            return result.fail(RC.CONTROLLER_INVALID_REPLICAS,
                               f"Rejecting alter syncStateSet request because the replicas {{{replica}}} "
                               "don't exist")
        if not alive(group.cluster_name, group.broker_name, replica):
            return result.fail(RC.CONTROLLER_BROKER_NOT_ALIVE,
                               f"Rejecting alter syncStateSet request because the replicas {{{replica}}} "
                               "don't alive")
    if group.master_broker_id not in new_set:
        return result.fail(RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                           "Rejecting alter syncStateSet request because the newSyncStateSet don't contains "
                           f"origin leader {{{group.master_broker_id}}}")
    epoch = group.sync_state_set_epoch + 1
    result.header = h.AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=epoch)
    result.body = SyncStateSet(new_set, epoch).encode()
    result.events.append(AlterSyncStateSet(group.broker_name, frozenset(new_set)))
    return result


def member_group(group: BrokerGroup) -> BrokerMemberGroup:
    return BrokerMemberGroup(group.cluster_name, group.broker_name, dict(group.addresses))


def elect_master(state: ReplicasState, req: h.ElectMasterRequestHeader, alive: Alive,
                 live_info: LiveInfo, *, unclean: bool) -> Result:
    """A broker's election (its own id), the controller's (-1) or mqadmin's (designated)."""
    result = Result(header=h.ElectMasterResponseHeader())
    group = _contains(state, req.broker_name)
    if group is None:
        return result.fail(RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
    old_master = group.master_broker_id
    # a group's first election takes the asker (RocketMQ takes any id; here it must be a replica)
    first = group.first_time_for_elect and req.broker_id in group.addresses
    new_master: int | None = req.broker_id if first else None
    if new_master is None or new_master == -1:
        new_master = elect_policy.elect(
            group.sync_state_set, set(group.addresses) if unclean else None, old_master,
            req.broker_id if req.designate_elect else None,
            alive=lambda b: alive(group.cluster_name, group.broker_name, b),
            live_info=lambda b: live_info(group.cluster_name, group.broker_name, b))
    if new_master is not None and new_master == old_master:
        result.header = h.ElectMasterResponseHeader(
            master_broker_id=old_master, master_address=group.addresses.get(old_master),
            master_epoch=group.master_epoch, sync_state_set_epoch=group.sync_state_set_epoch)
        result.body = ElectMasterResponseBody(sync_state_set=set(group.sync_state_set)).encode()
        return result.fail(RC.CONTROLLER_MASTER_STILL_EXIST,
                           f"The old master {old_master} is still alive, not need to elect new master "
                           f"for broker {group.broker_name}")
    if new_master is not None:
        result.header = h.ElectMasterResponseHeader(
            master_broker_id=new_master, master_address=group.addresses.get(new_master),
            master_epoch=group.master_epoch + 1, sync_state_set_epoch=group.sync_state_set_epoch + 1)
        result.body = ElectMasterResponseBody(member_group(group), {new_master}).encode()
        result.events.append(ElectMaster(group.broker_name, new_master))
        return result
    if req.broker_id == -1:
        result.events.append(ElectMaster(group.broker_name, None))
        return result.fail(RC.CONTROLLER_MASTER_NOT_AVAILABLE,
                           "Old master has down and failed to elect a new broker master")
    return result.fail(RC.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")


def get_next_broker_id(state: ReplicasState, req: h.GetNextBrokerIdRequestHeader) -> Result:
    group = state.get(req.broker_name)
    next_id = FIRST_BROKER_CONTROLLER_ID if group is None else group.next_assign_broker_id
    return Result(header=h.GetNextBrokerIdResponseHeader(cluster_name=req.cluster_name,
                                                         broker_name=req.broker_name,
                                                         next_broker_id=next_id))


def apply_broker_id(state: ReplicasState, req: h.ApplyBrokerIdRequestHeader) -> Result:
    """A broker claims an id with its check code (``address;timestamp``)."""
    result = Result(header=h.ApplyBrokerIdResponseHeader(cluster_name=req.cluster_name,
                                                         broker_name=req.broker_name))
    if not req.broker_name or req.applied_broker_id is None or not req.register_check_code:
        return result.fail(RC.CONTROLLER_INVALID_REQUEST,
                           "APPLY_BROKER_ID needs brokerName, appliedBrokerId and registerCheckCode "
                           "(brokerAddress;timestamp)")
    broker_id, code = req.applied_broker_id, req.register_check_code
    event = ApplyBrokerId(req.cluster_name or "", req.broker_name, code.split(";")[0], broker_id, code)
    group = state.get(req.broker_name)
    if group is None:
        if broker_id == FIRST_BROKER_CONTROLLER_ID:
            result.events.append(event)
            return result
        return result.fail(RC.CONTROLLER_BROKER_ID_INVALID,
                           f"Broker-set: {req.broker_name} hasn't been registered in controller, but broker "
                           f"try to apply brokerId: {broker_id}")
    if broker_id not in group.addresses or group.check_codes.get(broker_id) == code:
        result.events.append(event)
        return result
    return result.fail(RC.CONTROLLER_BROKER_ID_INVALID,
                       f"Fail to apply brokerId: {broker_id} in broker-set: {req.broker_name}")


def register_broker(state: ReplicasState, req: h.RegisterBrokerToControllerRequestHeader,
                    alive: Alive) -> Result:
    result = Result(header=h.RegisterBrokerToControllerResponseHeader(cluster_name=req.cluster_name,
                                                                      broker_name=req.broker_name))
    group = state.get(req.broker_name)
    if group is None:
        return result.fail(RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"Broker-set: {req.broker_name} hasn't been registered in controller")
    if req.broker_id not in group.addresses:
        return result.fail(RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"BrokerId: {req.broker_id} hasn't been registered in broker-set: "
                           f"{req.broker_name}")
    if group.master_broker_id is not None and alive(req.cluster_name or "", group.broker_name,
                                                     group.master_broker_id):
        result.header = h.RegisterBrokerToControllerResponseHeader(
            cluster_name=req.cluster_name, broker_name=req.broker_name,
            master_broker_id=group.master_broker_id, master_address=group.master_address,
            master_epoch=group.master_epoch, sync_state_set_epoch=group.sync_state_set_epoch)
    result.body = SyncStateSet(set(group.sync_state_set), group.sync_state_set_epoch).encode()
    assert req.broker_id is not None
    if req.broker_address and req.broker_address != group.addresses.get(req.broker_id):
        result.events.append(UpdateBrokerAddress(req.cluster_name or "", group.broker_name,
                                                 req.broker_address, req.broker_id))
    return result


def get_replica_info(state: ReplicasState, req: h.GetReplicaInfoRequestHeader) -> Result:
    group = state.get(req.broker_name)
    if group is None:
        return Result(header=h.GetReplicaInfoResponseHeader()).fail(
            RC.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
    return Result(header=h.GetReplicaInfoResponseHeader(master_broker_id=group.master_broker_id,
                                                        master_address=group.master_address,
                                                        master_epoch=group.master_epoch),
                  body=SyncStateSet(set(group.sync_state_set), group.sync_state_set_epoch).encode())


def sync_state_data(state: ReplicasState, broker_names: list[str], alive: Alive) -> BrokerReplicasInfo:
    """GET_SYNC_STATE_DATA: each known group's master, epochs and replicas."""
    out = BrokerReplicasInfo()
    for name in broker_names:
        group = state.get(name)
        if group is None:
            continue
        in_sync: list[ReplicaIdentity] = []
        not_in_sync: list[ReplicaIdentity] = []
        for broker_id in sorted(group.addresses):
            replica = ReplicaIdentity(name, broker_id, group.addresses[broker_id],
                                      alive(group.cluster_name, name, broker_id))
            (in_sync if broker_id in group.sync_state_set else not_in_sync).append(replica)
        out.replicas_info_table[name] = ReplicasInfo(
            group.master_broker_id, group.master_address, group.master_epoch, group.sync_state_set_epoch,
            in_sync, not_in_sync)
    return out


def clean_broker_data(state: ReplicasState, req: h.CleanControllerBrokerDataRequestHeader,
                      alive: Alive) -> Result:
    result = Result()
    ids_text = (req.broker_controller_ids_to_clean or "").strip()
    ids: frozenset[int] | None = None
    if not req.is_clean_living_broker:
        group = state.get(req.broker_name)
        if not ids_text and group is not None and group.master_broker_id is not None:
            return result.fail(RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                               f"Broker {req.broker_name} is still alive, clean up failure")
        if ids_text:
            try:
                ids = frozenset(int(i) for i in ids_text.split(";"))
            except ValueError as exc:
                return result.fail(RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                   "Please set the option <brokerControllerIdsToClean> according to the "
                                   f"format (ids joined by ';', e.g. 1;2), exception: {exc}")
            for broker_id in sorted(ids):
                if alive(req.cluster_name or "", req.broker_name, broker_id):
                    return result.fail(RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                       f"Broker [{req.broker_name},  {broker_id}] is still alive, "
                                       "clean up failure")
    if state.get(req.broker_name) is not None:
        result.events.append(CleanBrokerData(req.broker_name, ids))
        return result
    return result.fail(RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                       f"Broker {req.broker_name} is not existed,clean broker data failure.")


def need_reelect(state: ReplicasState, alive: Alive) -> list[str]:
    """Groups whose master is not alive while another replica is (scanInactiveMaster)."""
    out = []
    for name, group in state.groups.items():
        master = group.master_broker_id
        if master is not None and not alive(group.cluster_name, name, master) and \
                any(alive(group.cluster_name, name, b) for b in group.addresses):
            out.append(name)
    return out
