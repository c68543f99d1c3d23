"""Reads from the slave, in-process (a NameServer, a master and a slave on free ports).

A master with slaveReadEnable answers pulls that read far behind the CommitLog's end with
suggestWhichBrokerId = the group's whichBrokerWhenConsumeSlowly (1), and the bolide consumer
pulls from that broker next; with the master gone from the route, consumers keep reading
from the slave and commit their offsets there, and a restarted master takes its slave back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import ha_cluster
from ha_cluster import Cluster, store_config, wait_until

from bolide.client import ClientConfig, ConsumeContext, ConsumeFrom, ConsumeStatus, MessageExt, PushConsumer
from bolide.client.route import build_route
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import TopicRouteData
from bolide.protocol.bodies.broker import SubscriptionGroupConfig
from bolide.protocol.bodies.route import BrokerData, QueueData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from bolide.store import BrokerRole
from conftest import assert_consistent

BODY = 1000  # bytes of padding per message: each record is a little over 1 KB
# "physical memory" of 10 000 bytes: accessMessageInMemoryMaxRatio 40 % leaves 4000 bytes, so a
# read more than about 4 records behind the CommitLog's end counts as far behind
SMALL_MEMORY = 10_000
TOPIC = "SlaveRead"


def run(root: Path, test: Callable[[Cluster], Awaitable[None]], store_options: dict[str, Any],
        **broker_options: Any) -> None:
    ha_cluster.run(root, test, store_options=store_options,
                   options={"ha_reconnect_interval_ms": 100, **broker_options})


async def invoke(c: Cluster, addr: str, code: int, header: Any = None,
                 body: bytes = b"") -> RemotingCommand:
    return await c.client.invoke(addr, RemotingCommand.request(code, header, body))


async def create_topic(c: Cluster) -> None:
    header = CreateTopicRequestHeader(topic=TOPIC, default_topic="TBW102", read_queue_nums=2,
                                      write_queue_nums=2, perm=6)
    for b in (c.master, c.slave):
        r = await invoke(c, b.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        assert r.code == ResponseCode.SUCCESS, r


async def send_many(c: Cluster, start: int, count: int) -> list[bytes]:
    bodies = []
    for i in range(start, start + count):
        body = b"%d:" % i + bytes(BODY)
        header = SendMessageRequestHeader(producer_group="pg", topic=TOPIC, default_topic="TBW102",
                                          default_topic_queue_nums=4, queue_id=i % 2, sys_flag=0,
                                          born_timestamp=1_700_000_000_000, flag=0, properties="")
        r = await invoke(c, c.master.broker_addr, RequestCode.SEND_MESSAGE_V2, header.to_v2(), body)
        assert r.code == ResponseCode.SUCCESS, r
        bodies.append(body)
    return bodies


async def caught_up(c: Cluster) -> None:
    master, slave = c.master.store, c.slave.store
    await wait_until(lambda: slave.max_phy_offset == master.max_phy_offset)
    await wait_until(lambda: slave.dispatcher.behind() == 0 and master.dispatcher.behind() == 0)


async def pull(c: Cluster, addr: str, offset: int, max_nums: int = 1, queue_id: int = 0,
               commit_offset: int | None = None) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group="cg", topic=TOPIC, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=max_nums, sys_flag=4 | (1 if commit_offset is not None else 0),
        commit_offset=commit_offset or 0, suspend_timeout_millis=0, subscription="*",
        sub_version=0)
    return await invoke(c, addr, RequestCode.PULL_MESSAGE, header)


def suggested(r: RemotingCommand) -> int:
    return int(r.ext_fields["suggestWhichBrokerId"])


async def route_addrs(c: Cluster) -> dict[int, str]:
    r = await invoke(c, c.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                     GetRouteInfoRequestHeader(topic=TOPIC))
    if r.code != ResponseCode.SUCCESS:
        return {}
    route = TopicRouteData.decode(r.body_bytes())
    assert route.queue_datas, "the route lost its queues"
    return route.broker_datas[0].broker_addrs


class Collector:
    """A push listener recording bodies; with ``hold_after`` it stops returning after that
    many messages until ``release`` is set."""

    def __init__(self, hold_after: int | None = None) -> None:
        self.bodies: list[bytes] = []
        self.hold_after = hold_after
        self.release = asyncio.Event()

    async def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        self.bodies += [m.body for m in msgs]
        if self.hold_after is not None and len(self.bodies) >= self.hold_after:
            await self.release.wait()
        return ConsumeStatus.CONSUME_SUCCESS


def consumer(c: Cluster, listener: Collector, **options: Any) -> PushConsumer:
    config = ClientConfig(c.namesrv_addr, poll_name_server_interval_ms=200,
                          heartbeat_broker_interval_ms=500)
    push = PushConsumer(config, "cg", listener=listener, consume_from=ConsumeFrom.FIRST_OFFSET,
                        rebalance_interval_ms=200, suspend_ms=1000, pull_timeout_ms=3000,
                        pull_retry_delay_ms=100, persist_offset_interval_ms=200, **options)
    push.subscribe(TOPIC)
    return push


def test_pull_address_follows_the_suggested_broker_id() -> None:
    def where(addrs: dict[int, str], broker_id: int, only_this: bool = False) -> object:
        data = TopicRouteData(queue_datas=[QueueData(broker_name="b", read_queue_nums=1)],
                              broker_datas=[BrokerData(cluster="c", broker_name="b",
                                                       broker_addrs=addrs)])
        return build_route("T", data).subscribe_addr("b", broker_id, only_this)

    both = {0: "m:1", 1: "s:1", 2: "s:2"}
    assert where(both, 0) == ("m:1", False)
    assert where(both, 1) == ("s:1", True)
    assert where({0: "m:1", 2: "s:2"}, 1) == ("s:2", True)  # the next id
    assert where({0: "m:1"}, 1) == ("m:1", False)  # no such slave: the master
    assert where({1: "s:1", 2: "s:2"}, 0) == ("s:1", True)  # master down: a slave
    assert where({1: "s:1"}, 0, only_this=True) is None
    assert build_route("T", TopicRouteData()).subscribe_addr("b") is None


def test_pull_answers_suggest_the_slave_for_reads_far_behind(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        await create_topic(c)
        await send_many(c, 0, 20)  # queue 0 gets 10 of them
        await caught_up(c)
        master = c.master.broker_addr

        r = await pull(c, master, 0)
        assert r.code == ResponseCode.SUCCESS and suggested(r) == 0  # slaveReadEnable=false
        r = await invoke(c, master, RequestCode.UPDATE_BROKER_CONFIG, body=b"slaveReadEnable=true\n")
        assert r.code == ResponseCode.SUCCESS, r
        r = await pull(c, master, 0)
        assert r.code == ResponseCode.SUCCESS and suggested(r) == 1  # far behind: the slave
        r = await pull(c, master, 8)
        assert r.code == ResponseCode.SUCCESS and suggested(r) == 0  # near the end: brokerId
        r = await pull(c, master, 10)
        assert r.code == ResponseCode.PULL_NOT_FOUND and suggested(r) == 0

        group = SubscriptionGroupConfig(group_name="cg", broker_id=1,
                                        which_broker_when_consume_slowly=2)
        r = await invoke(c, master, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                         body=group.encode())
        assert r.code == ResponseCode.SUCCESS, r
        assert suggested(await pull(c, master, 0)) == 2
        assert suggested(await pull(c, master, 8)) == 1

        r = await invoke(c, master, RequestCode.UPDATE_BROKER_CONFIG, body=b"slaveReadEnable=false\n")
        assert r.code == ResponseCode.SUCCESS, r
        assert suggested(await pull(c, master, 0)) == 0

        # the slave serves reads even with slaveReadEnable=false, but never moves an offset
        # nor stores one
        slave = c.slave.broker_addr
        r = await pull(c, slave, 3, commit_offset=3)
        assert r.code == ResponseCode.SUCCESS and suggested(r) == 0
        assert c.slave.offsets.query("cg", TOPIC, 0) is None
        r = await pull(c, slave, 25)
        assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY, r
        assert int(r.ext_fields["nextBeginOffset"]) == 25
        settings = c.slave.subscription_groups.get("cg")  # the slave's copy may be synced
        assert settings is not None and suggested(r) == settings.broker_id
        r = await pull(c, master, 25)
        assert r.code == ResponseCode.PULL_OFFSET_MOVED, r
        assert int(r.ext_fields["nextBeginOffset"]) == 10

    run(tmp_path, test, {"total_physical_memory_bytes": SMALL_MEMORY})


def test_push_consumer_follows_the_suggestion_to_the_slave(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        await create_topic(c)
        bodies = await send_many(c, 0, 120)
        await caught_up(c)
        collector = Collector()
        push = consumer(c, collector, pull_batch_size=8)
        async with push:
            await wait_until(lambda: len(collector.bodies) >= len(bodies))
            await wait_until(lambda: all(
                c.master.offsets.query("cg", TOPIC, q) == 60 for q in (0, 1)))  # commits: master
        assert sorted(collector.bodies) == sorted(bodies)  # each once
        from_master, from_slave = c.master.stats.transferred, c.slave.stats.transferred
        assert from_master + from_slave == len(bodies)
        # the first pull of each queue goes to the master, which sends the consumer on
        assert from_master <= 2 * 8 and from_slave >= len(bodies) - 2 * 8

    run(tmp_path, test, {"total_physical_memory_bytes": SMALL_MEMORY}, slave_read_enable=True)


def test_consumers_read_from_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    async def test(c: Cluster) -> None:
        await create_topic(c)
        bodies = await send_many(c, 0, 100)
        await caught_up(c)
        master_port, master_ha_port = c.master.port, c.master.ha_master.port  # type: ignore[union-attr]
        collector = Collector(hold_after=10)
        push = consumer(c, collector, pull_batch_size=4, pull_threshold_for_queue=4)
        async with push:
            await wait_until(lambda: len(collector.bodies) >= 10)
            await c.master.close()  # its NameServer connection closes: the route drops it
            await wait_until_async(lambda: route_addrs(c), {1: c.slave.broker_addr})
            pulled_from_master = c.master.stats.transferred
            assert pulled_from_master < len(bodies) // 2
            collector.release.set()
            await wait_until(lambda: len(collector.bodies) >= len(bodies))
            assert sorted(collector.bodies) == sorted(bodies)
            # the rest came from the slave (more only if a pull cut by the close was repeated)
            assert c.slave.stats.transferred >= len(bodies) - pulled_from_master
            # progress is committed on the slave while the master is away
            await wait_until(lambda: all(
                c.slave.offsets.query("cg", TOPIC, q) == 50 for q in (0, 1)))

            # the master comes back on its store and ports: the slave resumes replication
            c.master = c.broker("master", BrokerRole.ASYNC_MASTER, listen_port=master_port,
                                ha_listen_port=master_ha_port)
            await c.master.start()
            await wait_until(lambda: c.slave.ha_slave is not None and c.slave.ha_slave.connected)
            more = await send_many(c, 100, 20)
            await caught_up(c)
            await wait_until(lambda: len(collector.bodies) >= len(bodies) + len(more))
            assert sorted(collector.bodies) == sorted(bodies + more)

    run(tmp_path, test, {})
    assert_consistent(store_config(tmp_path / "master", BrokerRole.ASYNC_MASTER))
    assert_consistent(store_config(tmp_path / "slave", BrokerRole.SLAVE))


async def wait_until_async(get: Callable[[], Awaitable[object]], expected: object,
                           timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while (value := await get()) != expected:
        assert time.monotonic() < deadline, f"still {value!r}, not {expected!r}"
        await asyncio.sleep(0.05)
