"""Where consumers keep their positions, against an in-process NameServer + Broker: the local
file of broadcasting consumers under ``~/.rocketmq_offsets`` by default, periodic commits of
running consumers (push and pull), and a pull consumer sought to the end of a queue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bolide.client import (
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    MessageExt,
    MessageModel,
    PullConsumer,
    PushConsumer,
)
from bolide.testing.servers import Servers
from conftest import run_with_servers, send_to_first_queue, wait_until

FAST = {"rebalance_interval_ms": 200, "suspend_ms": 1000, "pull_timeout_ms": 3000}


class Collector:
    def __init__(self) -> None:
        self.messages: list[MessageExt] = []

    async def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        self.messages += msgs
        return ConsumeStatus.CONSUME_SUCCESS


def test_broadcasting_offsets_default_to_the_home_directory(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))

    async def test(s: Servers) -> None:
        queue = await send_to_first_queue(s.namesrv_addr, "Bulletin", [b"a", b"b", b"c"])
        collector = Collector()
        consumer = PushConsumer(s.namesrv_addr, "bulletin_readers", listener=collector,
                                message_model=MessageModel.BROADCASTING,
                                consume_from=ConsumeFrom.FIRST_OFFSET, **FAST)
        consumer.subscribe("Bulletin")
        async with consumer:
            await wait_until(lambda: len(collector.messages) == 3)
        path = home / ".rocketmq_offsets" / "bulletin_readers" / "offsets.json"
        table = json.loads(path.read_text())["offsetTable"]
        stored = {(e["topic"], e["brokerName"], e["queueId"]): e["offset"] for e in table}
        assert stored[(queue.topic, queue.broker_name, queue.queue_id)] == 3
        # broadcasting positions are the member's own: nothing reached the broker
        assert s.broker.offsets.query("bulletin_readers", "Bulletin", queue.queue_id) is None

    run_with_servers(tmp_path, test)


def test_push_consumer_commits_while_running(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        queue = await send_to_first_queue(s.namesrv_addr, "Ticking", [b"%d" % i for i in range(5)])
        collector = Collector()
        consumer = PushConsumer(s.namesrv_addr, "ticking_cg", listener=collector,
                                consume_from=ConsumeFrom.FIRST_OFFSET,
                                persist_offset_interval_ms=200, **FAST)
        consumer.subscribe("Ticking")
        async with consumer:
            await wait_until(lambda: len(collector.messages) == 5)
            await wait_until(lambda: s.broker.offsets.query("ticking_cg", "Ticking", queue.queue_id) == 5)

    run_with_servers(tmp_path, test)


def test_pull_consumer_auto_commits_what_poll_returned(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        queue = await send_to_first_queue(s.namesrv_addr, "Polled", [b"%d" % i for i in range(6)])
        consumer = PullConsumer(s.namesrv_addr, "polled_cg", auto_commit_interval_ms=200,
                                consume_from=ConsumeFrom.FIRST_OFFSET, pull_batch_size=4, **FAST)
        consumer.assign([queue])
        # sends are answered before dispatch: a pull sees what the ConsumeQueue holds by then
        await wait_until(lambda: s.broker.store.get_max_offset_in_queue("Polled", queue.queue_id) == 6)
        async with consumer:
            assert [int(m.body) for m in await consumer.poll(5000)] == [0, 1, 2, 3]
            await wait_until(lambda: s.broker.offsets.query("polled_cg", "Polled", queue.queue_id) == 4)
            assert await consumer.committed(queue) == 4

    run_with_servers(tmp_path, test)


def test_pull_consumer_seek_to_end(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        queue = await send_to_first_queue(s.namesrv_addr, "Tail", [b"old%d" % i for i in range(5)])
        await wait_until(lambda: s.broker.store.get_max_offset_in_queue("Tail", queue.queue_id) == 5)
        consumer = PullConsumer(s.namesrv_addr, "tail_cg", auto_commit=False,
                                consume_from=ConsumeFrom.FIRST_OFFSET, **FAST)
        consumer.assign([queue])
        async with consumer:
            await consumer.seek_to_end(queue)
            assert await consumer.poll(300) == []  # the five old messages are skipped
            await send_to_first_queue(s.namesrv_addr, "Tail", [b"new0", b"new1"])
            got: list[MessageExt] = []
            while len(got) < 2:
                batch = await consumer.poll(5000)
                assert batch, "the messages sent after seek_to_end() did not arrive"
                got += batch
            assert [m.body for m in got] == [b"new0", b"new1"]
            assert [m.queue_offset for m in got] == [5, 6]
            await consumer.commit()
            assert await consumer.committed(queue) == 7

    run_with_servers(tmp_path, test)
