"""Real Apache RocketMQ 5.3.3 brokers using slave acting master under a Bolide NameServer
(``supportActingMaster=true``, ``notifyMinBrokerIdChanged=true``, in-process): broker-a's master
(brokerId 0) and slave (brokerId 1), both with ``enableSlaveActingMaster=true``, register with it
and heartbeat (QUERY_DATA_VERSION, ``compatibleWithOldNameSrv`` as RocketMQ ships it); the slave
learns its group's members from the route of ``rmq_sys_SYNC_BROKER_MEMBER_broker-a``.

The slave stays live on heartbeats alone while its DataVersion differs from the registered one
(a topic deleted on it, no registration after). Messages go to the master and reach the slave;
the master is SIGKILLed. Through the Bolide NameServer the slave is then broker-a's brokerId 0
with read-only queues; RocketMQ's slave reports ``brokerActive=true`` (its schedule,
transaction check and pop revive services run); Bolide's push consumer reads every message
from it and commits its offsets there. The master
restarts on its store: it takes those offsets from the slave before it registers (RocketMQ's
pre-online step), the route is the master's again and the slave stops acting.

A Bolide master with a RocketMQ 5.3.3 slave: the slave asks the master for its HA address
before it goes online (EXCHANGE_BROKER_HA_INFO), acts while the master is away, and the Bolide
master back tells it its HA address and takes the offsets committed on it before it registers.

Needs java and the cached RocketMQ 5.3.3 jars (``make interop-deps``): without them the
module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from bolide.broker import BrokerConfig, BrokerController
from bolide.client import (
    Admin,
    ClientConfig,
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    MQClientError,
    Producer,
    PushConsumer,
    SendStatus,
)
from bolide.client.errors import BrokerSystemError
from bolide.namesrv.controller import NamesrvController
from bolide.namesrv.route_info import BrokerLiveInfo
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import DeleteTopicRequestHeader, QueryConsumerOffsetRequestHeader
from bolide.remoting import RemotingClient
from bolide.store import BrokerRole, StoreConfig
from bolide.testing import rocketmq as rmqmod
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable, free_port
from conftest import acting_namesrv, unavailable, until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSION = "5.3.3"
BROKER_NAME = "broker-a"
TOPIC = "ActingRocketMQ"
GROUP = "acting_rmq_cg"
QUEUES, COUNT = 2, 20
TIMEOUT = 120.0
T = TypeVar("T")


@pytest.fixture
def classpath() -> None:
    try:
        rmqmod.classpath(VERSION)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")


def settings(store: Path, slave: bool, total_replicas: int = 1) -> BrokerSettings:
    extra = {
        "enableSlaveActingMaster": "true",
        # heartbeats every 500 ms, dropped by the NameServer after 3 s of silence; the group's
        # members looked up every 500 ms
        "brokerHeartbeatInterval": "500", "brokerNotActiveTimeoutMillis": "3000",
        "syncBrokerMemberGroupPeriod": "500",
        "brokerIP2": "127.0.0.1",  # the host of the haServerAddr the master registers
        # RocketMQ's slave refuses every pull without it (PullMessageProcessor.rejectRequest),
        # acting or not
        "slaveReadEnable": "true",
    }
    if total_replicas > 1:  # the broker starts isolated and goes online after its pre-online step
        extra["totalReplicas"] = str(total_replicas)
    if slave:
        extra |= {"brokerId": "1", "brokerRole": "SLAVE"}
    return BrokerSettings(store, broker_name=BROKER_NAME, extra=extra)


async def route(admin: Admin, topic: str = TOPIC) -> tuple[dict[int, str], int] | None:
    """broker-a's addresses and queue permission in the route of ``topic`` (None: no route)."""
    try:
        data = await admin.topic_route(topic)
    except MQClientError:  # not registered yet
        return None
    groups = [b for b in data.broker_datas if b.broker_name == BROKER_NAME]
    queues = [q for q in data.queue_datas if q.broker_name == BROKER_NAME]
    if not groups or not queues:
        return None
    return dict(groups[0].broker_addrs), queues[0].perm


async def registered(admin: Admin, brokers: list[RocketMQ], check: Callable[[], Awaitable[bool]],
                     what: str, timeout: float = 30.0) -> None:
    """Wait for ``check``; meanwhile have each of ``brokers`` register in full every second. A
    5.x broker registers at its start only if its NameServer connection is already up (the
    client's scan makes it), else 10 s later; UPDATE_BROKER_CONFIG of ``brokerPermission``
    makes it register every topic at once under a new DataVersion (a topic creation would
    register that topic alone, and a later full registration under the same DataVersion
    changes no queue data already routed: a read-only one from the acting slave would stay)."""
    deadline = time.monotonic() + timeout
    while True:
        for rmq in brokers:
            await admin.update_broker_config({"brokerPermission": 6}, broker_addr=rmq.broker_addr)
        second = time.monotonic() + 1
        while time.monotonic() < second:
            if await check():
                return
            await asyncio.sleep(0.05)
        assert time.monotonic() < deadline, f"timed out waiting for {what}: route {await route(admin)}"


async def runtime(admin: Admin, addr: str) -> dict[str, str] | None:
    """GET_BROKER_RUNTIME_INFO of ``addr``; None while a fresh Java broker has no stats sample
    yet (it answers SYSTEM_ERROR, NoSuchElementException)."""
    try:
        return await admin.broker_runtime_info(addr)
    except BrokerSystemError as exc:
        if "NoSuchElementException" not in str(exc):
            raise
        return None


async def committed(client: RemotingClient, addr: str) -> int:
    """The sum of GROUP's offsets on TOPIC stored by the broker at ``addr``."""
    total = 0
    for queue_id in range(QUEUES):
        header = QueryConsumerOffsetRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=queue_id)
        r = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header))
        if r.code == ResponseCode.SUCCESS:
            total += int(r.ext_fields["offset"])
    return total


async def heartbeats_outlive_a_changed_version(namesrv: NamesrvController, admin: Admin,
                                               client: RemotingClient, rmq: RocketMQ) -> None:
    """A topic deleted on a broker changes its DataVersion with no registration after: its
    QUERY_DATA_VERSION heartbeats (answered changed=true now) keep it live past its timeout.
    Tried again when a scheduled registration came in between."""
    live = namesrv.processor.routes.broker_live_info
    for attempt in range(3):
        topic = f"{TOPIC}Gone{attempt}"
        # the creation registers the broker (before it answers), the deletion does not
        await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1, broker_addr=rmq.broker_addr)
        registered_version = _live(live(rmq.broker_addr)).data_version
        r = await client.invoke(rmq.broker_addr, RemotingCommand.request(
            RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic=topic)))
        assert r.code == ResponseCode.SUCCESS, r
        deleted_ms = int(time.time() * 1000)
        await until(lambda due=deleted_ms + 3500: _live(live(rmq.broker_addr)).last_update_ms > due,
                    "heartbeats past the broker's timeout", timeout=10)
        if _live(live(rmq.broker_addr)).data_version == registered_version:  # no registration since
            return
    pytest.fail("the broker registered during each try")


async def send_and_replicate(admin: Admin, producer: Producer, slave_addr: str) -> None:
    """COUNT messages round the queues of TOPIC on broker-a; wait until the slave holds them."""
    for i in range(COUNT):
        sent = await producer.send(Message(TOPIC, b"acting-%d" % i),
                                   queue=MessageQueue(TOPIC, BROKER_NAME, i % QUEUES))
        assert sent.status is SendStatus.SEND_OK, sent

    async def replicated() -> bool:
        for queue_id in range(QUEUES):
            mq = MessageQueue(TOPIC, BROKER_NAME, queue_id)
            if (await admin.min_max_offset(mq, slave_addr))[1] != COUNT // QUEUES:
                return False
        return True

    await until(replicated, "the slave to hold every message")


class Collector:
    def __init__(self) -> None:
        self.bodies: set[bytes] = set()

    async def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        self.bodies.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS


async def consume_on(ns: str, client: RemotingClient, addr: str) -> None:
    """Bolide's push consumer reads every message of TOPIC through the broker routed as
    broker-a's brokerId 0 (``addr``, the acting slave) and commits its offsets there."""
    collector = Collector()
    config = ClientConfig(ns, poll_name_server_interval_ms=200, heartbeat_broker_interval_ms=500)
    push = PushConsumer(config, GROUP, listener=collector, consume_from=ConsumeFrom.FIRST_OFFSET,
                        rebalance_interval_ms=200, suspend_ms=1000, pull_timeout_ms=3000,
                        pull_retry_delay_ms=100, persist_offset_interval_ms=200)
    push.subscribe(TOPIC)
    async with push:
        await until(lambda: len(collector.bodies) == COUNT, "the consumer to read every message")
        await until(lambda: _equal(committed(client, addr), COUNT), "the offsets committed on the slave")
    assert collector.bodies == {b"acting-%d" % i for i in range(COUNT)}



def bolide_master(ns: str, store: Path, port: int) -> BrokerController:
    """broker-a's master as a Bolide broker, with the RocketMQ brokers' acting-master settings."""
    config = BrokerConfig(namesrv_addr=ns, listen_port=port, bind_address="127.0.0.1",
                          broker_ip1="127.0.0.1", broker_name=BROKER_NAME,
                          enable_slave_acting_master=True, total_replicas=2, broker_heartbeat_interval_ms=500,
                          broker_not_active_timeout_ms=3000, sync_broker_member_group_period_ms=500)
    return BrokerController(config, StoreConfig(store_path_root_dir=str(store),
                                                broker_role=BrokerRole.ASYNC_MASTER))


def test_bolide_master_returns_to_an_acting_rocketmq_slave(tmp_path: Path, classpath: None) -> None:
    """A RocketMQ 5.3.3 slave of a Bolide master: it asks the master where it replicates from
    before it goes online (EXCHANGE_BROKER_HA_INFO), acts while the master is away, and the
    master back takes the consumer offsets committed on it before it registers (pre-online)."""
    asyncio.run(asyncio.wait_for(bolide_master_scenario(tmp_path), TIMEOUT))


async def bolide_master_scenario(tmp_path: Path) -> None:
    namesrv = await acting_namesrv(tmp_path)
    ns = f"127.0.0.1:{namesrv.port}"
    port = free_port((-2, 0, 1))
    master = bolide_master(ns, tmp_path / "store-0", port)
    slave = RocketMQ(VERSION, tmp_path / "rmq-1", namesrv_port=namesrv.port)
    client = RemotingClient()
    try:
        await master.start()
        # a 5.x slave of a group of two (totalReplicas=2) starts isolated: it asks its master
        # where its HA service is (EXCHANGE_BROKER_HA_INFO), connects there and only then
        # registers; without the answer it would never go online
        await asyncio.to_thread(slave.start_broker, settings(tmp_path / "store-1", slave=True,
                                                             total_replicas=2))
        live = namesrv.processor.routes.broker_live_info
        await until(lambda: live(slave.broker_addr) is not None, "the slave online", timeout=30)
        async with Admin(ns) as admin, Producer(ns, "acting_bolide_pg") as producer:
            for addr in (master.broker_addr, slave.broker_addr):
                await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES,
                                         broker_addr=addr)
            normal = ({0: master.broker_addr, 1: slave.broker_addr}, 6)
            assert await until(lambda: _is(route(admin), normal), "both brokers in the route")
            await send_and_replicate(admin, producer, slave.broker_addr)
            await master.close()
            acting = ({0: slave.broker_addr}, 4)
            assert await until(lambda: _is(route(admin), acting), "the slave routed as brokerId 0")
            await until(lambda: _active(runtime(admin, slave.broker_addr), "true"),
                        "the slave to report brokerActive=true")

            await consume_on(ns, client, slave.broker_addr)

            # the master comes back on its store and port: it tells the slave its HA address,
            # takes the slave's offsets, then registers
            master = bolide_master(ns, tmp_path / "store-0", port)
            await master.start()
            await until(lambda: master.online, "the master's pre-online step")
            assert sum(master.offsets.query(GROUP, TOPIC, q) or 0 for q in range(QUEUES)) == COUNT
            await until(lambda: _is(route(admin), normal), "the master routed again")
            await until(lambda: _active(runtime(admin, slave.broker_addr), "false"),
                        "the slave to stop acting")
            ha = master.ha_master
            assert ha is not None
            await until(lambda: any(c.request_offset >= 0 for c in ha.connections),
                        "the slave replicating from the master again")
    finally:
        await client.close()
        await asyncio.to_thread(slave.kill_broker)
        await master.close()
        await namesrv.close()


def test_rocketmq_slave_acts_as_master_under_bolide_namesrv(tmp_path: Path, classpath: None) -> None:
    asyncio.run(asyncio.wait_for(scenario(tmp_path), TIMEOUT))


async def scenario(tmp_path: Path) -> None:
    namesrv = await acting_namesrv(tmp_path)
    ns = f"127.0.0.1:{namesrv.port}"
    master = RocketMQ(VERSION, tmp_path / "rmq-0", namesrv_port=namesrv.port)
    slave = RocketMQ(VERSION, tmp_path / "rmq-1", namesrv_port=namesrv.port)
    client = RemotingClient()
    try:
        # the master first: the slave's registration then answers the master's HA address
        await asyncio.to_thread(master.start_broker, settings(tmp_path / "store-0", slave=False))
        await asyncio.to_thread(slave.start_broker, settings(tmp_path / "store-1", slave=True))
        async with Admin(ns) as admin, Producer(ns, "acting_rmq_pg") as producer:
            for rmq in (master, slave):  # a 5.x slave syncs its master's topics only every minute
                await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES,
                                         broker_addr=rmq.broker_addr)
            normal = ({0: master.broker_addr, 1: slave.broker_addr}, 6)
            await registered(admin, [master, slave], lambda: _is(route(admin), normal),
                             "both brokers in the route")
            await heartbeats_outlive_a_changed_version(namesrv, admin, client, slave)
            await send_and_replicate(admin, producer, slave.broker_addr)
            info = await until(lambda: runtime(admin, slave.broker_addr), "the slave's runtime info")
            assert info["brokerActive"] == "false"

            # SIGKILL: the NameServer sees the master's connection close
            await asyncio.to_thread(master.kill_broker)
            acting = ({0: slave.broker_addr}, 4)  # the slave as brokerId 0, read-only
            assert await until(lambda: _is(route(admin), acting), "the slave routed as brokerId 0")
            # RocketMQ's slave acts: its schedule, transaction check and pop revive services run
            await until(lambda: _active(runtime(admin, slave.broker_addr), "true"),
                        "the slave to report brokerActive=true")
            # the acting slave registers a new topic (the prime slave's registration): its
            # queues are read-only too, and the group's route stays the slave's
            await admin.create_topic(f"{TOPIC}New", read_queue_nums=1, write_queue_nums=1,
                                     broker_addr=slave.broker_addr)
            assert await until(lambda: _is(route(admin, f"{TOPIC}New"), acting),
                               "the slave's new topic routed read-only")
            assert await route(admin) == acting

            await consume_on(ns, client, slave.broker_addr)

            # the master comes back on its store: the route is the master's, the slave stops acting
            await asyncio.to_thread(master.start_broker, settings(tmp_path / "store-0", slave=False))
            # (on another port when its old one was taken meanwhile: the harness moves it)
            normal = ({0: master.broker_addr, 1: slave.broker_addr}, 6)
            await registered(admin, [master], lambda: _is(route(admin), normal),
                             "the master routed again")
            await until(lambda: _active(runtime(admin, slave.broker_addr), "false"),
                        "the slave to stop acting")

    finally:
        await client.close()
        for rmq in (slave, master):  # killed: a clean 5.x shutdown takes seconds
            await asyncio.to_thread(rmq.kill_broker)
        await namesrv.close()


async def _is(value: Awaitable[T], expected: T) -> bool:
    return await value == expected


async def _equal(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def _active(info: Awaitable[dict[str, str] | None], expected: str) -> bool:
    got = await info
    return got is not None and got.get("brokerActive") == expected


def _live(info: BrokerLiveInfo | None) -> BrokerLiveInfo:
    assert info is not None, "the broker was dropped by the NameServer"
    return info
