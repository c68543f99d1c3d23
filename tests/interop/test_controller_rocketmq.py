"""Real Apache RocketMQ 5.3.3 brokers in controller mode, failing over under a group of three
Bolide controllers (Raft): two brokers of one group (``enableControllerMode=true``,
``controllerAddr`` listing the three controllers) register with a Bolide NameServer, find the
controller leader (GET_METADATA_INFO), apply for their ids and register with it, and it elects
the first one master; the second one replicates from it (AutoSwitch HA) until the master reports
it in sync, and sends are acknowledged once both hold them (``allAckInSyncStateSet``). The
controller leader then stops: the brokers find the new one. Then the master is SIGKILLed: the
new controller leader sees its connection drop, elects the other broker, tells it
(NOTIFY_BROKER_ROLE_CHANGED), and that broker takes sends and serves the messages the old
master had. Last the old master restarts on its store: it keeps its id, becomes the new
master's slave and is reported in sync again.

Needs java and the cached RocketMQ 5.3.3 jars (``make interop-deps``): without them the
module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client import Admin, Message, Producer, SendStatus
from bolide.controller import ControllerConfig, ControllerServer
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.remoting import run
from bolide.testing import rocketmq as rmqmod
from bolide.testing.controller import ControllerGroup
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable
from conftest import unavailable, wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSION = "5.3.3"
BROKER_NAME = "broker-a"
CLUSTER = "CtrlCluster"
TOPIC = "CtrlFailover"
TIMEOUT = 60.0


@pytest.fixture
def classpath() -> None:
    try:
        rmqmod.classpath(VERSION)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")


def _settings(store: Path, controller_addr: str) -> BrokerSettings:
    return BrokerSettings(store, cluster_name=CLUSTER, broker_name=BROKER_NAME, extra={
        "enableControllerMode": "true", "controllerAddr": controller_addr,
        # the brokers' controller-mode timers, shortened from 5-10 s for the test
        "syncBrokerMetadataPeriod": "1000", "checkSyncStateSetPeriod": "1000",
        "syncControllerMetadataPeriod": "2000", "controllerHeartBeatTimeoutMills": "4000",
        "brokerHeartbeatInterval": "500", "haMaxTimeSlaveNotCatchup": "5000",
        "defaultTopicQueueNums": "2",
        # a send is acknowledged once every in-sync replica has it: nothing acknowledged is
        # lost when the master dies
        "allAckInSyncStateSet": "true",
    })


async def _send(namesrv: str, tag: str, count: int) -> list[str]:
    """Send ``count`` messages; the broker addresses that stored them."""
    addrs = []
    async with Producer(namesrv, f"pg_{tag}") as producer:
        for i in range(count):
            result = await producer.send(Message(TOPIC, f"{tag}-{i}".encode()))
            assert result.status == SendStatus.SEND_OK
            addrs.append(result.queue.broker_name)
    return addrs


async def new_master_serves(ns_addr: str, new_master: str, before: int) -> None:
    """The new master is routed as broker id 0, takes sends and holds the ``before`` messages
    the old master acknowledged, and the new ones."""
    async with Admin(ns_addr) as admin:
        async def routed() -> bool:
            route = await admin.topic_route(TOPIC)
            return any(bd.broker_addrs.get(0) == new_master for bd in route.broker_datas)
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while not await routed():
            assert asyncio.get_running_loop().time() < deadline, "the new master never routed"
            await asyncio.sleep(0.2)
        after = await _send(ns_addr, "after", 10)
        assert set(after) == {BROKER_NAME}
        bodies = set()
        for mq, _addr in await admin.queues(TOPIC):
            bodies |= {m.body.decode() for m in await admin.read_messages(mq, 0, 100)}
        assert bodies == {f"before-{i}" for i in range(before)} | {f"after-{i}" for i in range(10)}


def test_rocketmq_brokers_fail_over_under_bolide_controller(tmp_path: Path, classpath: None) -> None:
    run(_scenario(tmp_path))


async def started_servers(tmp_path: Path) -> tuple[NamesrvController, ControllerServer]:
    """A Bolide NameServer and controller on free loopback ports, started (close both after)."""
    namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                host="127.0.0.1", port=0)
    controller = ControllerServer(ControllerConfig.from_mapping({
        "controllerDLegerPeers": "n0-127.0.0.1:0", "controllerStorePath": str(tmp_path / "ctrl"),
        "scanNotActiveBrokerInterval": "500", "scanInactiveMasterInterval": "1000"}), host="127.0.0.1")
    await namesrv.start()
    await controller.start()
    return namesrv, controller


async def _scenario(tmp_path: Path) -> None:
    namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                host="127.0.0.1", port=0)
    controllers = ControllerGroup(tmp_path / "ctrl", heartbeat_grace_s=5, scanNotActiveBrokerInterval="500",
                                  scanInactiveMasterInterval="1000")
    await namesrv.start()
    await controllers.start()
    controller_addr = ";".join(controllers.addresses)
    ns_addr = f"127.0.0.1:{namesrv.port}"
    first = RocketMQ(VERSION, tmp_path / "rmq-1", namesrv_port=namesrv.port)
    second = RocketMQ(VERSION, tmp_path / "rmq-2", namesrv_port=namesrv.port)
    brokers = {}
    try:
        leader = await controllers.leader()
        await asyncio.to_thread(first.start_broker, _settings(tmp_path / "store-1", controller_addr))
        await wait_until(lambda: leader.state.get(BROKER_NAME) is not None
                         and leader.state.groups[BROKER_NAME].master_broker_id is not None, TIMEOUT)
        group = leader.state.groups[BROKER_NAME]
        assert (group.master_broker_id, group.addresses[1], group.master_epoch) == (1, first.broker_addr, 1)
        brokers[1] = first
        await asyncio.to_thread(second.start_broker, _settings(tmp_path / "store-2", controller_addr))
        brokers[2] = second
        # the second broker joins as slave and catches up: the master reports it in sync
        await wait_until(lambda: group.sync_state_set == {1, 2}, TIMEOUT)
        assert group.addresses[2] == second.broker_addr and group.master_broker_id == 1
        before = await _send(ns_addr, "before", 20)
        assert set(before) == {BROKER_NAME}

        # the controller leader stops: another peer leads, with the same state
        await controllers.stop(leader.config.self_id)
        leader = await controllers.leader()
        group = leader.state.groups[BROKER_NAME]
        assert (group.master_broker_id, group.sync_state_set) == (1, {1, 2})

        # SIGKILL the master: its connection to the new leader drops and the slave is elected
        await asyncio.to_thread(first.kill_broker)
        await wait_until(lambda: leader.state.groups[BROKER_NAME].master_broker_id == 2, TIMEOUT)
        group = leader.state.groups[BROKER_NAME]
        assert group.master_epoch == 2 and group.sync_state_set == {2}
        await new_master_serves(ns_addr, second.broker_addr, 20)

        # the old master comes back on its store: same id, now a slave that catches up
        await asyncio.to_thread(first.start_broker, _settings(tmp_path / "store-1", controller_addr))
        await wait_until(lambda: leader.state.groups[BROKER_NAME].sync_state_set == {1, 2}, TIMEOUT)
        group = leader.state.groups[BROKER_NAME]
        assert (group.master_broker_id, group.master_epoch, sorted(group.addresses)) == (2, 2, [1, 2])
    finally:
        for rmq in brokers.values():  # killed: a clean 5.x shutdown takes seconds, the stores are temporary
            await asyncio.to_thread(rmq.kill_broker)
        await controllers.stop()
        await namesrv.close()
