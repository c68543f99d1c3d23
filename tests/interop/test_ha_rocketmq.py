"""Classic master/slave replication between Bolide and real Apache RocketMQ, both ways, for
each version of :data:`bolide.testing.rocketmq.VERSIONS` (5.x without controller mode runs
the same DefaultHAService as 4.9.x): a RocketMQ slave of a Bolide master, and a Bolide slave
of a RocketMQ master.

Both scenarios use an in-process Bolide NameServer, so the slave learns its master's HA
address from the registration result (``haServerAddr``) and the route lists both brokers, and
256 KiB CommitLog segments, so the master already spans more than one segment when the empty
slave connects: the master then streams from the start of its last segment. Each scenario
waits until the slave holds the master's CommitLog, pulls the messages from the slave, lets
the idle master send heartbeats (empty frames) without the connection dropping, and compares
the CommitLog bytes of the two stores up to the master's max offset.

Needs java and the cached RocketMQ jars (``make interop-deps``): without them the module is
skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from collections.abc import Awaitable, Callable, Set
from dataclasses import dataclass
from pathlib import Path

import pytest
from client_roundtrip import unavailable

from bolide.broker import BrokerConfig, BrokerController
from bolide.client import (
    Admin,
    Message,
    MessageExt,
    MessageQueue,
    MQClientError,
    Producer,
    SendStatus,
)
from bolide.client.errors import BrokerSystemError
from bolide.common.msgid import decode_offset_msg_id
from bolide.common.records import decode_records
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import PullMessageRequestHeader
from bolide.remoting import RemotingClient
from bolide.store import BrokerRole, StoreConfig
from bolide.store.consume_queue import ENTRY_SIZE
from bolide.testing import rocketmq as rmqmod
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable, free_port
from conftest import assert_consistent, until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SEGMENT = 256 * 1024
CONSUME_QUEUE = 300 * ENTRY_SIZE
TOPIC = "HaInterop"
BROKER_NAME = "broker-a"
QUEUES = 2
BATCH = 180  # ~1.6 KiB records: one batch fills more than a segment
HEARTBEAT_MS = 500  # the masters' idle heartbeat (RocketMQ: 5 s)
# seconds for a scenario: a RocketMQ slave polls for its master's address every 5 s, a 4.9.x
# one reports 5 s after it connects, and a 5.x broker first registers 10 s after its start
TIMEOUT = 90.0


@pytest.fixture(params=rmqmod.VERSIONS, ids=lambda v: f"rocketmq-{v}")
def version(request: pytest.FixtureRequest) -> str:
    try:
        rmqmod.classpath(request.param)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    return str(request.param)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), TIMEOUT))


# -- both sides -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sent:
    msg_id: str
    queue_id: int
    commit_log_offset: int
    body: bytes


def store_config(root: Path, role: BrokerRole) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT,
                       mapped_file_size_consume_queue=CONSUME_QUEUE, broker_role=role)


def rocketmq_settings(store: Path, **extra: str) -> BrokerSettings:
    return BrokerSettings(store, mapped_file_size_commit_log=SEGMENT,
                          mapped_file_size_consume_queue=CONSUME_QUEUE, broker_name=BROKER_NAME,
                          extra=extra)


async def start_namesrv(root: Path) -> NamesrvController:
    namesrv = NamesrvController(NamesrvConfig(kv_config_path=str(root / "kv.json")),
                                host="127.0.0.1", port=0)
    await namesrv.start()
    return namesrv


async def send_batch(producer: Producer, label: str) -> list[Sent]:
    sent = []
    for i in range(BATCH):
        body = f"{label}-{i}:".encode() + random.Random(f"{label}{i}").randbytes(1500)
        queue = MessageQueue(TOPIC, BROKER_NAME, i % QUEUES)
        r = await producer.send(Message(TOPIC, body, tags=label, keys=f"{label}{i}"), queue=queue)
        assert r.status is SendStatus.SEND_OK, r
        sent.append(Sent(r.msg_id, i % QUEUES, decode_offset_msg_id(r.offset_msg_id)[1], body))
    return sent


async def has_route(admin: Admin) -> bool:
    try:
        await admin.topic_route(TOPIC)
    except MQClientError:  # not registered yet
        return False
    return True


async def max_offset(admin: Admin, addr: str) -> int:
    """The CommitLog max offset of the broker at ``addr`` (GET_BROKER_RUNTIME_INFO). A Java
    broker answers SYSTEM_ERROR (NoSuchElementException in its TPS stats) until its first
    stats sample, a second or so after it starts: asked again until then."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return int((await admin.broker_runtime_info(addr))["commitLogMaxOffset"])
        except BrokerSystemError as exc:
            if "NoSuchElementException" not in str(exc) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def read_replica(client: RemotingClient, admin: Admin, addr: str) -> dict[str, MessageExt]:
    """Every message of TOPIC the broker at ``addr`` serves, pulled from each queue's minimum
    offset; empty while the broker does not know the topic yet."""
    found: dict[str, MessageExt] = {}
    for queue_id in range(QUEUES):
        offset, _ = await admin.min_max_offset(MessageQueue(TOPIC, BROKER_NAME, queue_id), addr)
        while True:
            header = PullMessageRequestHeader(
                consumer_group="ha-interop-cg", topic=TOPIC, queue_id=queue_id,
                queue_offset=offset, max_msg_nums=32, sys_flag=4, commit_offset=0,
                suspend_timeout_millis=0, subscription="*", sub_version=0)
            r = await client.invoke(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, header))
            if r.code == ResponseCode.TOPIC_NOT_EXIST:
                return {}
            if r.code != ResponseCode.SUCCESS:
                break
            for m in decode_records(r.body_bytes()):
                assert m.msg_id is not None
                found[m.msg_id] = m
            offset = int(r.ext_fields["nextBeginOffset"])
    return found


async def pulled_from_slave(client: RemotingClient, admin: Admin, addr: str,
                            expected: list[Sent]) -> None:
    """The slave at ``addr`` serves exactly ``expected``, in their queues, bodies intact."""
    want = {s.msg_id: s for s in expected}
    found = await until(lambda: _complete(read_replica(client, admin, addr), want.keys()),
                        f"the slave {addr} to serve {len(want)} messages")
    assert found.keys() == want.keys()
    for msg_id, m in found.items():
        s = want[msg_id]
        assert (m.queue_id, m.commit_log_offset, m.body) == (s.queue_id, s.commit_log_offset,
                                                               s.body), msg_id


async def _complete(read: Awaitable[dict[str, MessageExt]], ids: Set[str]) -> dict[str, MessageExt]:
    found = await read
    return found if found.keys() >= ids else {}


async def assert_route(admin: Admin, master_addr: str, slave_addr: str) -> None:
    """GET_ROUTEINFO_BY_TOPIC lists the master as brokerId 0 and the slave as brokerId 1."""
    async def both() -> dict[int, str] | None:
        route = await admin.topic_route(TOPIC)
        addrs = {i: a for b in route.broker_datas for i, a in b.broker_addrs.items()}
        return addrs if len(addrs) == 2 else None

    addrs = await until(both, "the NameServer to route to master and slave")
    assert addrs == {0: master_addr, 1: slave_addr}


def assert_same_commit_log(master_root: Path, slave_root: Path, start: int, end: int) -> None:
    """The slave's CommitLog begins with the segment at ``start`` and holds the master's bytes
    from there up to ``end``."""
    master_dir, slave_dir = master_root / "commitlog", slave_root / "commitlog"
    names = sorted(p.name for p in slave_dir.iterdir() if p.stat().st_size)
    assert names and int(names[0]) == start, (
        f"the empty slave should start at the master's last segment ({start}), it has {names}")
    for seg in range(start, end, SEGMENT):
        size = min(SEGMENT, end - seg)
        on_master = (master_dir / f"{seg:020d}").read_bytes()[:size]
        on_slave = (slave_dir / f"{seg:020d}").read_bytes()[:size]
        assert len(on_slave) == size, f"the slave's segment {seg:020d} is short"
        if on_master != on_slave:
            at = next(i for i, (a, b) in enumerate(zip(on_master, on_slave, strict=True)) if a != b)
            pytest.fail(f"CommitLog segment {seg:020d} differs at byte {at} (offset {seg + at})")


# -- 1: a real RocketMQ slave of a Bolide master ---------------------------------------------
def test_rocketmq_slave_replicates_a_bolide_master(version: str, tmp_path: Path) -> None:
    marks: dict[str, int] = {}
    sent: list[Sent] = []

    async def test() -> None:
        namesrv = await start_namesrv(tmp_path)
        addr = f"127.0.0.1:{namesrv.port}"
        # listenPort L: the HA port is L + 1, the slave syncs configs through L - 2
        config = BrokerConfig(namesrv_addr=addr, listen_port=free_port((-2, 0, 1)),
                              bind_address="127.0.0.1", broker_ip1="127.0.0.1",
                              ha_send_heartbeat_interval_ms=HEARTBEAT_MS)
        master = BrokerController(config, store_config(tmp_path / "master",
                                                       BrokerRole.ASYNC_MASTER))
        rmq = RocketMQ(version, tmp_path / "rmq", namesrv_port=namesrv.port)
        try:
            await master.start()
            ha = master.ha_master
            assert ha is not None and ha.port == config.listen_port + 1
            async with (Admin(addr) as admin, Producer(addr, "ha-interop-pg") as producer,
                        RemotingClient() as client):
                await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES,
                                         broker_addr=master.broker_addr)
                sent.extend(await send_batch(producer, "before"))
                assert master.store.max_phy_offset > SEGMENT
                with contextlib.ExitStack() as stack:
                    if version == "4.9.7":  # its HA port taken: the harness moves the broker
                        taken = stack.enter_context(socket.create_server(("0.0.0.0", rmq.broker_port + 1)))
                    await asyncio.to_thread(rmq.start_broker, rocketmq_settings(
                        tmp_path / "slave", brokerId="1", brokerRole="SLAVE",
                        slaveReadEnable="true"))
                    if version == "4.9.7":
                        assert rmq.broker_port + 1 != taken.getsockname()[1]
                # the address comes with the registration result; the first report follows
                # haSendHeartbeatInterval (5 s) later on 4.9.x
                conn = await until(lambda: next((c for c in ha.connections
                                                 if c.request_offset >= 0), None),
                                   "the RocketMQ slave's first report")
                assert conn.request_offset == 0  # an empty slave
                marks["start"] = master.store.max_phy_offset // SEGMENT * SEGMENT
                sent.extend(await send_batch(producer, "after"))
                marks["end"] = end = master.store.max_phy_offset
                await until(lambda: conn.ack_offset == end, "the slave to acknowledge "
                            f"{end}, the master's max offset")
                await assert_route(admin, master.broker_addr, rmq.broker_addr)
                # the slave learns topics from its master (GET_ALL_TOPIC_CONFIG on the master's
                # VIP port): 4.9.x 3 s after its start, 5.x only a minute after
                if rmq.major >= 5:
                    await admin.create_topic(TOPIC, read_queue_nums=QUEUES,
                                             write_queue_nums=QUEUES, broker_addr=rmq.broker_addr)
                await pulled_from_slave(client, admin, rmq.broker_addr,
                                        [s for s in sent if s.commit_log_offset >= marks["start"]])
                # idle: heartbeats (empty frames at the slave's offset) keep the connection up
                beats = conn.heartbeats
                await until(lambda: conn.heartbeats >= beats + 2, "two heartbeats")
                assert ha.connections == {conn}, "the RocketMQ slave reconnected"
        finally:
            await asyncio.to_thread(rmq.kill_broker)  # its written pages stay in the files
            await master.close()
            await namesrv.close()

    run(test)
    assert_same_commit_log(tmp_path / "master", tmp_path / "slave", marks["start"], marks["end"])
    assert_consistent(store_config(tmp_path / "master", BrokerRole.ASYNC_MASTER))


# -- 2: a Bolide slave of a real RocketMQ master ---------------------------------------------
def test_bolide_slave_replicates_a_rocketmq_master(version: str, tmp_path: Path) -> None:
    marks: dict[str, int] = {}
    sent: list[Sent] = []
    slave_store = store_config(tmp_path / "slave", BrokerRole.SLAVE)

    async def test() -> None:
        namesrv = await start_namesrv(tmp_path)
        addr = f"127.0.0.1:{namesrv.port}"
        rmq = RocketMQ(version, tmp_path / "rmq", namesrv_port=namesrv.port)
        slave: BrokerController | None = None
        try:
            # brokerIP2 is the host of the haServerAddr the master registers (default: a NIC's)
            await asyncio.to_thread(rmq.start_broker, rocketmq_settings(
                tmp_path / "master", brokerIP2="127.0.0.1",
                haSendHeartbeatInterval=str(HEARTBEAT_MS)))
            async with (Admin(addr) as admin, Producer(addr, "ha-interop-pg") as producer,
                        RemotingClient() as client):
                await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES,
                                         broker_addr=rmq.broker_addr)
                await until(lambda: has_route(admin), f"the NameServer to route {TOPIC}")
                sent.extend(await send_batch(producer, "before"))
                resume = await max_offset(admin, rmq.broker_addr)
                assert resume > SEGMENT
                marks["start"] = resume // SEGMENT * SEGMENT
                slave = BrokerController(
                    BrokerConfig(namesrv_addr=addr, listen_port=0, bind_address="127.0.0.1",
                                 broker_ip1="127.0.0.1", broker_id=1, vip_channel_enabled=False),
                    slave_store)
                await slave.start()
                ha = slave.ha_slave
                assert ha is not None
                await until(lambda: ha.connected, "the Bolide slave to connect")
                assert ha.master_addr == f"127.0.0.1:{rmq.broker_port + 1}"
                sent.extend(await send_batch(producer, "after"))
                store = slave.store

                async def caught_up() -> bool:
                    end = await max_offset(admin, rmq.broker_addr)
                    marks["end"] = end
                    return store.max_phy_offset == end and store.dispatcher.behind() == 0

                await until(caught_up, "the Bolide slave to reach the master's max offset")
                await assert_route(admin, rmq.broker_addr, slave.broker_addr)
                # the topic comes from the master's GET_ALL_TOPIC_CONFIG (the slave's sync)
                await pulled_from_slave(client, admin, slave.broker_addr,
                                        [s for s in sent if s.commit_log_offset >= marks["start"]])
                beats = ha.heartbeats
                await until(lambda: ha.heartbeats >= beats + 2, "two heartbeats")
                assert ha.connected and ha.connects == 1, "the Bolide slave reconnected"
                # every part of the metadata sync works against RocketMQ's master (the request
                # modes of 5.x; 4.x has none to give)
                assert slave.slave_sync is not None and await slave.slave_sync.sync_all()
        finally:
            if slave is not None:
                await slave.close()
            await asyncio.to_thread(rmq.kill_broker)
            await namesrv.close()

    run(test)
    assert_same_commit_log(tmp_path / "master", tmp_path / "slave", marks["start"], marks["end"])
    assert_consistent(slave_store)

