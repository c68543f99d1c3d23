"""Slave acting master, in-process (RocketMQ 5's enableSlaveActingMaster): a NameServer with
supportActingMaster and notifyMinBrokerIdChanged, a master and a slave of broker-a, and a
master of broker-b to escape to.

The master stops: the NameServer shows the slave as broker-a's brokerId 0, read-only; the
slave acts as master (its schedule delivers a delayed message left by the master, escaped to
broker-b); a consumer reads on from it and commits its offsets there; producers cannot write to
it. The master comes back: it takes the slave's consumer and delay offsets before it registers
(pre-online), the slave stops acting and the route is the master's again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ha_cluster import broker, wait_until
from test_ha_slave_reads import Collector, wait_until_async

from bolide.broker import BrokerController
from bolide.client import ClientConfig, ConsumeFrom, PushConsumer
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import TopicRouteData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    GetRouteInfoRequestHeader,
    SendMessageRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.store import BrokerRole
from conftest import acting_namesrv

TOPIC = "ActingTopic"
ACTING = {"enable_slave_acting_master": True, "enable_remote_escape": True, "total_replicas": 2,
          "broker_heartbeat_interval_ms": 200, "sync_broker_member_group_period_ms": 200,
          "ha_reconnect_interval_ms": 100}
STORE = {"message_delay_level": "1s 4s"}  # level 2: due 4 s after the send


async def invoke(client: RemotingClient, addr: str, code: int, header: Any = None,
                 body: bytes = b"") -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, header, body))


async def create_topic(client: RemotingClient, *brokers: BrokerController) -> None:
    header = CreateTopicRequestHeader(topic=TOPIC, default_topic="TBW102", read_queue_nums=2,
                                      write_queue_nums=2, perm=6)
    for b in brokers:
        r = await invoke(client, b.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        assert r.code == ResponseCode.SUCCESS, r


async def send(client: RemotingClient, addr: str, i: int, properties: str = "") -> RemotingCommand:
    header = SendMessageRequestHeader(producer_group="pg", topic=TOPIC, default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=i % 2, sys_flag=0,
                                      born_timestamp=1_700_000_000_000, flag=0, properties=properties)
    return await invoke(client, addr, RequestCode.SEND_MESSAGE_V2, header.to_v2(), b"msg-%d" % i)


async def route(client: RemotingClient, namesrv: str) -> tuple[dict[int, str], int]:
    """broker-a's addresses and queue permission in the route of TOPIC."""
    r = await invoke(client, namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                     GetRouteInfoRequestHeader(topic=TOPIC))
    assert r.code == ResponseCode.SUCCESS, r
    data = TopicRouteData.decode(r.body_bytes())
    [group] = [b for b in data.broker_datas if b.broker_name == "broker-a"]
    [queues] = [q for q in data.queue_datas if q.broker_name == "broker-a"]
    return group.broker_addrs, queues.perm


async def broker_active(client: RemotingClient, b: BrokerController) -> str:
    r = await invoke(client, b.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert r.code == ResponseCode.SUCCESS, r
    text = r.body_bytes().decode()
    return text.split('"brokerActive":"', 1)[1].split('"', 1)[0]


def test_slave_acts_while_the_master_is_stopped(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = await acting_namesrv(tmp_path)
        ns = f"127.0.0.1:{namesrv.port}"
        master = broker(namesrv.port, tmp_path / "a0", BrokerRole.ASYNC_MASTER, STORE, **ACTING)
        slave = broker(namesrv.port, tmp_path / "a1", BrokerRole.SLAVE, STORE, **ACTING)
        other = broker(namesrv.port, tmp_path / "b0", BrokerRole.ASYNC_MASTER, STORE,
                       broker_name="broker-b")
        client = RemotingClient()
        started = [master, slave, other]
        try:
            for b in started:
                await b.start()
            await create_topic(client, master, slave, other)
            # what a starting RocketMQ slave asks its master (EXCHANGE_BROKER_HA_INFO, no fields)
            r = await invoke(client, master.broker_addr, RequestCode.EXCHANGE_BROKER_HA_INFO)
            assert r.code == ResponseCode.SUCCESS, r
            assert r.ext_fields["masterHaAddress"].endswith(f":{master.ha_master.port}")  # type: ignore[union-attr]
            assert r.ext_fields["masterAddress"] == master.broker_addr
            assert int(r.ext_fields["masterFlushOffset"]) == master.init_max_offset
            for i in range(20):
                assert (await send(client, master.broker_addr, i)).code == ResponseCode.SUCCESS
            # a delayed message the master will not live to deliver
            r = await send(client, master.broker_addr, 99, "DELAY\x012\x02")
            assert r.code == ResponseCode.SUCCESS, r
            await wait_until(lambda: slave.store.max_phy_offset == master.store.max_phy_offset)
            assert slave.acting_master is not None
            await wait_until(lambda: slave.acting_master is not None
                             and slave.acting_master.min_broker_addr == master.broker_addr)
            assert not slave.acting and await broker_active(client, slave) == "false"

            collector = Collector(hold_after=6)
            config = ClientConfig(ns, poll_name_server_interval_ms=200, heartbeat_broker_interval_ms=500)
            push = PushConsumer(config, "cg", listener=collector, consume_from=ConsumeFrom.FIRST_OFFSET,
                                rebalance_interval_ms=200, suspend_ms=1000, pull_timeout_ms=3000,
                                pull_retry_delay_ms=100, persist_offset_interval_ms=200,
                                pull_batch_size=2, pull_threshold_for_queue=2)
            push.subscribe(TOPIC)
            async with push:
                await wait_until(lambda: len(collector.bodies) >= 6)
                master_port, master_ha = master.port, master.ha_master.port  # type: ignore[union-attr]
                await master.close()
                started.remove(master)

                # the NameServer: the slave is broker-a's brokerId 0, read-only
                await wait_until_async(lambda: route(client, ns), ({0: slave.broker_addr}, 4))
                await wait_until(lambda: slave.acting)
                assert await broker_active(client, slave) == "true"
                # producers cannot write to it
                refused = await send(client, slave.broker_addr, 1000)
                assert refused.code != ResponseCode.SUCCESS

                # consumers read on from it and commit their offsets there
                collector.release.set()
                await wait_until(lambda: len(collector.bodies) >= 20)
                assert sorted(collector.bodies) == sorted(b"msg-%d" % i for i in range(20))
                await wait_until(lambda: all(slave.offsets.query("cg", TOPIC, q) == 10 for q in (0, 1)))

                # its schedule delivers the master's delayed message, escaped to broker-b
                await wait_until(lambda: slave.escape.escaped >= 1, timeout=15)
                await wait_until(lambda: sum(other.store.get_max_offset_in_queue(TOPIC, q)
                                             for q in (0, 1)) == 1)

                delivered = slave.delay_offsets.get(2)
                assert delivered == 1  # the slave's schedule is past the delayed message

                # the master comes back: before it registers it takes the slave's consumer and
                # delay offsets (pre-online), then the slave stops acting and the route is the
                # master's again
                master = broker(namesrv.port, tmp_path / "a0", BrokerRole.ASYNC_MASTER, STORE,
                                listen_port=master_port, ha_listen_port=master_ha, **ACTING)
                await master.start()
                started.append(master)
                await wait_until(lambda: master.online)
                assert all(master.offsets.query("cg", TOPIC, q) == 10 for q in (0, 1))
                assert master.delay_offsets.get(2) == delivered  # not delivered a second time
                await wait_until(lambda: not slave.acting)
                await wait_until_async(lambda: route(client, ns),
                                       ({0: master.broker_addr, 1: slave.broker_addr}, 6))
                assert await broker_active(client, slave) == "false"
        finally:
            await client.close()
            for b in reversed(started):
                await b.close()
            await namesrv.close()

    asyncio.run(asyncio.wait_for(main(), 60))
