"""Flow control of the consumers against an in-process NameServer + Broker: a queue stops being
pulled while it holds ``pull_threshold_for_queue`` messages or
``pull_threshold_size_for_queue_mib`` MiB of bodies not yet consumed (push) or polled (pull),
and pulling resumes as they leave."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from bolide.client import (
    ClientConfigError,
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
)
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

FAST = {"rebalance_interval_ms": 200, "suspend_ms": 1000, "pull_timeout_ms": 3000}
BATCH = 4
# (messages sent, body bytes, the consumer's thresholds, what it may hold at most: one pull
# past the threshold, since the check comes before each pull)
LIMITS = {
    "count": (40, 100, {"pull_threshold_for_queue": 8}, (8 + BATCH - 1, None)),
    "size": (16, 128 * 1024, {"pull_threshold_size_for_queue_mib": 1},
             (None, 1024 * 1024 + BATCH * 128 * 1024 - 1)),
}
QUIET_S = 1.0  # how long a queue at its threshold must stay there (all messages are waiting)


async def stays_false(predicate: Callable[[], bool], duration: float) -> bool:
    """True when ``predicate`` never held during ``duration`` seconds."""
    try:
        await wait_until(predicate, duration)
    except TimeoutError:
        return True
    return False


async def fill_queue_0(namesrv: str, topic: str, count: int, size: int) -> None:
    """``count`` messages of ``size`` bytes, all in queue 0 (uncompressed)."""
    async with Producer(namesrv, "flow_pg", compress_over_bytes=size + 1) as producer:
        for i in range(count):
            body = b"%06d" % i + b"x" * (size - 6)
            await producer.send(Message(topic, body), selector=lambda qs, m, a: qs[0])


class Held:
    """What a consumer holds in one queue, and the most it ever held."""

    def __init__(self, read: Callable[[], tuple[int, int]]) -> None:
        self.read = read
        self.peak = (0, 0)

    def sample(self) -> tuple[int, int]:
        now = self.read()
        self.peak = (max(self.peak[0], now[0]), max(self.peak[1], now[1]))
        return now

    def within(self, limits: tuple[int | None, int | None]) -> bool:
        return all(limit is None or value <= limit for value, limit in zip(self.peak, limits, strict=True))

    def at_threshold(self, consumer: PushConsumer | PullConsumer) -> bool:
        count, size = self.sample()
        return count >= consumer.pull_threshold_for_queue or size >= consumer.pull_threshold_size_for_queue


@pytest.mark.parametrize("kind", sorted(LIMITS))
def test_push_consumer_holds_at_most_its_thresholds(tmp_path: Path, kind: str) -> None:
    count, size, thresholds, limits = LIMITS[kind]
    topic = f"Flow{kind.title()}"

    async def test(s: Servers) -> None:
        await fill_queue_0(s.namesrv_addr, topic, count, size)
        release = asyncio.Event()
        consumed: list[MessageExt] = []
        held: Held | None = None

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            assert held is not None
            held.sample()
            await release.wait()
            consumed.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(s.namesrv_addr, f"flow_push_{kind}", listener=listener,
                                consume_from=ConsumeFrom.FIRST_OFFSET, consume_concurrency=2,
                                pull_batch_size=BATCH, **thresholds, **FAST)  # type: ignore[arg-type]
        consumer.subscribe(topic)
        async with consumer:
            mq = MessageQueue(topic, s.broker.config.broker_name, 0)
            await wait_until(lambda: mq in consumer._queues)
            pq = consumer._queues[mq]
            held = Held(lambda: (pq.count, pq.size_bytes))
            await wait_until(lambda: held.at_threshold(consumer))
            # every message is in the broker: only flow control keeps the consumer from them
            assert await stays_false(lambda: not held.within(limits) or held.sample()[0] == count, QUIET_S)
            assert held.sample()[0] < count
            release.set()
            await wait_until(lambda: len(consumed) >= count)
            assert held.within(limits), held.peak
        assert sorted(m.queue_offset for m in consumed) == list(range(count))
        assert all(len(m.body) == size for m in consumed)

    run_with_servers(tmp_path, test)


@pytest.mark.parametrize("kind", sorted(LIMITS))
def test_pull_consumer_buffers_at_most_its_thresholds(tmp_path: Path, kind: str) -> None:
    count, size, thresholds, limits = LIMITS[kind]
    topic = f"PollFlow{kind.title()}"

    async def test(s: Servers) -> None:
        await fill_queue_0(s.namesrv_addr, topic, count, size)
        mq = MessageQueue(topic, s.broker.config.broker_name, 0)
        consumer = PullConsumer(s.namesrv_addr, f"flow_pull_{kind}", pull_batch_size=BATCH,
                                auto_commit=False, **thresholds, **FAST)  # type: ignore[arg-type]
        consumer.assign([mq])
        async with consumer:
            await consumer.seek_to_begin(mq)
            st = consumer._states[mq]
            held = Held(lambda: (st.buffered, st.buffered_bytes))
            await wait_until(lambda: held.at_threshold(consumer))
            assert await stays_false(lambda: not held.within(limits) or held.sample()[0] == count, QUIET_S)
            got: list[MessageExt] = []
            while len(got) < count:
                batch = await consumer.poll(timeout_ms=5000)
                assert batch, f"poll() returned nothing after {len(got)} of {count} messages"
                got += batch
                held.sample()
            assert held.within(limits), held.peak
        assert [m.queue_offset for m in got] == list(range(count))

    run_with_servers(tmp_path, test)


@pytest.mark.parametrize("consumer_class", [PushConsumer, PullConsumer])
@pytest.mark.parametrize("option", ["pull_threshold_for_queue", "pull_threshold_size_for_queue_mib"])
def test_thresholds_must_be_positive(consumer_class: type, option: str) -> None:
    with pytest.raises(ClientConfigError, match=option):
        consumer_class("127.0.0.1:9876", "g", **{option: 0})
