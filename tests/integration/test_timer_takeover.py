"""A store with timer messages waiting in RocketMQ 5's timer queue (``rmq_sys_wheel_timer``,
written here as RocketMQ writes it, with its ``config/timercheck``): the broker takes over the
ones neither delivered nor recalled at start, a rolled copy once, delivers each at its time
(one overdue at once), and a restart takes over nothing again."""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

from bolide.broker.timer_takeover import TakeoverMark
from bolide.common import Message
from bolide.common import properties as P
from bolide.common.topic import SCHEDULE_TOPIC, TIMER_TOPIC
from bolide.store import MessageStore, StoreConfig
from bolide.testing.servers import Servers, running_servers
from conftest import wait_until

SLACK_MS = 600  # half the shortest level (1 s), and a little for the clock


def store_config(root: Path) -> StoreConfig:
    # the geometry running_servers gives its broker
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1024 * 1024,
                       mapped_file_size_consume_queue=1000 * 20)


def timer_message(body: bytes, due_ms: int, uniq: str, *, topic: str = "Later", **extra: str) -> Message:
    """A timer message as RocketMQ 5 stores it in its timer queue."""
    props = {P.TIMER_OUT_MS: str(due_ms), P.REAL_TOPIC: topic, P.REAL_QUEUE_ID: "0",
             P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq, P.TIMER_DELIVER_MS: str(due_ms), **extra}
    return Message(TIMER_TOPIC, body, properties=props)


def write_rocketmq_timers(root: Path, now: int) -> None:
    """Seven entries of RocketMQ's timer queue: delivered (0), waiting a little (1) and long (2),
    recalled (3, recalled by 4), rolled (5, its copy 6), and one stored after the wheel's last
    read that was due before (7): RocketMQ had not put it in the wheel yet."""
    second = now // 1000 * 1000
    with MessageStore(store_config(root)) as store:
        entries = [
            timer_message(b"delivered", second - 60_000, "U0"),
            timer_message(b"soon", second + 4_000, "U1"),
            timer_message(b"in-an-hour", second + 3600_000, "U2"),
            timer_message(b"recalled", second + 4_000, "U3"),
            timer_message(b"0", second + 4_000, "U3-recall",
                          **{P.TIMER_DEL_UNIQKEY: "Later+U3"}),
            timer_message(b"rolled", second + 5_000, "U5"),
            timer_message(b"rolled", second + 5_000, "U5", TIMER_ROLL_TIMES="1"),
            timer_message(b"overdue", second - 30_000, "U7"),
        ]
        for msg in entries:
            assert store.put_message(msg, 0).ok
        assert store.wait_dispatched(10)
    # lastReadTimeMs: 10 s ago; lastTimerQueueOffset: the first 7 entries are in the wheel
    checkpoint = struct.pack(">qqqqqqq", second - 10_000, 0, 7, 7, 0, now, 3) + bytes(4096 - 56)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "timercheck").write_bytes(checkpoint)


def bodies(s: Servers, topic: str) -> list[bytes]:
    return [m.body for m in s.broker.store.get_message("t", topic, 0, 0, 32).messages]


def test_the_broker_takes_over_rocketmqs_waiting_timer_messages(tmp_path: Path) -> None:
    root = tmp_path / "store"
    now = int(time.time() * 1000)
    write_rocketmq_timers(root, now)

    async def first_start() -> None:
        async with running_servers(root) as s:
            report = s.broker.timer_takeover
            assert report is not None
            counts = (report.scanned, report.taken_over, report.recalled, report.delivered_before)
            assert counts == (8, 4, 1, 1)
            store = s.broker.store
            assert await asyncio.to_thread(store.wait_dispatched, 10)
            # overdue: in its topic at once; the others wait in the delay levels
            await wait_until(lambda: b"overdue" in bodies(s, "Later"), timeout=10)
            waiting = [m for q in range(len(store.delay_millis))
                       for m in store.get_message("t", SCHEDULE_TOPIC, q, 0, 32).messages]
            assert sorted(m.body for m in waiting) == [b"in-an-hour", b"rolled", b"soon"]
            assert all(m.properties[P.REAL_TOPIC] == "Later" for m in waiting)
            await wait_until(lambda: len(bodies(s, "Later")) == 3, timeout=20)
            got = s.broker.store.get_message("t", "Later", 0, 0, 32).messages
            assert [m.body for m in got] == [b"overdue", b"soon", b"rolled"]
            for m in got[1:]:
                assert m.store_timestamp >= int(m.properties[P.TIMER_OUT_MS]) - SLACK_MS
        mark = TakeoverMark.in_store(root)
        assert mark.load() and mark.queue_offset == 8

    async def second_start() -> None:
        async with running_servers(root) as s:
            assert s.broker.timer_takeover is None  # nothing new in RocketMQ's queue
            assert bodies(s, "Later") == [b"overdue", b"soon", b"rolled"]

    asyncio.run(asyncio.wait_for(first_start(), 60))
    asyncio.run(asyncio.wait_for(second_start(), 60))


def test_without_timercheck_only_the_messages_due_later_are_taken_over(tmp_path: Path) -> None:
    root = tmp_path / "store"
    now = int(time.time() * 1000)
    write_rocketmq_timers(root, now)
    (root / "config" / "timercheck").unlink()

    async def start() -> None:
        async with running_servers(root) as s:
            report = s.broker.timer_takeover
            assert report is not None
            # soon, in-an-hour and rolled; delivered and overdue cannot be told apart
            assert (report.taken_over, report.recalled, report.delivered_before) == (3, 1, 2)

    asyncio.run(asyncio.wait_for(start(), 60))
