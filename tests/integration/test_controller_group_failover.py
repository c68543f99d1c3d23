"""Automatic failover under a group of three controllers, every server a real process: three
``bolide controller`` processes (one Raft group), a NameServer and two ``bolide broker``
processes in controller mode whose ``controllerAddr`` lists the three.

The controller leader is SIGKILLed: the other two elect a leader. Then the master broker is
SIGKILLed: the new controller leader elects the slave, which takes sends at the next offset of
each queue. The killed controller restarts from its files and follows; the second leader is
SIGKILLed too, and the two left (the restarted one among them) still know the new master and
its epoch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bolide.broker.replicas.controller_client import ControllerCallError, ControllerClient
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import controller as h
from bolide.remoting import RemotingClient, RemotingError
from bolide.testing import controller as controller_testing
from bolide.testing.controller import (
    BrokerProcess,
    ControllerProcess,
    eventually,
    free_port,
    master_then_slave,
)

GROUP = "broker-a"
TOPIC = "GroupFailover"


async def group_addrs(client: RemotingClient, namesrv: str) -> dict[int, str]:
    return await controller_testing.group_addrs(client, namesrv, GROUP)


async def send(client: RemotingClient, addr: str, i: int) -> RemotingCommand:
    return await controller_testing.send_to(client, addr, TOPIC, i)


async def leader_of(client: RemotingClient, controllers: list[ControllerProcess]) -> ControllerProcess | None:
    """The controller that answers as leader, if one does."""
    for controller in controllers:
        try:
            r = await client.invoke(controller.address, RemotingCommand.request(
                RequestCode.CONTROLLER_GET_METADATA_INFO), 1000)
        except RemotingError:
            continue
        if r.read_header(h.GetMetaDataResponseHeader).is_leader:
            return controller
    return None


async def a_leader(client: RemotingClient, among: list[ControllerProcess], what: str) -> ControllerProcess:
    """The one of ``among`` that answers as leader, once one does."""
    found: list[ControllerProcess] = []

    async def elected() -> bool:
        leader = await leader_of(client, among)
        found[:] = [leader] if leader is not None else []
        return bool(found)
    await eventually(elected, 20, what)
    return found[0]


def test_failover_under_a_group_of_three_controllers(tmp_path: Path) -> None:
    asyncio.run(_scenario(tmp_path))


async def _scenario(tmp_path: Path) -> None:
    peers = ";".join(f"n{i}-127.0.0.1:{free_port()}" for i in range(3))
    controllers = [ControllerProcess(tmp_path, f"n{i}", peers, scanNotActiveBrokerInterval=1000,
                                     scanInactiveMasterInterval=1000) for i in range(3)]
    namesrv_server = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                       host="127.0.0.1", port=0)
    await namesrv_server.start()
    namesrv = f"127.0.0.1:{namesrv_server.port}"
    controller_addr = ";".join(c.address for c in controllers)
    a = BrokerProcess(tmp_path, "a", namesrv, controller_addr, syncControllerMetadataPeriod=1000)
    b = BrokerProcess(tmp_path, "b", namesrv, controller_addr, syncControllerMetadataPeriod=1000)
    client = RemotingClient()
    try:
        for controller in controllers:
            controller.start()
        first_leader = await a_leader(client, controllers, "a controller leader")
        logs = "\n".join(c.log() for c in controllers)
        id_b = await master_then_slave(client, namesrv, GROUP, a, b, context=logs)
        for i in range(20):
            assert (await send(client, a.addr, i)).code == ResponseCode.SUCCESS
        replicas = ControllerClient(client, "CtrlCluster", GROUP)

        async def in_sync() -> bool:
            leader = await leader_of(client, controllers)
            return leader is not None and id_b in (await replicas.replica_info(leader.address)).sync_state_set
        await eventually(in_sync, 30, "the controllers' in-sync set to hold the slave")

        # the controller leader dies: the other two elect one of them
        first_leader.kill()
        left = [c for c in controllers if c is not first_leader]
        second = await a_leader(client, left, "another controller leader")

        # the master broker dies: the new controller leader elects the slave
        a.kill()

        async def b_master() -> bool:
            return (await group_addrs(client, namesrv)).get(0) == b.addr
        await eventually(b_master, 40, f"{b.addr} elected master\n{b.log()}\n{second.log()}")
        taken: list[RemotingCommand] = []

        async def b_takes_sends() -> bool:
            taken.append(await send(client, b.addr, 100))
            return taken[-1].code == ResponseCode.SUCCESS
        await eventually(b_takes_sends, 10, "the new master to take sends")
        assert taken[-1].ext_fields["queueOffset"] == "5", taken[-1].ext_fields  # after queue 0's 0-4
        info = await replicas.replica_info(second.address)
        assert info.master_broker_id == id_b and info.master_epoch == 2

        # the first leader restarts from its files and follows; then the second leader dies
        first_leader.start()

        async def follows() -> bool:
            r = await client.invoke(first_leader.address, RemotingCommand.request(
                RequestCode.CONTROLLER_GET_METADATA_INFO), 1000)
            return r.read_header(h.GetMetaDataResponseHeader).controller_leader_id == second.peer_id
        await eventually(follows, 20, f"{first_leader.peer_id} back as a follower\n{first_leader.log()}")
        second.kill()
        last = [c for c in controllers if c is not second]
        third = await a_leader(client, last, "a leader of the last two")

        async def knows_the_new_master() -> bool:
            try:
                return (await replicas.replica_info(third.address)).master_broker_id == id_b
            except ControllerCallError:  # not the leader any more, or not yet ready
                return False
        await eventually(knows_the_new_master, 20, f"{third.peer_id} knowing the new master")
        assert (await replicas.replica_info(third.address)).master_epoch == 2
    finally:
        await client.close()
        for process in (a, b, *controllers):
            process.stop()
        await namesrv_server.close()
