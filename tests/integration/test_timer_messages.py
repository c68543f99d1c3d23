"""Timer messages through a broker (``Message.deliver_time_ms`` / ``delay_time_ms``, RocketMQ 5's
TIMER_DELIVER_MS / TIMER_DELAY_MS): each reaches its topic at its time, not before, hopping
through the delay levels; a broker restarted meanwhile still delivers it on time; RocketMQ's
refusals."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bolide.client import Admin, Producer
from bolide.client.errors import BrokerSystemError, MessageIllegalError
from bolide.common import Message
from bolide.common.message import MessageExt
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
