"""The real mqadmin 5.3.3's controller commands against Bolide's controller:
getControllerMetaData, getSyncStateSet, getControllerConfig, updateControllerConfig,
electMaster and cleanBrokerMetadata, in one mqadmin JVM while the controller runs on this
process's event loop (the brokers are played by :class:`bolide.testing.controller.ControllerBroker`);
getControllerMetaData of a follower in a group of three controllers names the leader and the peers.

Needs java and the cached RocketMQ 5.3.3 jars (``make interop-deps``): without them the module
is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.controller import ControllerConfig, ControllerServer
from bolide.remoting import run
from bolide.testing import rocketmq as rmqmod
from bolide.testing.controller import ControllerBroker, ControllerGroup
from bolide.testing.rocketmq import RocketMQ, RocketMQUnavailable, free_port
from conftest import unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSION = "5.3.3"


def test_mqadmin_controller_commands(tmp_path: Path) -> None:
    try:
        rmqmod.classpath(VERSION)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    run(_commands(tmp_path))


async def _commands(tmp_path: Path) -> None:
    config = ControllerConfig.from_mapping({"controllerStorePath": str(tmp_path / "ctrl"),
                                            "controllerDLegerGroup": "g1",
                                            "controllerDLegerPeers": "n0-127.0.0.1:0"})
    # mqadmin needs a NameServer address; these commands never use it
    rmq = RocketMQ(VERSION, tmp_path / "rmq", namesrv_port=free_port())
    group = ControllerGroup(tmp_path / "group", controllerDLegerGroup="g3")
    await group.start()
    try:
        leader = await group.leader()
        follower = next(s for s in group.running if s is not leader).address
        await _one_controller(config, rmq, [["getControllerMetaData", "-a", follower]],
                              leader.address, group.addresses)
    finally:
        await group.stop()


async def _one_controller(config: ControllerConfig, rmq: RocketMQ, group_commands: list[list[str]],
                          group_leader: str, group_peers: list[str]) -> None:
    async with ControllerServer(config, host="127.0.0.1") as server:
        addr = server.address
        one, two = ControllerBroker(addr, "b"), ControllerBroker(addr, "b")
        try:
            for broker in (one, two):
                await broker.join()
                await broker.beat(timeout_ms=300_000)
            await one.elect()
            one_addr, two_addr = one.addr, two.addr
            outputs = await asyncio.to_thread(rmq.mqadmin_batch, [
                ["getControllerMetaData", "-a", addr],
                ["getSyncStateSet", "-a", addr, "-b", "b"],
                ["getControllerConfig", "-a", addr],
                ["updateControllerConfig", "-a", addr, "-k", "enableElectUncleanMaster", "-v", "true"],
                ["electMaster", "-a", addr, "-c", "C", "-bn", "b", "-b", "2"],
                ["getSyncStateSet", "-a", addr, "-b", "b"],
                ["cleanBrokerMetadata", "-a", addr, "-bn", "b", "-c", "C", "-b", "1"],
                ["cleanBrokerMetadata", "-a", addr, "-bn", "b", "-l"],
                *group_commands,
            ])
        finally:
            for broker in (one, two):
                await broker.close()
    meta, sync1, conf, update, elect, sync2, clean_alive, clean, group_meta = outputs
    assert "#ControllerGroup\tg3" in group_meta and f"#ControllerLeaderAddress\t{group_leader}" in group_meta
    assert [line for line in group_meta.splitlines() if line.startswith("#Peer:")] == \
        [f"#Peer:\tn{i}:{a}" for i, a in enumerate(group_peers)], group_meta
    assert "#ControllerGroup\tg1" in meta and f"#ControllerLeaderAddress\t{addr}" in meta, meta
    assert f"#Peer:\tn0:{addr}" in meta, meta
    for line in ("#brokerName\tb", "#MasterBrokerId\t1", f"#MasterAddr\t{one_addr}", "#MasterEpoch\t1",
                 "#SyncStateSetEpoch\t1", "#SyncStateSetNums\t1",
                 f"InSyncReplica:\tReplicaIdentity{{brokerName='b', brokerId=1, brokerAddress='{one_addr}', "
                 "alive=true}",
                 f"NotInSyncReplica:\tReplicaIdentity{{brokerName='b', brokerId=2, "
                 f"brokerAddress='{two_addr}', alive=true}}"):
        assert line in sync1, sync1
    assert f"============{addr}============" in conf, conf
    assert any(line.startswith("enableElectUncleanMaster") and line.endswith("=  false")
               for line in conf.splitlines()), conf
    assert "update controller config success!" in update, update
    assert "enableElectUncleanMaster : true" in update, update
    assert f"#BrokerMasterAddr\t{two_addr}" in elect and "#MasterEpoch\t2" in elect, elect
    assert "#MasterBrokerId\t2" in sync2 and "#MasterEpoch\t2" in sync2, sync2
    assert "success" not in clean_alive, clean_alive  # broker 1 is alive: refused (mqadmin prints nothing)
    assert "clear broker b metadata from controller success!" in clean, clean
    assert server.state.get("b") is None
