"""A group of three controllers on loopback (``controllerDLegerPeers`` with three entries): one
leader elected by Raft, the others answering CONTROLLER_NOT_LEADER and naming it, the brokers'
registration and elections replicated to every peer, the leader stopped and another elected
with the same state, which re-elects a group's master when it falls silent, and a stopped peer
catching up from the leader (through a snapshot when the log was compacted)."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from bolide.cli.main import cli
from bolide.controller import ControllerServer
from bolide.controller.raft import journal as raft_journal
from bolide.protocol.bodies.controller import SyncStateSet
from bolide.protocol.codes import RequestCode as C
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import controller as h
from bolide.remoting import RemotingClient, run
from bolide.testing.controller import ControllerBroker, ControllerGroup
from conftest import wait_until


@asynccontextmanager
async def _group(tmp_path: Path) -> AsyncIterator[ControllerGroup]:
    group = ControllerGroup(tmp_path / "ctrl", controllerDLegerGroup="G", scanNotActiveBrokerInterval="100",
                            scanInactiveMasterInterval="100")
    try:
        await group.start()
        yield group
    finally:
        await group.stop()


async def _beating(brokers: list[ControllerBroker], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for broker in brokers:
            await broker.beat(timeout_ms=1500)
        await asyncio.sleep(0.1)


async def _metadata(client: RemotingClient, addr: str) -> h.GetMetaDataResponseHeader:
    answer = await client.invoke(addr, RemotingCommand.request(C.CONTROLLER_GET_METADATA_INFO))
    assert answer.code == RC.SUCCESS, answer.remark
    return answer.read_header(h.GetMetaDataResponseHeader)


def _master(server: ControllerServer) -> tuple[int | None, int]:
    group = server.state.get("b")
    return (group.master_broker_id, group.master_epoch) if group is not None else (None, 0)


def test_a_group_elects_replicates_and_fails_over(tmp_path: Path) -> None:
    run(_elects_replicates_and_fails_over(tmp_path))


async def _elects_replicates_and_fails_over(tmp_path: Path) -> None:
    async with _group(tmp_path) as group, RemotingClient() as client:
        leader = await group.leader()
        followers = [s for s in group.running if s is not leader]
        for server in group.running:  # every peer names the leader and the three peers
            meta = await _metadata(client, server.address)
            assert (meta.group, meta.controller_leader_id, meta.controller_leader_address) == \
                ("G", leader.config.self_id, leader.address)
            assert meta.is_leader is (server is leader)
            assert meta.peers == "".join(f"n{i}:{a};" for i, a in enumerate(group.addresses))
        refused = await client.invoke(followers[0].address, RemotingCommand.request(
            C.CONTROLLER_GET_REPLICA_INFO, h.GetReplicaInfoRequestHeader(broker_name="b")))
        assert refused.code == RC.CONTROLLER_NOT_LEADER
        assert refused.remark == f"The controller is not in leader state (the leader is {leader.address})"

        one = ControllerBroker(leader.address, beat_to=group.addresses)
        two = ControllerBroker(leader.address, beat_to=group.addresses)
        await one.join()
        await two.join()
        stop_one, stop_two = asyncio.Event(), asyncio.Event()
        beats = [asyncio.create_task(_beating([one], stop_one)),
                 asyncio.create_task(_beating([two], stop_two))]
        try:
            assert (await one.elect()).code == RC.SUCCESS
            # answered once a majority holds it; every peer applies it
            await wait_until(lambda: all(_master(s) == (1, 1) for s in group.running), timeout=5)
            assert all(sorted(s.state.get("b").addresses) == [1, 2] for s in group.running)  # type: ignore[union-attr]
            altered = await one.call(C.CONTROLLER_ALTER_SYNC_STATE_SET, h.AlterSyncStateSetRequestHeader(
                broker_name="b", master_broker_id=1, master_epoch=1), SyncStateSet({1, 2}, 1).encode())
            assert altered.code == RC.SUCCESS, altered.remark

            # the leader stops: the other two elect one of them, which has the whole state
            await group.stop(leader.config.self_id)
            second = await group.leader()
            assert second is not leader and _master(second) == (1, 1)
            for broker in (one, two):
                broker.controller = second.address
            meta = await _metadata(client, second.address)
            assert meta.is_leader and meta.controller_leader_address == second.address

            # the master falls silent: the new leader elects broker 2 and tells it
            stop_one.set()
            await wait_until(lambda: _master(second) == (2, 2), timeout=10)
            await wait_until(lambda: any(n[0].master_broker_id == 2 for n in two.notices), timeout=5)
            replica = await two.call(C.CONTROLLER_GET_REPLICA_INFO,
                                     h.GetReplicaInfoRequestHeader(broker_name="b"))
            assert replica.read_header(h.GetReplicaInfoResponseHeader).master_broker_id == 2

            # the first leader comes back from its files and catches up as a follower
            back = await group.start(leader.config.self_id)
            assert back is not None
            await wait_until(lambda: _master(back) == (2, 2), timeout=10)
            assert not back.journal.is_leader and back.journal.leader_id == second.config.self_id
        finally:
            stop_one.set()
            stop_two.set()
            await asyncio.gather(*beats)
            await one.close()
            await two.close()


def test_no_majority_no_change(tmp_path: Path) -> None:
    """With two of three peers down the last one cannot answer as leader: requests that read or
    change the state get CONTROLLER_NOT_LEADER, and nothing is applied."""
    run(_no_majority_no_change(tmp_path))


async def _no_majority_no_change(tmp_path: Path) -> None:
    async with _group(tmp_path) as group, RemotingClient() as client:
        leader = await group.leader()
        for server in list(group.running):
            if server is not leader:
                await group.stop(server.config.self_id)
        await wait_until(lambda: not leader.journal.is_leader, timeout=5)  # it stepped down
        answer = await client.invoke(leader.address, RemotingCommand.request(
            C.CONTROLLER_GET_NEXT_BROKER_ID,
            h.GetNextBrokerIdRequestHeader(cluster_name="C", broker_name="b")))
        assert answer.code == RC.CONTROLLER_NOT_LEADER
        assert leader.state.get("b") is None


def test_a_peer_behind_the_compacted_log_gets_a_snapshot(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader compacts its log while a peer is down; the peer, back, gets the snapshot."""
    monkeypatch.setattr(raft_journal, "COMPACT_AFTER_RECORDS", 5)  # compact after a few changes
    run(_snapshot_to_a_peer_behind(tmp_path))


async def _snapshot_to_a_peer_behind(tmp_path: Path) -> None:
    async with _group(tmp_path) as group:
        leader = await group.leader()
        away = next(s for s in group.running if s is not leader).config.self_id
        await group.stop(away)
        brokers = [ControllerBroker(leader.address, name=f"g{i}", beat_to=group.addresses) for i in range(4)]
        try:
            for broker in brokers:
                await broker.join()
                assert (await broker.elect()).code == RC.SUCCESS
            node = leader.journal.node  # type: ignore[attr-defined]
            assert node.snapshot_index > 0  # compacted
            back = await group.start(away)
            assert back is not None
            await wait_until(lambda: all(back.state.get(f"g{i}") is not None for i in range(4)), timeout=10)
            assert back.state.to_json() == leader.state.to_json()
            assert (tmp_path / "ctrl" / away / "raft" / "snapshot").is_file()
        finally:
            for broker in brokers:
                await broker.close()


def test_a_peer_whose_disk_fails_stops_and_the_group_goes_on(tmp_path: Path) -> None:
    """The leader's disk refuses a write (ENOSPC injected): the change is answered with an error
    naming the fix, that peer stops taking part, the other two elect a leader that takes it."""
    run(_disk_fails(tmp_path))


async def _disk_fails(tmp_path: Path) -> None:
    async with _group(tmp_path) as group:
        leader = await group.leader()
        journal = leader.journal
        assert isinstance(journal, raft_journal.RaftJournal)

        def full(*args: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")
        journal.storage.append = full  # type: ignore[method-assign]
        broker = ControllerBroker(leader.address, beat_to=group.addresses)
        try:
            with pytest.raises(AssertionError, match="could not persist the change") as refused:
                await broker.join()
            assert "fix the disk and restart it" in str(refused.value) and journal.failed
            await wait_until(lambda: any(s.journal.is_leader for s in group.running if s is not leader),
                             timeout=10)
            second = next(s for s in group.running if s.journal.is_leader)
            assert not leader.journal.is_leader
            again = ControllerBroker(second.address, beat_to=group.addresses)
            try:
                await again.join()
            finally:
                await again.close()
            assert second.state.get("b") is not None
        finally:
            await broker.close()


def test_a_peer_of_a_group_keeps_the_port_of_its_entry(tmp_path: Path) -> None:
    """`bolide controller -p` would listen where neither the peers nor the brokers look."""
    conf = tmp_path / "controller.conf"
    conf.write_text("controllerDLegerPeers=n0-127.0.0.1:19878;n1-127.0.0.1:19879;n2-127.0.0.1:19880\n"
                    f"controllerDLegerSelfId=n1\ncontrollerStorePath={tmp_path / 'ctrl'}\n")
    result = CliRunner().invoke(cli, ["controller", "-c", str(conf), "-p", "20000"])
    assert result.exit_code == 2
    assert "differs from this controller's controllerDLegerPeers entry (n1-127.0.0.1:19879)" in result.output
