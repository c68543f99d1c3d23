"""The producer against two brokers of one cluster and against a broker that stalls: a send
that fails on one broker with a retriable error (the broker went down, or it refuses writes)
is retried on the other; a send that gets no answer in time raises SendTimeoutError."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bolide.client import Admin, Message, Producer, SendStatus, SendTimeoutError
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.remoting import RemotingClient
from bolide.remoting.processor import ProcessorTable, RequestContext
from bolide.testing.servers import another_broker, running_servers

TIMEOUT = 30.0
TOPIC = "Failover"
SEND_CODES = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        await asyncio.wait_for(test(), TIMEOUT)

    asyncio.run(main())


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.02)


@dataclass
class SendAttempts:
    """Every send request the producer makes: (broker address, response code or error name)."""

    seen: list[tuple[str, str]] = field(default_factory=list)

    def watch(self, producer: Producer) -> None:
        remoting = producer._instance.remoting
        real_invoke = remoting.invoke

        async def watching(addr: str, cmd: RemotingCommand, timeout_ms: int = 3000) -> RemotingCommand:
            if cmd.code not in SEND_CODES:
                return await real_invoke(addr, cmd, timeout_ms)
            try:
                response = await real_invoke(addr, cmd, timeout_ms)
            except Exception as exc:
                self.seen.append((addr, type(exc).__name__))
                raise
            self.seen.append((addr, ResponseCode(response.code).name))
            return response

        remoting.invoke = watching  # type: ignore[method-assign]


async def refuse_writes(addr: str) -> None:
    """Make the broker at ``addr`` read-only (mqadmin updateBrokerConfig brokerPermission=4)."""
    client = RemotingClient()
    try:
        response = await client.invoke(addr, RemotingCommand.request(
            RequestCode.UPDATE_BROKER_CONFIG, None, b"brokerPermission=4\n"))
        assert response.code == ResponseCode.SUCCESS, response.remark
    finally:
        await client.close()


@pytest.mark.parametrize("failure", ["broker down", "broker read-only"])
def test_send_is_retried_on_the_other_broker(tmp_path: Path, failure: str) -> None:
    async def test() -> None:
        async with (running_servers(tmp_path / "a") as s, another_broker(s, tmp_path / "b") as b,
                    Admin(s.namesrv_addr) as admin):
            await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
            assert len(await admin.master_addrs()) == 2

            async def both_brokers_routed() -> bool:
                route = await admin.topic_route(TOPIC)
                return {q.broker_name for q in route.queue_datas} == {"broker-a", "broker-b"}

            await wait_until(both_brokers_routed)
            async with Producer(s.namesrv_addr, "failover_pg") as producer:
                queues = await producer.publish_queues(TOPIC)
                assert {q.broker_name for q in queues} == {"broker-a", "broker-b"}
                attempts = SendAttempts()
                attempts.watch(producer)
                addr_a = s.broker_addr
                if failure == "broker down":
                    await s.broker.close()
                else:
                    await refuse_writes(s.broker_addr)
                results = [await producer.send(Message(TOPIC, b"m%d" % i)) for i in range(len(queues))]
                results.append(await producer.send_batch([Message(TOPIC, b"b1"), Message(TOPIC, b"b2")]))
                results.append(await producer.send_batch([Message(TOPIC, b"b3")]))
                assert all(r.status is SendStatus.SEND_OK for r in results)
                assert {r.queue.broker_name for r in results} == {"broker-b"}
                # round robin began some sends on broker-a; each failed there, then went to broker-b
                failed_on_a = [i for i, (addr, _) in enumerate(attempts.seen) if addr == addr_a]
                assert failed_on_a, attempts.seen
                for i in failed_on_a:
                    assert attempts.seen[i][1] != "SUCCESS"
                    assert attempts.seen[i + 1] == (b.broker_addr, "SUCCESS"), attempts.seen
                assert len(attempts.seen) == len(results) + len(failed_on_a)
                if failure == "broker read-only":
                    assert {attempts.seen[i][1] for i in failed_on_a} == {"NO_PERMISSION"}

            def stored_on_b() -> int:
                return sum(b.store.get_max_offset_in_queue(TOPIC, q) for q in (0, 1))

            async def dispatched() -> bool:  # the ConsumeQueue is built after SEND_OK
                return stored_on_b() >= len(queues) + 3

            await wait_until(dispatched)
            assert stored_on_b() == len(queues) + 3

    run(test)


class Stall:
    """Send processors that answer only once ``release`` is set (a broker that hangs)."""

    def __init__(self, table: ProcessorTable) -> None:
        self.real = {code: table.get(code) for code in SEND_CODES}
        self.release = asyncio.Event()
        self.held = 0

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.held += 1
        await self.release.wait()
        return await self.real[request.code](ctx, request)


def test_send_timeout(tmp_path: Path) -> None:
    async def test() -> None:
        async with (running_servers(tmp_path / "store") as s,
                    Producer(s.namesrv_addr, "timeout_pg", send_timeout_ms=400) as producer):
            await producer.send(Message("Slow", b"warm-up"))
            stall = Stall(s.broker.server.processors)
            for code in SEND_CODES:
                s.broker.server.register(code, stall)
            with pytest.raises(SendTimeoutError, match="within 400 ms") as info:
                await producer.send(Message("Slow", b"default timeout"))
            assert info.value.retriable
            with pytest.raises(SendTimeoutError, match="within 250 ms"):
                await producer.send(Message("Slow", b"per-call timeout"), timeout_ms=250)
            with pytest.raises(SendTimeoutError, match=r"batch of 2 .* within 300 ms"):
                await producer.send_batch([Message("Slow", b"b1"), Message("Slow", b"b2")],
                                          timeout_ms=300)
            assert stall.held == 3  # one attempt each: the timeout left no time for a retry
            stall.release.set()  # the held sends are stored late; new ones pass at once
            result = await producer.send(Message("Slow", b"after"), timeout_ms=5000)
            assert result.status is SendStatus.SEND_OK

    run(test)
