"""The controller's decisions over random request sequences keep RocketMQ's invariants, and
the event log replays to the same state (hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.controller import decisions
from bolide.controller.event_log import EventLog
from bolide.controller.heartbeat import HeartbeatManager
from bolide.controller.replicas import ReplicasState
from bolide.protocol.bodies.controller import SyncStateSet
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.headers import controller as h

NAMES = ("a", "b")
STEP = st.tuples(st.sampled_from(("join", "beat", "silence", "elect", "designate", "alter", "clean")),
                 st.sampled_from(NAMES), st.integers(1, 4), st.sets(st.integers(1, 4), max_size=4))


@settings(max_examples=150, deadline=None)
@given(st.lists(STEP, max_size=40), st.booleans())
def test_invariants_and_replay(steps: list[tuple[str, str, int, set[int]]], unclean: bool) -> None:
    now = [0]
    hb = HeartbeatManager(clock=lambda: now[0])
    state = ReplicasState()
    alive = hb.is_active
    with tempfile.TemporaryDirectory() as tmp:
        log = EventLog(Path(tmp))
        log.open()
        epochs: dict[str, tuple[int, int]] = {}
        for action, name, broker_id, ids in steps:
            group = state.get(name)
            if action == "join":
                nxt = decisions.get_next_broker_id(state, h.GetNextBrokerIdRequestHeader(broker_name=name))
                assert isinstance(nxt.header, h.GetNextBrokerIdResponseHeader)
                new_id = nxt.header.next_broker_id
                result = decisions.apply_broker_id(state, h.ApplyBrokerIdRequestHeader(
                    cluster_name="C", broker_name=name, applied_broker_id=new_id,
                    register_check_code=f"h{new_id}:1;1"))
                assert result.code == RC.SUCCESS  # the next id is always free
            elif action == "beat":
                hb.on_heartbeat("C", name, f"h{broker_id}:1", broker_id, timeout_ms=100, epoch=broker_id)
                continue
            elif action == "silence":
                now[0] += 200
                continue
            elif action in ("elect", "designate"):
                result = decisions.elect_master(state, h.ElectMasterRequestHeader(
                    cluster_name="C", broker_name=name, broker_id=broker_id if action == "designate" else -1,
                    designate_elect=action == "designate"), alive, hb.live_info, unclean=unclean)
            elif action == "alter":
                if group is None or group.master_broker_id is None:
                    continue
                result = decisions.alter_sync_state_set(state, h.AlterSyncStateSetRequestHeader(
                    broker_name=name, master_broker_id=group.master_broker_id,
                    master_epoch=group.master_epoch),
                    SyncStateSet(ids | {group.master_broker_id}, group.sync_state_set_epoch), alive)
            else:
                result = decisions.clean_broker_data(state, h.CleanControllerBrokerDataRequestHeader(
                    broker_name=name, cluster_name="C",
                    broker_controller_ids_to_clean=";".join(map(str, sorted(ids))) or None), alive)
            # only successes make events, and the controller's failed election (no master)
            assert result.code in (RC.SUCCESS, RC.CONTROLLER_MASTER_NOT_AVAILABLE) or not result.events
            log.append(result.events)
            for event in result.events:
                state.apply(event)
            for gname, g in state.groups.items():
                if g.master_broker_id is not None and g.master_broker_id in g.addresses:
                    # a master is in its in-sync set (cleanBrokerMetadata may remove a dead
                    # master's id, as in RocketMQ; the next election replaces it)
                    assert g.master_broker_id in g.sync_state_set
                assert g.sync_state_set <= set(g.addresses)
                assert g.next_assign_broker_id > max(g.addresses, default=0)
                before = epochs.get(gname, (0, 0))
                assert g.master_epoch >= before[0] and g.sync_state_set_epoch >= before[1]
                epochs[gname] = (g.master_epoch, g.sync_state_set_epoch)
            for gone in set(epochs) - set(state.groups):
                del epochs[gone]
        log.close()
        replayed = ReplicasState()
        for event in EventLog(Path(tmp)).open().events:
            replayed.apply(event)
        assert replayed.to_json() == state.to_json()
