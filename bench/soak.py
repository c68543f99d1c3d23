"""Soak benchmark: does a broker's own memory stay flat under a mixed workload with churn?

    .venv/bin/python bench/soak.py [--minutes 10] [--sample-s 5] [--rate 400]

Starts ``bolide start`` in a child process and drives it for ``--minutes`` from five worker
processes, each one asyncio loop whose clients come and go every few seconds (new client ids,
connections opened and closed, heartbeats from ever-new ids):

- ``produce``: sync sends, batches, keys, tags and user properties, delay levels and timer
  messages, transactions committed, rolled back or left to the broker's check;
- ``pull``: pull consumers in ever-new groups (long polls held, then abandoned when the
  consumer closes), offsets committed, and raw long polls whose connection closes mid-poll;
- ``pop``: simple consumers (POP_MESSAGE) in groups that come back and groups that never do;
  they acknowledge most messages (some after changing their invisible time) and never
  acknowledge one in ten (leases expire, the messages come back), and raw pops held on an idle
  topic whose connection closes mid-poll;
- ``admin``: topics created and deleted, queries by key and by id, consumerProgress
  (GET_CONSUME_STATS), clusterList, topicStatus, brokerStatus;
- ``grpc``: RocketMQ 5 gRPC calls (SendMessage, ReceiveMessage, AckMessage) over channels
  that come and go, each with a client id of its own.

Meanwhile the parent samples the broker's ``RssAnon`` every ``--sample-s`` seconds, with the
table sizes of GET_BROKER_RUNTIME_INFO (its ``bolideTable*`` keys). Prints one JSON document:
the memory series (first, last, peak, and the slope in MiB per minute over the second half,
after the warm-up), peak RSS, messages and requests per second, the tables, errors by kind.
Figures are never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import multiprocessing
import random
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc

from bolide.cli.bench_common import load_avg, machine_info, r
from bolide.cli.bench_server import ServerProcess
from bolide.client import (
    Admin,
    ClientConfig,
    LocalTransactionState,
    Producer,
    PullConsumer,
    SimpleConsumer,
    TransactionProducer,
)
from bolide.common import Message
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.consumer import (
    PULL_COMMIT_OFFSET,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    PullMessageRequestHeader,
)
from bolide.protocol.headers.pop import PopMessageRequestHeader
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.remoting import RemotingClient
from bolide.testing.v5calls import V5Calls, message, receive_request

TOPICS = tuple(f"SoakTopic{i}" for i in range(4))
IDLE = "SoakIdle"  # never written: long polls on it are held until abandoned
QUEUES = 4
ROLES = ("produce", "pull", "pop", "admin", "grpc")
TABLE_PREFIX = "bolideTable"


class Tally:
    """What a worker did: messages, requests and errors by kind."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()

    async def call(self, what: str, awaitable: Awaitable[Any], sent: int = 0) -> Any:
        """Await one client call, counting it (and the messages it ``sent``), or its error by
        kind."""
        try:
            result = await awaitable
        except Exception as exc:  # a soak goes on: every failure is counted by kind
            self.errors[f"{what}: {type(exc).__name__}"] += 1
            return None
        self.counts["requests"] += 1
        self.counts[what] += 1
        self.counts["sent"] += sent
        return result


def _config(namesrv: str, kind: str, n: int) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, instance_name=f"soak-{kind}-{n}-{time.monotonic_ns()}")


def _message(rng: random.Random, topic: str, n: int) -> Message:
    msg = Message(topic, b"s" * rng.choice((64, 256, 1024)), tags=rng.choice(("a", "b", "c", None)))
    if n % 3 == 0:
        msg.properties["KEYS"] = f"k{n % 5000}"
    if n % 5 == 0:
        msg.properties[f"p{n % 7}"] = str(n)
    if n % 50 == 0:
        msg.delay_time_level = 1 + n % 2
    elif n % 50 == 25:
        msg.delay_time_ms = 1000 + n % 3000
    return msg


def _decided(msg: Message, state: LocalTransactionState) -> LocalTransactionState:
    """A local transaction whose outcome was drawn beforehand (its argument)."""
    return state


async def _pace(rate: float, started: float, done: int) -> None:
    """Sleep until ``done`` messages are due at ``rate`` per second."""
    ahead = done / rate - (time.monotonic() - started)
    if ahead > 0:
        await asyncio.sleep(ahead)


async def _produce(namesrv: str, broker: str, end: float, rate: float, tally: Tally,
                   rng: random.Random) -> None:
    states = (LocalTransactionState.COMMIT, LocalTransactionState.ROLLBACK, LocalTransactionState.UNKNOWN)

    def check(msg: Any) -> LocalTransactionState:
        return rng.choice(states[:2])

    started, sent, life = time.monotonic(), 0, 0
    while time.monotonic() < end:
        life += 1
        producer = Producer(_config(namesrv, "p", life), f"soak_pg_{life % 20}", retry_times=0)
        tx = TransactionProducer(_config(namesrv, "tx", life), f"soak_tx_{life % 3}", check_listener=check)
        until = min(end, time.monotonic() + rng.uniform(2, 4))
        while time.monotonic() < until:
            topic, roll = rng.choice(TOPICS), rng.random()
            if roll < 0.1:
                batch = [_message(rng, topic, sent + i) for i in range(16)]
                for m in batch:
                    m.delay_time_level, m.delay_time_ms = 0, None
                await tally.call("send_batch", producer.send_batch(batch), len(batch))
                sent += len(batch)
            elif roll < 0.15:
                msg = Message(topic, b"t" * 100, keys=f"tx{sent}")
                await tally.call("send_in_transaction",
                                 tx.send_message_in_transaction(msg, _decided, rng.choice(states)), 1)
                sent += 1
            else:
                await tally.call("send", producer.send(_message(rng, topic, sent)), 1)
                sent += 1
            await _pace(rate, started, sent)
        await tally.call("close_producer", producer.close())
        await tally.call("close_producer", tx.close())


async def _pull(namesrv: str, broker: str, end: float, rate: float, tally: Tally,
                rng: random.Random) -> None:
    life = 0
    while time.monotonic() < end:
        life += 1
        consumer = PullConsumer(_config(namesrv, "c", life), f"soak_cg_{life}", suspend_ms=2000,
                                pull_timeout_ms=5000, poll_timeout_ms=500, auto_commit_interval_ms=1000)
        consumer.subscribe(rng.choice(TOPICS), rng.choice(("*", "a || b")))
        if await tally.call("pull_start", consumer.start()) is not None:
            until = min(end, time.monotonic() + rng.uniform(2, 5))
            while time.monotonic() < until:
                got = await tally.call("poll", consumer.poll(500))
                tally.counts["received"] += len(got or ())
            await tally.call("commit", consumer.commit())
        await tally.call("close_consumer", consumer.close())  # with long polls held on the broker
        await tally.call("abandoned_pull", _abandoned_pull(broker, f"soak_cg_raw_{life % 50}"))


async def _held_then_hung_up(broker: str, requests: list[RemotingCommand]) -> None:
    """Send ``requests`` (long polls) on a connection of their own, then close it while the
    broker holds them (a moment later, so that they have arrived)."""
    client = RemotingClient()
    try:
        channel = await client.get_channel(broker)
        for request in requests:
            channel.send(request)
        await asyncio.sleep(0.2)
    finally:
        await client.close()


async def _abandoned_pull(broker: str, group: str) -> None:
    """Long polls on the idle topic's queues; the connection closes while they are held."""
    polls = [PullMessageRequestHeader(
        consumer_group=group, topic=IDLE, queue_id=queue, queue_offset=0, max_msg_nums=32,
        sys_flag=PULL_SUSPEND | PULL_SUBSCRIPTION | PULL_COMMIT_OFFSET, commit_offset=0,
        suspend_timeout_millis=15_000, subscription="*", sub_version=0, expression_type="TAG")
        for queue in range(QUEUES)]
    await _held_then_hung_up(broker, [RemotingCommand.request(RequestCode.PULL_MESSAGE, h) for h in polls])


async def _pop(namesrv: str, broker: str, end: float, rate: float, tally: Tally,
               rng: random.Random) -> None:
    life = 0
    while time.monotonic() < end:
        life += 1
        # groups that come back (each to its topic) and, one life in three, a group that never does
        group, topic = (f"soak_pop_{life % 8}", TOPICS[life % 8 % len(TOPICS)]) if life % 3 else (
            f"soak_pop_new_{life}", rng.choice(TOPICS))
        consumer = SimpleConsumer(_config(namesrv, "pop", life), group, {topic: "*"}, await_duration_ms=1000)
        if await tally.call("pop_start", consumer.start()) is not None:
            until = min(end, time.monotonic() + rng.uniform(2, 5))
            while time.monotonic() < until:
                invisible = rng.choice((1000, 2000, 5000))
                got = await tally.call("receive", consumer.receive(16, invisible)) or []
                tally.counts["received"] += len(got)
                for msg in got:
                    roll = rng.random()
                    if roll < 0.1:  # hidden a bit longer, then acknowledged with its new handle
                        await tally.call("change_invisible", consumer.change_invisible_duration(msg, 1000))
                        await tally.call("ack", consumer.ack(msg))
                    elif roll < 0.9:
                        await tally.call("ack", consumer.ack(msg))
                    # else never acknowledged: the lease expires and the message comes back
        await tally.call("close_consumer", consumer.close())
        await tally.call("abandoned_pop", _abandoned_pop(broker, f"soak_pop_raw_{life % 20}"))


async def _abandoned_pop(broker: str, group: str) -> None:
    """A pop held on the idle topic (poll time 15 s); the connection closes while it is held."""
    header = PopMessageRequestHeader(
        consumer_group=group, topic=IDLE, queue_id=-1, max_msg_nums=16, invisible_time=10_000,
        poll_time=15_000, born_time=int(time.time() * 1000), init_mode=0, exp_type="TAG", exp="*")
    await _held_then_hung_up(broker, [RemotingCommand.request(RequestCode.POP_MESSAGE, header)])


async def _admin(namesrv: str, broker: str, end: float, rate: float, tally: Tally,
                 rng: random.Random) -> None:
    life, made = 0, collections.deque[str]()
    while time.monotonic() < end:
        life += 1
        async with Admin(_config(namesrv, "admin", life)) as admin, \
                Producer(_config(namesrv, "ap", life), "soak_admin_pg") as producer:
            topic = f"SoakTemp{life}"
            await tally.call("create_topic", admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2))
            made.append(topic)
            sent = None
            for i in range(5):
                msg = Message(topic, b"q", keys=f"q{life}_{i}")
                sent = await tally.call("send", producer.send(msg), 1) or sent
            await tally.call("query_by_key", admin.query_by_key(topic, f"q{life}_0"))
            if sent is not None:
                await tally.call("view_message", admin.view_message(sent.offset_msg_id))
            await tally.call("consumer_progress", admin.consumer_progress(f"soak_cg_{rng.randint(1, life)}"))
            await tally.call("consumer_progress", admin.consumer_progress(f"soak_pop_{life % 8}"))
            await tally.call("cluster_info", admin.cluster_info())
            await tally.call("topic_stats", admin.topic_stats(rng.choice(TOPICS)))
            await tally.call("runtime_info", admin.broker_runtime_info(broker))
            key = f"k{rng.randrange(5000)}"
            await tally.call("query_by_key", admin.query_by_key(rng.choice(TOPICS), key))
            while len(made) > 5:
                await tally.call("delete_topic", admin.delete_topic(made.popleft()))
        await asyncio.sleep(rng.uniform(0.5, 1.5))


async def _grpc(namesrv: str, endpoint: str, end: float, rate: float, tally: Tally,
                rng: random.Random) -> None:
    """``endpoint``: the broker's gRPC address. A new channel and client id every few seconds."""
    life = 0
    while time.monotonic() < end:
        life += 1
        client_id = f"127.0.0.1@soak-grpc-{life}@{time.monotonic_ns()}"
        async with grpc.aio.insecure_channel(endpoint) as channel:
            calls = V5Calls(channel, (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON")))
            group, n = f"soak_grpc_{life % 4}", 0
            until = min(end, time.monotonic() + rng.uniform(2, 4))
            while time.monotonic() < until:
                topic = rng.choice(TOPICS)
                batch = [message(topic, b"g" * 100, f"SOAK{life:06d}{n + i:08d}") for i in range(4)]
                n += len(batch)
                send = calls("SendMessage", pb.SendMessageRequest(messages=batch))
                sent = await tally.call("grpc_send", send)
                if sent is not None and sent.status.code == pb.OK:
                    tally.counts["sent"] += len(batch)
                elif sent is not None:
                    tally.errors[f"grpc_send: status {sent.status.code}"] += 1
                invisible_s = rng.choice((1, 2, 5))
                request = receive_request(topic, group, invisible_s=invisible_s, poll_s=0.5, batch=16)
                got = await tally.call("grpc_receive", calls.receive(request))
                messages = got[1] if got is not None else []
                tally.counts["received"] += len(messages)
                acked = [m for m in messages if rng.random() < 0.9]  # the others come back later
                if acked:
                    await tally.call("grpc_ack", calls.ack(group, topic, acked))
                await asyncio.sleep(0.05)


_ROLE_FUNCS: dict[str, Callable[..., Coroutine[Any, Any, None]]] = {
    "produce": _produce, "pull": _pull, "pop": _pop, "admin": _admin, "grpc": _grpc}


def _worker(role: str, namesrv: str, broker: str, end_wall: float, rate: float, seed: int,
            conn: Connection) -> None:
    """One worker process: its role until ``end_wall`` (time.time), then its tally."""
    logging.basicConfig(level=logging.CRITICAL)  # clients log closed connections: expected here
    tally = Tally()
    end = time.monotonic() + (end_wall - time.time())
    try:
        asyncio.run(_ROLE_FUNCS[role](namesrv, broker, end, rate, tally, random.Random(seed)))
    except Exception as exc:  # reported, never hidden
        tally.errors[f"{role} worker: {type(exc).__name__}: {exc}"] += 1
    conn.send({"counts": dict(tally.counts), "errors": dict(tally.errors)})
    conn.close()


async def _setup(namesrv: str) -> None:
    async with Admin(namesrv) as admin:
        for topic in (*TOPICS, IDLE):
            await admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)


async def _tables(namesrv: str, broker: str) -> dict[str, int]:
    async with Admin(namesrv) as admin:
        info = await admin.broker_runtime_info(broker)
    return {k[len(TABLE_PREFIX):]: int(v) for k, v in info.items() if k.startswith(TABLE_PREFIX)}


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (minute, MiB) points: MiB per minute."""
    if len(points) < 2:
        return None
    n = len(points)
    mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
    var = sum((p[0] - mx) ** 2 for p in points)
    return sum((p[0] - mx) * (p[1] - my) for p in points) / var if var else None


def run(minutes: float, sample_s: float, rate: float) -> dict[str, Any]:
    duration = minutes * 60
    series: list[tuple[float, float]] = []
    tables: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bolide-soak-") as tmp:
        server = ServerProcess(Path(tmp), "ASYNC_FLUSH", ("transactionCheckInterval=5000",
                                                          "transactionTimeOut=3000", "grpcServerPort=0"))
        server.start()
        try:
            asyncio.run(_setup(server.namesrv_addr))
            grpc_addr = f"127.0.0.1:{server.grpc_port()}"
            ctx = multiprocessing.get_context("spawn")
            end_wall = time.time() + duration
            pipes, procs = [], []
            for i, role in enumerate(ROLES):
                parent, child = ctx.Pipe(duplex=False)
                addr = grpc_addr if role == "grpc" else server.broker_addr
                proc = ctx.Process(target=_worker, name=f"soak-{role}",
                                   args=(role, server.namesrv_addr, addr, end_wall, rate, i, child))
                proc.start()
                child.close()
                pipes.append(parent)
                procs.append(proc)
            started = time.monotonic()
            cpu0 = server.cpu_seconds() or 0.0
            while (elapsed := time.monotonic() - started) < duration:
                series.append((elapsed / 60, server.memory().get("RssAnon", 0.0)))
                try:
                    tables.append({"minute": r(elapsed / 60, 2),
                                   **asyncio.run(_tables(server.namesrv_addr, server.broker_addr))})
                except Exception as exc:  # the sample is missed, not the run
                    tables.append({"minute": r(elapsed / 60, 2), "error": type(exc).__name__})
                time.sleep(max(0.0, min(sample_s, duration - (time.monotonic() - started))))
            reports = [p.recv() if p.poll(120) else {"counts": {}, "errors": {"no report": 1}} for p in pipes]
            for proc in procs:
                proc.join(30)
            seconds = time.monotonic() - started
            cpu = (server.cpu_seconds() or 0.0) - cpu0
            series.append((seconds / 60, server.memory().get("RssAnon", 0.0)))
            memory = server.memory()
            alive = server.alive()
        finally:
            server.stop()
    counts: collections.Counter[str] = collections.Counter()
    errors: collections.Counter[str] = collections.Counter()
    for report in reports:
        counts.update(report["counts"])
        errors.update(report["errors"])
    second_half = [p for p in series if p[0] >= minutes / 2]
    anon = [mib for _, mib in series]
    return {
        "machine": machine_info(),
        "run": {"minutes": minutes, "sample_s": sample_s, "rate": rate, "seconds": r(seconds),
                "load_avg": load_avg()},
        "anon_mib": {
            "first": r(anon[0]), "last": r(anon[-1]), "peak": r(max(anon)),
            "slope_mib_per_min_second_half": r(_slope(second_half), 3),
            "series": [[r(m, 2), r(mib)] for m, mib in series],
        },
        "peak_rss_mib": r(memory.get("VmHWM", 0.0)),
        "broker_alive_at_end": alive,
        "broker_cpu_pct": r(cpu / seconds * 100),
        "sent_msgs_s": r(counts["sent"] / seconds),
        "received_msgs_s": r(counts["received"] / seconds),
        "requests_s": r(counts["requests"] / seconds),
        "counts": dict(sorted(counts.items())),
        "tables": {"first": tables[0] if tables else {}, "last": tables[-1] if tables else {},
                   "peak": _peaks(tables), "series": tables},
        "errors": dict(errors.most_common()),
    }


def _peaks(samples: list[dict[str, Any]]) -> dict[str, int]:
    peaks: dict[str, int] = {}
    for sample in samples:
        for key, value in sample.items():
            if key != "minute" and isinstance(value, int):
                peaks[key] = max(peaks.get(key, 0), value)
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sample-s", type=float, default=5.0, help="seconds between memory samples")
    parser.add_argument("--rate", type=float, default=400.0, help="messages/s the producer worker aims at")
    args = parser.parse_args()
    if args.minutes <= 0 or args.sample_s <= 0 or args.rate <= 0:
        parser.error("--minutes, --sample-s and --rate must be positive")
    print(json.dumps(run(args.minutes, args.sample_s, args.rate), indent=2))


if __name__ == "__main__":
    main()
