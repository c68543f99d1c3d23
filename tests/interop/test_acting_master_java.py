"""The official Java client (rocketmq-client 5.3.3, unmodified) consuming through a Bolide slave
acting as master: a NameServer with supportActingMaster, broker-a's master and its slave with
enableSlaveActingMaster, in-process on free ports. The master stops after the messages are
replicated; DefaultMQPushConsumer (``interop/java-client/BolideClient.java consume``) then finds
the slave as broker-a's brokerId 0, consumes every message from it and commits its offsets
there (its shutdown persists them to the route's master address, the acting slave)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from client_roundtrip import run_driver, unavailable

from bolide.broker import BrokerConfig, BrokerController
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import TopicRouteData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    GetRouteInfoRequestHeader,
    SendMessageRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.store import BrokerRole, StoreConfig
from bolide.testing.rocketmq import RocketMQUnavailable, java_client_command
from conftest import acting_namesrv, wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TOPIC, GROUP, COUNT = "JavaActingTopic", "java_acting_cg", 24


def broker(ns_port: int, root: Path, slave: bool) -> BrokerController:
    config = BrokerConfig(namesrv_addr=f"127.0.0.1:{ns_port}", listen_port=0, bind_address="127.0.0.1",
                          broker_ip1="127.0.0.1", broker_id=1 if slave else 0, ha_listen_port=0,
                          ha_reconnect_interval_ms=100, vip_channel_enabled=False,
                          enable_slave_acting_master=True, broker_heartbeat_interval_ms=200,
                          sync_broker_member_group_period_ms=200)
    role = BrokerRole.SLAVE if slave else BrokerRole.ASYNC_MASTER
    return BrokerController(config, StoreConfig(store_path_root_dir=str(root), broker_role=role))


async def call(client: RemotingClient, addr: str, code: int, header: object = None,
               body: bytes = b"") -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, header, body))  # type: ignore[arg-type]


def test_java_push_consumer_reads_from_the_acting_master(tmp_path: Path) -> None:
    try:
        java = java_client_command("5.3.3", home=tmp_path / "jclient")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")

    async def main() -> list[list[str]]:
        namesrv = await acting_namesrv(tmp_path, notify=False)
        ns = f"127.0.0.1:{namesrv.port}"
        master = broker(namesrv.port, tmp_path / "a0", False)
        slave = broker(namesrv.port, tmp_path / "a1", True)
        client = RemotingClient()
        running = [master, slave]
        try:
            for b in running:
                await b.start()
            create = CreateTopicRequestHeader(topic=TOPIC, default_topic="TBW102", read_queue_nums=4,
                                              write_queue_nums=4, perm=6)
            for b in running:
                r = await call(client, b.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
                assert r.code == ResponseCode.SUCCESS, r
            for i in range(COUNT):
                header = SendMessageRequestHeader(
                    producer_group="pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
                    queue_id=i % 4, sys_flag=0, born_timestamp=1_700_000_000_000, flag=0,
                    properties="TAGS\x01t\x02")
                r = await call(client, master.broker_addr, RequestCode.SEND_MESSAGE_V2, header.to_v2(),
                               b"acting-%d" % i)
                assert r.code == ResponseCode.SUCCESS, r
            await wait_until(lambda: slave.store.max_phy_offset == master.store.max_phy_offset
                             and slave.store.dispatcher.behind() == 0)
            await master.close()
            running.remove(master)
            await wait_until(lambda: slave.acting)
            get_route = GetRouteInfoRequestHeader(topic=TOPIC)
            r = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, get_route)
            route = TopicRouteData.decode(r.body_bytes())
            assert route.broker_datas[0].broker_addrs == {0: slave.broker_addr}
            assert route.queue_datas[0].perm == 4  # read-only

            lines = await run_driver([*java, "consume", ns, TOPIC, GROUP, str(COUNT), "90"],
                                     tmp_path / "consume.log", prefixes=("MSG", "DONE", "TIMEOUT"))
            # the consumer's shutdown committed its offsets on the acting slave
            await wait_until(lambda: sum(slave.offsets.query(GROUP, TOPIC, q) or 0
                                         for q in range(4)) == COUNT)
            assert slave.stats.transferred >= COUNT
            return lines
        finally:
            await client.close()
            for b in running:
                await b.close()
            await namesrv.close()

    lines = asyncio.run(main())
    bodies = {fields[1] for fields in lines if fields[0] == "MSG"}
    assert bodies == {f"acting-{i}" for i in range(COUNT)}
