"""Master/slave replication in-process: a NameServer, a master and a slave BrokerController on
free ports. The slave learns the master's HA address from its registration, copies the
CommitLog byte for byte, builds its own queues, serves pulls and refuses sends; SYNC_MASTER
sends wait for the slave."""

from __future__ import annotations

import asyncio
import logging
import random
import struct
from pathlib import Path

import pytest
from ha_cluster import SEGMENT, Cluster, run, store_config, wait_until

from bolide.broker import BrokerController
from bolide.common.message import Message
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import TopicRouteData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from bolide.store import BrokerRole, MessageStore
from bolide.store.record import decode_record, read_total_size
from conftest import assert_consistent


async def create_topic(c: Cluster, broker: BrokerController, topic: str) -> None:
    header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=2,
                                      write_queue_nums=2, perm=6)
    r = await c.client.invoke(broker.broker_addr,
                              RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
    assert r.code == ResponseCode.SUCCESS, r


async def send(c: Cluster, broker: BrokerController, topic: str, body: bytes,
               queue_id: int = 0, wait: bool = True) -> RemotingCommand:
    header = SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                      born_timestamp=1_700_000_000_000, flag=0,
                                      properties=f"TAGS\x01TagA\x02WAIT\x01{str(wait).lower()}\x02")
    return await c.client.invoke(broker.broker_addr, RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, header.to_v2(), body))


async def pull_all(c: Cluster, broker: BrokerController, topic: str, queue_id: int) -> list:
    out: list = []
    offset = 0
    while True:
        header = PullMessageRequestHeader(consumer_group="cg", topic=topic, queue_id=queue_id,
                                          queue_offset=offset, max_msg_nums=32, sys_flag=4,
                                          commit_offset=0, suspend_timeout_millis=0,
                                          subscription="*", sub_version=0)
        r = await c.client.invoke(broker.broker_addr,
                                  RemotingCommand.request(RequestCode.PULL_MESSAGE, header))
        if r.code != ResponseCode.SUCCESS:
            assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED), r
            return out
        body = r.body_bytes()
        pos = 0
        while pos < len(body):
            out.append(decode_record(body, pos))
            pos += read_total_size(body, pos)
        offset = int(r.ext_fields["nextBeginOffset"])


async def send_many(c: Cluster, topic: str, count: int, seed: int = 0) -> list[bytes]:
    rnd = random.Random(seed)
    bodies = []
    for i in range(count):
        body = f"{seed}-{i}:".encode() + bytes(rnd.randrange(100, 4000))
        r = await send(c, c.master, topic, body, queue_id=i % 2)
        assert r.code == ResponseCode.SUCCESS, r
        bodies.append(body)
    return bodies


async def caught_up(c: Cluster) -> None:
    assert c.slave is not None
    master, slave = c.master.store, c.slave.store
    await wait_until(lambda: slave.max_phy_offset == master.max_phy_offset)
    await wait_until(lambda: slave.dispatcher.behind() == 0 and master.dispatcher.behind() == 0)


def assert_identical_segments(c: Cluster) -> None:
    assert c.slave is not None
    m_dir = c.master.store.config.commit_log_dir
    s_dir = c.slave.store.config.commit_log_dir
    names = sorted(p.name for p in s_dir.iterdir())
    end = c.slave.store.max_phy_offset
    written = [name for name in names if int(name) < end]
    assert len(written) >= 2
    for name in written:
        assert (s_dir / name).read_bytes() == (m_dir / name).read_bytes(), f"segment {name}"
    for name in set(names) - set(written):  # spare segments made ahead of need: nothing in them yet
        assert not any((s_dir / name).read_bytes()), f"segment {name}"


def test_slave_copies_the_commit_log_and_serves_pulls(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        assert c.slave is not None and c.slave.ha_slave is not None
        await wait_until(lambda: c.slave.ha_slave.connected)  # learned from the registration
        assert c.master.ha_master is not None
        assert c.slave.ha_slave.master_addr == f"127.0.0.1:{c.master.ha_master.port}"
        for b in (c.master, c.slave):
            await create_topic(c, b, "Replicated")
        bodies = await send_many(c, "Replicated", 150)
        assert c.master.store.max_phy_offset > 2 * SEGMENT
        await caught_up(c)
        assert_identical_segments(c)
        for qid in (0, 1):
            from_slave = await pull_all(c, c.slave, "Replicated", qid)
            from_master = await pull_all(c, c.master, "Replicated", qid)
            assert [m.body for m in from_slave] == bodies[qid::2]
            assert [m.msg_id for m in from_slave] == [m.msg_id for m in from_master]
        route = await c.client.invoke(c.namesrv_addr, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="Replicated")))
        addrs = TopicRouteData.decode(route.body_bytes()).broker_datas[0].broker_addrs
        assert addrs == {0: c.master.broker_addr, 1: c.slave.broker_addr}

    run(tmp_path, test)
    assert_consistent(store_config(tmp_path / "master", BrokerRole.ASYNC_MASTER))
    assert_consistent(store_config(tmp_path / "slave", BrokerRole.SLAVE))


def test_sends_to_the_slave_are_refused(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        assert c.slave is not None
        await create_topic(c, c.slave, "Replicated")
        r = await send(c, c.slave, "Replicated", b"to the slave")
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "SLAVE" in (r.remark or "") and "master" in (r.remark or "")
        assert c.slave.store.max_phy_offset == 0

    run(tmp_path, test)


def test_sync_master_send_waits_for_the_slave(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        assert c.slave is not None and c.slave.ha_slave is not None
        await wait_until(lambda: c.master.ha_master is not None
                         and c.master.ha_master.in_sync_slaves(0) == 1)
        await create_topic(c, c.master, "Sync")
        for i in range(20):
            r = await send(c, c.master, "Sync", b"sync %d" % i + bytes(3000))
            assert r.code == ResponseCode.SUCCESS, r
            # answered only once the slave has the bytes
            assert c.slave.store.max_phy_offset == c.master.store.max_phy_offset

        # a slave that stops reading: the send times out waiting for it
        protocol = c.slave.ha_slave.link
        assert protocol is not None and protocol.transport is not None
        protocol.transport.pause_reading()
        r = await send(c, c.master, "Sync", b"unacknowledged")
        assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, r
        assert "slaveTimeout" in (r.remark or "") and r.ext_fields["msgId"]  # stored anyway
        protocol.transport.resume_reading()
        await caught_up(c)

    run(tmp_path, test, master_role=BrokerRole.SYNC_MASTER, slave_timeout_ms=500)


def test_sync_master_without_a_slave_answers_slave_not_available(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        await create_topic(c, c.master, "Sync")
        r = await send(c, c.master, "Sync", b"alone")
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE, r
        assert "slave" in (r.remark or "") and r.ext_fields["msgId"]
        assert c.master.store.max_phy_offset > 0  # stored on the master
        # WAIT=false (waitStoreMsgOK off): answered once stored, no slave waited for
        r = await send(c, c.master, "Sync", b"no wait", wait=False)
        assert r.code == ResponseCode.SUCCESS, r

    run(tmp_path, test, master_role=BrokerRole.SYNC_MASTER, with_slave=False)


def test_slave_catches_up_after_its_connection_is_cut(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        assert c.slave is not None and c.slave.ha_slave is not None
        ha = c.slave.ha_slave
        await wait_until(lambda: ha.connected)
        await create_topic(c, c.master, "Replicated")
        await create_topic(c, c.slave, "Replicated")
        bodies = await send_many(c, "Replicated", 40, seed=1)
        # an empty slave that reconnects starts at the master's last segment (as RocketMQ's
        # does): the first cut must find some of the first round on the slave
        await wait_until(lambda: c.slave is not None and c.slave.store.max_phy_offset > 0)
        for seed in (2, 3):
            ha.disconnect()  # cut while frames may be in flight
            bodies += await send_many(c, "Replicated", 40, seed=seed)
        await caught_up(c)
        assert_identical_segments(c)
        from_slave = await pull_all(c, c.slave, "Replicated", 0)
        assert [m.body for m in from_slave] == bodies[0::2]

    run(tmp_path, test)
    assert_consistent(store_config(tmp_path / "slave", BrokerRole.SLAVE))


def test_a_restarted_slave_resumes_from_its_own_offset(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        assert c.slave is not None
        await create_topic(c, c.master, "Replicated")
        await send_many(c, "Replicated", 30, seed=4)
        await caught_up(c)
        before = c.slave.store.max_phy_offset
        await c.slave.close()
        await send_many(c, "Replicated", 60, seed=5)  # the master goes on alone
        c.slave = c.broker("slave", BrokerRole.SLAVE)
        await c.slave.start()
        assert c.slave.store.max_phy_offset == before
        await caught_up(c)
        assert_identical_segments(c)

    run(tmp_path, test)
    assert_consistent(store_config(tmp_path / "slave", BrokerRole.SLAVE))


def test_a_slave_store_becomes_the_master_when_the_master_is_lost(tmp_path: Path) -> None:
    """docs/operations.md "Recovering when a master is lost": the slave restarted as the
    master (brokerId 0) serves everything it had, takes sends, and a new empty slave follows."""
    async def test(c: Cluster) -> None:
        assert c.slave is not None
        for b in (c.master, c.slave):
            await create_topic(c, b, "Promoted")
        bodies = await send_many(c, "Promoted", 40, seed=6)
        await caught_up(c)
        await c.master.close()  # the master and its disk are gone
        await c.slave.close()
        c.master = c.broker("slave", BrokerRole.ASYNC_MASTER)
        await c.master.start()
        c.slave = None
        got = [m.body for q in (0, 1) for m in await pull_all(c, c.master, "Promoted", q)]
        assert sorted(got) == sorted(bodies)
        r = await send(c, c.master, "Promoted", b"after the promotion")
        assert r.code == ResponseCode.SUCCESS, r
        c.slave = c.broker("new-slave", BrokerRole.SLAVE)
        await c.slave.start()
        await caught_up(c)

    run(tmp_path, test)
    assert_consistent(store_config(tmp_path / "new-slave", BrokerRole.SLAVE))


def test_a_slave_ahead_of_its_master_is_refused(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    with MessageStore(store_config(tmp_path / "slave", BrokerRole.ASYNC_MASTER)) as other:
        assert other.put_message(Message("Elsewhere", b"from another master")).ok
        ahead = other.max_phy_offset

    async def test(c: Cluster) -> None:
        assert c.slave is not None and c.master.ha_master is not None
        await wait_until(lambda: "past this master's max offset" in caplog.text)
        assert c.slave.store.max_phy_offset == ahead
        assert not c.master.ha_master.connections or all(
            conn.request_offset < 0 for conn in c.master.ha_master.connections)

    with caplog.at_level(logging.ERROR, logger="bolide.broker.ha.master"):
        run(tmp_path, test)


def test_a_negative_first_offset_on_the_ha_port_is_refused(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """Not a slave (an offset below zero): the master says so and closes that connection; the
    real slave keeps replicating."""
    async def test(c: Cluster) -> None:
        assert c.master.ha_master is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", c.master.ha_master.port)
        writer.write(struct.pack(">q", -5))
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed without a frame
        writer.close()
        assert "which no CommitLog has" in caplog.text
        assert "older files were deleted" not in caplog.text
        await create_topic(c, c.master, "AfterGarbage")
        await send_many(c, "AfterGarbage", 3)
        await caught_up(c)

    with caplog.at_level(logging.WARNING, logger="bolide.broker.ha.master"):
        run(tmp_path, test)
