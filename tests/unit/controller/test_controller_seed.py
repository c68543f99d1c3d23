"""Seeding a group's peers from a lone controller's event log: the same snapshot on every peer,
the lone log left unchanged (a torn tail left out and reported), the refusals, the check at a
controller's start, and ``bolide controller seed``."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from bolide.cli.main import cli
from bolide.controller import ControllerConfig
from bolide.controller.event_log import LOG_NAME, EventLog
from bolide.controller.events import AlterSyncStateSet, ApplyBrokerId, ElectMaster, Event, event_from_json
from bolide.controller.raft.storage import RaftStorage
from bolide.controller.replicas import ReplicasState
from bolide.controller.seed import SEED_INDEX, SEED_TERM, check_store, read_seed, seed_peer
from bolide.errors import BolideError

EVENTS: list[Event] = [
    ApplyBrokerId("C", "broker-a", "h:1", 1, "h:1;5"), ApplyBrokerId("C", "broker-a", "h:2", 2, "h:2;6"),
    ElectMaster("broker-a", 1), AlterSyncStateSet("broker-a", frozenset({1, 2})),
    ApplyBrokerId("C", "broker-b", "h:3", 1, "h:3;7"), ElectMaster("broker-b", 1)]
PEERS = "n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3"


def _lone_log(store: Path, events: Sequence[Event] = EVENTS) -> Path:
    """A stopped lone controller n0's event log under ``store``."""
    log = EventLog(store / "n0")
    log.open()
    log.append(list(events))
    log.close()
    return log.path


def _config(store: Path, peer_id: str, peers: str = PEERS) -> ControllerConfig:
    return ControllerConfig.from_mapping({"controllerStorePath": str(store), "controllerDLegerPeers": peers,
                                          "controllerDLegerSelfId": peer_id})


def _replayed(events: Sequence[Event]) -> ReplicasState:
    state = ReplicasState()
    for event in events:
        state.apply(event)
    return state


def test_every_peer_gets_the_same_snapshot_of_the_replayed_state(tmp_path: Path) -> None:
    store = tmp_path / "store"
    path = _lone_log(store)
    before = path.read_bytes()
    for peer_id in ("n0", "n1", "n2"):
        seed_peer(_config(store, peer_id), read_seed(store / "n0"))
    snapshots = {(store / p / "raft" / "snapshot").read_bytes() for p in ("n0", "n1", "n2")}
    assert len(snapshots) == 1
    for peer_id in ("n0", "n1", "n2"):
        storage = RaftStorage(store / peer_id / "raft")
        persisted = storage.open().persisted
        storage.close()
        assert (persisted.term, persisted.voted_for) == (SEED_TERM, None)
        assert (persisted.snapshot_index, persisted.snapshot_term) == (SEED_INDEX, SEED_TERM)
        assert persisted.entries == ()
        state = ReplicasState()
        state.apply(event_from_json(json.loads(persisted.snapshot_data)))
        assert state.to_json() == _replayed(EVENTS).to_json()
    group = state.groups["broker-a"]
    assert (group.master_broker_id, group.master_epoch, group.sync_state_set, group.next_assign_broker_id) \
        == (1, 1, {1, 2}, 3)
    assert path.read_bytes() == before  # the lone controller's log is not changed
    assert not (store / "n1" / "raft.seed.tmp").exists()


def test_a_torn_tail_is_left_out_and_reported_without_changing_the_log(tmp_path: Path) -> None:
    path = _lone_log(tmp_path / "store")
    torn = path.read_bytes()[:-3]
    path.write_bytes(torn)
    seed = read_seed(path)
    assert seed.replay.events == EVENTS[:-1] and seed.replay.dropped_bytes > 0
    assert "cut short" in seed.replay.describe_cut(path)
    assert seed.state.to_json() == _replayed(EVENTS[:-1]).to_json()
    assert path.read_bytes() == torn


def test_the_source_may_be_the_log_its_directory_or_the_store_path(tmp_path: Path) -> None:
    store = tmp_path / "store"
    path = _lone_log(store)
    assert {read_seed(s).digest for s in (path, store / "n0", store)} == {read_seed(path).digest}


@pytest.mark.parametrize(("setup", "expected"), [
    ("missing", "does not exist"),
    ("empty", "is empty: there is no state to seed"),
    ("damaged", "is damaged: no whole record"),
    ("no log", "holds no controller-events.log"),
    ("raft only", "a group's peers need no seed"),
    ("two logs", "several controllers' event logs"),
])
def test_a_source_without_a_state_is_refused(tmp_path: Path, setup: str, expected: str) -> None:
    source = tmp_path / "lone"
    if setup != "missing":
        source.mkdir()
    if setup == "empty":
        (source / LOG_NAME).write_bytes(b"")
    elif setup == "damaged":
        (source / LOG_NAME).write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x00hello")
    elif setup == "raft only":
        (source / "raft").mkdir()
        (source / "raft" / "term.json").write_text('{"term": 2, "votedFor": null}')
    elif setup == "two logs":
        _lone_log(source)
        EventLog(source / "n1").open()
        (source / "n1" / LOG_NAME).write_bytes((source / "n0" / LOG_NAME).read_bytes())
    with pytest.raises(BolideError, match=expected):
        read_seed(source)


def test_a_peer_with_raft_state_is_refused_and_one_started_empty_is_seeded(tmp_path: Path) -> None:
    store = tmp_path / "store"
    seed = read_seed(_lone_log(store))
    seed_peer(_config(store, "n1"), seed)
    with pytest.raises(BolideError, match=r"already has Raft state .*remove each peer's raft directory"):
        seed_peer(_config(store, "n1"), seed)
    used = store / "n2" / "raft"
    used.mkdir(parents=True)
    (used / "term.json").write_text('{"term": 4, "votedFor": "n0"}')
    with pytest.raises(BolideError, match=r"\(term.json\)"):
        seed_peer(_config(store, "n2"), seed)
    (used / "term.json").unlink()
    (used / "log").write_bytes(b"")  # started once, stopped before any vote
    seed_peer(_config(store, "n2"), seed)
    assert (used / "snapshot").read_bytes() == (store / "n1" / "raft" / "snapshot").read_bytes()


def test_a_lone_controllers_configuration_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    seed = read_seed(_lone_log(store))
    with pytest.raises(BolideError, match=r"lone controller's .*listing every peer"):
        seed_peer(_config(store, "n0", "n0-127.0.0.1:1"), seed)
    assert not (store / "n0" / "raft").exists()


def test_a_group_peer_without_raft_state_refuses_to_start_over_a_lone_log(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = tmp_path / "store"
    _lone_log(store)
    config = _config(store, "n0")
    command = "bolide controller seed -c <each peer's controller.conf> --from"
    with pytest.raises(BolideError, match=re.escape(command)):
        check_store(config)
    check_store(_config(store, "n1"))  # a peer whose directory holds no lone log starts
    seed_peer(config, read_seed(store / "n0"))
    with caplog.at_level(logging.WARNING, "bolide.controller.seed"):
        check_store(config)
        check_store(_config(store, "n0", "n0-127.0.0.1:1"))  # back to a lone controller
    assert "a lone controller's event log, which a group does not read" in caplog.text
    assert "a group's Raft state, which a lone controller does not read" in caplog.text


def _write_conf(path: Path, store: Path, peer_id: str, peers: str = PEERS) -> Path:
    path.write_text(f"controllerStorePath={store}\ncontrollerDLegerPeers={peers}\n"
                    f"controllerDLegerSelfId={peer_id}\n")
    return path


def test_the_seed_command_seeds_each_peer_and_names_the_fixes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _lone_log(store)
    outputs = []
    for peer_id in ("n0", "n1", "n2"):
        conf = _write_conf(tmp_path / f"{peer_id}.conf", store, peer_id)
        result = CliRunner().invoke(cli, ["controller", "seed", "-c", str(conf), "--from", str(store / "n0")])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    digest = read_seed(store).digest
    assert all(f"sha256 {digest}" in out for out in outputs)
    assert "C/broker-a: master 1 (epoch 1), in sync 1, 2 (epoch 2), broker ids 1, 2" in outputs[0]
    assert "6 events, 2 broker groups; snapshot at index 1 term 1" in outputs[0]
    again = CliRunner().invoke(cli, ["controller", "seed", "-c", str(tmp_path / "n1.conf"),
                                     "--from", str(store / "n0")])
    assert again.exit_code == 1 and "already has Raft state" in again.output
    lone = _write_conf(tmp_path / "lone.conf", store, "n0", "n0-127.0.0.1:1")
    refused = CliRunner().invoke(cli, ["controller", "seed", "-c", str(lone), "--from", str(store / "n0")])
    assert refused.exit_code == 1 and "lone controller's" in refused.output
    misplaced = CliRunner().invoke(cli, ["controller", "-c", str(lone), "seed", "--from", str(store)])
    assert misplaced.exit_code == 2 and "bolide controller seed -c" in misplaced.output


def test_the_seed_command_reports_a_torn_tail(tmp_path: Path) -> None:
    store = tmp_path / "store"
    path = _lone_log(store)
    path.write_bytes(path.read_bytes()[:-2])
    conf = _write_conf(tmp_path / "n1.conf", store, "n1")
    result = CliRunner().invoke(cli, ["controller", "seed", "-c", str(conf), "--from", str(path)])
    assert result.exit_code == 0, result.output
    assert "Left out a torn tail" in result.output and "after 5 events" in result.output


def test_the_lone_controller_restarted_as_a_group_peer_refuses_to_drop_its_state(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _lone_log(store)
    conf = _write_conf(tmp_path / "n0.conf", store, "n0")
    result = CliRunner().invoke(cli, ["controller", "-c", str(conf)])
    assert result.exit_code == 1
    assert "holds a lone controller's state, which a group does not read" in result.output
    assert f"--from {store / 'n0' / LOG_NAME}" in " ".join(result.output.split())
    assert not (store / "n0" / "raft").exists()
