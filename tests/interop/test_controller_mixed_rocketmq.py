"""A mixed broker group in controller mode under Bolide's controller: a Bolide broker elected
master and a real Apache RocketMQ 5.3.3 broker as its slave. The RocketMQ broker replicates the
Bolide master's CommitLog with RocketMQ's AutoSwitch HA until the Bolide master reports it in
sync (ALTER_SYNC_STATE_SET); sends are then acknowledged once both hold them
(``allAckInSyncStateSet``). Then the Bolide master stops: the controller elects the RocketMQ
broker, which takes sends and serves every message the Bolide master had acknowledged. The other
way round next: the Bolide broker comes back on its store as the RocketMQ master's slave (the
AutoSwitch HA of a Bolide slave under a RocketMQ master), is reported in sync, and when the
RocketMQ broker is SIGKILLed the controller elects it again; it serves every message either
master acknowledged.

Needs java and the cached RocketMQ 5.3.3 jars (``make interop-deps``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_controller_rocketmq import (
    BROKER_NAME,
    CLUSTER,
    TIMEOUT,
    TOPIC,
    _send,
    _settings,
    new_master_serves,
    started_servers,
)

from bolide.broker import BrokerConfig, BrokerController
from bolide.client import Admin
from bolide.remoting import run
from bolide.store import StoreConfig
from bolide.testing import rocketmq as rmqmod
from bolide.testing.rocketmq import RocketMQ, RocketMQUnavailable
from conftest import unavailable, wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSION = "5.3.3"


def test_rocketmq_slave_of_a_bolide_master_takes_over(tmp_path: Path) -> None:
    try:
        rmqmod.classpath(VERSION)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    run(_scenario(tmp_path))


def _bolide_broker(root: Path, namesrv: str, controller: str) -> BrokerController:
    config = BrokerConfig.from_mapping({
        "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "namesrvAddr": namesrv,
        "listenPort": "0", "haListenPort": "0", "brokerIP1": "127.0.0.1",
        "enableControllerMode": "true", "controllerAddr": controller,
        "syncBrokerMetadataPeriod": "1000", "checkSyncStateSetPeriod": "1000",
        "brokerHeartbeatInterval": "500", "haMaxTimeSlaveNotCatchup": "5000",
        "defaultTopicQueueNums": "2", "allAckInSyncStateSet": "true",
    }).replace(bind_address="127.0.0.1", vip_channel_enabled=False)
    # the RocketMQ slave's geometry: its CommitLog files must match the master's
    store = StoreConfig(store_path_root_dir=str(root),
                        mapped_file_size_commit_log=rmqmod.COMMIT_LOG_SIZE)
    return BrokerController(config, store)


async def _scenario(tmp_path: Path) -> None:
    namesrv, controller = await started_servers(tmp_path)
    ns_addr = f"127.0.0.1:{namesrv.port}"
    master = _bolide_broker(tmp_path / "bolide", ns_addr, controller.address)
    slave = RocketMQ(VERSION, tmp_path / "rmq", namesrv_port=namesrv.port)
    started = False
    back: BrokerController | None = None
    try:
        await master.start()
        await wait_until(lambda: controller.state.get(BROKER_NAME) is not None
                         and controller.state.groups[BROKER_NAME].master_broker_id == 1, TIMEOUT)
        group = controller.state.groups[BROKER_NAME]
        await asyncio.to_thread(slave.start_broker, _settings(tmp_path / "rmq-store", controller.address))
        started = True
        # the RocketMQ broker registers as id 2, replicates and is reported in sync
        await wait_until(lambda: group.sync_state_set == {1, 2}, TIMEOUT)
        assert group.addresses[2] == slave.broker_addr and group.master_broker_id == 1
        before = await _send(ns_addr, "before", 20)
        assert set(before) == {BROKER_NAME}
        # acknowledged once both hold them: the RocketMQ broker's CommitLog has every byte
        head = (tmp_path / "bolide" / "commitlog" / f"{0:020d}").read_bytes()
        copy = (tmp_path / "rmq-store" / "commitlog" / f"{0:020d}").read_bytes()
        end = master.store.max_phy_offset
        assert copy[:end] == head[:end]

        await master.close()  # its controller connection drops: the RocketMQ broker is elected
        await wait_until(lambda: group.master_broker_id == 2, TIMEOUT)
        await new_master_serves(ns_addr, slave.broker_addr, 20)

        # the Bolide broker comes back as the RocketMQ master's slave and catches up
        back = _bolide_broker(tmp_path / "bolide", ns_addr, controller.address)
        await back.start()
        await wait_until(lambda: group.sync_state_set == {1, 2}, TIMEOUT)
        more = await _send(ns_addr, "more", 10)  # acknowledged once the Bolide slave has them
        assert set(more) == {BROKER_NAME}
        await asyncio.to_thread(slave.kill_broker)  # SIGKILL: the Bolide broker is elected
        started = False
        await wait_until(lambda: group.master_broker_id == 1 and group.master_epoch == 3, TIMEOUT)
        async with Admin(ns_addr) as admin:
            async with asyncio.timeout(TIMEOUT):  # the Bolide broker routed as master again
                while not any(bd.broker_addrs.get(0) == back.broker_addr
                              for bd in (await admin.topic_route(TOPIC)).broker_datas):
                    await asyncio.sleep(0.2)
            last = await _send(ns_addr, "last", 5)
            assert set(last) == {BROKER_NAME}
            # acknowledged when stored: in its queues once dispatched
            assert await asyncio.to_thread(back.store.wait_dispatched, TIMEOUT)
            bodies: list[str] = []
            for mq, _addr in await admin.queues(TOPIC):
                bodies += [m.body.decode() for m in await admin.read_messages(mq, 0, 200)]
        expected = [f"{tag}-{i}" for tag, n in (("before", 20), ("after", 10), ("more", 10), ("last", 5))
                    for i in range(n)]
        assert sorted(bodies) == sorted(expected)  # each acknowledged message once, none lost
        await back.close()
    finally:
        if started:
            await asyncio.to_thread(slave.kill_broker)
        await master.close()
        if back is not None:
            await back.close()
        await controller.close()
        await namesrv.close()
