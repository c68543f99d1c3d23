"""bolide.client producers against an in-process NameServer + Broker: sync, async, oneway and
batch sends read back with the pull consumer, ordered sends with a selector, retries,
errors, and the blocking API's thread (gone after close, fresh after fork)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bolide.client import (
    ConsumeFrom,
    Message,
    MessageError,
    MessageExt,
    NoRouteError,
    Producer,
    PullConsumer,
    SendStatus,
    blocking,
    select_by_hash,
)
from bolide.errors import RemotingSendError
from bolide.protocol import RequestCode
from bolide.testing.servers import Servers, running_servers

TIMEOUT = 20.0


def run_with_servers(tmp_path: Path, test: Callable[[Servers], Awaitable[None]],
                     **broker_options: object) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", **broker_options) as servers:
            await asyncio.wait_for(test(servers), TIMEOUT)

    asyncio.run(main())


async def read_all(namesrv: str, topic: str, count: int, group: str = "reader") -> list[MessageExt]:
    """``count`` messages of ``topic`` from the start of every queue, by an assigned pull consumer."""
    consumer = PullConsumer(namesrv, group, consume_from=ConsumeFrom.FIRST_OFFSET, auto_commit=False)
    consumer.assign(await consumer.fetch_message_queues(topic))
    await consumer.start()
    got: list[MessageExt] = []
    try:
        while len(got) < count:
            got += await consumer.poll(timeout_ms=5000)
    finally:
        await consumer.close()
    return got


def test_send_modes_then_read_back(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "pg") as producer:
            sync = await producer.send(Message("Mixed", b"sync", tags="TagA", keys=["k1", "k2"]))
            assert sync.status is SendStatus.SEND_OK and len(sync.msg_id) == 32
            assert sync.queue.topic == "Mixed" and sync.queue.broker_name == s.broker.config.broker_name
            pending = producer.send_async(Message("Mixed", b"async", tags="TagB"))
            await producer.send_oneway(Message("Mixed", b"oneway", tags="TagC"))
            batch = await producer.send_batch([Message("Mixed", b"b1", keys="kb"), Message("Mixed", b"b2")])
            assert len(batch.msg_id.split(",")) == 2 and len(batch.offset_msg_id.split(",")) == 2
            big = b"compressible " * 1000  # above the 4 KiB threshold: sent zlib-compressed
            compressed = await producer.send(Message("Mixed", big))
            async_result = await pending
            assert async_result.status is SendStatus.SEND_OK
        got = {m.body: m for m in await read_all(s.namesrv_addr, "Mixed", 6)}
        assert set(got) == {b"sync", b"async", b"oneway", b"b1", b"b2", big}
        assert got[b"sync"].tags == "TagA" and got[b"sync"].keys == ["k1", "k2"]
        assert got[b"sync"].msg_id == sync.msg_id and got[b"sync"].offset_msg_id == sync.offset_msg_id
        assert got[b"async"].msg_id == async_result.msg_id and got[b"oneway"].tags == "TagC"
        assert [got[b"b1"].msg_id, got[b"b2"].msg_id] == batch.msg_id.split(",")
        assert got[b"b2"].queue_offset == got[b"b1"].queue_offset + 1 and got[b"b1"].keys == ["kb"]
        assert got[big].sys_flag & 1 and got[big].msg_id == compressed.msg_id

    run_with_servers(tmp_path, test)


def test_ordered_send_with_selector(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "pg") as producer:
            queues = {}
            for i in range(24):
                order = f"order-{i % 3}"
                r = await producer.send(Message("Ordered", f"{order}:{i}".encode(), keys=order),
                                        selector=select_by_hash, arg=order)
                queues.setdefault(order, set()).add(r.queue)
            assert all(len(q) == 1 for q in queues.values())
        got = await read_all(s.namesrv_addr, "Ordered", 24)
        for order, (queue,) in queues.items():
            bodies = [m.body.decode() for m in sorted(got, key=lambda m: m.queue_offset)
                      if m.queue_id == queue.queue_id and m.keys == [order]]
            assert [int(b.split(":")[1]) for b in bodies] == list(range(int(order[-1]), 24, 3))

    run_with_servers(tmp_path, test)


def test_send_retries_another_queue_after_a_transport_error(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "pg") as producer:
            await producer.send(Message("Retried", b"warm-up"))
            remoting = producer._instance.remoting
            real_invoke = remoting.invoke
            sends: list[int] = []

            async def failing_first(addr: str, cmd: object, timeout_ms: int = 3000) -> object:
                if cmd.code == RequestCode.SEND_MESSAGE_V2:  # type: ignore[attr-defined]
                    sends.append(cmd.ext_fields["e"])  # type: ignore[attr-defined]
                    if len(sends) == 1:
                        raise RemotingSendError("injected: connection lost")
                return await real_invoke(addr, cmd, timeout_ms)  # type: ignore[arg-type]

            remoting.invoke = failing_first  # type: ignore[method-assign]
            result = await producer.send(Message("Retried", b"after a failure"))
            assert result.status is SendStatus.SEND_OK and len(sends) == 2 and sends[0] != sends[1]
            sends.clear()
            # a fixed queue (selector) is not retried elsewhere: the error reaches the caller
            with pytest.raises(RemotingSendError):
                await producer.send(Message("Retried", b"x"), selector=select_by_hash, arg="k")
            assert len(sends) == 1

    run_with_servers(tmp_path, test)


def test_send_errors(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "pg") as producer:
            with pytest.raises(MessageError, match="empty"):
                await producer.send(Message("T", b""))
            with pytest.raises(MessageError, match="characters"):
                await producer.send(Message("bad topic", b"x"))
            with pytest.raises(NoRouteError, match="autoCreateTopicEnable") as info:
                await producer.send(Message("NeverCreated", b"x"))
            assert info.value.retriable

    run_with_servers(tmp_path, test, auto_create_topic_enable=False)


def client_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("bolide-client")]


def test_blocking_producer_leaves_no_thread(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        def work() -> list[str]:
            assert client_threads() == []
            with blocking.Producer(s.namesrv_addr, "pg") as producer:
                assert producer.loop_thread is None  # started lazily
                first = producer.send(Message("Blocking", b"one", tags="T"))
                second = producer.send_async(Message("Blocking", b"two")).result(timeout=10)
                producer.send_oneway(Message("Blocking", b"three"))
                batch = producer.send_batch([Message("Blocking", b"four")])
                assert len(client_threads()) == 1
                assert {first.status, second.status, batch.status} == {SendStatus.SEND_OK}
            assert client_threads() == []
            return [first.msg_id, second.msg_id, batch.msg_id]

        ids = await asyncio.to_thread(work)
        got = await read_all(s.namesrv_addr, "Blocking", 4)
        assert set(ids) <= {m.msg_id for m in got}

    run_with_servers(tmp_path, test)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_blocking_producer_after_fork(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        def work() -> int:
            producer = blocking.Producer(s.namesrv_addr, "pg")
            producer.send(Message("Forked", b"parent"))
            pid = os.fork()
            if pid == 0:  # child: the parent's loop thread does not exist here
                code = 1
                try:
                    result = producer.send(Message("Forked", b"child"))
                    producer.close()
                    code = 0 if result.status is SendStatus.SEND_OK else 2
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            producer.send(Message("Forked", b"parent again"))
            producer.close()
            return os.waitstatus_to_exitcode(status)

        assert await asyncio.to_thread(work) == 0
        got = await read_all(s.namesrv_addr, "Forked", 3)
        assert {m.body for m in got} == {b"parent", b"child", b"parent again"}

    run_with_servers(tmp_path, test)


def test_producer_introduces_itself_to_a_broker_it_meets(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "greeting_pg") as producer:
            assert "greeting_pg" not in s.broker.clients.producers
            await producer.send(Message("Greeting", b"hi"))
            while "greeting_pg" not in s.broker.clients.producers:  # heartbeat in flight
                await asyncio.sleep(0.01)
            assert producer.client_id in s.broker.clients.producers["greeting_pg"].values()

    run_with_servers(tmp_path, test)
