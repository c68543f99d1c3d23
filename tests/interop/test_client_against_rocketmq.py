"""Bolide's Python client against real Apache RocketMQ (a NameServer and a broker per version
in :data:`bolide.testing.rocketmq.VERSIONS`, started once for the module): Producer (sync,
async and batch sends with tags and keys), PushConsumer (clustering, tag filter, a failed
message redelivered through CONSUMER_SEND_MSG_BACK), orderly PushConsumer (LOCK_BATCH_MQ),
PullConsumer (assign, poll, commit), TransactionProducer (commit, rollback, and the broker's
CHECK_TRANSACTION_STATE), request-reply, Admin (topic route, consumer progress, query by key) and the
``bolide admin`` commands.

Needs java and the cached RocketMQ jars (``make interop-deps``): without them the module is
skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from client_roundtrip import acl_admin_scenario, acl_scenario, unavailable

from bolide.cli.main import cli
from bolide.client import (
    Admin,
    AuthRefusedError,
    ClientConfig,
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    MQBrokerError,
    MQClientError,
    Producer,
    PullConsumer,
    PushConsumer,
    RequestTimeoutError,
    SendStatus,
    SimpleConsumer,
    TransactionProducer,
    create_reply_message,
    select_by_hash,
)
from bolide.errors import BolideError, RemotingError
from bolide.protocol import RequestCode, ResponseCode
from bolide.testing import rocketmq as rmqmod
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable, acl2_settings
from bolide.testing.servers import running_servers

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TIMEOUT = 40.0  # seconds for one scenario
FAST = {"rebalance_interval_ms": 300, "suspend_ms": 1000, "pull_timeout_ms": 5000,
        "consume_from": ConsumeFrom.FIRST_OFFSET}
# the broker checks open transactions every second once they are 2 s old; 5.x writes the op
# messages of ended transactions in batches (every 3 s by default): sooner, or ended
# transactions would be checked too
TX_CHECKS = {"transactionCheckInterval": "1000", "transactionTimeOut": "2000",
             "transactionOpBatchInterval": "200"}
# 5.x's cold data flow control, which needs to be on at start (it reads the page size then);
# with the default accessMessageInMemoryHotRatio (26 % of memory) nothing the tests read is cold
COLD_DATA = {"coldDataFlowControlEnable": "true"}


@pytest.fixture(scope="module", params=rmqmod.VERSIONS, ids=lambda v: f"rocketmq-{v}")
def rmq(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQ]:
    """A real NameServer + broker of one version for every scenario of the module."""
    version = request.param
    run_dir = tmp_path_factory.mktemp(f"client-rocketmq-{version}")
    try:
        server = RocketMQ(version, run_dir)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    try:
        server.start_namesrv()
        server.start_broker(BrokerSettings(run_dir / "store", extra=TX_CHECKS | COLD_DATA))
        asyncio.run(wait_for_route(server.namesrv_addr, "TBW102"))
        yield server
    finally:
        server.kill_broker()  # nothing to keep: skip the clean shutdown's seconds
        server.stop()


async def wait_for_route(namesrv: str, topic: str, timeout: float = 30.0) -> None:
    """The broker logs its boot line before its routes reach the NameServer: wait for them."""
    async with Admin(namesrv) as admin, asyncio.timeout(timeout):
        while True:
            try:
                await admin.topic_route(topic)
                return
            except MQClientError:
                await asyncio.sleep(0.1)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), TIMEOUT))


async def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


async def poll_exactly(consumer: PullConsumer, count: int) -> list[MessageExt]:
    """``count`` messages, then a short poll that must find nothing more."""
    got: list[MessageExt] = []
    while len(got) < count:
        got += await consumer.poll(3000)
    got += await consumer.poll(500)
    return got


def test_producer_sync_async_batch(rmq: RocketMQ) -> None:
    async def test() -> None:
        async with Producer(rmq.namesrv_addr, "interop-pg") as producer:
            sync = [await producer.send(Message("ItSend", b"sync-%d" % i, tags="TagA", keys=f"k{i} all"))
                    for i in range(4)]
            tasks = [producer.send_async(Message("ItSend", b"async-%d" % i, tags="TagB")) for i in range(8)]
            pipelined = await asyncio.gather(*tasks)
            batch = await producer.send_batch([Message("ItSend", b"batch-%d" % i, keys=f"b{i}")
                                               for i in range(5)])
        for r in [*sync, *pipelined, batch]:
            assert r.status is SendStatus.SEND_OK
            assert r.queue.topic == "ItSend" and r.queue.broker_name == "broker-a"
        assert all(len(r.offset_msg_id) == 32 for r in sync + pipelined)
        assert len({(r.queue.queue_id, r.queue_offset) for r in sync + pipelined}) == 12
        assert len(batch.msg_id.split(",")) == 5 and len(batch.offset_msg_id.split(",")) == 5

        consumer = PullConsumer(rmq.namesrv_addr, "interop-send-check", consume_from=ConsumeFrom.FIRST_OFFSET,
                                suspend_ms=1000, pull_timeout_ms=5000)
        consumer.subscribe("ItSend")
        async with consumer:
            got = await poll_exactly(consumer, 17)
        by_id = {m.msg_id: m for m in got}
        assert set(by_id) == ({r.msg_id for r in sync + pipelined} | set(batch.msg_id.split(",")))
        first = by_id[sync[1].msg_id]
        assert (first.body, first.tags, first.keys) == (b"sync-1", "TagA", ["k1", "all"])
        members = sorted((m for m in got if m.body.startswith(b"batch-")), key=lambda m: m.queue_offset)
        assert [m.body for m in members] == [b"batch-%d" % i for i in range(5)]  # one queue, in order
        assert len({m.queue_id for m in members}) == 1

    run(test)


def test_push_consumer_receives_everything_and_redelivers_a_failure(rmq: RocketMQ) -> None:
    async def test() -> None:
        async with Producer(rmq.namesrv_addr, "interop-push-pg") as producer:
            sent = {(await producer.send(Message("ItPush", b"m-%d" % i, tags="ABC"[i % 3]))).msg_id: i
                    for i in range(15)}
        wanted = {msg_id for msg_id, i in sent.items() if i % 3 != 2}  # tags A and B
        deliveries: list[MessageExt] = []
        failed: set[str] = set()

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            deliveries.extend(msgs)
            if msgs[0].body == b"m-4" and not failed:
                failed.add(msgs[0].msg_id or "")
                ctx.delay_level = 1  # 1 s
                return ConsumeStatus.RECONSUME_LATER
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(rmq.namesrv_addr, "interop-push-cg", listener=listener, **FAST)
        consumer.subscribe("ItPush", "A || B")
        async with consumer:
            await wait_until(lambda: {m.msg_id for m in deliveries} >= wanted
                             and any(m.reconsume_times == 1 for m in deliveries))
        assert {m.msg_id for m in deliveries} == wanted  # the broker filtered tag C out
        again = [m for m in deliveries if m.reconsume_times == 1]
        assert [m.body for m in again] == [b"m-4"]
        assert again[0].topic == "ItPush" and again[0].msg_id in failed  # original topic and id

    run(test)


def test_simple_consumer_pops(rmq: RocketMQ) -> None:
    """SimpleConsumer (POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME) against RocketMQ
    5's broker: a message made visible again comes back from its pop retry topic, with its
    reconsume times one higher, and acknowledges there. RocketMQ 4.x does not pop: the receive
    fails naming the code."""

    async def test() -> None:
        async with Admin(rmq.namesrv_addr) as admin:
            await admin.create_topic("ItSimple", read_queue_nums=2, write_queue_nums=2)
        await wait_for_route(rmq.namesrv_addr, "ItSimple")
        async with Producer(rmq.namesrv_addr, "interop-simple-pg") as producer:
            for i in range(3):
                await producer.send(Message("ItSimple", b"s-%d" % i, tags="A" if i < 2 else "B"))
        consumer = SimpleConsumer(rmq.namesrv_addr, "interop-simple-cg", {"ItSimple": "A"},
                                  consume_from=ConsumeFrom.FIRST_OFFSET)
        async with consumer:
            if rmq.major < 5:
                with pytest.raises(MQBrokerError) as refused:
                    await consumer.receive(4, await_duration_ms=1000)
                assert refused.value.code == 3  # REQUEST_CODE_NOT_SUPPORTED
                return
            got: list[MessageExt] = []
            while len(got) < 2:
                got += await consumer.receive(16, invisible_duration_ms=60_000, await_duration_ms=2000)
            assert sorted(m.body for m in got) == [b"s-0", b"s-1"]
            first, second = sorted(got, key=lambda m: m.body)
            await consumer.ack(first)
            await consumer.change_invisible_duration(second, 0)
            again: list[MessageExt] = []
            while not again:  # revived into the pop retry topic, then popped from there
                again = await consumer.receive(16, invisible_duration_ms=60_000, await_duration_ms=3000)
            assert [(m.body, m.topic, m.reconsume_times) for m in again] == [(b"s-1", "ItSimple", 1)]
            await consumer.ack(again[0])

    run(test)


def test_request_reply(rmq: RocketMQ) -> None:
    """Producer.request and create_reply_message through a RocketMQ broker: it pushes each
    reply to the requester (PUSH_REPLY_MESSAGE_TO_CLIENT, which Bolide's client answers)."""
    async def test() -> None:
        async with Admin(rmq.namesrv_addr) as admin:
            await admin.create_topic("ItRpc", read_queue_nums=2, write_queue_nums=2)
        replier = Producer(rmq.namesrv_addr, "interop-rpc-responder-pg")

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            for m in msgs:
                await replier.send(create_reply_message(m, b"re:" + m.body))
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(rmq.namesrv_addr, "interop-rpc-cg", listener=listener, **FAST)
        consumer.subscribe("ItRpc")
        async with replier, consumer, Producer(rmq.namesrv_addr, "interop-rpc-pg") as requester:
            replies = await asyncio.gather(*(requester.request(Message("ItRpc", b"q%d" % i),
                                                               timeout_ms=30_000) for i in range(4)))
            with pytest.raises(RequestTimeoutError):
                await requester.request(Message("ItRpcNobody", b"?"), timeout_ms=1000)
        assert [r.body for r in replies] == [b"re:q%d" % i for i in range(4)]
        assert {r.topic for r in replies} == {"DefaultCluster_REPLY_TOPIC"}
        assert len({r.properties["CORRELATION_ID"] for r in replies}) == 4
        assert all("PUSH_REPLY_TIME" in r.properties and "ARRIVE_TIME" in r.properties
                   for r in replies)

    run(test)


def test_orderly_push_consumer_locks_queues(rmq: RocketMQ) -> None:
    async def test() -> None:
        async with Producer(rmq.namesrv_addr, "interop-orderly-pg") as producer:
            for i in range(24):
                key = f"k{i % 3}"
                await producer.send(Message("ItOrderly", f"{key}:{i // 3}".encode()),
                                    selector=select_by_hash, arg=key)
        seen: dict[str, list[int]] = defaultdict(list)
        total = 0

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            nonlocal total
            for m in msgs:
                key, seq = m.body.decode().split(":")
                seen[key].append(int(seq))
                total += 1
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(rmq.namesrv_addr, "interop-orderly-cg", listener=listener, orderly=True,
                                lock_interval_ms=500, **FAST)
        consumer.subscribe("ItOrderly")
        async with consumer:
            await wait_until(lambda: total >= 24)
            assert all(consumer._orderly.is_locked(mq) for mq in consumer.assignment())  # type: ignore[union-attr]
        assert dict(seen) == {f"k{i}": list(range(8)) for i in range(3)}

    run(test)


def test_pull_consumer_assign_poll_commit(rmq: RocketMQ) -> None:
    async def test() -> None:
        async with Producer(rmq.namesrv_addr, "interop-pull-pg") as producer:
            queue = (await producer.publish_queues("ItPull"))[1]
            for i in range(6):
                await producer.send(Message("ItPull", b"%d" % i), queue=queue)
        consumer = PullConsumer(rmq.namesrv_addr, "interop-pull-cg", auto_commit=False,
                                suspend_ms=1000, pull_timeout_ms=5000)
        consumer.assign([queue])
        async with consumer:
            await consumer.seek_to_begin(queue)
            got = await poll_exactly(consumer, 6)
            assert [m.body for m in got] == [b"%d" % i for i in range(6)]
            await consumer.commit()
            assert await consumer.committed(queue) == 6
            assert await consumer.max_offset(queue) == 6

    run(test)


def test_a_commit_after_the_group_was_deleted_recreates_it(rmq: RocketMQ) -> None:
    """RocketMQ 5 refuses UPDATE_CONSUMER_OFFSET for a group it does not know (deleted here by
    an admin while the consumer runs): the offset store sends a heartbeat, which recreates the
    group (autoCreateSubscriptionGroup), and commits again instead of losing the commit."""
    async def test() -> None:
        async with Producer(rmq.namesrv_addr, "interop-commit-pg") as producer:
            queue = (await producer.publish_queues("ItCommitAgain"))[0]
            for i in range(3):
                await producer.send(Message("ItCommitAgain", b"%d" % i), queue=queue)
        group = "interop-commit-again-cg"
        consumer = PullConsumer(rmq.namesrv_addr, group, auto_commit=False)
        consumer.assign([queue])
        async with consumer, Admin(rmq.namesrv_addr) as admin:
            await consumer.commit({queue: 1})
            assert await consumer.committed(queue) == 1
            await admin.delete_subscription_group(group, broker_addr=rmq.broker_addr)
            await consumer.commit({queue: 2})
            assert await consumer.committed(queue) == 2

    run(test)


def test_admin_cold_data_flow_ctr_calls(rmq: RocketMQ) -> None:
    """The cold data flow control calls (2001 to 2003, RocketMQ 5) against the real broker: a
    group's threshold set and removed, and a group that read cold data (every stored message is
    cold with accessMessageInMemoryHotRatio=0) in the runtime table; a 4.9 broker, which has
    none, refuses the call by its code."""
    addr = rmq.broker_addr
    if rmq.major < 5:
        async def refused() -> None:
            async with Admin(rmq.namesrv_addr) as admin:
                with pytest.raises(MQBrokerError) as exc:
                    await admin.update_cold_data_flow_ctr_group_config("g", 1, broker_addr=addr)
                assert exc.value.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

        run(refused)
        return

    async def test() -> None:
        producer = Producer(rmq.namesrv_addr, "interop-cold-pg")
        async with Admin(rmq.namesrv_addr) as admin, producer:
            assert await admin.update_cold_data_flow_ctr_group_config("interop-cold-slow", 1234,
                                                                      broker_addr=addr) == [addr]
            info = (await admin.cold_data_flow_ctr_info(broker_addr=addr))[addr]
            assert info is not None and info.config_table == {"interop-cold-slow": 1234}, info
            assert (info.cg_cold_read_threshold, info.global_cold_read_threshold) == (3 << 20, 100 << 20)
            queue = (await producer.publish_queues("ItCold"))[0]
            for i in range(4):
                await producer.send(Message("ItCold", b"cold-%d" % i), queue=queue)
            await admin.update_broker_config({"accessMessageInMemoryHotRatio": 0}, broker_addr=addr)
            try:
                consumer = PullConsumer(rmq.namesrv_addr, "interop-cold-reader", auto_commit=False,
                                        suspend_ms=1000, pull_timeout_ms=5000)
                consumer.assign([queue])
                async with consumer:
                    await consumer.seek_to_begin(queue)
                    assert len(await poll_exactly(consumer, 4)) == 4
                info = (await admin.cold_data_flow_ctr_info(cluster="DefaultCluster"))[addr]
                raw = json.loads((await admin._call(addr, RequestCode.GET_COLD_DATA_FLOW_CTR_INFO, None,
                                                    "raw")).body_bytes())
            finally:
                await admin.update_broker_config({"accessMessageInMemoryHotRatio": 26}, broker_addr=addr)
            assert info is not None and "interop-cold-reader" in info.runtime_table, info
            entry = info.runtime_table["interop-cold-reader"]
            # the document's shape, as Bolide's broker writes it
            assert set(raw) == {"runtimeTable", "configTable", "cgColdReadThreshold",
                                "globalColdReadThreshold", "globalAcc"}, raw
            assert set(raw["runtimeTable"]["interop-cold-reader"]) == {"coldAcc", "createTimeMills",
                                                                       "lastColdReadTimeMills"}, raw
            now = int(time.time() * 1000)
            assert now - 60_000 < entry.create_ms <= entry.last_cold_read_ms <= now, entry
            await admin.remove_cold_data_flow_ctr_group_config("interop-cold-slow", broker_addr=addr)
            info = (await admin.cold_data_flow_ctr_info(broker_addr=addr))[addr]
            assert info is not None and info.config_table == {}, info

    run(test)


def test_transaction_producer_commit_rollback_and_check(rmq: RocketMQ) -> None:
    async def test() -> None:
        checked: list[bytes] = []
        topics: set[str] = set()

        def check(msg: MessageExt) -> LocalTransactionState:
            checked.append(msg.body)
            topics.add(msg.topic)
            return (LocalTransactionState.COMMIT if msg.body == b"check-commit"
                    else LocalTransactionState.ROLLBACK)

        def execute(msg: Message, arg: Any) -> LocalTransactionState:
            return arg  # type: ignore[no-any-return]

        async with TransactionProducer(rmq.namesrv_addr, "interop-tx-pg", check_listener=check) as producer:
            results = [await producer.send_message_in_transaction(Message("ItTx", body), execute, state)
                       for body, state in ((b"commit", LocalTransactionState.COMMIT),
                                           (b"rollback", LocalTransactionState.ROLLBACK),
                                           (b"check-commit", LocalTransactionState.UNKNOWN),
                                           (b"check-rollback", LocalTransactionState.UNKNOWN))]
            assert all(r.status is SendStatus.SEND_OK for r in results)
            await wait_until(lambda: {b"check-commit", b"check-rollback"} <= set(checked))
            # the answer goes out after the listener returns: wait for both answers
            await wait_until(lambda: producer.checks_answered >= 2)
        assert topics == {"ItTx"}  # the real topic, not the half topic
        # A transaction already ended may still be checked (5.x writes its op message later);
        # the listener then answers ROLLBACK for "commit", so "commit" arriving below proves
        # that the END_TRANSACTION commit itself took effect.

        consumer = PullConsumer(rmq.namesrv_addr, "interop-tx-cg", consume_from=ConsumeFrom.FIRST_OFFSET,
                                suspend_ms=1000, pull_timeout_ms=5000)
        consumer.subscribe("ItTx")
        async with consumer:
            got = await poll_exactly(consumer, 2)
        assert sorted(m.body for m in got) == [b"check-commit", b"commit"]

    run(test)


def test_admin_route_progress_and_query_by_key(rmq: RocketMQ) -> None:
    async def test() -> None:
        async with Producer(rmq.namesrv_addr, "interop-admin-pg") as producer:
            sent = [await producer.send(Message("ItAdmin", b"a-%d" % i, keys=f"order-{i % 2} shared"))
                    for i in range(6)]
        consumer = PullConsumer(rmq.namesrv_addr, "interop-admin-cg", consume_from=ConsumeFrom.FIRST_OFFSET,
                                suspend_ms=1000, pull_timeout_ms=5000)
        consumer.subscribe("ItAdmin")
        async with consumer:  # close() commits what poll() returned
            got = await poll_exactly(consumer, 6)
            positions = {mq.queue_id: st.consumed for mq, st in consumer._states.items()}
        assert sorted(m.body for m in got) == sorted(b"a-%d" % i for i in range(6)), positions

        async with Admin(rmq.namesrv_addr) as admin:
            route = await admin.topic_route("ItAdmin")
            assert [(b.broker_name, b.broker_addrs.get(0)) for b in route.broker_datas] == [
                ("broker-a", rmq.broker_addr)]
            assert [q.broker_name for q in route.queue_datas] == ["broker-a"]

            seen: list[tuple[int, int, int]] = []
            try:
                async with asyncio.timeout(20):  # the broker applies commits in its own time
                    while True:
                        progress = await admin.consumer_progress("interop-admin-cg", "ItAdmin")
                        queues = [q for q in progress.queues if q.queue.topic == "ItAdmin"]
                        seen = [(q.queue.queue_id, q.broker_offset, q.consumer_offset) for q in queues]
                        if sum(q.consumer_offset for q in queues) == 6:
                            break
                        await asyncio.sleep(0.2)
            except TimeoutError:
                raise AssertionError(f"progress {seen}; positions committed at close {positions}") from None
            assert sum(q.broker_offset for q in queues) == 6 and progress.total_lag == 0

            found: list[MessageExt] = []

            def indexed() -> bool:  # the broker indexes keys asynchronously
                return len(found) == 3

            async with asyncio.timeout(20):
                while not indexed():
                    found = await admin.query_by_key("ItAdmin", "order-1")
                    if not indexed():
                        await asyncio.sleep(0.2)
        assert sorted(m.msg_id or "" for m in found) == sorted(r.msg_id for r in sent[1::2])
        assert sorted(m.body for m in found) == [b"a-1", b"a-3", b"a-5"]

    run(test)


def test_bolide_admin_commands(rmq: RocketMQ, tmp_path: Path) -> None:
    """``bolide admin`` (mqadmin's commands by name) against the real NameServer and broker."""

    ns = rmq.namesrv_addr

    def admin(*args: str) -> Any:
        result = CliRunner().invoke(cli, ["admin", *args, "-n", ns, "--output", "json"])
        assert result.exit_code == 0, result.output + repr(result.exception)
        return json.loads(result.stdout)

    clusters = admin("clusterList")  # a row even while the broker's statistics are empty
    assert [b["addr"] for b in clusters["brokers"]] == [rmq.broker_addr]

    def until(ready: Callable[[], Any]) -> Any:
        """Poll ``ready()`` until it returns something true; fail after TIMEOUT."""
        deadline = time.monotonic() + TIMEOUT
        while not (found := ready()):
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.2)
        return found

    def status() -> dict[str, str] | None:
        # a Java broker answers GET_BROKER_RUNTIME_INFO with an error until its first
        # statistics sample (NoSuchElementException): poll until it has one
        result = CliRunner().invoke(cli, ["admin", "brokerStatus", "-b", rmq.broker_addr,
                                          "-n", ns, "--output", "json"])
        if result.exit_code:
            assert "GET_BROKER_RUNTIME_INFO failed" in result.output, result.output
            return None
        return json.loads(result.stdout)[rmq.broker_addr]  # type: ignore[no-any-return]

    assert until(status)["brokerVersionDesc"].startswith("V")
    created = admin("updateTopic", "-t", "CliAdminTopic", "-r", "2", "-w", "2")
    assert created["routed"] is True
    assert "CliAdminTopic" in admin("topicList")["topics"]
    assert admin("topicRoute", "-t", "CliAdminTopic")["queueDatas"][0]["writeQueueNums"] == 2
    assert admin("topicClusterList", "-t", "CliAdminTopic")["clusters"] == ["DefaultCluster"]
    sent = admin("sendMessage", "-t", "CliAdminTopic", "-p", "hello", "-k", "cli-key", "-c", "TagA")
    assert sent["status"] == "SEND_OK"
    status = admin("topicStatus", "-t", "CliAdminTopic")
    assert sum(q["maxOffset"] for q in status["queues"]) == 1
    assert admin("queryMsgById", "-i", sent["offsetMsgId"])["body"] == "hello"

    # the real broker builds its index asynchronously too
    until(lambda: admin("queryMsgByKey", "-t", "CliAdminTopic", "-k", "cli-key")["count"] == 1)
    printed = admin("printMsg", "-t", "CliAdminTopic")
    assert [m["body"] for m in printed["messages"]] == ["hello"]
    # statsAll from the broker's statistics items (VIEW_BROKER_STATS_DATA), which RocketMQ samples
    # every 10 s
    until(lambda: [r["inMsg24Hour"] for r in admin("statsAll", "-t", "CliAdminTopic")] == [1])
    # the checks that send, and the lookups by unique key, by queue and in the KV config
    assert [(r["brokerName"], r["successCount"]) for r in admin("clusterRT", "-a", "2")] == [("broker-a", 2)]
    assert [s["ok"] for s in admin("sendMsgStatus", "-b", "broker-a", "-c", "2")] == [True, True]
    checked = admin("checkMsgSendRT", "-t", "CliAdminTopic", "-a", "2")
    assert [s["queueId"] for s in checked["sends"]] == [0, 1]
    shares = admin("allocateMQ", "-t", "CliAdminTopic", "-i", "a,b")["result"]
    assert {c: [q["queueId"] for q in queues] for c, queues in shares.items()} == {"a": [0], "b": [1]}
    assert admin("queryMsgByUniqueKey", "-i", sent["msgId"], "-t", "CliAdminTopic")["body"] == "hello"
    by_queue = admin("printMsgByQueue", "-t", "CliAdminTopic", "-a", "broker-a", "-i", str(sent["queueId"]),
                     "-f")
    assert by_queue["tags"]["TagA"] == 1
    admin("updateOrderConf", "-t", "CliAdminTopic", "-m", "put", "-v", "broker-a:2")
    assert admin("updateOrderConf", "-t", "CliAdminTopic", "-m", "get")["orderConf"] == "broker-a:2"
    admin("updateOrderConf", "-t", "CliAdminTopic", "-m", "delete")
    exported = admin("exportMetadata", "-c", "DefaultCluster", "-f", str(tmp_path / "export"))
    metadata = json.loads(Path(exported["file"]).read_text())
    assert metadata["topicConfigTable"]["CliAdminTopic"]["writeQueueNums"] == 2, metadata
    assert "TBW102" not in metadata["topicConfigTable"] and "TOOLS_CONSUMER" not in metadata[
        "subscriptionGroupTable"], metadata
    configs = admin("exportConfigs", "-c", "DefaultCluster", "-f", str(tmp_path / "export"))
    assert configs["masterBrokerSize"] == 1, configs
    written = json.loads((tmp_path / "export" / "configs.json").read_text())
    assert written["brokerConfigs"]["broker-a"]["brokerClusterName"] == "DefaultCluster", written
    metrics = admin("exportMetrics", "-c", "DefaultCluster", "-f", str(tmp_path / "export"))
    assert set(metrics["totalTps"]) == {"totalNormalInTps", "totalNormalOutTps", "totalTransInTps",
                                        "totalScheduleInTps"}, metrics
    quota = json.loads((tmp_path / "export" / "metrics.json").read_text())["evaluateReport"]["broker-a"][
        "runtimeQuota"]
    assert quota["topicSize"] >= 1 and float(quota["messageAverageSize"]) >= 0, quota
    if rmq.major >= 5:  # SET_COMMITLOG_READ_MODE is RocketMQ 5's
        answer = admin("setCommitLogReadAheadMode", "-b", rmq.broker_addr, "-m", "1")["brokers"]
        assert "success" in answer[rmq.broker_addr], answer
        admin("setCommitLogReadAheadMode", "-b", rmq.broker_addr, "-m", "0")
        # RocketMQ 5.3's RocksDB migration codes: a file store checks in the background
        check = admin("checkRocksdbCqWriteProgress", "-b", rmq.broker_addr, "-t", "CliAdminTopic")
        assert check[rmq.broker_addr]["checkStatus"] == 2, check  # CHECK_IN_PROGRESS
        assert admin("rocksDBConfigToJson", "-b", rmq.broker_addr)["brokers"] == [rmq.broker_addr]

    # the settings commands: RocketMQ too applies a change and writes it into its broker.conf
    addr = rmq.broker_addr
    assert admin("getBrokerConfig", "-b", addr)[addr]["brokerName"] == "broker-a"
    admin("updateBrokerConfig", "-b", addr, "-k", "fileReservedTime", "-v", "48")
    assert admin("getBrokerConfig")[addr]["fileReservedTime"] == "48"
    assert "fileReservedTime=48" in rmq.broker_conf_path.read_text().splitlines()
    assert admin("getNamesrvConfig")[ns]["orderMessageEnable"] == "false"
    assert admin("wipeWritePerm", "-b", "broker-a")["topics"][ns] >= 1
    assert admin("topicRoute", "-t", "CliAdminTopic")["queueDatas"][0]["perm"] == 4
    assert admin("addWritePerm", "-b", "broker-a")["topics"][ns] >= 1
    assert admin("topicRoute", "-t", "CliAdminTopic")["queueDatas"][0]["perm"] == 6
    admin("updateTopicPerm", "-t", "CliAdminTopic", "-p", "4")
    until(lambda: admin("topicRoute", "-t", "CliAdminTopic")["queueDatas"][0]["perm"] == 4)
    admin("updateTopicPerm", "-t", "CliAdminTopic", "-p", "6")
    admin("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "CliAdminTopic", "-v", "broker-a:2")
    admin("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "CliAdminTopic")
    assert admin("deleteExpiredCommitLog", "-b", addr)["brokers"] == [addr]

    # updateTopicList / updateSubGroupList: one request on 5.x, one per entry on 4.9.7
    topics, groups = tmp_path / "topics.json", tmp_path / "groups.json"
    topics.write_text('[{"topicName": "CliListA", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},'
                      ' {"topicName": "CliListB", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}]')
    groups.write_text('[{"groupName": "cli-list-g1", "retryMaxTimes": 7}, {"groupName": "cli-list-g2"}]')
    assert admin("updateTopicList", "-f", str(topics), "-b", addr)["brokers"] == [addr]
    until(lambda: {"CliListA", "CliListB"} <= set(admin("topicList")["topics"]))
    assert admin("topicRoute", "-t", "CliListA")["queueDatas"][0]["writeQueueNums"] == 2
    assert admin("updateSubGroupList", "-f", str(groups))["brokers"] == [addr]
    assert admin("getConsumerConfig", "-g", "cli-list-g1")[addr]["retryMaxTimes"] == 7
    assert admin("getConsumerConfig", "-g", "cli-list-g2")[addr]["groupName"] == "cli-list-g2"


def test_bolide_admin_group_commands(rmq: RocketMQ) -> None:
    """The group and offset commands of ``bolide admin`` against the real broker: updateSubGroup,
    deleteSubGroup, consumerConnection, producerConnection, consumerProgress, queryMsgByOffset,
    consumeMessage, skipAccumulatedMessage (the broker hands the offsets to the online consumer),
    resetOffsetByTime (dry run and applied), cloneGroupOffset and deleteTopic."""
    from bolide.client.blocking import Producer as BlockingProducer
    from bolide.client.blocking import PullConsumer as BlockingPullConsumer

    ns = rmq.namesrv_addr

    def admin(*args: str) -> Any:
        result = CliRunner().invoke(cli, ["admin", *args, "-n", ns, "--output", "json"])
        assert result.exit_code == 0, result.output + repr(result.exception)
        return json.loads(result.stdout)

    def until(ready: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + TIMEOUT
        while not (found := ready()):
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.2)
        return found

    assert admin("updateSubGroup", "-g", "cli-sub", "-r", "5")["group"]["retryMaxTimes"] == 5
    assert admin("getConsumerConfig", "-g", "cli-sub")[rmq.broker_addr]["retryMaxTimes"] == 5
    admin("deleteSubGroup", "-g", "cli-sub")
    admin("updateTopic", "-t", "CliGroups", "-r", "1", "-w", "1")
    with BlockingProducer(ns, group="cli-pg") as producer:
        for i in range(4):
            producer.send(Message("CliGroups", b"g-%d" % i))
        producers = until(lambda: admin("producerConnection", "-g", "cli-pg", "-t", "CliGroups")
                          ["connectionSet"])
        assert [c["clientId"] for c in producers] == [producer.client_id]
    consumer = BlockingPullConsumer(ns, "cli-cg", consume_from=ConsumeFrom.FIRST_OFFSET,
                                    auto_commit=False)
    consumer.subscribe("CliGroups")
    consumer.start()
    try:
        got: list[MessageExt] = []
        until(lambda: bool(got.extend(consumer.poll(timeout_ms=200))) or len(got) >= 4)
        consumer.commit()  # every queue's position after what poll() returned
        connected = until(lambda: admin("consumerConnection", "-g", "cli-cg")["connectionSet"])
        assert [c["clientId"] for c in connected] == [consumer.client_id]
        skipped = admin("skipAccumulatedMessage", "-g", "cli-cg", "-t", "CliGroups")  # online: relayed
        assert skipped["relayedBy"] == [rmq.broker_addr] and skipped["queues"][0]["newOffset"] == 4
    finally:
        consumer.close()
    progress = until(lambda: (p := admin("consumerProgress", "-g", "cli-cg"))["queues"]
                     and p["queues"][0]["consumerOffset"] == 4 and p)
    assert progress["totalLag"] == 0
    admin("updateSubGroup", "-g", "cli-clone")  # a 5.x broker takes offsets of known groups only
    cloned = admin("cloneGroupOffset", "-s", "cli-cg", "-d", "cli-clone", "-t", "CliGroups")
    assert [o["offset"] for o in cloned["offsets"]] == [4]
    until(lambda: admin("consumerProgress", "-g", "cli-clone")["queues"][0]["consumerOffset"] == 4)
    at = admin("queryMsgByOffset", "-t", "CliGroups", "-i", "0", "-o", "1")
    assert at["body"] == "g-1"
    read = admin("consumeMessage", "-t", "CliGroups", "-i", "0", "-o", "0", "-c", "4")
    assert [m["body"] for m in read["messages"]] == [f"g-{i}" for i in range(4)]
    plan = admin("resetOffsetByTime", "-g", "cli-cg", "-t", "CliGroups", "-s", "0", "--dry-run")
    assert [(q["oldOffset"], q["newOffset"]) for q in plan["queues"]] == [(4, 0)]
    assert admin("resetOffsetByTime", "-g", "cli-cg", "-t", "CliGroups", "-s", "0")["applied"] is True
    until(lambda: admin("consumerProgress", "-g", "cli-cg")["queues"][0]["consumerOffset"] == 0)
    assert admin("deleteTopic", "-t", "CliGroups")["deleted"] is True


def test_admin_operations_without_an_mqadmin_command(rmq: RocketMQ) -> None:
    """The Admin's QUERY_CORRECTION_OFFSET and RESUME_CHECK_HALF_MESSAGE against the real broker,
    and on 5.x GET_TIMER_METRICS, UPDATE_AND_GET_GROUP_FORBIDDEN and the NameServer's
    GET_BROKER_MEMBER_GROUP: the same headers and bodies Bolide's servers answer."""
    from bolide.protocol import RemotingCommand
    from bolide.protocol.bodies.broker import SubscriptionGroupConfig
    from bolide.protocol.codes import RequestCode, ResponseCode
    from bolide.protocol.headers import UpdateConsumerOffsetRequestHeader
    from bolide.remoting import RemotingClient

    async def test() -> None:
        addr = rmq.broker_addr
        checked: list[bytes] = []

        def check(msg: MessageExt) -> LocalTransactionState:
            checked.append(msg.body)
            return LocalTransactionState.ROLLBACK

        async with (Admin(rmq.namesrv_addr) as admin, RemotingClient() as client,
                    TransactionProducer(rmq.namesrv_addr, "interop-ops-pg", check_listener=check) as tx):
            await admin.create_topic("ItOps", read_queue_nums=2, write_queue_nums=2, broker_addr=addr)
            for group, q0, q1 in (("ops-g1", 3, 1), ("ops-g2", 2, 4), ("ops-cmp", 5, 0)):
                await admin.create_subscription_group(SubscriptionGroupConfig(group_name=group),
                                                      broker_addr=addr)
                for queue_id, offset in ((0, q0), (1, q1)):
                    r = await client.invoke(addr, RemotingCommand.request(
                        RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
                            consumer_group=group, topic="ItOps", queue_id=queue_id, commit_offset=offset)))
                    assert r.code == ResponseCode.SUCCESS, r
            assert await admin.query_correction_offset(addr, "ItOps", "ops-cmp") == {0: 2, 1: 0}
            # (a RocketMQ broker deletes the offsets of the filter groups while answering)
            assert await admin.query_correction_offset(addr, "ItOps", "ops-cmp", ["ops-g2"]) == {0: 3, 1: 0}

            # a rolled-back transaction is never checked, unless an admin resumes its checks
            def execute(msg: Message, arg: Any) -> LocalTransactionState:
                return LocalTransactionState.ROLLBACK
            resumed = await tx.send_message_in_transaction(Message("ItOps", b"resume-me"), execute, None)
            await tx.send_message_in_transaction(Message("ItOps", b"left-alone"), execute, None)
            half_id = resumed.offset_msg_id
            assert half_id is not None
            assert await admin.resume_check_half_message("RMQ_SYS_TRANS_HALF_TOPIC", half_id) == addr
            await wait_until(lambda: b"resume-me" in checked)
            assert b"left-alone" not in checked
            r = await client.invoke(addr, RemotingCommand.request(
                RequestCode.RESUME_CHECK_HALF_MESSAGE, ext_fields={"topic": "ItOps", "msgId": "nonsense"}))
            assert r.code == ResponseCode.SYSTEM_ERROR, r

            if rmq.major < 5:
                return
            group = await admin.broker_member_group("DefaultCluster", "broker-a")
            assert (group.cluster, group.broker_name, group.broker_addrs) == (
                "DefaultCluster", "broker-a", {0: addr})
            assert (await admin.broker_member_group("DefaultCluster", "nobody")).broker_addrs == {}

            asked = await admin.update_and_get_group_read_forbidden(addr, "ops-g1", "ItOps")
            assert (asked.group, asked.topic, asked.readable) == ("ops-g1", "ItOps", True)
            readable = []
            for change in (False, None, True):
                answer = await admin.update_and_get_group_read_forbidden(addr, "ops-g1", "ItOps", change)
                readable.append(answer.readable)
            assert readable == [False, False, True]

            timer = Message("ItOps", b"timer")
            timer.delay_time_ms = 600_000
            async with Producer(rmq.namesrv_addr, "interop-ops-timer-pg") as producer:
                await producer.send(timer)
            found: dict[str, int] = {}

            async def counted() -> bool:  # RocketMQ's wheel takes the message in its own time
                metrics = await admin.timer_metrics(addr)
                found.update({t: m.count for t, m in metrics.timing_count.items()})
                return found.get("ItOps") == 1 and metrics.data_version.counter > 0
            async with asyncio.timeout(20):
                while not await counted():
                    await asyncio.sleep(0.2)

    run(test)


def test_signed_requests_against_a_broker_with_plain_acl(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ClientConfig(access_key, secret_key) signs for RocketMQ's plain ACL: a 4.9.7 broker with
    aclEnable=true (accounts in interop/rocketmq/home/conf/plain_acl.yml) lets the admin account
    create a topic, send and consume, refuses the read-only account's sends, and unsigned ones;
    the Admin's ACL calls add, list and delete an account there."""
    run_dir = tmp_path_factory.mktemp("client-rocketmq-acl")
    try:  # a home of its own: the ACL admin calls rewrite the broker's plain_acl.yml
        server = RocketMQ("4.9.7", run_dir, tools_account=("bolide-admin", "bolide-admin-secret"))
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")

    async def test() -> None:
        await acl_scenario(server.namesrv_addr, "ItAcl")
        await acl_admin_scenario(server.namesrv_addr, "ItAcl")

    try:
        server.start_namesrv()
        server.start_broker(BrokerSettings(run_dir / "store", extra={"aclEnable": "true"}))
        asyncio.run(wait_for_route(server.namesrv_addr, "TBW102"))
        run(test)
    finally:
        server.kill_broker()
        server.stop()


def test_acl_2_against_a_rocketmq_5_broker(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The Admin's ACL 2.0 calls and signed clients against a RocketMQ 5.3.3 broker with
    authentication and authorization on: a super user from initAuthenticationUser creates a
    user and its ACL, reads them back; the user sends where its ACL allows and gets RocketMQ's
    refusal elsewhere. Then a Bolide broker with ACL 2.0 on opens the store RocketMQ left and
    enforces the users and ACLs of its RocksDB databases (``config/users``, ``config/acls``),
    and changes them; RocketMQ opening the store again has Bolide's users and ACLs, and a user
    it adds is Bolide's on the next start."""
    run_dir = tmp_path_factory.mktemp("client-rocketmq-auth2")
    try:
        server = RocketMQ("5.3.3", run_dir)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    extra = acl2_settings("rmq-root", "rmq-root-secret")
    store = run_dir / "store"

    async def test() -> None:
        root = ClientConfig(server.namesrv_addr, access_key="rmq-root", secret_key="rmq-root-secret")
        app = ClientConfig(server.namesrv_addr, access_key="rmq-app", secret_key="rmq-app-secret")
        async with Admin(root) as admin:
            await admin.create_topic("ItAuth2", read_queue_nums=1, write_queue_nums=1)
            await admin.create_topic("ItAuth2Other", read_queue_nums=1, write_queue_nums=1)
            await admin.create_user("rmq-app", "rmq-app-secret")
            await admin.put_acl("User:rmq-app", ["Topic:ItAuth2"], ["Pub"])
            user = await admin.get_user("rmq-app")
            assert user is not None and (user.user_type, user.user_status) == ("Normal", "enable")
            acl = await admin.get_acl("User:rmq-app")
            assert acl is not None and acl.policies[0].entries[0].resource == "Topic:ItAuth2"  # type: ignore[index]
            assert "rmq-app" in {u.username for u in await admin.list_users()}
            assert [a.subject for a in await admin.list_acls("rmq-app")] == ["User:rmq-app"]
        await wait_for_route(server.namesrv_addr, "ItAuth2")
        async with Producer(app, "auth2-pg") as producer:
            assert (await producer.send(Message("ItAuth2", b"allowed"))).status is SendStatus.SEND_OK
        await wait_for_route(server.namesrv_addr, "ItAuth2Other")
        async with Producer(app, "auth2-pg") as producer:
            with pytest.raises(AuthRefusedError) as refused:
                await producer.send(Message("ItAuth2Other", b"refused"))
        assert refused.value.remark is not None
        assert "User:rmq-app has no permission to access Topic:ItAuth2Other from" in refused.value.remark
        async with Admin(root) as admin:
            await admin.delete_user("rmq-app")
            assert await admin.get_user("rmq-app") is None
            # what Bolide takes over below
            await admin.create_user("rmq-keep", "rmq-keep-secret")
            await admin.put_acl("User:rmq-keep", ["Topic:ItAuth2", "Group:app*"], ["Pub", "Sub"])
            await admin.put_acl("User:rmq-keep", ["Topic:ItAuth2Other"], ["Pub"], decision="Deny")
            await admin.create_user("rmq-off", "rmq-off-secret")
            await admin.update_user("rmq-off", user_status="disable")

    try:
        server.start_namesrv()
        server.start_broker(BrokerSettings(store, extra=extra))
        asyncio.run(wait_for_route(server.namesrv_addr, "TBW102"))  # the broker has registered
        run(test)
        code = server.stop_broker()  # clean: RocksDB closed
        assert (store / "config" / "users" / "CURRENT").is_file(), f"no users database (exit {code})"
        store_options = server.store_options()
    finally:
        server.kill_broker()
        server.stop()

    async def bolide() -> None:
        async with running_servers(store, store_options=store_options, authentication_enabled=True,
                                   authorization_enabled=True) as s:
            auth = s.broker.auth
            assert sorted(auth.users) == ["rmq-keep", "rmq-off", "rmq-root"]
            assert auth.users["rmq-root"].is_super and not auth.users["rmq-keep"].is_super
            assert (store / "config" / "authMetadata.json").is_file()  # Bolide's own from now on
            root = ClientConfig(s.namesrv_addr, access_key="rmq-root", secret_key="rmq-root-secret")
            async with Admin(root) as admin:
                acl = await admin.get_acl("User:rmq-keep")
                assert acl is not None
                entries = {e.resource: (sorted(e.actions or []), e.decision)
                           for p in acl.policies or [] for e in p.entries or []}
                assert entries == {"Topic:ItAuth2": (["Pub", "Sub"], "Allow"),
                                   "Group:app*": (["Pub", "Sub"], "Allow"),
                                   "Topic:ItAuth2Other": (["Pub"], "Deny")}
            keep = ClientConfig(s.namesrv_addr, access_key="rmq-keep", secret_key="rmq-keep-secret")
            async with Producer(keep, "app-pg") as producer:
                assert (await producer.send(Message("ItAuth2", b"allowed"))).status is SendStatus.SEND_OK
                with pytest.raises(AuthRefusedError, match="the decision is deny"):
                    await producer.send(Message("ItAuth2Other", b"refused"))
            off = ClientConfig(s.namesrv_addr, access_key="rmq-off", secret_key="rmq-off-secret")
            async with Producer(off, "off-pg") as producer:
                with pytest.raises(AuthRefusedError, match="disabled"):
                    await producer.send(Message("ItAuth2", b"refused"))
            async with Admin(root) as admin:  # what RocketMQ finds below
                await admin.create_user("bolide-made", "bolide-made-secret")
                await admin.put_acl("User:bolide-made", ["Topic:ItAuth2"], ["Pub"])
                await admin.delete_user("rmq-off")

    asyncio.run(asyncio.wait_for(bolide(), 90))

    # back to RocketMQ: Bolide wrote its users and ACLs into the RocksDB databases
    async def rocketmq_again() -> None:
        await wait_for_route(server.namesrv_addr, "TBW102")  # the broker has registered
        root = ClientConfig(server.namesrv_addr, access_key="rmq-root", secret_key="rmq-root-secret")
        async with Admin(root) as admin:
            assert {u.username for u in await admin.list_users()} == {"rmq-root", "rmq-keep", "bolide-made"}
            acl = await admin.get_acl("User:bolide-made")
            assert acl is not None and [(e.resource, e.actions) for p in acl.policies or []
                                        for e in p.entries or []] == [("Topic:ItAuth2", ["Pub"])]
            await admin.create_user("rmq-later", "rmq-later-secret")  # taken over by Bolide again
        made = ClientConfig(server.namesrv_addr, access_key="bolide-made", secret_key="bolide-made-secret")
        await wait_for_route(server.namesrv_addr, "ItAuth2")
        async with Producer(made, "made-pg") as producer:
            assert (await producer.send(Message("ItAuth2", b"by-bolide-made"))).status is SendStatus.SEND_OK
            with pytest.raises(AuthRefusedError):
                await producer.send(Message("ItAuth2Other", b"refused"))

    try:
        server.start_namesrv()
        server.start_broker(BrokerSettings(store, extra=extra))
        asyncio.run(asyncio.wait_for(rocketmq_again(), 90))
    finally:
        server.kill_broker()
        server.stop()

    async def bolide_again() -> None:
        async with running_servers(store, store_options=store_options) as s:
            assert sorted(s.broker.auth.users) == ["bolide-made", "rmq-keep", "rmq-later", "rmq-root"]

    asyncio.run(asyncio.wait_for(bolide_again(), 60))


def test_tls_against_servers_that_enforce_it(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ClientConfig(use_tls=True) against a 4.9.7 NameServer and broker started with
    tls.server.mode=enforcing (and the broker registering over TLS): routes, a send and a
    consume go over TLS; a plain client's connection is closed."""
    run_dir = tmp_path_factory.mktemp("client-rocketmq-tls")
    tls_dir = Path(__file__).resolve().parents[1] / "data" / "tls"
    options = ["-Dtls.server.mode=enforcing", "-Dtls.test.mode.enable=false",
               f"-Dtls.server.certPath={tls_dir / 'server.crt'}",
               f"-Dtls.server.keyPath={tls_dir / 'server.key'}", "-Dtls.enable=true"]
    try:
        server = RocketMQ("4.9.7", run_dir, server_jvm_options=options)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")

    async def test() -> None:
        secure = ClientConfig(server.namesrv_addr, use_tls=True,
                              tls_ca_file=str(tls_dir / "server.crt"))
        async with Admin(secure) as admin, asyncio.timeout(60):
            while True:  # the broker's boot line comes before its registration reaches the NameServer
                try:
                    await admin.topic_route("TBW102")
                    await admin.create_topic("ItTls", read_queue_nums=1, write_queue_nums=1)
                    break
                except MQClientError:  # no route yet, or no master in the cluster info yet
                    await asyncio.sleep(0.1)
        async with Producer(secure, "tls-pg") as producer, asyncio.timeout(60):
            while True:  # until the new topic's route is out
                try:
                    sent = await producer.send(Message("ItTls", b"over tls"))
                    break
                except MQClientError:
                    await asyncio.sleep(0.1)
        assert sent.status is SendStatus.SEND_OK
        consumer = PullConsumer(secure, "tls-cg", consume_from=ConsumeFrom.FIRST_OFFSET,
                                rebalance_interval_ms=300, suspend_ms=1000, pull_timeout_ms=5000)
        consumer.subscribe("ItTls")
        async with consumer:
            got = await poll_exactly(consumer, 1)
        assert [m.body for m in got] == [b"over tls"]
        async with Admin(server.namesrv_addr) as plain:
            with pytest.raises(RemotingError):
                await plain.topic_route("ItTls")

    try:
        server.start_namesrv()
        server.start_broker(BrokerSettings(run_dir / "store"))
        run(test)
    finally:
        server.kill_broker()
        server.stop()


def test_static_topic_commands_against_rocketmq(rmq: RocketMQ, tmp_path: Path) -> None:
    """The Admin's updateStaticTopic and remappingStaticTopic against a real 5.x broker: its
    GET_TOPIC_CONFIG answers read as Bolide's, it takes the UPDATE_AND_CREATE_STATIC_TOPIC
    requests, and the client sends and pulls through the logic queues it then routes."""
    from bolide.client import MessageQueue
    from bolide.protocol.bodies.static_topic import mock_broker_name

    topic = "ItStatic"
    if rmq.major < 5:  # 4.9.x has no static topics: the Admin says so, naming the broker's answer
        async def refused() -> None:
            async with Admin(rmq.namesrv_addr) as admin:
                with pytest.raises(BolideError, match=r"REQUEST_CODE_NOT_SUPPORTED.*upgrade the broker"):
                    await admin.update_static_topic(topic, 2, brokers=["broker-a"], temp_dir=tmp_path)
        run(refused)
        return

    async def test() -> None:
        async with Admin(rmq.namesrv_addr) as admin:
            made = await admin.update_static_topic(topic, 2, brokers=["broker-a"], temp_dir=tmp_path)
            assert [w[1] for w in made.writes] == ["broker-a"]
            config = await admin.topic_config(rmq.broker_addr, topic)
            assert config is not None and config.mapping_detail is not None
            assert (config.write_queue_nums, config.mapping_detail.epoch) == (2, made.plan.epoch)
            grown = await admin.update_static_topic(topic, 3, brokers=["broker-a"], temp_dir=tmp_path)
            assert grown.plan.epoch > made.plan.epoch
            config = await admin.topic_config(rmq.broker_addr, topic)
            assert config is not None and config.mapping_detail is not None
            assert sorted(config.mapping_detail.hosted_queues) == [0, 1, 2]
            still = await admin.remap_static_topic(topic, brokers=["broker-a"], temp_dir=tmp_path)
            assert [w[0] for w in still.writes] == ["others"] and not still.plan.broker_to_map_in

            async def routed() -> bool:
                route = await admin.topic_route(topic)
                infos = route.topic_queue_mapping_by_broker or {}
                return any(info.total_queues == 3 for info in infos.values())
            async with asyncio.timeout(30):
                while not await routed():
                    await asyncio.sleep(0.2)
        queues = [MessageQueue(topic, mock_broker_name(), q) for q in range(3)]
        async with Producer(rmq.namesrv_addr, "interop-static-pg") as producer:
            for i in range(6):
                r = await producer.send(Message(topic, b"s%d" % i), queue=queues[i % 3])
                assert r.queue_offset == i // 3
        consumer = PullConsumer(rmq.namesrv_addr, "interop-static-cg", **FAST)
        consumer.assign(queues)
        async with consumer:
            got = await poll_exactly(consumer, 6)
        assert sorted((m.queue_id, m.queue_offset, m.body) for m in got) == sorted(
            (i % 3, i // 3, b"s%d" % i) for i in range(6))

    run(test)
