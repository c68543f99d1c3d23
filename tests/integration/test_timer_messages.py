"""Timer messages through a broker (``Message.deliver_time_ms`` / ``delay_time_ms``, RocketMQ 5's
TIMER_DELIVER_MS / TIMER_DELAY_MS): each reaches its topic at its time, not before, hopping
through the delay levels; a broker restarted meanwhile still delivers it on time; RocketMQ's
refusals."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bolide.client import Admin, Producer
from bolide.client.errors import BrokerSystemError, MessageError, MessageIllegalError, MQBrokerError
from bolide.common import Message
from bolide.common.message import MessageExt
from bolide.common.recall_handle import decode_recall_handle
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

SLACK_MS = 600  # half the shortest level (1 s), and a little for the clock


def arrived(s: Servers, topic: str) -> list[MessageExt]:
    store = s.broker.store
    return store.get_message("g", topic, 0, 0, max_count=32).messages


def test_timer_messages_arrive_at_their_time(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            await admin.create_topic("Later", read_queue_nums=1, write_queue_nums=1)
        now = int(time.time() * 1000)
        at = Message("Later", b"at")
        at.deliver_time_ms = now + 3200
        after = Message("Later", b"after")
        after.delay_time_ms = 1500
        async with Producer(s.namesrv_addr, "timer_pg") as producer:
            for msg in (at, after, Message("Later", b"now")):
                await producer.send(msg)
        await wait_until(lambda: len(arrived(s, "Later")) == 3, timeout=20)
        got = arrived(s, "Later")
        assert [m.body for m in got] == [b"now", b"after", b"at"]
        for m in got[1:]:
            due = int(m.properties["TIMER_OUT_MS"])
            assert m.store_timestamp >= due - SLACK_MS, (m.body, m.store_timestamp - due)
            assert m.properties["REAL_TOPIC"] == "Later" and "DELAY" not in m.properties
        assert int(got[2].properties["TIMER_OUT_MS"]) == (now + 3200) // 1000 * 1000
        # 2.2 to 3.2 s: the 1 s level two or three times, one after the other
        assert s.broker.schedule.rescheduled >= 1

    run_with_servers(tmp_path, test, timeout=40)


def test_a_timer_message_survives_a_broker_restart(tmp_path: Path) -> None:
    due: list[int] = []

    async def send(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            await admin.create_topic("Later", read_queue_nums=1, write_queue_nums=1)
        msg = Message("Later", b"patient")
        msg.delay_time_ms = 4000
        async with Producer(s.namesrv_addr, "timer_pg") as producer:
            await producer.send(msg)
        due.append(int(time.time() * 1000) + 4000)
        assert arrived(s, "Later") == []

    async def after_restart(s: Servers) -> None:
        await wait_until(lambda: len(arrived(s, "Later")) == 1, timeout=20)
        [m] = arrived(s, "Later")
        assert m.body == b"patient" and m.store_timestamp >= due[0] - 1000 - SLACK_MS

    run_with_servers(tmp_path, send)
    run_with_servers(tmp_path, after_restart, timeout=40)


def test_refused_timer_messages(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "timer_pg") as producer:
            too_late = Message("Later", b"x")
            too_late.delay_time_ms = 4 * 86400_000
            with pytest.raises(MessageIllegalError, match="max delay"):
                await producer.send(too_late)
            bad = Message("Later", b"x", properties={"TIMER_DELAY_SEC": "soon"})
            with pytest.raises(MessageIllegalError, match="not a whole number"):
                await producer.send(bad)

    run_with_servers(tmp_path, test, auto_create_topic_enable=True)

    async def disabled(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "timer_pg", retry_times=0) as producer:
            msg = Message("Later", b"x")
            msg.delay_time_ms = 5000
            with pytest.raises(BrokerSystemError, match="timerWheelEnable=true"):
                await producer.send(msg)

    run_with_servers(tmp_path / "off", disabled, auto_create_topic_enable=True,
                     timer_wheel_enable=False)


def test_a_recalled_timer_message_is_not_delivered_even_across_a_restart(tmp_path: Path) -> None:
    handles: list[str] = []

    async def send(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            for topic in ("Later", "Other"):
                await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
        async with Producer(s.namesrv_addr, "timer_pg") as producer:
            for body in (b"keep", b"recall-me", b"recall-later"):
                msg = Message("Later", body)
                msg.delay_time_ms = 2500
                sent = await producer.send(msg)
                assert sent.recall_handle is not None
                handles.append(sent.recall_handle)
            plain = await producer.send(Message("Later", b"now"))
            assert plain.recall_handle is None
            assert await producer.recall_message("Later", handles[1]) == decode_recall_handle(handles[1])[3]
            with pytest.raises(MQBrokerError, match="topic not match"):
                await producer.recall_message("Other", handles[2])
            with pytest.raises(MessageError, match="recall handle is invalid"):
                await producer.recall_message("Later", "garbage")
        assert s.broker.timer_recalls.due  # on disk before the answer

    async def recall_after_restart(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "timer_pg") as producer:
            await producer.recall_message("Later", handles[2])
        schedule = s.broker.schedule
        assert schedule is not None
        await wait_until(lambda: schedule.recalled == 2, timeout=20)
        await wait_until(lambda: len(arrived(s, "Later")) == 2, timeout=20)
        assert sorted(m.body for m in arrived(s, "Later")) == [b"keep", b"now"]
        assert not s.broker.timer_recalls.due  # used up
        due_ms = decode_recall_handle(handles[0])[2]  # delivered up to half a second early
        await wait_until(lambda: time.time() * 1000 > due_ms, timeout=5)
        async with Producer(s.namesrv_addr, "timer_pg") as producer:
            with pytest.raises(MQBrokerError, match="due already"):
                await producer.recall_message("Later", handles[0])

    run_with_servers(tmp_path, send)
    run_with_servers(tmp_path, recall_after_restart, timeout=40)

