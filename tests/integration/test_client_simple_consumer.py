"""SimpleConsumer (RocketMQ 5's pop over remoting) against a broker on loopback: receive with a
tag filter, acknowledge, change the invisible duration (the message comes back with its
reconsume times one higher), wait for messages, and the blocking twin."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from bolide.client import Admin, ConsumeFrom, MQBrokerError, Producer, SimpleConsumer, blocking
from bolide.common import Message
from bolide.protocol.codes import ResponseCode
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

TOPIC, GROUP = "SimpleTopic", "simple_cg"


async def send(s: Servers, *bodies: tuple[bytes, str]) -> None:
    async with Producer(s.namesrv_addr, "simple_pg") as producer:
        for body, tag in bodies:
            await producer.send(Message(TOPIC, body, tags=tag))


def test_receive_ack_and_change_invisible_duration(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
        await send(s, (b"a", "TagA"), (b"b", "TagB"), (b"c", "TagA"))
        async with SimpleConsumer(s.namesrv_addr, GROUP, {TOPIC: "TagA"},
                                  consume_from=ConsumeFrom.FIRST_OFFSET) as consumer:
            # its heartbeat shows the group online, as a pop consumer (consumerConnection)
            group = s.broker.clients.consumers[GROUP]
            assert group.consume_type == "CONSUME_POP"
            assert list(group.clients.values()) == [consumer.client_id]
            assert set(group.subscriptions) == {TOPIC}
            got = []
            while len(got) < 2:
                got += await consumer.receive(16, invisible_duration_ms=60_000, await_duration_ms=2000)
            assert sorted(m.body for m in got) == [b"a", b"c"]  # the tag filter kept b out
            assert all(m.topic == TOPIC and m.reconsume_times == 0 for m in got)
            first, second = sorted(got, key=lambda m: m.body)
            await consumer.ack(first)
            await consumer.ack(first)  # acknowledged already: no effect
            before = copy.copy(second)
            before.properties = dict(second.properties)
            await consumer.change_invisible_duration(second, 0)  # visible again at once
            with pytest.raises(MQBrokerError) as stale:  # its old handle no longer acknowledges
                await consumer.ack(before)
            assert stale.value.code == ResponseCode.NO_MESSAGE
            again = await consumer.receive(16, invisible_duration_ms=60_000, await_duration_ms=2000)
            assert [(m.body, m.reconsume_times) for m in again] == [(b"c", 1)]
            await consumer.ack(again[0])
            assert await consumer.receive(16, await_duration_ms=300) == []
            waiting = asyncio.ensure_future(consumer.receive(16, await_duration_ms=10_000))
            await wait_until(lambda: s.broker.pop._waiting >= 1)  # the receive waits for a message
            await send(s, (b"late", "TagA"))
            [late] = await waiting
            assert late.body == b"late"
            await consumer.ack(late)
        assert sum(s.broker.offsets.query(GROUP, TOPIC, q) or 0 for q in range(2)) == 4  # all done
        assert GROUP not in s.broker.clients.consumers  # unregistered by close()

    run_with_servers(tmp_path, test)


def test_the_blocking_simple_consumer(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s, (b"x", "T"))

        def consume() -> list[bytes]:
            with blocking.SimpleConsumer(s.namesrv_addr, "blocking_cg", {TOPIC: "*"},
                                         consume_from=ConsumeFrom.FIRST_OFFSET) as consumer:
                consumer.start()
                msgs = consumer.receive(4, await_duration_ms=2000)
                for msg in msgs:
                    consumer.ack(msg)
                return [m.body for m in msgs]

        assert await asyncio.to_thread(consume) == [b"x"]

    run_with_servers(tmp_path, test)
