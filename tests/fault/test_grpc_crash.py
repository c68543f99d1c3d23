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
from google.protobuf.duration_pb2 import Duration

from bolide.cli.bench_server import ServerProcess
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.store import StoreConfig
from conftest import assert_consistent

TOPIC, GROUP = "CrashV5", "crash_v5_g"
METHOD = "/apache.rocketmq.v2.MessagingService/"
METADATA = (("x-mq-client-id", "crash@0@0@test"),)


class Client:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.send = channel.unary_unary(
            METHOD + "SendMessage",
            request_serializer=pb.SendMessageRequest.SerializeToString,
            response_deserializer=pb.SendMessageResponse.FromString,
        )
        self.receive = channel.unary_stream(
            METHOD + "ReceiveMessage",
            request_serializer=pb.ReceiveMessageRequest.SerializeToString,
            response_deserializer=pb.ReceiveMessageResponse.FromString,
        )
        self.ack = channel.unary_unary(
            METHOD + "AckMessage",
            request_serializer=pb.AckMessageRequest.SerializeToString,
            response_deserializer=pb.AckMessageResponse.FromString,
        )

    async def take(self, poll_s: float, skip_every: int = 0) -> list[str]:
        """Receive a batch and acknowledge it (but every ``skip_every``-th message, which stays
        out); the bodies acknowledged."""
        request = pb.ReceiveMessageRequest(
            group=pb.Resource(name=GROUP),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=32,
            invisible_duration=Duration(seconds=30),
            long_polling_timeout=Duration(seconds=int(poll_s)),
        )
        got = [
            r.message
            async for r in self.receive(request, metadata=METADATA, timeout=poll_s + 10)
            if r.HasField("message")
        ]
        if skip_every:
            got = [m for m in got if int(m.body.decode().rpartition("-")[2]) % skip_every]
        if got:
            entries = [
                pb.AckMessageEntry(
                    message_id=m.system_properties.message_id,
                    receipt_handle=m.system_properties.receipt_handle,
                )
                for m in got
            ]
            answer = await self.ack(
                pb.AckMessageRequest(group=request.group, topic=pb.Resource(name=TOPIC), entries=entries),
                metadata=METADATA,
                timeout=10,
            )
            assert answer.status.code == pb.OK, answer.status
        return [m.body.decode() for m in got]


async def load(port: int, target: int, acked: set[str], received: list[str], attempted: set[str]) -> None:
    """Send from 4 workers and receive, until ``target`` sends are acknowledged (then keep going:
    the test kills the server meanwhile); returns when the server is gone."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        client = Client(channel)
        reached = asyncio.Event()

        async def sender(worker: int) -> None:
            for i in range(1_000_000):
                body = f"w{worker}-{i}"
                attempted.add(body)
                msg = pb.Message(
                    topic=pb.Resource(name=TOPIC),
                    body=body.encode(),
                    system_properties=pb.SystemProperties(message_id=body),
                )
                answer = await client.send(
                    pb.SendMessageRequest(messages=[msg]), metadata=METADATA, timeout=10
                )
                if answer.status.code == pb.OK:
                    acked.add(body)
                    if len(acked) >= target:
                        reached.set()

        async def receiver() -> None:
            while True:
                received.extend(await client.take(1, skip_every=4))  # a quarter stays out

        tasks = [asyncio.ensure_future(sender(w)) for w in range(4)] + [asyncio.ensure_future(receiver())]
        await reached.wait()
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            task.cancel()
        assert all(isinstance(t.exception(), grpc.aio.AioRpcError) for t in done), done


async def drain(port: int, wanted: set[str], received: list[str]) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        client = Client(channel)
        deadline = time.monotonic() + 60
        while not wanted <= set(received) and time.monotonic() < deadline:
            received.extend(await client.take(2))


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
