"""The replicas state machine and each request's decision, as RocketMQ's ReplicasInfoManager."""

from __future__ import annotations

from bolide.controller import decisions
from bolide.controller.events import ElectMaster, event_from_json, event_to_json
from bolide.controller.heartbeat import BrokerLiveInfo, HeartbeatManager
from bolide.controller.replicas import ReplicasState
from bolide.protocol.bodies.controller import ElectMasterResponseBody, SyncStateSet
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.headers import controller as h


class Cluster:
    """A state plus a heartbeat table driven by a fake clock."""

    def __init__(self) -> None:
        self.now = 1_000_000
        self.state = ReplicasState()
        self.hb = HeartbeatManager(clock=lambda: self.now)

    def alive(self, cluster: str, name: str, broker_id: int | None) -> bool:
        return self.hb.is_active(cluster, name, broker_id)

    def live(self, cluster: str, name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.hb.live_info(cluster, name, broker_id)

    def run(self, result: decisions.Result) -> decisions.Result:
        for event in result.events:
            # every event survives its log form
            event = event_from_json(event_to_json(event))
            self.state.apply(event)
        return result

    def join(self, name: str, addr: str) -> int:
        """GET_NEXT_BROKER_ID -> APPLY_BROKER_ID -> REGISTER, then a heartbeat."""
        nxt = decisions.get_next_broker_id(self.state, h.GetNextBrokerIdRequestHeader(cluster_name="C",
                                                                                      broker_name=name))
        assert isinstance(nxt.header, h.GetNextBrokerIdResponseHeader)
        broker_id = nxt.header.next_broker_id
        assert broker_id is not None
        applied = self.run(decisions.apply_broker_id(self.state, h.ApplyBrokerIdRequestHeader(
            cluster_name="C", broker_name=name, applied_broker_id=broker_id,
            register_check_code=f"{addr};{self.now}")))
        assert applied.code == RC.SUCCESS, applied.remark
        reg = self.run(decisions.register_broker(self.state, h.RegisterBrokerToControllerRequestHeader(
            cluster_name="C", broker_name=name, broker_id=broker_id, broker_address=addr), self.alive))
        assert reg.code == RC.SUCCESS, reg.remark
        self.beat(name, addr, broker_id)
        return broker_id

    def beat(self, name: str, addr: str, broker_id: int, **kw: int) -> None:
        self.hb.on_heartbeat("C", name, addr, broker_id, timeout_ms=10_000, **kw)

    def elect(self, name: str, broker_id: int = -1, designate: bool = False,
              unclean: bool = False) -> decisions.Result:
        return self.run(decisions.elect_master(self.state, h.ElectMasterRequestHeader(
            cluster_name="C", broker_name=name, broker_id=broker_id, designate_elect=designate),
            self.alive, self.live, unclean=unclean))


def test_ids_are_handed_out_in_order_and_first_elect_takes_the_asker() -> None:
    c = Cluster()
    assert c.join("b", "h:1") == 1
    assert c.join("b", "h:2") == 2
    result = c.elect("b", 2)
    assert result.code == RC.SUCCESS
    assert result.header == h.ElectMasterResponseHeader(master_broker_id=2, master_address="h:2",
                                                        master_epoch=1, sync_state_set_epoch=1)
    body = ElectMasterResponseBody.decode(result.body)
    assert body.sync_state_set == {2}
    assert body.broker_member_group is not None
    assert body.broker_member_group.broker_addrs == {1: "h:1", 2: "h:2"}
    group = c.state.groups["b"]
    assert (group.master_broker_id, group.master_epoch, group.sync_state_set, group.sync_state_set_epoch) \
        == (2, 1, {2}, 1)
    # broker 1 asks too: the master is alive
    again = c.elect("b", 1)
    assert again.code == RC.CONTROLLER_MASTER_STILL_EXIST
    assert isinstance(again.header, h.ElectMasterResponseHeader) and again.header.master_broker_id == 2
    assert not again.events


def test_apply_broker_id_checks_the_register_code() -> None:
    c = Cluster()
    wrong_first = decisions.apply_broker_id(c.state, h.ApplyBrokerIdRequestHeader(
        cluster_name="C", broker_name="b", applied_broker_id=2, register_check_code="h:1;1"))
    assert wrong_first.code == RC.CONTROLLER_BROKER_ID_INVALID
    c.join("b", "h:1")
    taken = decisions.apply_broker_id(c.state, h.ApplyBrokerIdRequestHeader(
        cluster_name="C", broker_name="b", applied_broker_id=1, register_check_code="h:9;5"))
    assert taken.code == RC.CONTROLLER_BROKER_ID_INVALID
    bad = decisions.apply_broker_id(c.state, h.ApplyBrokerIdRequestHeader(cluster_name="C", broker_name="b"))
    assert bad.code == RC.CONTROLLER_INVALID_REQUEST and "registerCheckCode" in (bad.remark or "")


def test_register_unknown_and_address_change() -> None:
    c = Cluster()
    unknown = decisions.register_broker(c.state, h.RegisterBrokerToControllerRequestHeader(
        cluster_name="C", broker_name="b", broker_id=1, broker_address="h:1"), c.alive)
    assert unknown.code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    c.join("b", "h:1")
    c.elect("b", 1)
    moved = c.run(decisions.register_broker(c.state, h.RegisterBrokerToControllerRequestHeader(
        cluster_name="C", broker_name="b", broker_id=1, broker_address="h:9"), c.alive))
    assert moved.code == RC.SUCCESS
    assert isinstance(moved.header, h.RegisterBrokerToControllerResponseHeader)
    assert moved.header.master_broker_id == 1 and moved.header.master_epoch == 1
    assert c.state.groups["b"].addresses[1] == "h:9"
    assert SyncStateSet.decode(moved.body) == SyncStateSet({1}, 1)


def test_alter_sync_state_set_is_fenced_by_epochs() -> None:
    c = Cluster()
    c.join("b", "h:1")
    c.join("b", "h:2")
    c.elect("b", 1)

    def alter(master: int, master_epoch: int, ids: set[int], set_epoch: int) -> decisions.Result:
        return c.run(decisions.alter_sync_state_set(c.state, h.AlterSyncStateSetRequestHeader(
            broker_name="b", master_broker_id=master, master_epoch=master_epoch),
            SyncStateSet(ids, set_epoch), c.alive))

    assert alter(2, 1, {1, 2}, 1).code == RC.CONTROLLER_INVALID_MASTER
    assert alter(1, 0, {1, 2}, 1).code == RC.CONTROLLER_FENCED_MASTER_EPOCH
    assert alter(1, 1, {1, 2}, 0).code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert alter(1, 1, {1, 3}, 1).code == RC.CONTROLLER_INVALID_REPLICAS
    assert alter(1, 1, {2}, 1).code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert alter(1, 1, {1}, 1).code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED  # unchanged
    ok = alter(1, 1, {1, 2}, 1)
    assert ok.code == RC.SUCCESS
    assert ok.header == h.AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=2)
    assert c.state.groups["b"].sync_state_set == {1, 2}
    c.now += 20_000  # broker 2 silent past its timeout
    c.beat("b", "h:1", 1)
    assert alter(1, 1, {1, 2}, 2).code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    # a shrink is accepted, a grow with a dead broker is not
    assert alter(1, 1, {1}, 2).code == RC.SUCCESS
    assert alter(1, 1, {1, 2}, 3).code == RC.CONTROLLER_BROKER_NOT_ALIVE


def test_master_expiry_elects_from_sync_state_set_and_fails_cleanly() -> None:
    c = Cluster()
    c.join("b", "h:1")
    c.join("b", "h:2")
    c.elect("b", 1)
    c.run(decisions.alter_sync_state_set(c.state, h.AlterSyncStateSetRequestHeader(
        broker_name="b", master_broker_id=1, master_epoch=1), SyncStateSet({1, 2}, 1), c.alive))
    c.now += 20_000
    c.beat("b", "h:2", 2)
    assert decisions.need_reelect(c.state, c.alive) == ["b"]
    result = c.elect("b")  # the controller's own election
    assert result.code == RC.SUCCESS
    group = c.state.groups["b"]
    assert (group.master_broker_id, group.master_epoch, group.sync_state_set, group.sync_state_set_epoch) \
        == (2, 2, {2}, 3)
    assert decisions.need_reelect(c.state, c.alive) == []
    # now 2 dies too and 1 comes back, but 1 is out of the syncStateSet
    c.now += 20_000
    c.beat("b", "h:1", 1)
    failed = c.elect("b")
    assert failed.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert failed.events == [ElectMaster("b", None)]
    assert group.master_broker_id is None and group.master_epoch == 3
    assert c.elect("b", 1).code == RC.CONTROLLER_ELECT_MASTER_FAILED
    assert c.elect("b", 1, unclean=True).code == RC.SUCCESS  # enableElectUncleanMaster
    assert group.master_broker_id == 1 and group.master_epoch == 4


def test_designated_elect() -> None:
    c = Cluster()
    c.join("b", "h:1")
    c.join("b", "h:2")
    c.elect("b", 1)
    c.run(decisions.alter_sync_state_set(c.state, h.AlterSyncStateSetRequestHeader(
        broker_name="b", master_broker_id=1, master_epoch=1), SyncStateSet({1, 2}, 1), c.alive))
    moved = c.elect("b", 2, designate=True)
    assert moved.code == RC.SUCCESS and c.state.groups["b"].master_broker_id == 2
    assert c.elect("b", 7, designate=True).code == RC.CONTROLLER_ELECT_MASTER_FAILED


def test_clean_broker_data() -> None:
    c = Cluster()
    c.join("b", "h:1")
    c.join("b", "h:2")
    c.elect("b", 1)

    def clean(ids: str | None, living: bool = False) -> decisions.Result:
        return c.run(decisions.clean_broker_data(c.state, h.CleanControllerBrokerDataRequestHeader(
            broker_name="b", cluster_name="C", broker_controller_ids_to_clean=ids,
            is_clean_living_broker=living), c.alive))

    assert clean(None).code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA  # a master exists
    assert clean("2").code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA  # 2 is alive
    assert "format" in (clean("x").remark or "")
    c.now += 20_000
    assert clean("2").code == RC.SUCCESS
    assert set(c.state.groups["b"].addresses) == {1}
    assert clean(None, living=True).code == RC.SUCCESS
    assert "b" not in c.state.groups
    assert clean(None, living=True).code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA


def test_sync_state_data_splits_replicas() -> None:
    c = Cluster()
    c.join("b", "h:1")
    c.join("b", "h:2")
    c.elect("b", 1)
    data = decisions.sync_state_data(c.state, ["b", "unknown"], c.alive)
    info = data.replicas_info_table["b"]
    assert (info.master_broker_id, info.master_address, info.master_epoch, info.sync_state_set_epoch) \
        == (1, "h:1", 1, 1)
    assert [(r.broker_id, r.alive) for r in info.in_sync_replicas] == [(1, True)]
    assert [r.broker_id for r in info.not_in_sync_replicas] == [2]
    assert "unknown" not in data.replicas_info_table


def test_snapshot_reproduces_the_state() -> None:
    c = Cluster()
    c.join("b", "h:1")
    c.join("b", "h:2")
    c.elect("b", 2)
    copy = ReplicasState()
    copy.apply(event_from_json(event_to_json(c.state.snapshot())))
    assert copy.to_json() == c.state.to_json()
    assert copy.groups["b"].next_assign_broker_id == 3
