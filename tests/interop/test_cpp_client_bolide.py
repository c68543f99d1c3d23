"""The official Apache RocketMQ C++ client (rocketmq-client-cpp, its C API as built into the
``rocketmq`` 0.4.4 wheel on PyPI, through that wheel's ctypes binding) against Bolide: sync,
async, oneway, orderly and batched sends, a compressed body and a delayed message; push
consumers (concurrent with retries, orderly, two sharing a group in clustering and broadcasting
mode, their queues read back through GET_CONSUMER_RUNNING_INFO, a group reset while offline),
the pull consumer, and requests signed for a broker with plain ACL.

The driver is ``interop/cpp-client/driver.py``; its consumers run until their standard input
closes, so a test starts them, acts on the broker, and stops them once they printed what it
waits for. Producers other than the C++ one are Bolide's client, where a test is about the C++
consumer.

C++ client behaviour the tests take into account (the same against a RocketMQ broker):

- it sends a batch as SEND_MESSAGE with the header's ``batch`` flag (RocketMQ decides by the
  flag, not the request code) written ``1``, which Java reads as false: RocketMQ 5.3.3 stores the
  batch as one message (checked by hand), and so does Bolide; it reports no message id for it;
- a push consumer's first rebalance runs before it has read its retry topic's route and the
  next comes 10 s later, so the retry test creates ``%RETRY%<group>`` first, as a previous run
  of the group would have;
- a new group reads a young queue from its start (the broker answers offset 0 when the queue's
  first message is still in memory), whatever its consume-from-where.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import zlib
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from client_roundtrip import (
    FAST_RETRIES,
    create_topic,
    run_driver,
    stored,
    unavailable,
    wait_for,
    with_servers,
)

from bolide.client import ClientConfig, Message, Producer
from bolide.client.admin import Admin
from bolide.client.errors import MQBrokerError
from bolide.common import sysflag
from bolide.protocol.bodies.batch import iter_batch_body
from bolide.protocol.bodies.client import MessageQueue
from bolide.testing.cppclient import cpp_command
from bolide.testing.pyvenv import driver_env
from bolide.testing.rocketmq import RocketMQUnavailable, interop_dir
from bolide.testing.servers import Servers

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

WAIT = 60.0  # seconds for what a test waits on


def cppclient(tmp_path: Path, name: str = "cpp") -> tuple[list[str], dict[str, str]]:
    """The driver's command line and its environment (HOME in ``tmp_path/name-home``)."""
    try:
        return cpp_command(), driver_env(tmp_path / f"{name}-home")
    except RocketMQUnavailable as exc:
        unavailable(f"C++ client unavailable: {exc}")


class Consumer:
    """A running ``consume`` command: the MSG lines it printed so far (tab-split)."""

    def __init__(self, proc: asyncio.subprocess.Process, instance: str) -> None:
        self.proc, self.instance = proc, instance
        self.lines: list[list[str]] = []
        self.ready = asyncio.Event()

    async def read(self, log: Path) -> None:
        assert self.proc.stdout is not None
        with log.open("w") as out:
            async for raw in self.proc.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                out.write(line + "\n")
                fields = line.split("\t")
                if fields[0] == "READY":
                    self.ready.set()
                elif fields[0] == "MSG":
                    self.lines.append(fields)

    def bodies(self) -> list[str]:
        return [fields[1] for fields in self.lines]


@contextlib.asynccontextmanager
async def consumer(tmp_path: Path, s: Servers, topic: str, group: str, *, model: str = "CLUSTERING",
                   instance: str = "a", policy: str = "ok", account: tuple[str, str] | None = None,
                   ) -> AsyncIterator[Consumer]:
    """Start a C++ push consumer (signing with ``account``); stop it (standard input closed)
    when the block ends."""
    cmd, env = cppclient(tmp_path, instance)
    if account is not None:
        env["CPP_ACCESS_KEY"], env["CPP_SECRET_KEY"] = account
    proc = await asyncio.create_subprocess_exec(
        *cmd, "consume", s.namesrv_addr, topic, group, model, instance, policy,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=(tmp_path / f"consume-{instance}.err").open("w"), env=env)
    c = Consumer(proc, instance)
    reader = asyncio.ensure_future(c.read(tmp_path / f"consume-{instance}.log"))
    try:
        async with asyncio.timeout(WAIT):
            await asyncio.wait([reader, asyncio.ensure_future(c.ready.wait())],
                               return_when=asyncio.FIRST_COMPLETED)
        assert c.ready.is_set(), f"the C++ consumer {instance} did not start; see {tmp_path}"
        yield c
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            async with asyncio.timeout(WAIT):
                await proc.wait()
                await reader
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, f"the C++ consumer {instance} exited {proc.returncode}; see {tmp_path}"


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (up to WAIT) for ``condition``."""
    try:
        await wait_for(condition, WAIT)
    except (AssertionError, TimeoutError):
        raise AssertionError(f"timed out waiting for {what}") from None


async def produce(s: Servers, topic: str, bodies: list[str], queue_of: Callable[[int], int] | None = None,
                  ) -> None:
    """Send ``bodies`` with Bolide's client (to queue ``queue_of(i)`` when given)."""
    broker = s.broker.config.broker_name
    async with Producer(s.namesrv_addr, "cpp_test_pg") as p:
        for i, body in enumerate(bodies):
            msg = Message(topic, body.encode(), tags="t", keys=f"k{i}")
            queue = None if queue_of is None else MessageQueue(topic, broker, queue_of(i))
            await p.send(msg, queue=queue)


def test_cpp_send_modes_then_push_consumer(tmp_path: Path) -> None:
    (cmd, env), n, topic = cppclient(tmp_path), 5, "CppSendModes"
    modes = ("sync", "async", "oneway", "orderly")
    total = len(modes) * n + 3  # and the batch (one message, see below), the big and the delayed one

    async def test(s: Servers) -> tuple[list[list[str]], list, list[list[str]]]:
        lines = await run_driver([*cmd, "send-modes", s.namesrv_addr, topic, str(n)], tmp_path / "send.log",
                                 env)  # the topic is auto-created from TBW102
        await until(lambda: len(stored(s, topic)) == total, "every message stored")
        async with consumer(tmp_path, s, topic, "cpp_modes_cg") as c:
            await until(lambda: len(c.lines) >= total, "every message consumed")
        return lines, stored(s, topic), c.lines

    lines, msgs, received = with_servers(tmp_path, test)
    assert Counter(fields[1] for fields in lines) == {"sync": n, "async": n, "orderly": n, "batch": 1,
                                                      "big": 1, "delay": 1}
    assert all(fields[2] == "OK" for fields in lines), lines
    by_body = {m.body.decode(errors="replace") if not m.sys_flag & sysflag.COMPRESSED else "<big>": m
               for m in msgs}
    for mode in modes:
        for i in range(n):
            m = by_body[f"{mode}-{i}"]
            assert (m.tags, m.keys) == (mode, [f"{mode}-{i}"]), m
    sent_ids = {fields[3] for fields in lines if fields[1] != "batch"}
    assert len(sent_ids) == 3 * n + 2  # sync, async, orderly, big, delay: distinct UNIQ_KEYs
    for m in msgs:
        if m.tags in ("sync", "async", "orderly", "big", "delay"):
            assert m.properties["UNIQ_KEY"] in sent_ids
    assert [by_body[f"orderly-{i}"].queue_id for i in range(n)] == [i % 4 for i in range(n)]  # i % queues
    # this build of the client flags its batches with batch=1, which Java's Boolean.parseBoolean
    # (and Bolide) read as false: RocketMQ 5.3.3 too stores the batch as one message, its body
    # the batch's encoding (newer builds send "true", and RocketMQ and Bolide split the batch)
    [batch] = [m for m in msgs if m.tags is None]
    members = list(iter_batch_body(batch.body))
    assert [member.body for member in members] == [f"batch-{i}".encode() for i in range(n)]
    big = by_body["<big>"]  # the client compresses bodies over 4 KiB; stored as it came
    assert zlib.decompress(big.body) == b"b" * 65536 and big.tags == "big"
    delayed = by_body["delay-0"]
    assert delayed.store_timestamp - delayed.born_timestamp >= 900  # level 1: 1 s in SCHEDULE_TOPIC_XXXX
    assert delayed.properties["REAL_TOPIC"] == topic and "DELAY" not in delayed.properties
    assert len(received) == total and len({(f[4], f[5]) for f in received}) == total
    got = {fields[1]: fields for fields in received}
    assert got["<65536 bytes>"][9] == "65536"  # the consumer decompressed it
    for mode in modes:
        for i in range(n):
            fields = got[f"{mode}-{i}"]
            assert (fields[2], fields[3], fields[8]) == (mode, f"{mode}-{i}", topic), fields
            m = by_body[f"{mode}-{i}"]
            assert (int(fields[4]), int(fields[5])) == (m.queue_id, m.queue_offset)


def test_cpp_push_consumer_retries(tmp_path: Path) -> None:
    """A message failed twice comes back from the retry topic, then is consumed (one message:
    this client sends back every message of a pull when one fails, see the driver)."""
    topic, group = "CppRetry", "cpp_retry_cg"

    async def test(s: Servers) -> tuple[list[list[str]], list]:
        await create_topic(s, topic, queues=1)
        await create_topic(s, f"%RETRY%{group}", queues=1)  # see the module docstring
        async with consumer(tmp_path, s, topic, group, policy="retry") as c:
            await produce(s, topic, ["once"])
            await until(lambda: len(c.lines) == 3, "two retries")
            # consumed at the third delivery: the retry queue's offset is committed past it
            await until(lambda: s.broker.offsets.query(group, f"%RETRY%{group}", 0) == 2, "the commit")
        return c.lines, stored(s, f"%RETRY%{group}")

    lines, retried = with_servers(tmp_path, test, FAST_RETRIES)
    assert [int(fields[7]) for fields in lines] == [0, 1, 2]  # reconsume times
    assert all(fields[1] == "once" and fields[8] == topic for fields in lines)  # mapped back to the topic
    assert len({fields[6] for fields in lines}) == 1  # the same message id each time
    assert [m.reconsume_times for m in retried] == [1, 2]
    assert all(m.properties["RETRY_TOPIC"] == topic for m in retried)


def test_cpp_orderly_consumer_reads_each_queue_in_order(tmp_path: Path) -> None:
    n, topic, group = 40, "CppOrderly", "cpp_orderly_cg"

    async def test(s: Servers) -> tuple[list[list[str]], list[str | None]]:
        await create_topic(s, topic, queues=4)
        async with consumer(tmp_path, s, topic, group, policy="orderly") as c:
            await produce(s, topic, [f"{i % 4}:{i}" for i in range(n)], queue_of=lambda i: i % 4)
            await until(lambda: len(set(c.bodies())) == n, "every message")
            broker = s.broker.config.broker_name  # the queues it locked (LOCK_BATCH_MQ)
            held = [s.broker.queue_locks.owner(group, MessageQueue(topic, broker, q)) for q in range(4)]
        return c.lines, held

    lines, held = with_servers(tmp_path, test)
    by_queue: dict[int, list[int]] = defaultdict(list)
    for fields in lines:
        queue, i = map(int, fields[1].split(":"))
        assert int(fields[4]) == queue
        by_queue[queue].append(i)
    for queue, seen in by_queue.items():
        assert seen == sorted(seen) and set(seen) == set(range(queue, n, 4)), (queue, seen)
    assert None not in held and len(set(held)) == 1  # one client holds the four


@pytest.mark.parametrize("model", ["CLUSTERING", "BROADCASTING"])
def test_cpp_two_consumers_in_one_group(tmp_path: Path, model: str) -> None:
    n, topic, group = 20, f"CppGroup{model.title()}", f"cpp_{model.lower()}_cg"
    everything = {f"g-{i}" for i in range(n)}

    async def assigned(s: Servers) -> list[int]:
        """Queues of the topic each online consumer reports holding (GET_CONSUMER_RUNNING_INFO)."""
        async with Admin(s.namesrv_addr) as admin:
            try:
                conn = await admin.consumer_connection(group)
            except MQBrokerError:
                return []
            held = []
            for client in sorted(c.client_id for c in conn.connection_set):
                info = await admin.consumer_running_info(group, client)
                held.append(sum(1 for mq in info.mq_table if mq.topic == topic))
            return held

    async def test(s: Servers) -> tuple[list[int], set[str], set[str]]:
        await create_topic(s, topic, queues=4)
        async with (consumer(tmp_path, s, topic, group, model=model, instance="a") as a,
                    consumer(tmp_path, s, topic, group, model=model, instance="b") as b):
            want = [2, 2] if model == "CLUSTERING" else [4, 4]
            async with asyncio.timeout(WAIT):
                while (held := await assigned(s)) != want:
                    await asyncio.sleep(0.2)
            await produce(s, topic, sorted(everything))
            if model == "CLUSTERING":
                await until(lambda: set(a.bodies()) | set(b.bodies()) == everything, "every message")
            else:
                await until(lambda: set(a.bodies()) == set(b.bodies()) == everything, "every message twice")
        return held, set(a.bodies()), set(b.bodies())

    held, got_a, got_b = with_servers(tmp_path, test)
    if model == "CLUSTERING":
        assert held == [2, 2] and got_a and got_b and got_a | got_b == everything
    else:
        assert held == [4, 4] and got_a == got_b == everything


def test_cpp_consumer_resumes_from_an_offset_reset(tmp_path: Path) -> None:
    """resetOffsetByTime to the start while the group is offline: a C++ consumer started after
    reads every message again. (A running one cannot take a reset: it fails to parse the body
    the broker hands it, RocketMQ's ResetOffsetBody, a map keyed by queue objects, where it
    expects a list; the same against a RocketMQ broker.)"""
    n, topic, group = 6, "CppReset", "cpp_reset_cg"

    def committed(s: Servers) -> int:
        return sum(s.broker.offsets.query(group, topic, q) or 0 for q in range(2))

    async def test(s: Servers) -> tuple[list[str], list[str]]:
        await create_topic(s, topic, queues=2)
        await produce(s, topic, [f"r-{i}" for i in range(n)])
        async with consumer(tmp_path, s, topic, group) as first:
            await until(lambda: len(set(first.bodies())) == n, "every message")
        await until(lambda: committed(s) == n, "the offsets committed at its shutdown")
        async with Admin(s.namesrv_addr) as admin:
            await admin.reset_offset_by_time(group, topic, 0)
        assert committed(s) == 0
        async with consumer(tmp_path, s, topic, group, instance="b") as again:
            await until(lambda: len(set(again.bodies())) == n, "every message again")
        return first.bodies(), again.bodies()

    first, again = with_servers(tmp_path, test)
    assert sorted(set(first)) == sorted(set(again)) == sorted(f"r-{i}" for i in range(n))


def test_cpp_pull_consumer(tmp_path: Path) -> None:
    (cmd, env), n, topic = cppclient(tmp_path), 10, "CppPull"

    async def test(s: Servers) -> tuple[list[list[str]], list]:
        await create_topic(s, topic, queues=2)
        await produce(s, topic, [f"pull-{i}" for i in range(n)], queue_of=lambda i: i % 2)
        await until(lambda: len(stored(s, topic)) == n, "every message stored")
        lines = await run_driver([*cmd, "pull", s.namesrv_addr, topic, "cpp_pull_cg"], tmp_path / "pull.log",
                                 env, prefixes=("MSG",))
        return lines, stored(s, topic)

    lines, msgs = with_servers(tmp_path, test)
    assert sorted(fields[1] for fields in lines) == sorted(f"pull-{i}" for i in range(n))
    where = {m.body.decode(): (m.queue_id, m.queue_offset) for m in msgs}
    assert all((int(f[4]), int(f[5])) == where[f[1]] for f in lines)


ADMIN = ("bolide-admin", "bolide-admin-secret")  # an account of interop/rocketmq/home/conf/plain_acl.yml


def test_cpp_client_signs_for_an_acl_broker(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (cmd, env), n, topic, group = cppclient(tmp_path), 4, "CppAcl", "cpp_acl_cg"
    accounts = tmp_path / "conf" / "plain_acl.yml"
    accounts.parent.mkdir(parents=True)
    shutil.copy(interop_dir() / "rocketmq" / "home" / "conf" / "plain_acl.yml", accounts)

    async def test(s: Servers) -> tuple[list[list[str]], list[str], int]:
        async with Admin(ClientConfig(s.namesrv_addr, access_key=ADMIN[0], secret_key=ADMIN[1])) as admin:
            await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
        lines = await run_driver([*cmd, "acl", s.namesrv_addr, topic, str(n), *ADMIN], tmp_path / "acl.log",
                                 env, prefixes=("SEND", "REFUSED"))
        async with consumer(tmp_path, s, topic, group, account=ADMIN) as c:
            await until(lambda: len(set(c.bodies())) == n, "every message")
        return lines, c.bodies(), len(stored(s, topic))

    with caplog.at_level(logging.WARNING, logger="bolide.remoting.processor"):
        lines, got, kept = with_servers(tmp_path, test, acl_enable=True, acl_file=str(accounts))
    assert [(f[0], f[1], f[2]) for f in lines[:n]] == [("SEND", "acl", "OK")] * n
    # the client reports a refused send as "No route info" once its retries end; the broker's
    # answers are RocketMQ's (the client sends an empty AccessKey when it has no account)
    assert {f[1] for f in lines if f[0] == "REFUSED"} == {"wrong-secret", "unsigned"}, lines
    answers = " ".join(r.getMessage() for r in caplog.records)
    assert "Check signature failed for accessKey=bolide-admin" in answers
    assert "No acl config for :" in answers
    assert kept == n and sorted(set(got)) == [f"acl-{i}" for i in range(n)]
