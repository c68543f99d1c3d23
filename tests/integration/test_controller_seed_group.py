"""Moving from a lone controller to a group of three with ``bolide controller seed``: the group
starts with the lone controller's state (masters, epochs, in-sync sets, broker ids).

In process: a lone controller with two brokers registered and elected is stopped, two peers are
seeded from its directory (the third left out gets the snapshot from the leader), every peer
holds the same state, a broker registers again with its old id and a new one gets the next id.

With real processes: a lone ``bolide controller`` with a Bolide master and slave (their
``controllerAddr`` lists the future group's three peers, so they need no new configuration) is
stopped, the three peers are seeded through the command and started; the master keeps serving
under the group with the same id and epoch, getSyncStateSet through a follower shows the same
master, epochs and in-sync set, and the slave restarted with its ``brokerIdentity`` comes back
with its id and is in sync again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from bolide.cli.main import cli
from bolide.client.admin import Admin
from bolide.controller import ControllerConfig, ControllerServer
from bolide.controller.seed import read_seed, seed_peer
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol.bodies.controller import ReplicasInfo, SyncStateSet
from bolide.protocol.codes import RequestCode as C
from bolide.protocol.codes import ResponseCode as RC
from bolide.protocol.headers import controller as h
from bolide.remoting import RemotingClient
from bolide.testing.controller import (
    BrokerProcess,
    ControllerBroker,
    ControllerGroup,
    ControllerProcess,
    eventually,
    group_addrs,
    master_then_slave,
)
from conftest import wait_until

pytestmark = pytest.mark.timeout(60)

GROUP = "broker-a"


def _lone_config(group: ControllerGroup, **settings: str) -> ControllerConfig:
    """The lone controller that becomes peer n0 of ``group``: same store and address."""
    first = group.configs[0]
    return ControllerConfig.from_mapping({"controllerStorePath": str(first.store_dir),
                                          "controllerDLegerPeers": f"n0-{first.self_peer('').address}",
                                          "controllerDLegerSelfId": "n0", **settings})


def test_a_seeded_group_starts_with_the_lone_controllers_state(tmp_path: Path) -> None:
    asyncio.run(_in_process(tmp_path))


async def _in_process(tmp_path: Path) -> None:
    group = ControllerGroup(tmp_path / "ctrl")
    lone = await ControllerServer(_lone_config(group), host="127.0.0.1").start()
    lone_running = True
    one, two = ControllerBroker(lone.address), ControllerBroker(lone.address)
    try:
        await one.join()
        assert (await one.elect()).code == RC.SUCCESS
        await two.join()
        altered = await one.call(C.CONTROLLER_ALTER_SYNC_STATE_SET, h.AlterSyncStateSetRequestHeader(
            broker_name="b", master_broker_id=1, master_epoch=1), SyncStateSet({1, 2}, 1).encode())
        assert altered.code == RC.SUCCESS, altered.remark
        expected = lone.state.to_json()
        await lone.close()
        lone_running = False

        seed = read_seed(group.configs[0].store_dir / "n0")
        for config in group.configs[:2]:  # n2 is left out: the leader sends it the snapshot
            seed_peer(config, seed)
        await group.start()
        leader = await group.leader()
        await wait_until(lambda: all(s.state.to_json() == expected for s in group.running), timeout=5)
        b = leader.state.get("b")
        assert b is not None and (b.master_broker_id, b.master_epoch, b.sync_state_set) == (1, 1, {1, 2})

        for broker in (one, two):
            broker.controller, broker.beat_to = leader.address, group.addresses
            await broker.beat()
        again = await two.call(C.CONTROLLER_REGISTER_BROKER, h.RegisterBrokerToControllerRequestHeader(
            cluster_name="C", broker_name="b", broker_id=2, broker_address=two.addr))
        assert again.code == RC.SUCCESS, again.remark  # its old id, without a new application
        answer = again.read_header(h.RegisterBrokerToControllerResponseHeader)
        assert (answer.master_broker_id, answer.master_epoch, answer.sync_state_set_epoch) == (1, 1, 2)
        three = ControllerBroker(leader.address, beat_to=group.addresses)
        try:
            await three.join()
            assert three.broker_id == 3  # after the seeded ids
        finally:
            await three.close()
    finally:
        await one.close()
        await two.close()
        await group.stop()
        if lone_running:
            await lone.close()


def test_brokers_keep_ids_master_and_epoch_when_their_controller_becomes_a_group(tmp_path: Path) -> None:
    asyncio.run(_with_processes(tmp_path))


def _seed_with_command(tmp_path: Path, group: ControllerGroup, source: Path) -> list[str]:
    """``bolide controller seed`` for each peer of ``group`` (a controller.conf each); the outputs."""
    outputs = []
    for config in group.configs:
        conf = tmp_path / f"group-{config.self_id}.conf"
        conf.write_text(f"controllerStorePath={config.store_dir}\n"
                        f"controllerDLegerPeers={config.controller_dleger_peers}\n"
                        f"controllerDLegerSelfId={config.self_id}\n")
        result = CliRunner().invoke(cli, ["controller", "seed", "-c", str(conf), "--from", str(source)])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    return outputs


def _summary(info: ReplicasInfo) -> tuple[object, ...]:
    return (info.master_broker_id, info.master_address, info.master_epoch, info.sync_state_set_epoch,
            sorted((r.broker_id, r.broker_address) for r in info.in_sync_replicas))


async def _with_processes(tmp_path: Path) -> None:
    # the group's peers run in this process (short Raft timeouts); n0 is where the lone one ran
    group = ControllerGroup(tmp_path / "controller-store", heartbeat_grace_s=2.0,
                            scanNotActiveBrokerInterval="500", scanInactiveMasterInterval="500")
    lone = ControllerProcess(tmp_path, "n0", f"n0-{group.addresses[0]}")
    namesrv_server = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                       host="127.0.0.1", port=0)
    await namesrv_server.start()
    namesrv = f"127.0.0.1:{namesrv_server.port}"
    controller_addr = ";".join(group.addresses)
    a = BrokerProcess(tmp_path, "a", namesrv, controller_addr, syncControllerMetadataPeriod=500)
    b = BrokerProcess(tmp_path, "b", namesrv, controller_addr, syncControllerMetadataPeriod=500)
    client = RemotingClient()
    admin = Admin(namesrv)
    await admin.start()

    async def replicas(addr: str) -> ReplicasInfo:
        return (await admin.sync_state_data(addr, [GROUP])).replicas_info_table[GROUP]

    try:
        lone.start()
        id_b = await master_then_slave(client, namesrv, GROUP, a, b, context=lone.log())
        found: list[ReplicasInfo] = []

        async def in_sync(addr: str) -> bool:
            found[:] = [await replicas(addr)]
            return sorted(r.broker_id for r in found[0].in_sync_replicas) == [1, id_b]
        await eventually(lambda: in_sync(lone.address), 10, "the slave in sync under the lone controller")
        before = _summary(found[0])
        assert before[:3] == (1, a.addr, 1)
        lone.stop()

        outputs = _seed_with_command(tmp_path, group, tmp_path / "controller-store" / "n0")
        assert len({out.split("sha256 ")[1].split()[0] for out in outputs}) == 1
        await group.start()
        leader = await group.leader()
        follower = next(s for s in group.running if s is not leader)
        assert _summary(await replicas(follower.address)) == before  # through a follower, as mqadmin

        # past the group's heartbeat grace, with both brokers' heartbeats heard, no election
        def heard() -> bool:
            return all(leader.heartbeats.is_active("CtrlCluster", GROUP, i) for i in (1, id_b))
        await wait_until(lambda: heard() and leader._may_elect(), timeout=10)
        leader.scan_inactive_masters()
        assert _summary(await replicas(leader.address))[:3] == (1, a.addr, 1)

        # the slave restarts with its brokerIdentity: same id, in sync again under the same master
        b.stop()
        b.start()

        async def b_back() -> bool:
            return (await group_addrs(client, namesrv, GROUP)) == {0: a.addr, id_b: b.addr}
        await eventually(b_back, 15, f"{b.addr} back as slave {id_b}\n{b.log()}")
        await eventually(lambda: in_sync(leader.address), 10, "the restarted slave in sync")
        assert _summary(found[0])[:3] == (1, a.addr, 1)
        assert "registering failed" not in b.log()
    finally:
        await admin.close()
        await client.close()
        for process in (a, b, lone):
            process.stop()
        await group.stop()
        await namesrv_server.close()
