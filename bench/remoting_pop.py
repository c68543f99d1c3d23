"""Benchmark of RocketMQ 5's pop over remoting (POP_MESSAGE and its acknowledgements): msgs/s
popped and acknowledged from a ``bolide start`` child process, with the broker's CPU per
message, peak RSS and anonymous memory.

    .venv/bin/python bench/remoting_pop.py [--messages 200000] [--size 100] [--consumers 8]

The store is filled first (batched sends); then ``--consumers`` pops of 32 in flight over one
connection take everything back, twice: acknowledging each message with its own ACK_MESSAGE,
as the Java 5.x push consumer does, then each pop's messages with one BATCH_ACK_MESSAGE, as
RocketMQ's proxy can (``enableBatchAck``), each time for a group of its own. Prints one JSON
document. Figures are never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bolide.cli.bench_common import machine_info, r
from bolide.cli.bench_server import AnonPeak, ServerProcess
from bolide.client import Admin, Producer
from bolide.common import Message
from bolide.common.records import decode_records
from bolide.protocol.bodies.pop import BatchAck, BatchAckMessageRequestBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.pop import (
    AckMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from bolide.protocol.pop_info import pop_handles
from bolide.remoting import RemotingClient

TOPIC, QUEUES = "PopBench", 8


async def _fill(namesrv: str, total: int, size: int) -> None:
    async with Admin(namesrv) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
    body = b"x" * size
    async with Producer(namesrv, "pop_bench_pg") as producer:
        sent = 0
        while sent < total:
            batch = [Message(TOPIC, body) for _ in range(min(256, total - sent))]
            await producer.send_batch(batch)
            sent += len(batch)


def _pop(group: str) -> RemotingCommand:
    header = PopMessageRequestHeader(
        consumer_group=group,
        topic=TOPIC,
        queue_id=-1,
        max_msg_nums=32,
        invisible_time=60_000,
        poll_time=0,
        born_time=0,
        init_mode=0,
        exp_type="TAG",
        exp="*",
    )
    return RemotingCommand.request(RequestCode.POP_MESSAGE, header)


async def _consume(addr: str, group: str, total: int, consumers: int, batch_ack: bool) -> float:
    """Pop and acknowledge ``total`` messages; the seconds it took."""
    got = 0
    async with RemotingClient() as client:
        started = time.perf_counter()

        async def worker() -> None:
            nonlocal got
            while got < total:
                response = await client.invoke(addr, _pop(group), 10_000)
                if response.code != ResponseCode.SUCCESS:
                    continue  # nothing due here now: the others hold the rest
                header = response.read_header(PopMessageResponseHeader)
                messages = decode_records(response.body_bytes())
                got += len(messages)
                if batch_ack:
                    await client.invoke(addr, _batch_ack(group, header, messages))
                    continue
                handles = pop_handles(messages, header.start_offset_info, header.msg_offset_info,
                                      header.pop_time, header.invisible_time, header.revive_qid, "broker-a")
                acks = [
                    RemotingCommand.request(RequestCode.ACK_MESSAGE, AckMessageRequestHeader(
                        consumer_group=group, topic=TOPIC, queue_id=m.queue_id, offset=m.queue_offset,
                        extra_info=ck))
                    for m, ck in zip(messages, handles, strict=True)
                ]
                for answer in await client.invoke_many(addr, acks):
                    assert answer.code == ResponseCode.SUCCESS, answer.remark

        await asyncio.gather(*(worker() for _ in range(consumers)))
        return time.perf_counter() - started


def _batch_ack(group: str, header: PopMessageResponseHeader, messages: list[Any]) -> RemotingCommand:
    starts = {int(q): int(o) for _, q, o in (p.split(" ") for p in header.start_offset_info.split(";"))}
    acks = []
    for q, start in starts.items():
        bits = sum(1 << (m.queue_offset - start) for m in messages if m.queue_id == q)
        acks.append(
            BatchAck(
                consumer_group=group,
                topic=TOPIC,
                start_offset=start,
                queue_id=q,
                revive_queue_id=header.revive_qid,
                pop_time=header.pop_time,
                invisible_time=header.invisible_time,
                bit_set=base64.b64encode(bits.to_bytes((bits.bit_length() + 7) // 8, "little")).decode(),
            )
        )
    body = BatchAckMessageRequestBody(broker_name="broker-a", acks=acks)
    return RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, body=body.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--consumers", type=int, default=8, help="pops in flight")
    args = parser.parse_args()
    cases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bolide-pop-bench-") as tmp:
        server = ServerProcess(Path(tmp), "ASYNC_FLUSH")
        server.start()
        try:
            asyncio.run(_fill(server.namesrv_addr, args.messages, args.size))
            with AnonPeak(server) as peak:
                for name, batch_ack in (("pop_ack_each", False), ("pop_batch_ack", True)):
                    cpu_before = server.cpu_seconds() or 0.0
                    seconds = asyncio.run(
                        _consume(
                            server.broker_addr, f"pop_bench_{name}", args.messages, args.consumers, batch_ack
                        )
                    )
                    cpu = (server.cpu_seconds() or 0.0) - cpu_before
                    cases[name] = {
                        "msgs_s": r(args.messages / seconds, 0),
                        "broker_cpu_us_per_msg": r(cpu / args.messages * 1e6),
                    }
            memory = server.memory()
        finally:
            server.stop()
    print(
        json.dumps(
            {
                "machine": machine_info(),
                "run": {
                    "messages": args.messages,
                    "size": args.size,
                    "consumers": args.consumers,
                    "per_pop": 32,
                },
                "cases": cases,
                "broker": {
                    "anon_peak_mib": r(peak.mib),
                    "peak_rss_mib": r(memory.get("VmHWM", 0.0)),
                    "anon_mib_after": r(memory.get("RssAnon", 0.0)),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
