"""A real RocketMQ 5.3.3 broker's pops carried over to Bolide: a SimpleConsumer pops from RocketMQ
(which moves the group's offset past what it hands out and keeps what is out in its revive log
and timer wheel), acknowledges some, changes one's invisible time to 0 (RocketMQ revives it into
the group's pop retry topic); RocketMQ is killed, and a Bolide broker on its store hands out
every message not acknowledged (and those never popped), none of the acknowledged ones, and
takes the consumer's RocketMQ handles for the messages it took over.

Needs java, javac and mvn (the jars come from Maven Central once, into ``interop/.m2``):
without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bolide.client import (
    Admin,
    ConsumeFrom,
    Message,
    MessageExt,
    MessageQueue,
    MQClientError,
    Producer,
    SimpleConsumer,
)
from bolide.store.config_files import ConsumerOffsetManager
from bolide.store.pop_revive_log import REVIVE_GROUP, revive_topic
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable
from bolide.testing.servers import running_servers
from conftest import unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSION = "5.3.3"
TOPIC = "PopHandover"
GROUP = "pop_handover_cg"
RETRY_TOPIC = f"%RETRY%{GROUP}_{TOPIC}"
REVIVE_TOPIC = revive_topic("DefaultCluster")
SHORT_MS = 10_000  # the second pop's invisible time: its unacknowledged message comes back in Bolide


async def _receive(consumer: SimpleConsumer, count: int, invisible_ms: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    async with asyncio.timeout(20):
        while len(got) < count:
            got += await consumer.receive(count - len(got), invisible_duration_ms=invisible_ms,
                                          await_duration_ms=2000)
    return got


def _offsets_written(root: Path) -> bool:
    """RocketMQ wrote the group's offset past both pops, and its revive service's progress."""
    offsets = ConsumerOffsetManager.in_store(root)
    try:
        offsets.load()
    except Exception:  # a file being replaced: read it again
        return False
    return offsets.query(GROUP, TOPIC, 0) == 6 and offsets.query(REVIVE_GROUP, REVIVE_TOPIC, 0) is not None


def test_bolide_hands_out_what_rocketmq_pops_left_unacknowledged(tmp_path: Path) -> None:
    try:
        rmq = RocketMQ(VERSION, tmp_path / "rocketmq")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    root = tmp_path / "store"
    extra = {"flushConsumerOffsetInterval": "300"}  # written every 0.3 s instead of 5 s

    async def on_rocketmq() -> dict[str, MessageExt]:
        async with Admin(rmq.namesrv_addr) as admin:
            async with asyncio.timeout(30):
                while rmq.broker_addr not in await admin.master_addrs():
                    await asyncio.sleep(0.1)
            await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1,
                                     broker_addr=rmq.broker_addr)
            async with Producer(rmq.namesrv_addr, "pop_handover_pg") as producer:
                for i in range(8):
                    await producer.send(Message(TOPIC, b"m%d" % i))
            # RocketMQ writes consumerOffset.json first 10 s after its start, then every 0.3 s:
            # pop once it does, so that it has the offsets soon after the pops
            async with asyncio.timeout(20):
                while not (root / "config" / "consumerOffset.json").exists():
                    await asyncio.sleep(0.1)
            consumer = SimpleConsumer(rmq.namesrv_addr, GROUP, {TOPIC: "*"},
                                      consume_from=ConsumeFrom.FIRST_OFFSET)
            async with consumer:
                popped = {m.body.decode(): m for m in await _receive(consumer, 3, 60_000)}
                assert sorted(popped) == ["m0", "m1", "m2"]
                # the second pop before m1 is revived: m5's invisible time runs meanwhile
                second = {m.body.decode(): m for m in await _receive(consumer, 3, SHORT_MS)}
                assert sorted(second) == ["m3", "m4", "m5"]
                await consumer.change_invisible_duration(popped["m1"], 0)  # revived into the retry topic
                await consumer.ack(popped["m0"])
                await consumer.ack(second["m3"])
                async with asyncio.timeout(20):
                    while True:
                        try:
                            if (await admin.min_max_offset(MessageQueue(RETRY_TOPIC, "broker-a", 0),
                                                           rmq.broker_addr))[1] >= 1:
                                break
                        except MQClientError:
                            pass  # the retry topic is not there yet
                        await asyncio.sleep(0.1)
                popped.update(second)
        return popped

    try:
        rmq.start_namesrv()
        rmq.start_broker(BrokerSettings(root, extra=extra))
        popped = asyncio.run(asyncio.wait_for(on_rocketmq(), 90))
        deadline = time.monotonic() + 10
        while not _offsets_written(root):
            assert time.monotonic() < deadline, "RocketMQ never wrote the group's offset past its pops"
            time.sleep(0.05)
        rmq.kill_broker()
        killed_ms = int(time.time() * 1000)
    finally:
        rmq.kill_broker()
        rmq.stop()
    second_pop_ms = int(popped["m3"].properties["POP_CK"].split(" ")[1])
    # RocketMQ revives m5 2 s after its revive time at the earliest: it must not have run as long
    assert killed_ms < second_pop_ms + SHORT_MS - 1_000, "RocketMQ was too slow for this test"
    store_options = rmq.store_options()  # its store's geometry

    async def on_bolide() -> None:
        async with running_servers(root, store_options=store_options) as s:
            report = s.broker.pop_takeover
            assert report is not None
            assert (report.adopted, report.skipped, report.unreadable) == (3, 0, 0), report  # m2, m4, m5
            addr = f"127.0.0.1:{s.namesrv.port}"
            consumer = SimpleConsumer(addr, GROUP, {TOPIC: "*"}, consume_from=ConsumeFrom.FIRST_OFFSET)
            async with consumer:
                # the handles RocketMQ gave still work for the messages Bolide took over
                await consumer.ack(popped["m4"])
                await consumer.change_invisible_duration(popped["m2"], 0)
                got: dict[str, MessageExt] = {}
                async with asyncio.timeout(30):  # m5 comes back at its revive time
                    while len(got) < 5:
                        for m in await consumer.receive(16, invisible_duration_ms=60_000,
                                                        await_duration_ms=2000):
                            assert m.body.decode() not in got, f"{m.body!r} handed out twice"
                            got[m.body.decode()] = m
                            await consumer.ack(m)
                assert sorted(got) == ["m1", "m2", "m5", "m6", "m7"]
                assert {b: m.reconsume_times for b, m in got.items()} == {
                    "m1": 1, "m2": 1, "m5": 1, "m6": 0, "m7": 0}
                assert await consumer.receive(16, await_duration_ms=500) == []
            offsets = s.broker.offsets
            assert (offsets.query(GROUP, TOPIC, 0), offsets.query(GROUP, RETRY_TOPIC, 0)) == (8, 1)

    asyncio.run(asyncio.wait_for(on_bolide(), 90))
