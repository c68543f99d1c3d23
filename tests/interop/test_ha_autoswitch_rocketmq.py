"""AutoSwitch HA (controller mode) with real Apache RocketMQ 5.3.3: a Bolide AutoSwitch slave
replicates a RocketMQ broker that RocketMQ's own controller (embedded in its NameServer,
``enableControllerInNamesrv``) elected master.

The Bolide side is pointed at the master's HA port directly (the broker-side registration
with a controller is not part of this test): it handshakes, receives the master's epoch
entries, takes the CommitLog from offset 0 with the confirm offset of each transfer header,
and ends with the master's CommitLog bytes and a byte-identical ``epochFileCheckpoint``.
Then the Bolide replica diverges (master of a later epoch on its own, taking messages of its
own while the RocketMQ master takes more) and comes back as slave: from the master's
handshake it finds where their epochs agree, cuts its own messages and copies the master's.

Needs java and the cached RocketMQ jars (``make interop-deps``): without them the module is
skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from client_roundtrip import unavailable

from bolide.broker.ha.autoswitch import AutoSwitchHA, AutoSwitchHAConfig
from bolide.client import Admin, Message, MessageQueue, MQClientError, Producer, SendStatus
from bolide.client.errors import BrokerSystemError
from bolide.store import BrokerRole, MessageStore, StoreConfig
from bolide.store.epoch_file import EpochFile
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable, classpath, free_port
from conftest import assert_consistent, until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

VERSION = "5.3.3"
SEGMENT = 256 * 1024
CONSUME_QUEUE = 300 * 20
TOPIC = "AutoSwitchInterop"
GROUP = "broker-as"
COUNT = 200  # ~1.6 KiB records: the master spans two segments


async def max_offset(admin: Admin, addr: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        try:
            return int((await admin.broker_runtime_info(addr))["commitLogMaxOffset"])
        except BrokerSystemError as exc:
            if "NoSuchElementException" not in str(exc) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def has_route(admin: Admin) -> bool:
    try:
        await admin.topic_route(TOPIC)
    except MQClientError:
        return False
    return True


@pytest.fixture
def rocketmq(tmp_path: Path):  # type: ignore[no-untyped-def]
    try:
        classpath(VERSION)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    rmq = RocketMQ(VERSION, tmp_path / "rmq")
    port = free_port()
    rmq.controller_addr = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    rmq.start_namesrv(extra={
        "enableControllerInNamesrv": "true", "controllerDLegerGroup": "group1",
        "controllerDLegerPeers": f"n0-127.0.0.1:{port}", "controllerDLegerSelfId": "n0",
        "controllerStorePath": str(tmp_path / "controller-store"), "mappedFileSize": str(4 << 20),
        "scanNotActiveBrokerInterval": "1000", "scanInactiveMasterInterval": "1000"})
    try:
        yield rmq
    finally:
        rmq.stop()


def test_bolide_slave_replicates_a_rocketmq_controller_mode_master(rocketmq: RocketMQ,
                                                                   tmp_path: Path) -> None:
    rmq = rocketmq
    master_root = tmp_path / "master"
    cfg = StoreConfig(store_path_root_dir=str(tmp_path / "slave"),
                      mapped_file_size_commit_log=SEGMENT,
                      mapped_file_size_consume_queue=CONSUME_QUEUE, broker_role=BrokerRole.SLAVE,
                      enable_controller_mode=True)
    marks: dict[str, int] = {}

    async def test() -> None:
        await asyncio.to_thread(rmq.start_broker, BrokerSettings(
            master_root, mapped_file_size_commit_log=SEGMENT,
            mapped_file_size_consume_queue=CONSUME_QUEUE, broker_name=GROUP, extra={
                "enableControllerMode": "true",
                "controllerAddr": rmq.controller_addr,  # type: ignore[attr-defined]
                "brokerIP2": "127.0.0.1", "haSendHeartbeatInterval": "500",
                "controllerHeartBeatTimeoutMills": "3000", "syncBrokerMetadataPeriod": "1000",
                "brokerHeartbeatInterval": "500"}))
        store = MessageStore(cfg).open()
        ha = AutoSwitchHA(store, AutoSwitchHAConfig(
            ha_host="127.0.0.1", local_broker_id=7, ha_send_heartbeat_interval_ms=500,
            reconnect_interval_ms=300))
        try:
            async with Admin(rmq.namesrv_addr) as admin, \
                    Producer(rmq.namesrv_addr, "as-interop-pg") as producer:
                async def master_listed() -> bool:
                    try:
                        info = await admin.cluster_info()
                    except MQClientError:
                        return False
                    data = info.broker_addr_table.get(GROUP)
                    return data is not None and data.broker_addrs.get(0) == rmq.broker_addr
                await until(master_listed, "the controller to elect the RocketMQ broker master")
                await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2,
                                         broker_addr=rmq.broker_addr)
                await until(lambda: has_route(admin), f"the NameServer to route {TOPIC}")
                for i in range(COUNT // 2):
                    r = await producer.send(Message(TOPIC, f"a{i}:".encode() + bytes(1500),
                                                    keys=f"a{i}"),
                                            queue=MessageQueue(TOPIC, GROUP, i % 2))
                    assert r.status is SendStatus.SEND_OK, r
                await ha.start()
                await ha.change_to_slave(f"127.0.0.1:{rmq.broker_port + 1}", 1, 1, 7)
                for i in range(COUNT // 2, COUNT):
                    r = await producer.send(Message(TOPIC, f"a{i}:".encode() + bytes(1500),
                                                    keys=f"a{i}"),
                                            queue=MessageQueue(TOPIC, GROUP, i % 2))
                    assert r.status is SendStatus.SEND_OK, r

                async def caught_up() -> bool:
                    marks["end"] = end = await max_offset(admin, rmq.broker_addr)
                    return store.max_phy_offset == end
                await until(caught_up, "the Bolide slave to reach the master's max offset")
                assert marks["end"] > SEGMENT
                # the master's sync state set is itself alone: it confirms everything
                await until(lambda: store.confirm_offset == marks["end"], "the confirm offset")
                store.wait_dispatched(10)
                assert store.get_max_offset_in_queue(TOPIC, 0) + \
                    store.get_max_offset_in_queue(TOPIC, 1) == COUNT
                found = store.query_message(TOPIC, "a150")
                assert [m.body[:5] for m in found] == [b"a150:"]
                assert ha.slave is not None and ha.slave.connects == 1
                beats = ha.slave.heartbeats
                await until(lambda: ha.slave is not None and ha.slave.heartbeats >= beats + 2,
                            "two heartbeats of the idle master")
                assert ha.slave.connects == 1, "the connection dropped"
                theirs = EpochFile.in_store(master_root).entries()
                assert theirs and ha.epoch_entries() == theirs
                assert (tmp_path / "slave" / "epochFileCheckpoint").read_bytes() == \
                    (master_root / "epochFileCheckpoint").read_bytes()
                # the Bolide replica diverges: master of a later epoch on its own for a while
                split = store.max_phy_offset
                await ha.change_to_master(theirs[-1].epoch + 1, {7}, 1)
                for i in range(20):
                    assert store.put_message(Message(TOPIC, b"mine%d:" % i + bytes(900)), 0).ok
                for i in range(COUNT, COUNT + 30):
                    r = await producer.send(Message(TOPIC, f"a{i}:".encode() + bytes(1500),
                                                    keys=f"a{i}"),
                                            queue=MessageQueue(TOPIC, GROUP, i % 2))
                    assert r.status is SendStatus.SEND_OK, r
                # back as slave: its epochs and the master's agree up to `split`, cut there
                await ha.change_to_slave(f"127.0.0.1:{rmq.broker_port + 1}",
                                         theirs[-1].epoch + 1, 1, 7)
                await until(caught_up, "the Bolide slave to cut its tail and catch up")
                assert ha.slave is not None and ha.slave.truncations == 1
                assert ha.epoch_entries() == theirs
                assert store.query_message(TOPIC, "mine3") == []
                store.wait_dispatched(10)
                await until(lambda: store.get_max_offset_in_queue(TOPIC, 0)
                            + store.get_max_offset_in_queue(TOPIC, 1) == COUNT + 30,
                            "the master's messages after the cut")
                assert split < marks["end"]
        finally:
            await ha.close()
            store.close()
            await asyncio.to_thread(rmq.kill_broker)

    asyncio.run(asyncio.wait_for(test(), 150))
    end = marks["end"]
    for seg in range(0, end, SEGMENT):
        n = min(SEGMENT, end - seg)
        theirs = (master_root / "commitlog" / f"{seg:020d}").read_bytes()[:n]
        mine = (tmp_path / "slave" / "commitlog" / f"{seg:020d}").read_bytes()[:n]
        assert mine == theirs, f"CommitLog segment {seg} differs"
    assert_consistent(cfg)
