"""bolide.client consumers against an in-process NameServer + Broker: push consumers (all
messages, two members sharing the queues, tag filters, redelivery of failed messages through
the retry topic, broadcasting), the pull consumer's offsets, and the blocking API's threads."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bolide.client import (
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
    blocking,
)
from bolide.client.errors import NoRouteError, RequestNotSupportedError
from bolide.protocol import RemotingCommand
from bolide.protocol.allocate import AllocateStrategy, allocate_averagely, allocate_by_circle
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers.admin import ResetOffsetRequestHeader
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers, running_servers
from conftest import send_to_first_queue

TIMEOUT = 20.0
FAST = {"rebalance_interval_ms": 200, "suspend_ms": 1000, "pull_timeout_ms": 3000}
FAST_DELAYS = " ".join(["1s"] * 18)  # every delay level 1 s: redeliveries come quickly


def run_with_servers(tmp_path: Path, test: Callable[[Servers], Awaitable[None]],
                     store_options: dict[str, object] | None = None) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", store_options=store_options) as servers:
            await asyncio.wait_for(test(servers), TIMEOUT)

    asyncio.run(main())


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for ``predicate`` to hold, checking as the loop runs; fail after ``timeout``."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


class Collector:
    """A push listener that records messages and wakes waiters when ``expected`` arrived."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.messages: list[MessageExt] = []
        self.done = asyncio.Event()

    async def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        self.messages += msgs
        if len(self.messages) >= self.expected:
            self.done.set()
        return ConsumeStatus.CONSUME_SUCCESS


async def send_all(namesrv: str, topic: str, n: int, **message_options: object) -> list[str]:
    async with Producer(namesrv, "pg") as producer:
        return [(await producer.send(Message(topic, b"m%d" % i, **message_options))).msg_id  # type: ignore[arg-type]
                for i in range(n)]


def test_push_consumer_receives_every_message(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        ids = await send_all(s.namesrv_addr, "Pushed", 20)
        collector = Collector(20)
        consumer = PushConsumer(s.namesrv_addr, "cg", listener=collector,
                                consume_from=ConsumeFrom.FIRST_OFFSET, **FAST)
        consumer.subscribe("Pushed")
        async with consumer:
            await asyncio.wait_for(collector.done.wait(), 10)
            assert sorted(m.msg_id for m in collector.messages) == sorted(ids)
            assert {mq.topic for mq in consumer.assignment()} == {"Pushed", "%RETRY%cg"}
        # close() committed the offsets: the group's next consumer starts after them
        assert s.broker.offsets.query("cg", "Pushed", 0) is not None
        total = sum(s.broker.offsets.query("cg", "Pushed", q) or 0 for q in range(4))
        assert total == 20

    run_with_servers(tmp_path, test)


@pytest.mark.parametrize("allocate", [allocate_averagely, allocate_by_circle])
def test_two_push_consumers_share_the_queues(tmp_path: Path, allocate: AllocateStrategy) -> None:
    async def test(s: Servers) -> None:
        await send_all(s.namesrv_addr, "Shared", 1)  # creates the topic (4 queues)
        first, second = Collector(0), Collector(0)
        a = PushConsumer(s.namesrv_addr, "shared", listener=first, allocate=allocate, **FAST)
        b = PushConsumer(s.namesrv_addr, "shared", listener=second, allocate=allocate, **FAST)
        for c in (a, b):
            c.subscribe("Shared")
        async with a, b:
            def split() -> bool:
                qa = {q.queue_id for q in a.assignment() if q.topic == "Shared"}
                qb = {q.queue_id for q in b.assignment() if q.topic == "Shared"}
                lower = a if a.client_id < b.client_id else b
                mine = {q.queue_id for q in lower.assignment() if q.topic == "Shared"}
                wanted = {0, 1} if allocate is allocate_averagely else {0, 2}
                return len(qa) == 2 and len(qb) == 2 and not qa & qb and mine == wanted

            await wait_until(split)
            ids = await send_all(s.namesrv_addr, "Shared", 40)
            await wait_until(lambda: len(first.messages) + len(second.messages) >= 40)
            got = [m.msg_id for m in first.messages + second.messages]
            assert sorted(got) == sorted(ids)  # every message once
            assert first.messages and second.messages
            assert {m.queue_id for m in first.messages}.isdisjoint({m.queue_id for m in second.messages})

    run_with_servers(tmp_path, test)


def test_tag_filters(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "pg") as producer:
            for i in range(12):
                await producer.send(Message("Tagged", b"%d" % i, tags="ABC"[i % 3]))
        collector = Collector(8)
        push = PushConsumer(s.namesrv_addr, "push-tags", listener=collector,
                            consume_from=ConsumeFrom.FIRST_OFFSET, **FAST)
        push.subscribe("Tagged", "A || C")
        pull = PullConsumer(s.namesrv_addr, "pull-tags", consume_from=ConsumeFrom.FIRST_OFFSET,
                            suspend_ms=1000, pull_timeout_ms=3000)
        pull.subscribe("Tagged", "B")
        async with push, pull:
            await asyncio.wait_for(collector.done.wait(), 10)
            polled: list[MessageExt] = []
            while len(polled) < 4:
                polled += await pull.poll(5000)
            assert await pull.poll(300) == []
        assert sorted(m.tags for m in collector.messages) == ["A"] * 4 + ["C"] * 4
        assert sorted(int(m.body) for m in polled) == [1, 4, 7, 10]

    run_with_servers(tmp_path, test)


def failing_once(collector: Collector) -> Callable[..., Awaitable[ConsumeStatus]]:
    seen: set[str | None] = set()

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
        msg = msgs[0]
        if msg.msg_id not in seen:
            seen.add(msg.msg_id)
            return ConsumeStatus.RECONSUME_LATER
        return await collector(msgs, ctx)

    return listener


def test_failed_message_is_redelivered_through_the_retry_topic(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        collector = Collector(1)
        consumer = PushConsumer(s.namesrv_addr, "retrying", listener=failing_once(collector), **FAST)
        consumer.subscribe("Fragile")
        await send_all(s.namesrv_addr, "Fragile", 1)  # create the topic; consumed from its end
        async with consumer:
            await wait_until(lambda: any(q.topic == "%RETRY%retrying" for q in consumer.assignment()))
            (msg_id,) = await send_all(s.namesrv_addr, "Fragile", 1, tags="T")
            await asyncio.wait_for(collector.done.wait(), 15)
        (again,) = collector.messages
        assert again.msg_id == msg_id and again.topic == "Fragile" and again.tags == "T"
        assert again.reconsume_times == 1 and again.properties["RETRY_TOPIC"] == "Fragile"

    run_with_servers(tmp_path, test, store_options={"message_delay_level": FAST_DELAYS})


def test_send_back_falls_back_to_a_retry_topic_send(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        collector = Collector(1)
        consumer = PushConsumer(s.namesrv_addr, "fallback", listener=failing_once(collector), **FAST)
        consumer.subscribe("Fragile2")
        refused: list[int] = []

        async def not_supported(addr: str, header: object) -> None:
            refused.append(1)
            raise RequestNotSupportedError("injected: no CONSUMER_SEND_MSG_BACK", 3)

        consumer._instance.api.send_back = not_supported  # type: ignore[method-assign]
        await send_all(s.namesrv_addr, "Fragile2", 1)
        async with consumer:
            await wait_until(lambda: any(q.topic == "%RETRY%fallback" for q in consumer.assignment()))
            (msg_id,) = await send_all(s.namesrv_addr, "Fragile2", 1, keys="k")
            await asyncio.wait_for(collector.done.wait(), 15)
        (again,) = collector.messages
        assert refused == [1]
        assert again.msg_id == msg_id and again.topic == "Fragile2" and again.keys == ["k"]
        assert again.reconsume_times == 1 and again.properties["ORIGIN_MESSAGE_ID"] == msg_id

    run_with_servers(tmp_path, test, store_options={"message_delay_level": FAST_DELAYS})


def test_broadcasting_consumers_each_get_everything(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        ids = await send_all(s.namesrv_addr, "News", 8)
        collectors = [Collector(8), Collector(8)]
        broadcast = MessageModel.BROADCASTING
        consumers = [PushConsumer(s.namesrv_addr, "readers", listener=c, message_model=broadcast,
                                  consume_from=ConsumeFrom.FIRST_OFFSET,
                                  offset_store_dir=tmp_path / f"offsets{i}", **FAST)
                     for i, c in enumerate(collectors)]
        for c in consumers:
            c.subscribe("News")
            await c.start()
        for collector in collectors:
            await asyncio.wait_for(collector.done.wait(), 10)
            assert sorted(m.msg_id for m in collector.messages) == sorted(ids)
        for c in consumers:
            await c.close()
        assert (tmp_path / "offsets0" / "readers" / "offsets.json").is_file()
        # a restarted broadcasting consumer resumes from its file: nothing is delivered again
        again = Collector(1)
        c = PushConsumer(s.namesrv_addr, "readers", listener=again, message_model=broadcast,
                         consume_from=ConsumeFrom.FIRST_OFFSET, offset_store_dir=tmp_path / "offsets0",
                         **FAST)
        c.subscribe("News")
        async with c:
            (fresh,) = await send_all(s.namesrv_addr, "News", 1)
            await asyncio.wait_for(again.done.wait(), 10)
        assert [m.msg_id for m in again.messages] == [fresh]

    run_with_servers(tmp_path, test)


def test_pull_consumer_offsets_seek_and_manual_commit(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        queue = await send_to_first_queue(s.namesrv_addr, "Polled", [b"%d" % i for i in range(10)])
        # a send is acknowledged before the dispatcher indexes it: wait for all ten in the queue
        await wait_until(lambda: s.broker.store.get_max_offset_in_queue("Polled", queue.queue_id) == 10)
        consumer = PullConsumer(s.namesrv_addr, "pc", auto_commit=False,
                                consume_from=ConsumeFrom.FIRST_OFFSET, pull_batch_size=4,
                                suspend_ms=1000, pull_timeout_ms=3000)
        consumer.assign([queue])
        async with consumer:
            first = await consumer.poll(5000)
            assert [int(m.body) for m in first] == [0, 1, 2, 3]
            assert await consumer.committed(queue) is None
            await consumer.commit()
            assert await consumer.committed(queue) == 4
            await consumer.seek(queue, 8)
            assert [int(m.body) for m in await consumer.poll(5000)] == [8, 9]
            await consumer.seek_to_begin(queue)
            assert [int(m.body) for m in await consumer.poll(5000)] == [0, 1, 2, 3]
            assert await consumer.max_offset(queue) == 10
            await consumer.commit({queue: 5})
            elsewhere = MessageQueue("Polled", "no-such-broker", 0)
            with pytest.raises(NoRouteError, match="no-such-broker"):  # said, not swallowed,
                await consumer.commit({elsewhere: 3, queue: 6})  # after the other queues
        # auto_commit=False: close() committed nothing more; a new member resumes at 6
        resumed = PullConsumer(s.namesrv_addr, "pc", suspend_ms=1000, pull_timeout_ms=3000)
        resumed.assign([queue])
        async with resumed:
            assert [int(m.body) for m in await resumed.poll(5000)] == [6, 7, 8, 9]
        assert s.broker.offsets.query("pc", "Polled", queue.queue_id) == 10  # auto commit at close

    run_with_servers(tmp_path, test)


def test_pull_consumer_ignores_batches_of_a_queue_it_gave_up(tmp_path: Path) -> None:
    """Messages pulled before a queue was given up and taken back (a rebalance) are not
    returned beside the same messages pulled again."""
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "pg") as producer:
            queue = (await producer.publish_queues("Regained"))[0]
            for i in range(4):
                await producer.send(Message("Regained", b"%d" % i), queue=queue)
        await wait_until(lambda: s.broker.store.get_max_offset_in_queue("Regained", queue.queue_id) == 4)
        consumer = PullConsumer(s.namesrv_addr, "rc", auto_commit=False, pull_batch_size=4,
                                consume_from=ConsumeFrom.FIRST_OFFSET, suspend_ms=1000,
                                pull_timeout_ms=3000)
        consumer.assign([queue])
        async with consumer:
            await wait_until(lambda: consumer._buffer is not None and consumer._buffer.qsize() == 1)
            consumer.assign([])
            await wait_until(lambda: not consumer.assignment())
            consumer.assign([queue])  # pulls from the committed offset (none: the first) again
            await wait_until(lambda: consumer._buffer is not None and consumer._buffer.qsize() == 2)
            got = [int(m.body) for m in await consumer.poll(5000)]
            assert got == [0, 1, 2, 3]
            assert await consumer.poll(300) == []

    run_with_servers(tmp_path, test)


def test_the_first_commit_of_a_topic_goes_alone(tmp_path: Path) -> None:
    """RocketMQ 4.9 creates a group's offset map of a topic without a lock, so first commits
    that arrive together lose all but one: the first commit of a topic is answered before the
    others are sent, which then go together."""
    async def test(s: Servers) -> None:
        await send_all(s.namesrv_addr, "FirstCommits", 1)  # creates the topic (4 queues)
        consumer = PullConsumer(s.namesrv_addr, "fc", auto_commit=False, **FAST)
        queues = await consumer.fetch_message_queues("FirstCommits")
        consumer.assign(queues)
        async with consumer:
            api = consumer._instance.api
            real = api.update_consumer_offset
            events: list[tuple[str, int]] = []

            async def recorded(addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
                events.append(("sent", queue_id))
                await real(addr, group, topic, queue_id, offset)
                events.append(("answered", queue_id))

            api.update_consumer_offset = recorded  # type: ignore[method-assign]
            await consumer.commit({q: 3 for q in queues})
        assert len(events) == 2 * len(queues) == 8
        assert events[1] == ("answered", events[0][1])  # the first alone
        others = sorted(q for what, q in events[2:] if what == "sent")
        assert others == sorted({q.queue_id for q in queues} - {events[0][1]})
        assert all(s.broker.offsets.query("fc", "FirstCommits", q.queue_id) == 3 for q in queues)

    run_with_servers(tmp_path, test)


def test_blocking_consumers_leave_no_thread(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        ids = await send_all(s.namesrv_addr, "BlockingConsume", 6)

        def work() -> tuple[list[str | None], list[str | None], list[str]]:
            pushed: list[MessageExt] = []
            done = threading.Event()

            def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:  # runs in a pool thread
                pushed.extend(msgs)
                if len(pushed) >= 6:
                    done.set()

            push = blocking.PushConsumer(s.namesrv_addr, "bpush", consume_from=ConsumeFrom.FIRST_OFFSET,
                                         **FAST)
            push.subscribe("BlockingConsume")
            push.register_listener(listener)
            push.start()
            assert done.wait(10)
            push.close()
            with blocking.PullConsumer(s.namesrv_addr, "bpull", consume_from=ConsumeFrom.FIRST_OFFSET,
                                       suspend_ms=1000, pull_timeout_ms=3000) as pull:
                pull.subscribe("BlockingConsume")
                pull.start()
                polled: list[MessageExt] = []
                while len(polled) < 6:
                    polled += pull.poll(5000)
            names = [t.name for t in threading.enumerate() if t.name.startswith("bolide-client")]
            return [m.msg_id for m in pushed], [m.msg_id for m in polled], names

        pushed, polled, left = await asyncio.to_thread(work)
        assert sorted(pushed) == sorted(ids) and sorted(polled) == sorted(ids)  # type: ignore[type-var]
        assert left == []

    run_with_servers(tmp_path, test)


def test_push_consumer_from_a_timestamp(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "pg") as producer:
            queue = (await producer.publish_queues("FromTime"))[0]
            for i in range(3):
                await producer.send(Message("FromTime", b"old-%d" % i), queue=queue)
            since = time.time_ns() // 1_000_000
            await wait_until(lambda: time.time_ns() // 1_000_000 > since)  # later store times
            for i in range(3):
                await producer.send(Message("FromTime", b"new-%d" % i), queue=queue)
        collector = Collector(3)
        consumer = PushConsumer(s.namesrv_addr, "from-time-cg", listener=collector,
                                consume_from=ConsumeFrom.TIMESTAMP, consume_timestamp_ms=since + 1, **FAST)
        consumer.subscribe("FromTime")
        async with consumer:
            await asyncio.wait_for(collector.done.wait(), 10)
        assert [m.body for m in collector.messages] == [b"new-0", b"new-1", b"new-2"]

    run_with_servers(tmp_path, test)


def test_push_consumer_follows_a_reset_of_its_offsets(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        bodies = {f"m{i}".encode() for i in range(5)}
        await send_all(s.namesrv_addr, "Rewind", 5)
        collector = Collector(5)
        consumer = PushConsumer(s.namesrv_addr, "rewind-cg", listener=collector,
                                consume_from=ConsumeFrom.FIRST_OFFSET, **FAST)
        consumer.subscribe("Rewind")
        async with consumer:
            await asyncio.wait_for(collector.done.wait(), 10)
            await consumer.offsets.persist()
            # mqadmin resetOffsetByTime: the broker works out the offsets and tells the consumer
            header = ResetOffsetRequestHeader(topic="Rewind", group="rewind-cg", timestamp=0,
                                              is_force=True)
            async with RemotingClient() as admin:
                r = await admin.invoke(s.broker_addr, RemotingCommand.request(
                    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header))
            assert r.code == ResponseCode.SUCCESS, r
            await wait_until(lambda: len(collector.messages) >= 10)  # everything once more
        assert sorted(m.body for m in collector.messages) == sorted([*bodies, *bodies])

    run_with_servers(tmp_path, test)
