"""Orderly push consumers (``PushConsumer(..., orderly=True)``) against an in-process NameServer
+ Broker: queue locks on the broker (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ), per-queue order with
one batch at a time, local retries then the DLQ, two members handing queues over, and the
blocking API."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

from bolide.client import (
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    blocking,
    select_by_hash,
)
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

FAST = {"rebalance_interval_ms": 200, "suspend_ms": 1000, "pull_timeout_ms": 3000,
        "lock_interval_ms": 300, "consume_from": ConsumeFrom.FIRST_OFFSET}


async def send_keyed(namesrv: str, topic: str, n: int, keys: int = 4) -> None:
    """``n`` messages ``"<key>:<seq>"``; one key always goes to the same queue."""
    async with Producer(namesrv, "orderly-pg") as producer:
        for i in range(n):
            key = f"k{i % keys}"
            await producer.send(Message(topic, f"{key}:{i // keys}".encode(), keys=key),
                                selector=select_by_hash, arg=key)


def sequences(msgs: list[MessageExt]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for m in msgs:
        key, seq = m.body.decode().split(":")
        out[key].append(int(seq))
    return out


def test_orderly_consumer_locks_its_queues_and_keeps_order(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send_keyed(s.namesrv_addr, "Ordered", 80)
        got: list[MessageExt] = []
        active: dict[int, int] = defaultdict(int)
        overlap: list[int] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            q = ctx.queue.queue_id
            active[q] += 1
            if active[q] > 1:
                overlap.append(q)
            await asyncio.sleep(0.001)  # give a second batch of the queue the chance to overlap
            got.extend(msgs)
            active[q] -= 1
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(s.namesrv_addr, "orderly-cg", listener=listener, orderly=True,
                                consume_batch_max_size=3, **FAST)
        consumer.subscribe("Ordered")
        async with consumer:
            await wait_until(lambda: len(got) >= 80)
            owned = {mq for mq in consumer.assignment() if mq.topic == "Ordered"}
            assert len(owned) == 4
            for mq in owned:  # the broker holds this client's locks
                assert s.broker.queue_locks.owner("orderly-cg", mq) == consumer.client_id
        assert not overlap
        assert {k: v for k, v in sequences(got).items()} == {f"k{i}": list(range(20)) for i in range(4)}
        for mq in owned:  # close() gave the locks back and committed the offsets
            assert s.broker.queue_locks.owner("orderly-cg", mq) is None
        assert sum(s.broker.offsets.query("orderly-cg", "Ordered", q) or 0 for q in range(4)) == 80

    run_with_servers(tmp_path, test)


def test_a_failed_batch_suspends_its_queue_and_is_retried_in_place(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send_keyed(s.namesrv_addr, "OrderedRetry", 12, keys=1)  # one queue: k0:0 .. k0:11
        got: list[tuple[str, int]] = []
        failures = {"k0:3": 2}  # fails twice, then succeeds

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            body = msgs[0].body.decode()
            got.append((body, msgs[0].reconsume_times))
            if failures.get(body, 0) > 0:
                failures[body] -= 1
                ctx.suspend_queue_ms = 50
                return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(s.namesrv_addr, "orderly-retry", listener=listener, orderly=True, **FAST)
        consumer.subscribe("OrderedRetry")
        async with consumer:
            # every message consumed, so the queue's offset reached the end: only a duplicate
            # could still arrive, and the assertion below would catch it
            await wait_until(lambda: len(got) >= 14 and 12 in {
                consumer.offsets.memory(mq) for mq in consumer.assignment() if mq.topic == "OrderedRetry"})
        assert [b for b, _ in got] == ([f"k0:{i}" for i in range(4)] + ["k0:3", "k0:3"]
                                       + [f"k0:{i}" for i in range(4, 12)])
        assert [r for b, r in got if b == "k0:3"] == [0, 1, 2]  # counted locally, as Java does
        # nothing went to the retry topic: an orderly consumer retries in place
        assert s.broker.store.get_max_offset_in_queue("%RETRY%orderly-retry", 0) == 0

    run_with_servers(tmp_path, test)


def test_a_message_out_of_local_retries_goes_to_the_dlq(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send_keyed(s.namesrv_addr, "OrderedDlq", 3, keys=1)
        got: list[str] = []

        def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:  # pool thread
            body = msgs[0].body.decode()
            got.append(body)
            if body == "k0:1":
                raise RuntimeError("poison message")
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(s.namesrv_addr, "orderly-dlq", listener=listener, orderly=True,
                                max_reconsume_times=2, suspend_current_queue_ms=20, **FAST)
        consumer.subscribe("OrderedDlq")
        async with consumer:
            await wait_until(lambda: "k0:2" in got)
            await wait_until(lambda: s.broker.store.get_max_offset_in_queue("%DLQ%orderly-dlq", 0) == 1)
        assert got == ["k0:0", "k0:1", "k0:1", "k0:1", "k0:2"]  # 1 + max_reconsume_times tries
        dead = s.broker.store.get_message("orderly-dlq", "%DLQ%orderly-dlq", 0, 0, 1)
        assert [m.body for m in dead.messages] == [b"k0:1"]
        assert dead.messages[0].properties["RETRY_TOPIC"] == "OrderedDlq"

    run_with_servers(tmp_path, test)


def test_two_orderly_members_hand_queues_over_without_overlap(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send_keyed(s.namesrv_addr, "OrderedShared", 40)
        consumed: dict[MessageQueue, list[tuple[str, str]]] = defaultdict(list)

        def make(name: str) -> Callable[..., Awaitable[ConsumeStatus]]:
            async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
                for m in msgs:
                    consumed[ctx.queue].append((name, m.body.decode()))
                return ConsumeStatus.CONSUME_SUCCESS
            return listener

        a = PushConsumer(s.namesrv_addr, "orderly-shared", listener=make("a"), orderly=True, **FAST)
        a.subscribe("OrderedShared")
        async with a:
            await wait_until(lambda: sum(map(len, consumed.values())) >= 40)
            b = PushConsumer(s.namesrv_addr, "orderly-shared", listener=make("b"), orderly=True, **FAST)
            b.subscribe("OrderedShared")
            async with b:
                def split() -> bool:
                    qa = {q for q in a.assignment() if q.topic == "OrderedShared"}
                    qb = {q for q in b.assignment() if q.topic == "OrderedShared"}
                    return len(qa) == 2 and len(qb) == 2
                await wait_until(split)
                for mq in b.assignment():
                    if mq.topic == "OrderedShared":
                        assert s.broker.queue_locks.owner("orderly-shared", mq) == b.client_id
                await send_keyed(s.namesrv_addr, "OrderedShared", 40)
                await wait_until(lambda: sum(map(len, consumed.values())) >= 80)
        for mq, entries in consumed.items():
            seqs = [int(body.split(":")[1]) for _, body in entries]
            assert seqs == list(range(10)) * 2, (mq, entries)  # each message once, in order
            owners = [name for name, _ in entries[10:]]
            assert len(set(owners)) == 1  # the second round went to one member per queue
        assert {name for e in consumed.values() for name, _ in e[10:]} == {"a", "b"}

    run_with_servers(tmp_path, test)


def test_blocking_orderly_consumer(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send_keyed(s.namesrv_addr, "OrderedBlocking", 20, keys=2)
        got: list[MessageExt] = []
        done = threading.Event()

        def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
            got.extend(msgs)
            if len(got) >= 20:
                done.set()

        def consume() -> None:
            with blocking.PushConsumer(s.namesrv_addr, "orderly-blocking", listener=listener,
                                       orderly=True, **FAST) as consumer:
                consumer.subscribe("OrderedBlocking")
                consumer.start()
                assert done.wait(15)

        await asyncio.to_thread(consume)
        assert sequences(got) == {"k0": list(range(10)), "k1": list(range(10))}

    run_with_servers(tmp_path, test)
