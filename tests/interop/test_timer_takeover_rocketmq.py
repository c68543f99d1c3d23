"""A real RocketMQ 5.3.3 broker's timer messages carried over to Bolide: RocketMQ stores them in
its timer wheel; after it is killed, a Bolide broker on its store delivers the ones still waiting
at their time, never the one RocketMQ delivered or the recalled one. And the other way: a
RocketMQ broker on a store Bolide wrote delivers Bolide's waiting timer message at its time.

Needs java, javac and mvn (the jars come from Maven Central once, into ``interop/.m2``):
without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bolide.client import Admin as AsyncAdmin
from bolide.client import ClientConfig
from bolide.client import Producer as AsyncProducer
from bolide.client.blocking import Admin, Producer
from bolide.common import Message
from bolide.common.topic import SCHEDULE_TOPIC
from bolide.store import MessageStore, StoreConfig
from bolide.store.timer_checkpoint import TimerCheckpoint
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable
from bolide.testing.servers import running_servers
from conftest import unavailable, wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSION = "5.3.3"
TOPIC = "TimerHandover"
SLACK_MS = 600  # half the shortest delay level, and a little for the clock


def test_bolide_delivers_the_timer_messages_rocketmq_left_waiting(tmp_path: Path) -> None:
    try:
        rmq = RocketMQ(VERSION, tmp_path / "rocketmq")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    root = tmp_path / "store"
    try:
        rmq.start_namesrv()
        rmq.start_broker(BrokerSettings(root, extra={"recallMessageEnable": "true"}))
        config = ClientConfig(rmq.namesrv_addr, client_ip="127.0.0.1")
        with Admin(config) as admin, Producer(config, "timer_pg") as producer:
            deadline = time.monotonic() + 30
            while rmq.broker_addr not in admin.master_addrs():
                assert time.monotonic() < deadline, f"{rmq.broker_addr} never registered"
                time.sleep(0.1)
            admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1, broker_addr=rmq.broker_addr)
            now = int(time.time() * 1000)
            due = {"soon": now + 2_000, "later": now + 12_000, "recalled": now + 12_000,
                   "tomorrow": now + 86_400_000}
            for body, at in due.items():
                msg = Message(TOPIC, body.encode())
                msg.deliver_time_ms = at
                sent = producer.send(msg)
                if body == "recalled":
                    assert sent.recall_handle is not None
                    producer.recall_message(TOPIC, sent.recall_handle)
            deadline = time.monotonic() + 20  # RocketMQ delivers "soon" before it is killed
            while next(iter(admin.topic_stats(TOPIC).values())).max_offset < 1:
                assert time.monotonic() < deadline, "RocketMQ did not deliver the first timer message"
                time.sleep(0.1)
        # RocketMQ writes how far its wheel got to config/timercheck every second: once that is
        # past "soon", a kill loses nothing of it (a clean stop takes RocketMQ 15 s here)
        deadline = time.monotonic() + 20
        while (checkpoint := TimerCheckpoint.read(root / "config" / "timercheck")) is None \
                or checkpoint.last_read_time_ms <= due["soon"]:
            assert time.monotonic() < deadline, f"RocketMQ's timercheck stays at {checkpoint}"
            time.sleep(0.05)
    finally:
        rmq.kill_broker()
        rmq.stop()
    assert int(time.time() * 1000) < due["later"] - 3_000, "RocketMQ was too slow for this test"
    store_options = rmq.store_options()  # its store's geometry

    async def bolide() -> None:
        async with running_servers(root, store_options=store_options) as s:
            report = s.broker.timer_takeover
            assert report is not None
            assert (report.taken_over, report.recalled, report.delivered_before) == (2, 1, 1), report
            store = s.broker.store

            def arrived() -> list[bytes]:
                return [m.body for m in store.get_message("t", TOPIC, 0, 0, 32).messages]

            # the take-over's puts are read back once dispatched
            await asyncio.to_thread(store.wait_dispatched)
            waiting = [m.body for q in range(len(store.delay_millis))
                       for m in store.get_message("t", SCHEDULE_TOPIC, q, 0, 32).messages]
            assert sorted(waiting) == [b"later", b"tomorrow"]
            await wait_until(lambda: len(arrived()) == 2, timeout=30)
            got = store.get_message("t", TOPIC, 0, 0, 32).messages
            assert [m.body for m in got] == [b"soon", b"later"]  # "soon" from RocketMQ, once
            assert got[1].store_timestamp >= due["later"] // 1000 * 1000 - 1000 - SLACK_MS

    asyncio.run(asyncio.wait_for(bolide(), 90))


def test_rocketmq_delivers_bolide_waiting_timer_messages_at_their_time(tmp_path: Path) -> None:
    """The other way: a timer message waiting in Bolide's delay levels when a RocketMQ 5.3.3
    broker takes the store over goes into RocketMQ's timer wheel when its level ends (for the
    TIMER_DELAY_MS left) and arrives at its time, not at the end of that level: RocketMQ's wheel
    marks what it delivers with TIMER_DEQUEUE_MS, and the message is stored in its topic no
    earlier than its due time (RocketMQ's wheel rounds to its 1 s precision)."""
    try:
        rmq = RocketMQ(VERSION, tmp_path / "rocketmq")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    root = tmp_path / "store"
    levels = "1s 2s 4s 8s 16s"
    settings = BrokerSettings(root, extra={"messageDelayLevel": levels})
    store_options = {"mapped_file_size_commit_log": settings.mapped_file_size_commit_log,
                     "mapped_file_size_consume_queue": settings.mapped_file_size_consume_queue,
                     "message_delay_level": levels,
                     "max_hash_slot_num": 50_000, "max_index_num": 200_000}  # as the harness's broker.conf

    async def bolide() -> int:
        async with running_servers(root, store_options=store_options) as s:
            async with AsyncAdmin(s.namesrv_addr) as admin:
                await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
            msg = Message(TOPIC, b"waiting")
            msg.deliver_time_ms = int(time.time() * 1000) + 20_000
            async with AsyncProducer(s.namesrv_addr, "timer_pg") as producer:
                await producer.send(msg)
            store = s.broker.store
            await asyncio.to_thread(store.wait_dispatched)
            # waiting in the 16 s level, with the 4 s left after it for RocketMQ's wheel
            stored = store.get_message("t", SCHEDULE_TOPIC, 4, 0, 1).messages
            assert len(stored) == 1 and "TIMER_OUT_MS" not in stored[0].properties, stored
            assert stored[0].properties["TIMER_DELAY_MS"].isdecimal()
            return int(stored[0].properties["TIMER_DELIVER_MS"])

    due = asyncio.run(asyncio.wait_for(bolide(), 60))
    try:
        rmq.start_namesrv()
        rmq.start_broker(settings)
        config = ClientConfig(rmq.namesrv_addr, client_ip="127.0.0.1")
        with Admin(config) as admin:
            deadline = time.monotonic() + 60
            while rmq.broker_addr not in admin.master_addrs():
                assert time.monotonic() < deadline, f"{rmq.broker_addr} never registered"
                time.sleep(0.1)
            while next(iter(admin.topic_stats(TOPIC).values())).max_offset < 1:
                assert time.monotonic() < deadline, "RocketMQ never delivered the timer message"
                time.sleep(0.05)
    finally:
        rmq.kill_broker()
        rmq.stop()
    with MessageStore(StoreConfig(**rmq.store_options())) as store:
        got = store.get_message("t", TOPIC, 0, 0, 1).messages
    assert len(got) == 1 and got[0].body == b"waiting", got
    assert "TIMER_DEQUEUE_MS" in got[0].properties, got[0].properties  # through RocketMQ's wheel
    assert got[0].store_timestamp >= due - 1_000 - SLACK_MS, got[0].store_timestamp - due
