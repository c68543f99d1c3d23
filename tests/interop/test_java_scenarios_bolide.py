"""The official Java client (rocketmq-client 4.9.7 and 5.3.3, unmodified) against Bolide beyond
the plain round trip: sync/async/oneway/batch sends, retries ending in the dead letter queue,
orderly consumption with queue locks, two push consumers sharing a group (clustering rebalance
and broadcasting), the lite pull consumer, query by key / view by id, SQL92 subscriptions
(MessageSelector.bySql), request-reply (DefaultMQProducer.request), timer messages and
RocketMQ 5's body compression types.

The driver is ``interop/java-client/BolideScenarios.java``; each test runs one of its commands
in a JVM against an in-process NameServer + Broker on free ports.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from client_roundtrip import (
    CLIENT_TIMEOUT,
    FAST_RETRIES,
    create_topic,
    run_driver,
    stored,
    unavailable,
    wait_for,
    with_servers,
)

from bolide.client import Admin, ConsumeFrom, Producer, PullConsumer
from bolide.common import Message
from bolide.common.message import MessageExt
from bolide.testing.rocketmq import JAVA_SCENARIOS_MAIN, RocketMQUnavailable, java_client_command
from bolide.testing.servers import Servers
from conftest import replying_consumer, wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSIONS = ("4.9.7", "5.3.3")


def scenarios(tmp_path: Path, version: str = "4.9.7") -> list[str]:
    try:
        return java_client_command(version, home=tmp_path / "jhome", main=JAVA_SCENARIOS_MAIN)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")






@pytest.mark.parametrize("version", VERSIONS)
def test_send_modes(tmp_path: Path, version: str) -> None:
    java, n, topic = scenarios(tmp_path, version), 5, "JavaSendModes"

    async def test(s: Servers) -> tuple[list[list[str]], list]:
        lines = await run_driver([*java, "send-modes", s.namesrv_addr, topic, str(n)],
                                 tmp_path / "send.log")
        await wait_for(lambda: len(stored(s, topic)) == 4 * n)  # oneway sends are not answered
        return lines, stored(s, topic)

    lines, msgs = with_servers(tmp_path, test)
    modes = Counter(fields[1] for fields in lines)
    assert modes == {"sync": n, "async": n, "batch": 1}
    assert all(fields[2] == "SEND_OK" for fields in lines)
    [batch] = [fields for fields in lines if fields[1] == "batch"]
    assert len(batch[3].split(",")) == n  # one message id per batched message
    bodies = Counter(m.body.decode() for m in msgs)
    assert bodies == {f"{mode}-{i}": 1 for mode in ("sync", "async", "oneway", "batch") for i in range(n)}
    for m in msgs:
        mode, i = m.body.decode().split("-")
        assert m.tags == mode and m.keys == [f"{mode}-{i}"]
        assert m.properties["UNIQ_KEY"]


def test_retries_end_in_the_dead_letter_queue(tmp_path: Path) -> None:
    java, n, topic, group = scenarios(tmp_path), 4, "JavaRetry", "java_retry_cg"

    async def test(s: Servers) -> tuple[list[list[str]], list, list]:
        await create_topic(s, topic, queues=1)
        lines = await run_driver([*java, "retry", s.namesrv_addr, topic, group, str(n), "2", "120"],
                                 tmp_path / "retry.log", prefixes=("MSG", "DLQ"))
        return lines, stored(s, f"%RETRY%{group}"), stored(s, f"%DLQ%{group}")

    lines, retried, dead = with_servers(tmp_path, test, store=FAST_RETRIES)
    attempts = defaultdict(list)
    for fields in lines:
        if fields[0] == "MSG":
            attempts[int(fields[1])].append(int(fields[2]))
            assert fields[3] == topic  # the client maps retries back to the original topic
    assert attempts[0] == [0, 1] and attempts[2] == [0, 1]  # failed once, then consumed
    assert attempts[1] == [0, 1, 2] and attempts[3] == [0, 1, 2]  # failed until the limit
    dlq_lines = [fields for fields in lines if fields[0] == "DLQ"]
    assert sorted(fields[1] for fields in dlq_lines) == ["1", "3"]
    assert all(fields[2] == "3" and fields[4] == topic for fields in dlq_lines)
    assert sorted(m.body for m in dead) == [b"1", b"3"]
    assert all(m.properties["RETRY_TOPIC"] == topic and m.reconsume_times == 3 for m in dead)
    assert Counter(m.reconsume_times for m in retried) == {1: 4, 2: 2}


def test_orderly_consumer_sees_each_key_in_order(tmp_path: Path) -> None:
    java, n, keys, topic = scenarios(tmp_path), 30, 3, "JavaOrderly"

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic, queues=4)
        return await run_driver([*java, "orderly", s.namesrv_addr, topic, "java_orderly_cg", str(n),
                                 str(keys), "90"], tmp_path / "orderly.log")

    lines = with_servers(tmp_path, test)
    sent = [fields for fields in lines if fields[0] == "SEND"]
    assert len(sent) == n
    queue_of_key = {int(f[4]) for f in sent[:keys]}
    assert len(queue_of_key) == keys  # three keys, three queues
    by_key: dict[int, list[int]] = defaultdict(list)
    for fields in lines:
        if fields[0] == "MSG":
            key, i = map(int, fields[1].split(":"))
            by_key[key].append(i)
    assert set(by_key) == set(range(keys))
    for key, seen in by_key.items():
        assert seen == sorted(seen) and set(seen) == set(range(key, n, keys)), (key, seen)


@pytest.mark.parametrize("model", ["CLUSTERING", "BROADCASTING"])
def test_two_consumers_in_one_group(tmp_path: Path, model: str) -> None:
    java, n, topic = scenarios(tmp_path), 20, f"JavaGroup{model.title()}"

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic, queues=4)
        return await run_driver([*java, "group", s.namesrv_addr, topic, f"java_{model.lower()}_cg",
                                 model, str(n), "90"], tmp_path / "group.log",
                                prefixes=("MSG", "ASSIGNED"))

    lines = with_servers(tmp_path, test)
    [assigned] = [fields for fields in lines if fields[0] == "ASSIGNED"]
    received: dict[str, set[str]] = defaultdict(set)
    for fields in lines:
        if fields[0] == "MSG":
            received[fields[1]].add(fields[2])
    everything = {f"g-{i}" for i in range(n)}
    if model == "CLUSTERING":
        assert int(assigned[1]) + int(assigned[2]) == 4
        assert received["a"] | received["b"] == everything
        assert received["a"] and received["b"]  # the queues were shared
    else:
        assert assigned[1:] == ["4", "4"]
        assert received["a"] == received["b"] == everything


@pytest.mark.parametrize("version", VERSIONS)
def test_lite_pull_consumer(tmp_path: Path, version: str) -> None:
    """5.x's lite pull consumer pulls with LITE_PULL_MESSAGE (361), 4.9's with PULL_MESSAGE."""
    java, n, topic = scenarios(tmp_path, version), 10, "JavaLitePull"

    async def test(s: Servers) -> tuple[list[list[str]], int]:
        await create_topic(s, topic, queues=2)
        lines = await run_driver([*java, "lite-pull", s.namesrv_addr, topic, "java_lite_cg", str(n),
                                  "60"], tmp_path / "lite.log")
        committed = sum(s.broker.offsets.query("java_lite_cg", topic, q) or 0 for q in (0, 1))
        return lines, committed

    lines, committed = with_servers(tmp_path, test)
    assert {fields[1] for fields in lines} == {f"lite-{i}" for i in range(n)}
    assert committed == n  # commitSync stored every queue's next offset


def test_query_by_key_and_view_by_id(tmp_path: Path) -> None:
    java, topic = scenarios(tmp_path), "JavaQuery"

    async def test(s: Servers) -> tuple[list[list[str]], list]:
        await create_topic(s, topic, queues=2)
        lines = await run_driver([*java, "send-modes", s.namesrv_addr, topic, "3"], tmp_path / "send.log")
        s.broker.store.wait_dispatched()
        sync1 = next(m for m in stored(s, topic) if m.body == b"sync-1")
        found = await run_driver([*java, "query", s.namesrv_addr, topic, "sync-1", sync1.offset_msg_id],
                                 tmp_path / "query.log", prefixes=("FOUND", "VIEW"))
        return found, [f for f in lines if f[1] == "sync" and f[3] == sync1.msg_id]

    found, sent = with_servers(tmp_path, test)
    [hit] = [f for f in found if f[0] == "FOUND"]
    assert hit[1] == "sync-1" and hit[2] == sent[0][3]  # the client's message id
    assert [f for f in found if f[0] == "VIEW"] == [["VIEW", "sync-1", topic]]


@pytest.mark.parametrize("version", VERSIONS)
def test_sql92_subscription(tmp_path: Path, version: str) -> None:
    """MessageSelector.bySql: with enablePropertyFilter=true the broker delivers only the
    messages whose properties match; without it the consumer's start is refused with the fix."""
    java, n, topic = scenarios(tmp_path, version), 20, "JavaSql"
    expression = "n >= 10 AND TAGS = 'even' AND n NOT IN ('14')"

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic)
        return await run_driver([*java, "sql", s.namesrv_addr, topic, "java_sql_cg", str(n), "4", expression,
                                 "60"], tmp_path / "sql.log", prefixes=("MSG", "REFUSED"))

    lines = with_servers(tmp_path, test, enable_property_filter=True)
    assert {(f[1], f[2], f[3]) for f in lines} == {(f"sql-{i}", str(i), "even") for i in (10, 12, 16, 18)}

    refused = with_servers(tmp_path / "off", test)
    assert refused[0][0] == "REFUSED" and "enablePropertyFilter=true" in refused[0][1], refused


@pytest.mark.parametrize("version", VERSIONS)
def test_request_reply(tmp_path: Path, version: str) -> None:
    """DefaultMQProducer.request and MessageUtil.createReplyMessage: a Java responder answers
    a Java requester and a Python one; a Python responder answers a Java requester."""
    java, n, topic = scenarios(tmp_path, version), 4, "JavaRpc"

    async def test(s: Servers) -> tuple[list[list[str]], list[bytes], list[list[str]], list[list[str]]]:
        await create_topic(s, topic, queues=2)
        responder = asyncio.ensure_future(run_driver(
            [*java, "respond", s.namesrv_addr, topic, "java_rpc_cg", str(2 * n), "120"],
            tmp_path / "respond.log", prefixes=("ANSWERED", "ERROR")))
        async with Producer(s.namesrv_addr, "py_rpc_pg") as requester:
            java_asked = asyncio.ensure_future(run_driver(
                [*java, "request", s.namesrv_addr, topic, str(n), "60000"],
                tmp_path / "request.log", prefixes=("REPLY",)))
            python_asked = [(await requester.request(Message(topic, b"py-%d" % i),
                                                     timeout_ms=60_000)).body for i in range(n)]
            requested = await java_asked
        answered = await responder

        # the other way round: Bolide's client answers the Java requester
        consumer, replier = replying_consumer(s.namesrv_addr, topic, "py_rpc_cg", prefix=b"py:",
                                              consume_from=ConsumeFrom.LAST_OFFSET)
        async with replier, consumer:
            answered_by_python = await run_driver(
                [*java, "request", s.namesrv_addr, topic, "2", "60000"],
                tmp_path / "request-python.log", prefixes=("REPLY",))
        return requested, python_asked, answered, answered_by_python

    requested, python_asked, answered, answered_by_python = with_servers(tmp_path, test)
    assert [f[1:3] for f in requested] == [[f"re:ask-{i}", "DefaultCluster_REPLY_TOPIC"]
                                           for i in range(n)]
    assert len({f[3] for f in requested}) == n  # one correlation id per request
    assert python_asked == [b"re:py-%d" % i for i in range(n)]
    assert sorted(f[1] for f in answered) == sorted(
        [f"ask-{i}" for i in range(n)] + [f"py-{i}" for i in range(n)])
    assert all(f[0] == "ANSWERED" and f[2] == "SEND_OK" for f in answered), answered
    assert [f[1] for f in answered_by_python] == ["py:ask-0", "py:ask-1"]


def test_push_consumer_pops_the_queues_the_broker_allocates(tmp_path: Path) -> None:
    """RocketMQ 5's pop over remoting: a Java 5.3.3 push consumer with setClientRebalance(false)
    asks the broker for its queues (QUERY_ASSIGNMENT); with its group set to POP
    (setConsumeMode) it pops them and acknowledges what it consumed: the group's offsets end
    committed past everything. (Invisible-time changes and redelivery over remoting: the proxy
    test of test_grpc_clients_bolide.py; the Java client's first pop retry waits 10 s.)"""
    java, n, topic, group = scenarios(tmp_path, "5.3.3"), 4, "JavaPop", "java_pop_cg"

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic, queues=2)
        async with Admin(s.namesrv_addr) as admin:
            await admin.set_consume_mode(topic, group, "POP")
        lines = await run_driver([*java, "pop", s.namesrv_addr, topic, group, str(n), "60"],
                                 tmp_path / "pop.log")
        await wait_until(lambda: sum(s.broker.offsets.query(group, topic, q) or 0 for q in range(2)) == n)
        return lines

    lines = with_servers(tmp_path, test)
    assert all(f[3] == "true" for f in lines), lines  # popped: every message carried its POP_CK
    assert sorted(f[1] for f in lines) == [f"pop-{i}" for i in range(n)]  # each once
    assert all(f[2] == "0" for f in lines)


def test_timer_messages(tmp_path: Path) -> None:
    """5.x timer messages (TIMER_DELIVER_MS, Message.setDeliverTimeMs) from the Java client
    reach its consumer at their time, not before (precision: half the shortest level, 0.5 s)."""
    java, n, topic = scenarios(tmp_path, "5.3.3"), 3, "JavaTimer"

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic, queues=2)
        lines = await run_driver([*java, "timer", s.namesrv_addr, topic, "java_timer_cg", str(n),
                                  "3000", "60"], tmp_path / "timer.log", prefixes=("DUE", "MSG", "RECALLED"))
        schedule = s.broker.schedule
        assert schedule is not None
        await wait_until(lambda: schedule.recalled == 1, timeout=20)  # dropped when it came due
        stored = [m.body for q in range(2) for m in s.broker.store.get_message("g", topic, q, 0, 32).messages]
        assert sorted(stored) == [f"timer-{i}".encode() for i in range(n)]
        return lines

    lines = with_servers(tmp_path, test)
    assert len([f for f in lines if f[0] == "RECALLED" and len(f[1]) == 32]) == 1
    due = {f[1]: int(f[2]) for f in lines if f[0] == "DUE"}
    received = {f[1]: int(f[2]) for f in lines if f[0] == "MSG"}
    assert set(due) == set(received) == {f"timer-{i}" for i in range(n)}
    for body, at in received.items():
        assert at >= due[body] // 1000 * 1000 - 600, (body, at - due[body])


def test_compressed_bodies_both_ways(tmp_path: Path) -> None:
    """RocketMQ 5's body compression types: what the Java 5.3.3 producer compresses with ZLIB,
    LZ4 and ZSTD, Bolide's consumer reads back; what Bolide's producer compresses with each,
    the Java consumer reads back."""
    java, n, size, topic = scenarios(tmp_path, "5.3.3"), 2, 6000, "JavaCompressed"
    kinds = ("ZLIB", "LZ4", "ZSTD")

    def body(kind: str, i: int) -> bytes:
        return (f"{kind}-{i}:" + "rocketmq-body-" * (size // 14 + 1))[:size].encode()

    async def test(s: Servers) -> tuple[list[list[str]], list[MessageExt], list[list[str]]]:
        await create_topic(s, topic, queues=1)
        sent = await run_driver([*java, "compressed", s.namesrv_addr, topic, str(n), str(size)],
                                tmp_path / "compressed.log")
        flags = {m.sys_flag & 0x701 for m in stored(s, topic)}
        assert flags == {0x301, 0x101, 0x201}, flags  # stored as the Java client sent them
        consumer = PullConsumer(s.namesrv_addr, "py_compressed_cg", consume_from=ConsumeFrom.FIRST_OFFSET)
        consumer.subscribe(topic)
        got: list[MessageExt] = []
        async with consumer:
            while len(got) < 3 * n:
                got += await consumer.poll(3000)
        for kind in kinds:
            async with Producer(s.namesrv_addr, "py_compressed_pg", compress_over_bytes=1024,
                                compress_type=kind.lower()) as producer:
                for i in range(n):
                    await producer.send(Message(topic, body(f"py{kind}", i)))
        digests = await run_driver([*java, "digests", s.namesrv_addr, topic, "java_digests_cg",
                                    str(6 * n), "60"], tmp_path / "digests.log")
        return sent, got, digests

    sent, got, digests = with_servers(tmp_path, test)
    assert [f[1:] for f in sent] == [[kind, "SEND_OK"] for kind in kinds for _ in range(n)]
    assert sorted(m.body for m in got) == sorted(body(k, i) for k in kinds for i in range(n))
    expected = {(b.split(b":")[0].decode(), str(len(b)), hashlib.md5(b).hexdigest())
                for b in [body(k, i) for k in kinds for i in range(n)]
                + [body(f"py{k}", i) for k in kinds for i in range(n)]}
    assert {tuple(f[1:]) for f in digests} == expected


COMPACTION_FILES = {"compaction_cq_mapped_file_size": 46 * 10,  # nine records a file pair
                    "compaction_mapped_file_size": 64 * 1024,
                    "compaction_schedule_interval_ms": 3_600_000}


async def run_compacted_driver(cmd: list[str], log: Path,
                               compact: Callable[[], Awaitable[None]]) -> list[list[str]]:
    """Run the ``compacted`` command: once it printed SENT, ``await compact()``, then let it read."""
    proc = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    head: list[str] = []
    try:
        async with asyncio.timeout(CLIENT_TIMEOUT):
            while not head or not head[-1].startswith("SENT"):
                line = (await proc.stdout.readline()).decode(errors="replace")
                if not line:
                    break
                head.append(line.rstrip("\n"))
            await compact()
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
            out, err = await proc.communicate()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    text = "\n".join(head) + "\n" + out.decode(errors="replace")
    errors = err.decode(errors="replace")
    log.write_text(text + "\n--- stderr ---\n" + errors)
    assert proc.returncode == 0, (f"{cmd[-7:]} exited {proc.returncode}; see {log}:\n"
                                  f"{text[-3000:]}\n{errors[-3000:]}")
    return [line.split("\t") for line in text.splitlines() if "\t" in line]


@pytest.mark.parametrize("version", VERSIONS)
def test_compacted_topic_read_from_the_beginning(tmp_path: Path, version: str) -> None:
    """RocketMQ's Example_Compaction_Topic.md against Bolide: sends by key with a selector, a
    compaction, then DefaultLitePullConsumer assign + seekToBegin + poll into a key -> body map."""
    java, topic, keys, rounds = scenarios(tmp_path, version), "JavaCompacted", 8, 8

    async def test(s: Servers) -> tuple[list[list[str]], dict[tuple[int, int], str]]:
        await create_topic(s, topic, queues=4, attributes="+cleanup.policy=COMPACTION")
        store = s.broker.store
        assert topic in store.compacted_topics()

        async def compact() -> None:
            assert await asyncio.to_thread(store.wait_dispatched)
            assert await asyncio.to_thread(store.compact_now) >= 1

        lines = await run_compacted_driver(
            [*java, "compacted", s.namesrv_addr, topic, "java_compacted_cg", str(keys), str(rounds),
             "60"], tmp_path / "compacted.log", compact)
        kept = {}  # (queue, offset) -> body the store serves from offset 0
        for qid in range(4):
            offset = 0
            while True:
                got = store.get_message("check", topic, qid, offset, 32)
                kept.update(((qid, m.queue_offset), m.body.decode()) for m in got.messages)
                if got.next_begin_offset <= offset:
                    break
                offset = got.next_begin_offset
        return lines, kept

    lines, kept = with_servers(tmp_path, test, store=COMPACTION_FILES)
    sent = [f for f in lines if f[0] == "SEND"]
    assert len(sent) == keys * rounds
    queue_of = {f[1]: f[2] for f in sent}
    assert all(queue_of[f[1]] == f[2] for f in sent)  # the selector kept each key on one queue
    got = [f for f in lines if f[0] == "MSG"]
    assert {(int(f[3]), int(f[4])): f[2] for f in got} == kept  # what the store keeps, no more
    assert len(got) < keys * rounds  # compaction dropped older values
    kv = {f[1]: f[2] for f in lines if f[0] == "KV"}
    assert kv == {f"key-{k}": f"v{k}-{rounds - 1}" for k in range(keys)}
