"""Automatic failover of Bolide brokers in RocketMQ 5 controller mode, with RocketMQ 5.3.3's own
controller, embedded in its NameServer (``enableControllerInNamesrv``), which serves the
controller's codes on its DLedger peer port (``controllerDLegerPeers``), the brokers'
``controllerAddr``; and with Bolide's controller (:mod:`bolide.controller`).

Two Bolide broker processes of one group register with the controller: one becomes master (the
route lists it as broker id 0) and takes sends, the other is a slave that refuses them and
replicates. SIGKILL of the master: the controller elects the other, which becomes master and
takes sends; the killed broker restarts from its store (its ``brokerIdentity`` keeps its id)
and comes back as slave of the new one. ``mqadmin getBrokerEpoch`` reads both brokers' epochs.

With the AutoSwitch HA the master reports its in-sync replicas (ALTER_SYNC_STATE_SET) and the
controller elects only among them (``enableElectUncleanMaster=false``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from client_roundtrip import unavailable

from bolide.broker.replicas.controller_client import ControllerClient
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies.controller import EpochEntryCache
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.remoting import RemotingClient
from bolide.store.broker_identity import read_identity
from bolide.testing import controller as controller_testing
from bolide.testing.controller import BrokerProcess, eventually, free_port, master_then_slave
from bolide.testing.rocketmq import RocketMQ, RocketMQUnavailable, classpath

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

VERSION = "5.3.3"
GROUP = "broker-a"
TOPIC = "CtrlFailover"


async def group_addrs(client: RemotingClient, namesrv: str) -> dict[int, str]:
    return await controller_testing.group_addrs(client, namesrv, GROUP)


async def send(client: RemotingClient, addr: str, i: int) -> RemotingCommand:
    return await controller_testing.send_to(client, addr, TOPIC, i)


async def epoch_cache(client: RemotingClient, addr: str) -> EpochEntryCache:
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return EpochEntryCache.decode(r.body_bytes())


@pytest.fixture
def rocketmq(tmp_path: Path):  # type: ignore[no-untyped-def]
    try:
        classpath(VERSION)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    rmq = RocketMQ(VERSION, tmp_path / "rmq")
    rmq.controller_port = free_port()  # type: ignore[attr-defined]
    rmq.start_namesrv(extra={
        "enableControllerInNamesrv": "true", "controllerDLegerGroup": "group1",
        "controllerDLegerPeers": f"n0-127.0.0.1:{rmq.controller_port}", "controllerDLegerSelfId": "n0",
        "controllerStorePath": str(tmp_path / "controller-store"), "mappedFileSize": str(4 << 20),
        "enableElectUncleanMaster": "false", "scanNotActiveBrokerInterval": "1000",
        "scanInactiveMasterInterval": "1000", "notifyBrokerRoleChanged": "true"})
    try:
        yield rmq
    finally:
        rmq.stop()


def test_failover_with_rocketmq_controller(rocketmq: RocketMQ, tmp_path: Path) -> None:
    controller = f"127.0.0.1:{rocketmq.controller_port}"  # type: ignore[attr-defined]

    def get_broker_epoch() -> str:
        return rocketmq.mqadmin_batch([["getBrokerEpoch", "-b", GROUP]])[0]
    asyncio.run(failover(tmp_path, rocketmq.namesrv_addr, controller, get_broker_epoch))


def test_failover_with_bolide_controller(tmp_path: Path) -> None:
    """The same with Bolide's controller (bolide.controller) and NameServer, in process."""
    from bolide.controller import config as config_mod
    from bolide.controller import server
    from bolide.namesrv.config import NamesrvConfig
    from bolide.namesrv.controller import NamesrvController

    async def main() -> None:
        config = config_mod.ControllerConfig(
            bind_address="127.0.0.1", controller_store_path=str(tmp_path / "controller-store"),
            config_store_path=str(tmp_path / "controller.properties"),
            enable_elect_unclean_master=False, scan_not_active_broker_interval_ms=1000,
            scan_inactive_master_interval_ms=1000)
        controller = server.ControllerServer(config, host="127.0.0.1", port=0)
        await controller.start()
        namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                    host="127.0.0.1", port=0)
        await namesrv.start()
        try:
            await failover(tmp_path, f"127.0.0.1:{namesrv.port}", controller.address, None)
        finally:
            await namesrv.close()
            await controller.close()
    asyncio.run(main())


async def failover(tmp_path: Path, namesrv: str, controller: str,
                   get_broker_epoch: Callable[[], str] | None) -> None:
    """Two brokers of a group: master, slave, master killed, the slave elected, the old
    master back as slave; ``get_broker_epoch`` runs mqadmin getBrokerEpoch at the end."""
    a = BrokerProcess(tmp_path, "a", namesrv, controller)
    b = BrokerProcess(tmp_path, "b", namesrv, controller)

    async def scenario() -> None:
        client = RemotingClient()
        try:
            id_b = await master_then_slave(client, namesrv, GROUP, a, b)
            assert read_identity(tmp_path / "a" / "brokerIdentity") is not None
            for i in range(20):
                assert (await send(client, a.addr, i)).code == ResponseCode.SUCCESS
            refused = await send(client, b.addr, 99)
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused.remark
            master_offset = (await epoch_cache(client, a.addr)).max_offset

            async def replicated() -> bool:
                return (await epoch_cache(client, b.addr)).max_offset == master_offset
            await eventually(replicated, 20, "the slave to replicate the master's CommitLog")
            replicas = ControllerClient(client, "CtrlCluster", GROUP)

            async def in_sync() -> bool:  # the master reports the caught-up slave as in sync
                info = await replicas.replica_info(controller)
                return id_b in info.sync_state_set
            await eventually(in_sync, 20, "the controller's in-sync set to hold the slave")
            first = await epoch_cache(client, a.addr)
            assert first.epoch_list and first.epoch_list[-1].epoch >= 1

            a.kill()

            async def b_master() -> bool:
                return (await group_addrs(client, namesrv)).get(0) == b.addr
            await eventually(b_master, 40, f"{b.addr} elected master\n{b.log()}")

            taken: list[RemotingCommand] = []

            async def b_takes_sends() -> bool:
                taken.append(await send(client, b.addr, 100))
                return taken[-1].code == ResponseCode.SUCCESS
            await eventually(b_takes_sends, 10, "the new master to take sends")
            # queue 0 had offsets 0-4 on the old master: the new one goes on from there
            assert taken[-1].ext_fields["queueOffset"] == "5", taken[-1].ext_fields
            assert (await epoch_cache(client, b.addr)).epoch_list[-1].epoch > first.epoch_list[-1].epoch

            a.start()  # from its store: the same broker id, now a slave
            id_a = read_identity(tmp_path / "a" / "brokerIdentity")
            assert id_a is not None

            async def a_slave() -> bool:
                addrs = await group_addrs(client, namesrv)
                return addrs.get(0) == b.addr and addrs.get(id_a.broker_id) == a.addr
            await eventually(a_slave, 40, f"{a.addr} back as slave\n{a.log()}")
            assert (await send(client, a.addr, 101)).code == ResponseCode.SERVICE_NOT_AVAILABLE
            new_master_offset = (await epoch_cache(client, b.addr)).max_offset

            async def caught_up() -> bool:
                return (await epoch_cache(client, a.addr)).max_offset == new_master_offset
            await eventually(caught_up, 20, "the old master to replicate the new master")
            if get_broker_epoch is not None:
                out = await asyncio.to_thread(get_broker_epoch)
                assert f"#brokerAddr\t{a.addr}" in out and f"#brokerAddr\t{b.addr}" in out, out
                assert "#Epoch: EpochEntry" in out, out
        finally:
            await client.close()

    try:
        await scenario()
    finally:
        a.stop()
        b.stop()
