"""Producers (single and batched sends), pull consumers (committing now and then), a push
consumer (asking for some messages again) and an admin (stats, progress, routes, queries,
offset resets, reads, and topics deleted and created again under the others) all at once against
one broker for a few seconds (longer on a slow machine, until the admin has deleted a few topics
and enough sends after the last deletion were acknowledged). Nothing may fail with anything but
a BolideError or log a traceback; every acknowledged send that started after the last deletion
of its topic had finished is read back at its queue offset with its body (a deletion takes the
topic's messages with it); the store verifies."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from test_server_garbage import verify_store

from bolide.client.admin import Admin
from bolide.client.config import ClientConfig
from bolide.client.producer import Producer
from bolide.client.pull_consumer import PullConsumer
from bolide.client.push_consumer import PushConsumer
from bolide.client.results import ConsumeStatus
from bolide.common import Message
from bolide.common.message import MessageExt
from bolide.errors import BolideError, RemotingTimeoutError
from bolide.protocol.bodies import MessageQueue
from bolide.testing.servers import running_servers
from conftest import no_traceback_logged

SEED = 20261127
SECONDS = 8.0
TOPICS = ("Busy0", "Busy1", "Busy2")
QUEUES = 4  # topics are always (re)created with this many queues, as auto-creation does
CHECKED = 2000  # acknowledged sends read back (the latest)
QUIET_S = 2.0  # the last seconds of the run delete no topic (a slow run left too few sends to check)
QUIET_MAX_S = 60.0  # the quiet part goes on until enough sends survive, this long at most
MIN_DELETIONS = 3  # the deleting part of the run lasts until the admin has deleted this many topics


class Run:
    """What the tasks share: the deadline, the acknowledged sends and the surprises. The run
    ends QUIET_S after its deleting part, which lasts SECONDS - QUIET_S and until MIN_DELETIONS
    topics were deleted."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.deleting_until = time.monotonic() + SECONDS - QUIET_S
        self.stop = math.inf  # set when the deleting part ends
        # (topic, broker, queue, offset) -> body and when its send started
        self.acked: dict[tuple[str, str, int, int], tuple[bytes, float]] = {}
        self.deletions: dict[str, list[tuple[float, float]]] = {}  # topic -> (start, end)
        self.unexpected: list[str] = []
        self.enough = False
        self._checked_at = 0.0

    def survives(self, topic: str, send_started: float) -> bool:
        """True when every deletion of ``topic`` had finished before the send started."""
        return all(end < send_started for _, end in self.deletions.get(topic, ()))

    def kept(self) -> list[tuple[tuple[str, str, int, int], bytes]]:
        """The acknowledged sends no deletion took away."""
        return [(key, body) for key, (body, started) in self.acked.items() if self.survives(key[0], started)]

    @property
    def going(self) -> bool:
        """Until QUIET_S after the deleting part, and on (a slow machine) until more than
        CHECKED // 4 sends survive, checked every 0.2 s, for at most QUIET_MAX_S."""
        now = time.monotonic()
        if now < self.stop:
            return True
        if not self.enough and now >= self._checked_at + 0.2:
            self._checked_at = now
            self.enough = len(self.kept()) > CHECKED // 4 or now >= self.stop + QUIET_MAX_S
        return not self.enough

    @property
    def deleting(self) -> bool:
        """Whether topics may still be deleted; ends the deleting part once it has done its
        share, so that the run's last QUIET_S seconds only send to topics that stay."""
        if self.stop == math.inf:
            now = time.monotonic()
            done = sum(len(d) for d in self.deletions.values())
            if now >= self.deleting_until and done >= MIN_DELETIONS:
                self.stop = now + QUIET_S
        return self.stop == math.inf

    async def guard(self, call: Awaitable[Any], what: str) -> Any:
        """The call's result, None for a BolideError; anything else is recorded."""
        try:
            return await asyncio.wait_for(call, 30)
        except BolideError:
            return None
        except Exception as exc:
            self.unexpected.append(f"{what}: {type(exc).__name__}: {exc}")
            return None


async def produce(run: Run, config: ClientConfig, n: int) -> None:
    producer = Producer(config, f"busy-pg{n}")
    i = 0
    while run.going:
        topic, body = run.rnd.choice(TOPICS), f"{n}-{i}".encode()
        i += 1
        if run.rnd.random() < 0.2:
            await run.guard(producer.send_batch([Message(topic, body + b"a"), Message(topic, body + b"b")]),
                            "send_batch")
            continue
        started = time.monotonic()
        sent = await run.guard(producer.send(Message(topic, body, tags=run.rnd.choice("ab"), keys=f"k{i}")),
                               "send")
        if sent is not None:
            key = (topic, sent.queue.broker_name, sent.queue.queue_id, sent.queue_offset)
            run.acked[key] = (body, started)
    await producer.close()


async def pull(run: Run, config: ClientConfig, n: int) -> None:
    consumer = PullConsumer(config, f"busy-cg{n}")
    consumer.subscribe(run.rnd.choice(TOPICS), run.rnd.choice(("*", "a", "a || b")))
    await run.guard(consumer.start(), "pull consumer start")
    while run.going:
        await run.guard(consumer.poll(50), "poll")
        if run.rnd.random() < 0.1:
            await run.guard(consumer.commit(), "commit")
    await run.guard(consumer.close(), "pull consumer close")


async def push(run: Run, config: ClientConfig) -> None:
    statuses = [ConsumeStatus.CONSUME_SUCCESS] * 5 + [ConsumeStatus.RECONSUME_LATER]
    consumer = PushConsumer(config, "busy-push", listener=lambda msgs, ctx: run.rnd.choice(statuses),
                            max_reconsume_times=1)
    consumer.subscribe(run.rnd.choice(TOPICS), "*")
    await run.guard(consumer.start(), "push consumer start")
    while run.going:  # it consumes until the end
        await asyncio.sleep(0.05)
    await run.guard(consumer.close(), "push consumer close")


async def administer(run: Run, admin: Admin) -> None:
    rnd = run.rnd
    now_ms = int(time.time() * 1000)
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: admin.topic_stats(rnd.choice(TOPICS)),
        lambda: admin.consumer_progress(rnd.choice(("busy-cg0", "busy-cg1", "busy-push"))),
        lambda: admin.topic_route(rnd.choice(TOPICS)),
        admin.cluster_info,
        lambda: admin.query_by_key(rnd.choice(TOPICS), f"k{rnd.randint(0, 50)}"),
        lambda: admin.consumer_connection(rnd.choice(("busy-cg0", "busy-push"))),
        lambda: admin.reset_offset_by_time("busy-cg1", rnd.choice(TOPICS), now_ms),
        lambda: admin.read_messages(MessageQueue(rnd.choice(TOPICS), "broker-a", rnd.randrange(QUEUES)),
                                    0, 5),
    ]
    while run.going:
        r = rnd.random()
        # past its time, the deleting part deletes at once what it still owes
        if run.deleting and (r < 0.03 or time.monotonic() >= run.deleting_until):
            topic, started = rnd.choice(TOPICS), time.monotonic()
            await run.guard(admin.delete_topic(topic), "delete_topic")
            run.deletions.setdefault(topic, []).append((started, time.monotonic()))
        elif r < 0.08:
            await run.guard(admin.create_topic(rnd.choice(TOPICS), read_queue_nums=QUEUES,
                                               write_queue_nums=QUEUES), "create_topic")
        else:
            await run.guard(rnd.choice(calls)(), "admin call")
        await asyncio.sleep(0.01)


async def read_back(admin: Admin, mq: MessageQueue, offset: int) -> list[MessageExt]:
    """The message at ``offset``, retrying a call that timed out (a busy machine), as a client
    retries retriable errors."""
    for _ in range(2):
        try:
            return await admin.read_messages(mq, offset, 1)
        except RemotingTimeoutError:
            pass
    return await admin.read_messages(mq, offset, 1)


def test_clients_and_admin_at_once_with_topics_deleted_under_them(tmp_path: Path) -> None:
    run = Run(SEED)

    async def main() -> list[str]:
        async with running_servers(tmp_path / "store", auto_create_topic_enable=True) as servers:
            config = ClientConfig(namesrv_addr=servers.namesrv_addr)
            admin = Admin(config)
            try:
                for topic in TOPICS:
                    await admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
                await asyncio.gather(*(produce(run, config, n) for n in range(3)),
                                     *(pull(run, config, n) for n in range(2)), push(run, config),
                                     administer(run, admin))
                kept = run.kept()
                assert len(kept) > CHECKED // 4, (len(kept), len(run.acked))
                assert sum(len(d) for d in run.deletions.values()) >= MIN_DELETIONS, run.deletions
                wrong = []
                for (topic, broker, queue, offset), body in kept[-CHECKED:]:
                    found = await read_back(admin, MessageQueue(topic, broker, queue), offset)
                    if [m.body for m in found] != [body]:
                        wrong.append(f"{topic}/{queue}@{offset}: {body!r} read back as "
                                     f"{[m.body for m in found]!r}")
                return wrong
            finally:
                await admin.close()

    with no_traceback_logged():
        wrong = asyncio.run(asyncio.wait_for(main(), 180))
    assert not run.unexpected, "\n".join(run.unexpected[:10])
    assert not wrong, "\n".join(wrong[:10])
    verify_store(tmp_path)
