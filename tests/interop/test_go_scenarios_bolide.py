"""The official Apache RocketMQ Go client (rocketmq-client-go/v2 v2.1.2, unmodified) against Bolide
beyond the plain round trip, mirroring ``test_java_scenarios_bolide.py``: SendSync/SendAsync/
SendOneWay/batch sends, retries ending in the dead letter queue, orderly consumption with queue
locks, two push consumers sharing a group (clustering rebalance and broadcasting), the pull
consumer, a SQL92 subscription, request-reply (Producer.Request), message traces (WithTrace), and
the TransactionProducer with CheckLocalTransaction, mirroring ``test_java_transactions_bolide.py``.

The driver is ``interop/go-client/scenarios.go`` and ``traces.go`` (commands of the ``goclient``
binary); each test runs one command against an in-process NameServer + Broker on free ports. Go's
pull consumer (Poll/ACK) stands for the Java lite pull consumer; Go v2.1.2 has no query-by-key /
view-by-id API, so that Java scenario has no Go twin.

Go client behaviour the tests take into account (the same against a RocketMQ broker):

- the broker creates ``%RETRY%<group>`` on a new group's first heartbeat, but a Go push consumer's
  start-up rebalances run before it has read that topic's route, so it would pull retried
  messages only at its next periodic rebalance (every 20 s, not configurable; the same against a
  RocketMQ broker): the retry test creates the retry topic first, as a previous run of the group
  would have;
- it sets no ``UNIQ_KEY`` on the messages of a batch, so a batch's send result has an empty
  msgId (only the broker's offset ids, one per message).
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from client_roundtrip import (
    COMMIT_LOG,
    CONSUME_QUEUE,
    FAST_RETRIES,
    create_topic,
    run_driver,
    stored,
    unavailable,
    wait_for,
    with_servers,
)

from bolide.client.admin import Admin
from bolide.client.admin_trace import TraceView
from bolide.store import StoreConfig
from bolide.testing.goclient import go_client_binary, go_env
from bolide.testing.rocketmq import RocketMQUnavailable
from bolide.testing.servers import Servers
from conftest import assert_consistent, replying_consumer

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]



def goclient(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The driver's command line and its environment (HOME in ``tmp_path``)."""
    try:
        return [str(go_client_binary())], go_env(home=tmp_path / "goclient-home")
    except RocketMQUnavailable as exc:
        unavailable(f"Go client unavailable: {exc}")






def test_go_send_modes(tmp_path: Path) -> None:
    (go, env), n, topic = goclient(tmp_path), 5, "GoSendModes"

    async def test(s: Servers) -> tuple[list[list[str]], list]:
        lines = await run_driver([*go, "send-modes", s.namesrv_addr, topic, str(n)], tmp_path / "send.log",
                                 env)
        await wait_for(lambda: len(stored(s, topic)) == 4 * n)  # oneway sends are not answered
        return lines, stored(s, topic)

    lines, msgs = with_servers(tmp_path, test)  # the topic is auto-created from TBW102
    modes = Counter(fields[1] for fields in lines)
    assert modes == {"sync": n, "async": n, "batch": 1}
    assert all(fields[2] == "SEND_OK" for fields in lines)
    single = [fields for fields in lines if fields[1] != "batch"]
    assert len({fields[3] for fields in single}) == 2 * n and all(fields[3] for fields in single)
    assert len({(fields[4], fields[5]) for fields in single}) == 2 * n  # queue and offset each
    [batch] = [fields for fields in lines if fields[1] == "batch"]
    assert batch[3] == ""  # Go gives batched messages no UNIQ_KEY, so no client message id
    assert len(batch[6].split(",")) == n  # one offset message id per batched message
    bodies = Counter(m.body.decode() for m in msgs)
    assert bodies == {f"{mode}-{i}": 1 for mode in ("sync", "async", "oneway", "batch") for i in range(n)}
    sent_ids = {fields[3] for fields in single}
    for m in msgs:
        mode, i = m.body.decode().split("-")
        assert m.tags == mode and m.keys == [f"{mode}-{i}"]
        if mode in ("sync", "async"):
            assert m.properties["UNIQ_KEY"] in sent_ids  # the client's message id
        elif mode == "oneway":
            assert m.properties["UNIQ_KEY"] not in sent_ids  # set by the client, not reported
    assert {m.offset_msg_id for m in msgs if m.body.startswith(b"batch-")} == set(batch[6].split(","))


def test_go_retries_end_in_the_dead_letter_queue(tmp_path: Path) -> None:
    (go, env), n, topic, group = goclient(tmp_path), 4, "GoRetry", "go_retry_cg"

    async def test(s: Servers) -> tuple[list[list[str]], list, list]:
        await create_topic(s, topic, queues=1)
        await create_topic(s, f"%RETRY%{group}", queues=1)  # see the module docstring
        lines = await run_driver([*go, "retry", s.namesrv_addr, topic, group, str(n), "2", "60"],
                                 tmp_path / "retry.log", env, prefixes=("MSG", "DLQ"))
        return lines, stored(s, f"%RETRY%{group}"), stored(s, f"%DLQ%{group}")

    lines, retried, dead = with_servers(tmp_path, test, FAST_RETRIES)
    attempts = defaultdict(list)
    for fields in lines:
        if fields[0] == "MSG":
            attempts[int(fields[1])].append(int(fields[2]))
            assert fields[3] == topic  # the client maps retries back to the original topic
    assert attempts[0] == [0, 1] and attempts[2] == [0, 1]  # failed once, then consumed
    assert attempts[1] == [0, 1, 2] and attempts[3] == [0, 1, 2]  # failed until the limit
    dlq_lines = [fields for fields in lines if fields[0] == "DLQ"]
    assert sorted(fields[1] for fields in dlq_lines) == ["1", "3"]
    assert all(f[2] == "3" and f[3] == f"%DLQ%{group}" and f[4] == topic for f in dlq_lines)
    assert sorted(m.body for m in dead) == [b"1", b"3"]
    assert all(m.properties["RETRY_TOPIC"] == topic and m.reconsume_times == 3 for m in dead)
    assert Counter(m.reconsume_times for m in retried) == {1: 4, 2: 2}


def test_go_orderly_consumer_sees_each_key_in_order(tmp_path: Path) -> None:
    (go, env), n, keys, topic = goclient(tmp_path), 30, 3, "GoOrderly"

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic, queues=4)
        return await run_driver([*go, "orderly", s.namesrv_addr, topic, "go_orderly_cg", str(n), str(keys),
                                 "60"], tmp_path / "orderly.log", env)

    lines = with_servers(tmp_path, test)
    sent = [fields for fields in lines if fields[0] == "SEND"]
    assert len(sent) == n and all(fields[2] == "SEND_OK" for fields in sent)
    queue_of_key = [int(fields[4]) for fields in sent[:keys]]
    assert len(set(queue_of_key)) == keys  # three keys, three queues, chosen by the selector
    assert all(int(fields[4]) == queue_of_key[i % keys] for i, fields in enumerate(sent))
    by_key: dict[int, list[int]] = defaultdict(list)
    for fields in lines:
        if fields[0] == "MSG":
            key, i = map(int, fields[1].split(":"))
            by_key[key].append(i)
    assert set(by_key) == set(range(keys))
    for key, seen in by_key.items():
        assert seen == sorted(seen) and set(seen) == set(range(key, n, keys)), (key, seen)


@pytest.mark.parametrize("model", ["CLUSTERING", "BROADCASTING"])
def test_go_two_consumers_in_one_group(tmp_path: Path, model: str) -> None:
    (go, env), n, topic = goclient(tmp_path), 20, f"GoGroup{model.title()}"

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic, queues=4)
        return await run_driver([*go, "group", s.namesrv_addr, topic, f"go_{model.lower()}_cg", model, str(n),
                                 "60"], tmp_path / "group.log", env, prefixes=("MSG", "ASSIGNED"))

    lines = with_servers(tmp_path, test)
    [assigned] = [fields for fields in lines if fields[0] == "ASSIGNED"]
    received: dict[str, set[str]] = defaultdict(set)
    for fields in lines:
        if fields[0] == "MSG":
            received[fields[1]].add(fields[2])
    everything = {f"g-{i}" for i in range(n)}
    if model == "CLUSTERING":
        assert int(assigned[1]) + int(assigned[2]) == 4 and "0" not in assigned[1:]
        assert received["a"] | received["b"] == everything
        assert received["a"] and received["b"]  # the queues were shared
    else:
        assert assigned[1:] == ["4", "4"]
        assert received["a"] == received["b"] == everything


def test_go_pull_consumer_poll_and_ack(tmp_path: Path) -> None:
    (go, env), n, topic, group = goclient(tmp_path), 10, "GoLitePull", "go_lite_cg"

    async def test(s: Servers) -> tuple[list[list[str]], int]:
        await create_topic(s, topic, queues=2)
        lines = await run_driver([*go, "lite-pull", s.namesrv_addr, topic, group, str(n), "60"],
                                 tmp_path / "lite.log", env)
        # PersistOffset's UPDATE_CONSUMER_OFFSET requests are oneway
        await wait_for(lambda: sum(s.broker.offsets.query(group, topic, q) or 0 for q in (0, 1)) == n)
        return lines, sum(s.broker.offsets.query(group, topic, q) or 0 for q in (0, 1))

    lines, stored_offsets = with_servers(tmp_path, test)
    assert {fields[1] for fields in lines} == {f"lite-{i}" for i in range(n)}
    assert len({(fields[2], fields[3]) for fields in lines}) == n  # queue and offset each
    assert stored_offsets == n  # every queue's next offset was stored


def committed(i: int) -> bool:
    """What the driver's local transaction (and its check) decides for message ``i``."""
    return i % 2 == 0 or i % 4 == 1


def test_go_transaction_producer(tmp_path: Path) -> None:
    (go, env), n, topic = goclient(tmp_path), 20, "GoTxTopic"
    expected = {f"tx-{i}" for i in range(n) if committed(i)}

    async def test(s: Servers) -> tuple[list[list[str]], int]:
        lines = await run_driver([*go, "transaction", s.namesrv_addr, topic, "go_tx_cg", str(n), "60"],
                                 tmp_path / "transaction.log", env, prefixes=("SEND", "CHECK", "MSG"))
        store = s.broker.store
        assert await asyncio.to_thread(store.wait_dispatched, 10.0)
        return lines, sum(store.get_max_offset_in_queue(topic, q) for q in store.topics().get(topic, []))

    # checks start 1 s after a send; the 2 s interval leaves the producer's answer to a check
    # time to arrive before the copy it is about could be checked again
    lines, count = with_servers(tmp_path, test, auto_create_topic_enable=True, transaction_timeout_ms=1000,
                                transaction_check_interval_ms=2000)
    sent = [fields for fields in lines if fields[0] == "SEND"]
    assert [(f[1], f[4]) for f in sent] == [("SEND_OK", str(i)) for i in range(n)]
    states = {int(f[4]): f[3] for f in sent}
    assert {i for i, state in states.items() if state == "UNKNOW"} == {i for i in range(n) if i % 4 == 1}
    assert all(states[i] == ("COMMIT_MESSAGE" if i % 2 == 0 else "ROLLBACK_MESSAGE")
               for i in range(n) if i % 4 != 1)
    checks = [fields for fields in lines if fields[0] == "CHECK"]
    assert {int(f[1]) for f in checks} == {i for i in range(n) if i % 4 == 1}  # only the unknown ones
    assert all(f[2] == "COMMIT_MESSAGE" and f[3] == topic for f in checks)
    assert {f[1] for f in lines if f[0] == "MSG"} == expected
    assert count == len(expected)  # nothing rolled back, nothing committed twice
    assert_consistent(StoreConfig(store_path_root_dir=str(tmp_path / "store"),
                                  mapped_file_size_commit_log=COMMIT_LOG,
                                  mapped_file_size_consume_queue=CONSUME_QUEUE))


def test_go_sql92_subscription(tmp_path: Path) -> None:
    """MessageSelector{Type: SQL92}: the broker (enablePropertyFilter=true) delivers only the
    messages whose properties match (the Go client sends the expression with its pulls)."""
    go, env = goclient(tmp_path)
    topic, expression = "GoSql", "n >= 10 AND TAGS = 'even' AND n NOT IN ('14')"

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic)
        return await run_driver([*go, "sql", s.namesrv_addr, topic, "go_sql_cg", "20", "4", expression, "60"],
                                tmp_path / "sql.log", env=env)

    lines = with_servers(tmp_path, test, enable_property_filter=True)
    assert {(f[1], f[2], f[3]) for f in lines} == {(f"sql-{i}", str(i), "even") for i in (10, 12, 16, 18)}


def test_go_request_reply(tmp_path: Path) -> None:
    """Producer.Request: Bolide's client answers the Go requester through the broker (Go's own
    CreateReplyMessage drops the reply's body in v2.1.2, so Go cannot be the responder)."""
    go, env = goclient(tmp_path)
    topic, n = "GoRpc", 3

    async def test(s: Servers) -> list[list[str]]:
        await create_topic(s, topic, queues=2)
        consumer, replier = replying_consumer(s.namesrv_addr, topic, "go_rpc_cg")
        async with replier, consumer:
            return await run_driver([*go, "request", s.namesrv_addr, topic, str(n), "60"],
                                    tmp_path / "request.log", env=env, prefixes=("REPLY", "ERROR"))

    lines = with_servers(tmp_path, test)
    assert [f[:3] for f in lines] == [["REPLY", f"re:go-ask-{i}", "DefaultCluster_REPLY_TOPIC"]
                                      for i in range(n)]
    assert len({f[3] for f in lines}) == n


def test_go_message_traces(tmp_path: Path) -> None:
    """WithTrace on the producer and the push consumer: the Go client writes Pub and SubAfter
    traces to RMQ_SYS_TRACE_TOPIC (traceTopicEnable on the broker), which Bolide's Admin reads
    back by message id with the fields the client put in them."""
    go, env = goclient(tmp_path)
    topic, group, n = "GoTraced", "go_trace_cg", 4

    async def test(s: Servers) -> tuple[list[list[str]], dict[str, list[TraceView]]]:
        await create_topic(s, topic, queues=2)
        lines = await run_driver([*go, "trace", s.namesrv_addr, topic, group, str(n), "90"],
                                 tmp_path / "trace.log", env, prefixes=("SEND", "MSG", "TRACED", "TIMEOUT"))
        ids = [f[3] for f in lines if f[0] == "SEND"]
        async with Admin(s.namesrv_addr) as admin:  # the driver read them all from the topic;
            for _ in range(500):                    # the index, built after, finds them soon
                traces = {i: await admin.message_trace(i) for i in ids}
                if all({v.type for v in views} >= {"Pub", "SubAfter"} for views in traces.values()):
                    break
                await asyncio.sleep(0.02)
        return lines, traces

    lines, traces = with_servers(tmp_path, test, trace_topic_enable=True)
    assert lines[-1] == ["TRACED", str(n), str(n)], lines
    sends = [f for f in lines if f[0] == "SEND"]
    assert len(traces) == n and all(f[2] == "SEND_OK" for f in sends)
    for i, f in enumerate(sends):
        views = traces[f[3]]
        [pub] = [v for v in views if v.type == "Pub"]
        assert (pub.group, pub.topic, pub.tags, pub.keys, pub.status) == (
            "bolide_go_scenarios_pg", topic, "traced", f"trace-key-{i}", "success"), pub
        assert pub.offset_msg_id == f[6] and pub.store_host, pub
        assert {(v.group, v.status) for v in views if v.type == "SubAfter"} == {(group, "success")}, views
