"""A store a RocketMQ 5 broker left with pops in flight (written here as RocketMQ writes it: the
group's offset past the pops, checkpoints and acks in its revive topic and, not due yet, in its
timer wheel): the broker hands out again, at their revive time, the messages no ack covers, reads
the revive log once, and a restart hands out again from the first message not acknowledged."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from bolide.broker.pop_takeover import ReviveTakeoverMark
from bolide.broker.timer_takeover import TakeoverMark
from bolide.client import ConsumeFrom, MessageExt, SimpleConsumer
from bolide.common import Message
from bolide.common import properties as P
from bolide.common.topic import TIMER_TOPIC
from bolide.protocol.bodies.broker import TopicConfig
from bolide.store import MessageStore, StoreConfig
from bolide.store.config_files import ConsumerOffsetManager
from bolide.store.pop_revive_log import REVIVE_GROUP, revive_topic
from bolide.store.topic_config import TopicConfigManager
from bolide.testing.servers import running_servers

T, G = "PopT", "pop_cg"
REVIVE = revive_topic("DefaultCluster")


def store_config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1024 * 1024,
                       mapped_file_size_consume_queue=1000 * 20)


def ck(start: int, diffs: list[int], pop_time: int, invisible: int) -> bytes:
    return json.dumps({"bm": 0, "bn": "broker-a", "c": G, "d": diffs, "it": invisible, "n": len(diffs),
                       "pt": pop_time, "q": 0, "ro": 0, "so": start, "t": T}, separators=(",", ":")).encode()


def ack(start: int, offsets: list[int], pop_time: int) -> bytes:
    return json.dumps({"ao": -1, "aol": offsets, "c": G, "pt": pop_time, "q": 0, "so": start, "t": T},
                      separators=(",", ":")).encode()


def revive_record(body: bytes, tag: str, uniq: str) -> Message:
    return Message(REVIVE, body, tags=tag, properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq})


def waiting_record(body: bytes, tag: str, uniq: str, due: int) -> Message:
    """A revive-log message still in RocketMQ's timer wheel."""
    props = {P.TIMER_OUT_MS: str(due), P.REAL_TOPIC: REVIVE, P.REAL_QUEUE_ID: "0", P.TAGS: tag,
             P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq, P.TIMER_DELIVER_MS: str(due)}
    return Message(TIMER_TOPIC, body, properties=props)


def write_rocketmq_pops(root: Path, now: int) -> None:
    """p0..p5 of PopT, all popped by the group: p0 long ago (its checkpoint revived by RocketMQ
    already), p1..p3 two minutes ago for 60 s (p2 acknowledged), p4 and p5 just now for 30 s
    (p5 acknowledged; both still in the timer wheel), and a timer message of another topic."""
    old, earlier = now - 3_600_000, now - 120_000
    with MessageStore(store_config(root)) as store:
        for i in range(6):
            assert store.put_message(Message(T, b"p%d" % i), 0).ok
        for msg in (revive_record(ck(0, [0], old, 60_000), "ck", "X"),  # handled by RocketMQ
                    revive_record(ck(1, [0, 1, 2], earlier, 60_000), "ck", "A"),
                    revive_record(ack(1, [2], earlier), "bAck", "A2"),
                    revive_record(b"0-17", "ck", "cancel")):  # PopBufferMergeService's: not a checkpoint
            assert store.put_message(msg, 0).ok
        for msg in (waiting_record(ck(4, [0, 1], now, 30_000), "ck", "B", now + 29_000),
                    waiting_record(ack(4, [5], now), "bAck", "B5", now + 30_000),
                    Message(TIMER_TOPIC, b"timer", properties={
                        P.TIMER_OUT_MS: str(now + 3600_000), P.REAL_TOPIC: "Later", P.REAL_QUEUE_ID: "0",
                        P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1"})):
            assert store.put_message(msg, 0).ok
        assert store.wait_dispatched(10)
    offsets = ConsumerOffsetManager.in_store(root)
    offsets.commit(G, T, 0, 6)  # a pop moves the group's offset past what it hands out
    offsets.commit(REVIVE_GROUP, REVIVE, 0, 0)  # the revive service handled the checkpoint at 0
    offsets.persist()
    topics = TopicConfigManager.in_store(root)
    topics.put(TopicConfig(topic_name=T, read_queue_nums=1, write_queue_nums=1))
    topics.persist()


def test_the_broker_hands_out_what_rocketmqs_pops_left_unacknowledged_once(tmp_path: Path) -> None:
    root = tmp_path / "store"
    now = int(time.time() * 1000)
    write_rocketmq_pops(root, now)

    async def first_start() -> None:
        async with running_servers(root) as s:
            report = s.broker.pop_takeover
            assert report is not None
            assert (report.checkpoints, report.acks, report.unacked, report.adopted, report.unreadable) == (
                2, 2, 3, 3, 1)
            assert s.broker.timer_takeover is not None and s.broker.timer_takeover.taken_over == 1  # "timer"
            pop = s.broker.pop
            assert s.broker.offsets.query(G, T, 0) == 1  # back to p1: a restart hands it out again
            got = pop.pop(G, T, [0], 32, 60_000)  # p1, p3: their revive time is over; p4 is out
            assert [(d.message.body, d.attempt) for d in got] == [(b"p1", 2), (b"p3", 2)]
            for d in got:
                pop.ack(G, T, d.handle)
            assert s.broker.offsets.query(G, T, 0) == 4
            # the consumer that popped p4 from RocketMQ may still acknowledge it
            assert pop.progress_of(G, T, 0) == (4, 1, 6)
            assert s.broker.offsets.query(REVIVE_GROUP, REVIVE, 0) == 3

    async def second_start() -> None:
        async with running_servers(root) as s:
            assert s.broker.pop_takeover is None  # read already
            # the leases did not outlive the restart: from the first message not acknowledged on
            # (p5 again too, acknowledged on RocketMQ: at least once)
            assert [d.message.body for d in s.broker.pop.pop(G, T, [0], 32, 60_000)] == [b"p4", b"p5"]

    asyncio.run(asyncio.wait_for(first_start(), 60))
    mark = ReviveTakeoverMark.in_store(root)
    assert mark.load()
    assert (mark.timer_queue_offset, mark.revive_offsets) == (3, {REVIVE: {0: 4}})
    assert TakeoverMark.in_store(root).load()
    asyncio.run(asyncio.wait_for(second_start(), 60))



def test_a_simple_consumer_receives_what_rocketmq_revived_into_the_pop_retry_topic(tmp_path: Path) -> None:
    """POP_MESSAGE answers the retry topic's record under its retry mark; the client acknowledges
    it there."""
    root = tmp_path / "store"
    retry = f"%RETRY%{G}_{T}"
    with MessageStore(store_config(root)) as store:
        assert store.put_message(Message(T, b"new"), 0).ok
        # PopReviveService.reviveRetry: queue 0 of the retry topic, reconsume times one higher
        revived = Message(retry, b"revived", tags="A", properties={"1ST_POP_TIME": "1716000000123"})
        assert store.put_message(revived, 0, reconsume_times=1).ok
        assert store.wait_dispatched(10)
    topics = TopicConfigManager.in_store(root)
    for name in (T, retry):
        topics.put(TopicConfig(topic_name=name, read_queue_nums=1, write_queue_nums=1))
    topics.persist()

    async def start() -> None:
        async with running_servers(root) as s:
            consumer = SimpleConsumer(f"127.0.0.1:{s.namesrv.port}", G, {T: "*"},
                                      consume_from=ConsumeFrom.FIRST_OFFSET)
            async with consumer:
                got: list[MessageExt] = []
                async with asyncio.timeout(10):
                    while len(got) < 2:
                        got += await consumer.receive(16, await_duration_ms=1000)
                assert sorted((m.body, m.topic, m.reconsume_times) for m in got) == [
                    (b"new", T, 0), (b"revived", T, 1)]
                for m in got:
                    await consumer.ack(m)
            assert (s.broker.offsets.query(G, T, 0), s.broker.offsets.query(G, retry, 0)) == (1, 1)

    asyncio.run(asyncio.wait_for(start(), 60))
