"""SIGKILL a ``bolide start`` process under SYNC_FLUSH while RocketMQ 5 clients send and
receive over its gRPC endpoint (the consumer leaves a quarter of what it receives
unacknowledged): after a restart on the same store, every send the endpoint acknowledged is
received and acknowledged (before the kill or after it: at least once), nothing is received that
was not sent, and the store passes the verifier."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import grpc

from bolide.cli.bench_server import ServerProcess
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.store import StoreConfig
from bolide.testing.v5calls import V5Calls, message, receive_request
from conftest import assert_consistent

TOPIC, GROUP = "CrashV5", "crash_v5_g"


async def take(calls: V5Calls, poll_s: float, skip_every: int = 0) -> list[str]:
    """Receive a batch and acknowledge it (but every ``skip_every``-th message, which stays
    out); the bodies acknowledged."""
    _, got = await calls.receive(receive_request(TOPIC, GROUP, poll_s=poll_s), timeout=poll_s + 10)
    if skip_every:
        got = [m for m in got if int(m.body.decode().rpartition("-")[2]) % skip_every]
    if got:
        answer = await calls.ack(GROUP, TOPIC, got)
        assert answer.status.code == pb.OK, answer.status
    return [m.body.decode() for m in got]


async def load(port: int, target: int, acked: set[str], received: list[str], attempted: set[str]) -> None:
    """Send from 4 workers and receive, until ``target`` sends are acknowledged (then keep going:
    the test kills the server meanwhile); returns when the server is gone."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        calls = V5Calls(channel)
        reached = asyncio.Event()

        async def sender(worker: int) -> None:
            for i in range(1_000_000):
                body = f"w{worker}-{i}"
                attempted.add(body)
                msg = message(TOPIC, body.encode(), body)
                answer = await calls("SendMessage", pb.SendMessageRequest(messages=[msg]))
                if answer.status.code == pb.OK:
                    acked.add(body)
                    if len(acked) >= target:
                        reached.set()

        async def receiver() -> None:
            while True:
                received.extend(await take(calls, 1, skip_every=4))  # a quarter stays out

        tasks = [asyncio.ensure_future(sender(w)) for w in range(4)] + [asyncio.ensure_future(receiver())]
        await reached.wait()
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            task.cancel()
        assert all(isinstance(t.exception(), grpc.aio.AioRpcError) for t in done), done


async def drain(port: int, wanted: set[str], received: list[str]) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        calls = V5Calls(channel)
        deadline = time.monotonic() + 60
        while not wanted <= set(received) and time.monotonic() < deadline:
            received.extend(await take(calls, 2))


def test_sigkill_with_grpc_clients_loses_no_acknowledged_send(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(1 << 32)
    target = random.Random(seed).choice([1, 30, 200])
    server = ServerProcess(tmp_path, "SYNC_FLUSH", ("grpcServerPort=0", "flushConsumerOffsetInterval=500"))
    acked: set[str] = set()
    attempted: set[str] = set()
    received: list[str] = []
    server.start()
    try:
        port = server.grpc_port()

        async def until_killed() -> None:
            loading = asyncio.ensure_future(load(port, target, acked, received, attempted))
            started = time.monotonic()
            async with asyncio.timeout(60):  # past one write of the consumer offsets (500 ms)
                while (len(acked) < target or time.monotonic() - started < 1.0) and not loading.done():
                    await asyncio.sleep(0.01)
            server.proc.kill()  # type: ignore[union-attr]  # SIGKILL mid-traffic
            await loading

        asyncio.run(until_killed())
        server.stop()
        assert len(acked) >= target, f"seed {seed}: {len(acked)} sends acknowledged"
        server.start()
        port = server.grpc_port()
        asyncio.run(drain(port, acked, received))
    finally:
        server.stop()
    missing = acked - set(received)
    assert not missing, (
        f"seed {seed}: {len(missing)} acknowledged sends never received, e.g. {sorted(missing)[:5]}"
    )
    assert set(received) <= attempted, f"seed {seed}: received what was never sent"
    assert_consistent(StoreConfig(store_path_root_dir=str(tmp_path / "store")))
