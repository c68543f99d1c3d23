"""A slave's metadata sync and the replication status, in-process: a NameServer, a master and a
slave BrokerController on free ports. The slave copies its master's topics, consumer offsets,
delay offsets, subscription groups (with their read bans) and timer metrics (memory and
config/*.json); GET_BROKER_HA_STATUS (907) and ``bolide admin`` haStatus / clusterList /
brokerStatus show roles, offsets and lag."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import ha_cluster
from click.testing import CliRunner
from ha_cluster import Cluster, wait_until

from bolide.broker import BrokerController
from bolide.broker.ha.status import ByteRate
from bolide.broker.request_modes import MessageRequestModes
from bolide.cli.main import cli
from bolide.client.admin import Admin
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies.broker import SubscriptionGroupConfig, TopicConfig
from bolide.protocol.bodies.ha import HARuntimeInfo
from bolide.protocol.bodies.pop import SetMessageRequestModeRequestBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import CreateTopicRequestHeader, SendMessageRequestHeader
from bolide.protocol.headers.admin import UpdateGroupForbiddenRequestHeader
from bolide.protocol.headers.consumer import UpdateConsumerOffsetRequestHeader
from bolide.store import topic_config as stored
from bolide.store.config_files import ConsumerOffsetManager, DelayOffsetManager
from bolide.store.timer_metrics import TimerMetrics

SYNC_MS = 300  # the slaves' bolideSlaveSyncInterval here


def run(root: Path, test: Callable[[Cluster], Awaitable[None]], with_slave: bool = True) -> None:
    ha_cluster.run(root, test, with_slave=with_slave, options={"slave_sync_interval_ms": SYNC_MS})


async def invoke(c: Cluster, b: BrokerController, code: int, header: Any = None,
                 body: bytes = b"") -> RemotingCommand:
    r = await c.client.invoke(b.broker_addr, RemotingCommand.request(code, header, body))
    assert r.code == ResponseCode.SUCCESS, r
    return r


async def create_topic(c: Cluster, b: BrokerController, topic: str, queues: int = 4) -> None:
    await invoke(c, b, RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=queues, write_queue_nums=queues,
        perm=6))


async def commit(c: Cluster, b: BrokerController, queue_id: int, offset: int) -> None:
    await invoke(c, b, RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
        consumer_group="cg", topic="Synced", queue_id=queue_id, commit_offset=offset))


async def send(c: Cluster, topic: str, body: bytes, delay_level: int = 0) -> None:
    props = "WAIT\x01true\x02" + (f"DELAY\x01{delay_level}\x02" if delay_level else "")
    header = SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                      born_timestamp=1_700_000_000_000, flag=0, properties=props)
    await invoke(c, c.master, RequestCode.SEND_MESSAGE_V2, header.to_v2(), body)


async def next_rounds(slave: BrokerController, n: int = 1) -> None:
    """Wait for ``n`` more complete sync rounds (each ends with the files written)."""
    sync = slave.slave_sync
    assert sync is not None
    target = sync.rounds + n
    await wait_until(lambda: sync.rounds >= target)


async def bolide(*args: str) -> str:
    """Run the CLI in a thread (it runs its own event loop); its stdout."""
    result = await asyncio.to_thread(CliRunner().invoke, cli, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.stdout


async def admin_json(c: Cluster, *args: str) -> Any:
    return json.loads(await bolide("admin", *args, "-n", c.namesrv_addr, "--output", "json"))


def test_byte_rate_counts_the_last_whole_second() -> None:
    now = [100.2]
    rate = ByteRate(lambda: now[0])
    rate.add(500)
    rate.add(24)
    assert rate.per_second() == 0  # the second is not over
    now[0] = 101.5
    assert rate.per_second() == 524
    rate.add(7)
    now[0] = 103.0  # a silent second in between
    assert rate.per_second() == 0


def test_slave_copies_topics_offsets_delay_offsets_and_groups(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        slave = c.the_slave
        assert slave.slave_sync is not None and c.master.slave_sync is None
        await wait_until(lambda: slave.slave_sync is not None
                         and slave.slave_sync.master_addr == c.master.broker_addr)
        await create_topic(c, c.master, "Synced")
        await commit(c, c.master, 0, 12)
        await commit(c, c.master, 3, 30)
        group = SubscriptionGroupConfig(group_name="sync-group", retry_max_times=5)
        await invoke(c, c.master, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                     body=group.encode())
        mode = SetMessageRequestModeRequestBody(topic="Synced", consumer_group="sync-group", mode="POP")
        await invoke(c, c.master, RequestCode.SET_MESSAGE_REQUEST_MODE, body=mode.encode())
        await send(c, "Synced", b"later", delay_level=1)  # delivered after 1 s
        c.master.timer_metrics.add("Synced", 2)  # two timer messages waiting (GET_TIMER_METRICS)
        await invoke(c, c.master, RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN,
                     UpdateGroupForbiddenRequestHeader(group="sync-group", topic="Synced", readable=False))
        await wait_until(lambda: c.master.delay_offsets.get(1) == 1, 5)

        # the master answers 43 and 45 as a Java broker does
        r = await invoke(c, c.master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        assert r.body_bytes() == b'{"offsetTable":{"Synced@cg":{0:12,3:30}}}'
        r = await invoke(c, c.master, RequestCode.GET_ALL_DELAY_OFFSET)
        assert r.body_bytes() == b'{"offsetTable":{1:1}}'
        # and a 5.x slave's timer checkpoint request (no timer wheel: all zero, SUCCESS)
        r = await invoke(c, c.master, RequestCode.GET_TIMER_CHECK_POINT)
        assert r.code == ResponseCode.SUCCESS and r.body_bytes() == bytes(56)

        await wait_until(lambda: slave.topics.get("Synced") == c.master.topics.get("Synced")
                         and slave.offsets.query_all("cg", "Synced") == {0: 12, 3: 30}
                         and slave.delay_offsets.get(1) == 1
                         and slave.subscription_groups.get("sync-group") is not None
                         and slave.request_modes.get("Synced", "sync-group") == mode
                         and slave.timer_metrics.snapshot() == c.master.timer_metrics.snapshot()
                         and slave.subscription_groups.file.forbidden == {"sync-group": {"Synced": 4}})
        assert slave.timer_metrics.data_version == c.master.timer_metrics.data_version
        sg = slave.subscription_groups.get("sync-group")
        assert sg is not None and sg.retry_max_times == 5
        assert slave.topics.data_version == c.master.topics.data_version

        # what changed on the slave only gives way to the master's at the next sync
        await create_topic(c, slave, "SlaveOnly")
        await commit(c, slave, 0, 99)
        await commit(c, slave, 2, 5)
        assert slave.offsets.query_all("cg", "Synced") == {0: 99, 2: 5, 3: 30}
        await wait_until(lambda: slave.topics.get("SlaveOnly") is None
                         and slave.offsets.query_all("cg", "Synced") == {0: 12, 3: 30})

        # and the files are written
        await next_rounds(slave)
        config = slave.store.config.config_dir
        topics = stored.TopicConfigManager(config / "topics.json")
        assert topics.load() and topics.get("Synced") is not None
        assert topics.get("Synced").write_queue_nums == 4  # type: ignore[union-attr]
        assert topics.get("SlaveOnly") is None
        offsets = ConsumerOffsetManager(config / "consumerOffset.json")
        assert offsets.load() and offsets.query_all("cg", "Synced") == {0: 12, 3: 30}
        delay = DelayOffsetManager(config / "delayOffset.json")
        assert delay.load() and delay.snapshot() == {1: 1}
        groups = stored.SubscriptionGroupManager(config / "subscriptionGroup.json")
        assert groups.load()
        assert groups.get("sync-group").retry_max_times == 5  # type: ignore[union-attr]
        modes = MessageRequestModes(config / "messageRequestMode.json")
        assert modes.load() and modes.get("Synced", "sync-group") == mode
        assert groups.forbidden == {"sync-group": {"Synced": 4}}
        timer_metrics = TimerMetrics(config / "timermetrics")
        assert timer_metrics.load() and timer_metrics.count("Synced") == 2

    run(tmp_path, test)


def test_slave_syncs_as_soon_as_it_learns_its_master(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        await create_topic(c, c.master, "BeforeSlave")
        await commit(c, c.master, 1, 7)
        slave = await c.start_slave(slave_sync_interval_ms=600_000)  # no periodic sync here
        await wait_until(lambda: slave.topics.get("BeforeSlave") is not None
                         and slave.offsets.query("cg", "Synced", 1) == 7)
        assert slave.topics.get("BeforeSlave") == TopicConfig(
            topic_name="BeforeSlave", read_queue_nums=4, write_queue_nums=4, perm=6)

    run(tmp_path, test, with_slave=False)


def test_ha_status_and_the_admin_commands_show_roles_and_lag(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        slave, master = c.the_slave, c.master
        assert slave.ha_slave is not None and master.ha_master is not None
        ha_master, ha_slave = master.ha_master, slave.ha_slave
        await create_topic(c, master, "Replicated")
        for i in range(20):
            await send(c, "Replicated", b"m%d" % i + bytes(1000))
        await wait_until(lambda: ha_master.acked_offset == master.store.max_phy_offset)
        top = master.store.max_phy_offset

        async with Admin(c.namesrv_addr) as admin:
            info = await admin.ha_status(master.broker_addr)
            assert info.master and info.master_commit_log_max_offset == top
            assert info.in_sync_slave_nums == 1
            (conn,) = info.ha_connection_info
            assert (conn.slave_ack_offset, conn.diff, conn.in_sync) == (top, 0, True)
            assert conn.transfer_from_where == top and conn.addr.startswith("127.0.0.1:")
            info = await admin.ha_status(slave.broker_addr)
            client = info.ha_client_runtime_info
            assert not info.master and client.is_activated
            assert client.master_addr == f"127.0.0.1:{ha_master.port}"
            assert client.max_offset == slave.store.max_phy_offset == top
            now = time.time() * 1000
            assert now - 60_000 < client.last_read_timestamp <= now
            assert now - 60_000 < client.last_write_timestamp <= now

        # a slave that stops reading falls behind by what the master stores meanwhile
        protocol = ha_slave.link
        assert protocol is not None and protocol.transport is not None
        protocol.transport.pause_reading()
        for i in range(10):
            await send(c, "Replicated", b"behind %d" % i + bytes(2000))
        await wait_until(lambda: ha_master.acked_offset == slave.store.max_phy_offset)
        lag = master.store.max_phy_offset - slave.store.max_phy_offset
        assert lag >= 10 * 2000

        doc = await admin_json(c, "haStatus", "-b", master.broker_addr)
        (conn_doc,) = doc[master.broker_addr]["haConnectionInfo"]
        assert conn_doc["diff"] == lag and conn_doc["inSync"] is True
        assert doc[master.broker_addr]["masterCommitLogMaxOffset"] == master.store.max_phy_offset
        doc = await admin_json(c, "haStatus", "-b", slave.broker_addr)
        slave_doc = HARuntimeInfo.from_json_obj(doc[slave.broker_addr])
        assert not slave_doc.master
        assert slave_doc.ha_client_runtime_info.max_offset == slave.store.max_phy_offset
        text = await bolide("admin", "haStatus", "-n", c.namesrv_addr)  # every master
        assert "Slaves of" in text and "OK" in text and str(lag) in text

        rows = {r["brokerId"]: r for r in (await admin_json(c, "clusterList"))["brokers"]}
        assert (rows[0]["brokerRole"], rows[0]["replicationLag"]) == ("MASTER", "-")
        assert (rows[1]["brokerRole"], rows[1]["replicationLag"]) == ("SLAVE", lag)
        assert rows[1]["addr"] == slave.broker_addr
        status = await admin_json(c, "brokerStatus", "-b", slave.broker_addr)
        assert status[slave.broker_addr]["brokerRole"] == "SLAVE"
        assert status[slave.broker_addr]["replicationLag"] == str(lag)
        assert status[slave.broker_addr]["brokerActive"] == "false"
        status = await admin_json(c, "brokerStatus")  # every master
        assert status[master.broker_addr]["brokerRole"] == "MASTER"
        assert status[master.broker_addr]["replicationLag"] == "-"
        assert status[master.broker_addr]["brokerActive"] == "true"

        protocol.transport.resume_reading()
        await wait_until(lambda: slave.store.max_phy_offset == master.store.max_phy_offset)
        rows = {r["brokerId"]: r for r in (await admin_json(c, "clusterList"))["brokers"]}
        assert rows[1]["replicationLag"] == 0

    run(tmp_path, test)
