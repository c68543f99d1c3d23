"""Helpers of the Spark tests: an in-process NameServer + Broker on an event loop in a
background thread (Spark calls block), and message producers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bolide.client import Message
from bolide.client.blocking import Admin, Producer
from bolide.testing.servers import Servers, running_servers


class ServerThread:
    """NameServer + Broker on an event loop in a background thread."""

    def __init__(self, store_dir: Path, **broker_options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.servers: Servers | None = None
        self.error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._options = broker_options
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(store_dir),),
                                       daemon=True)

    async def _main(self, store_dir: Path) -> None:
        self._stop = asyncio.Event()
        try:
            async with running_servers(store_dir, **self._options) as servers:
                self.servers = servers
                self.ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self.error = exc
            self.ready.set()

    def start(self) -> ServerThread:
        self.thread.start()
        assert self.ready.wait(30) and self.error is None, self.error
        return self

    @property
    def namesrv(self) -> str:
        assert self.servers is not None
        return self.servers.namesrv_addr

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)


def create_topic(namesrv: str, topic: str, queues: int = 2) -> None:
    """Create ``topic`` and wait until the NameServer routes it."""
    with Admin(namesrv) as admin:
        admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        wait_for(lambda: _routed(admin, topic), f"a route for {topic}")


def _routed(admin: Admin, topic: str) -> bool:
    try:
        return len(admin.queues(topic)) > 0
    except Exception:
        return False


def produce(namesrv: str, topic: str, bodies: Iterable[bytes], *, queue_id: int | None = None,
            tags: Callable[[int], str | None] | None = None, keys: Callable[[int], str | None] | None = None,
            properties: dict[str, str] | None = None) -> list[Any]:
    """Send one message per body (to ``queue_id`` when given); returns the SendResults."""
    results = []
    with Producer(namesrv, group="spark-test-pg") as producer:
        queue = None
        if queue_id is not None:
            queue = next(q for q in producer.publish_queues(topic) if q.queue_id == queue_id)
        for i, body in enumerate(bodies):
            msg = Message(topic, body, tags=tags(i) if tags else None, keys=keys(i) if keys else None,
                          properties=properties)
            results.append(producer.send(msg, queue=queue))
    _wait_dispatched(namesrv, results)
    return results


def _wait_dispatched(namesrv: str, results: list[Any]) -> None:
    """Wait until the broker's ConsumeQueues hold every sent message: a send is acknowledged
    once in the CommitLog, and readers see it only after the dispatcher's next pass."""
    ends: dict[Any, int] = {}
    for r in results:
        ends[r.queue] = max(ends.get(r.queue, 0), r.queue_offset + 1)
    with Admin(namesrv) as admin:
        for mq, end in ends.items():
            wait_for(lambda mq=mq, end=end: admin.topic_stats(mq.topic)[mq].max_offset >= end,
                     f"{mq} dispatched up to {end}")


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)
