"""Message traces of Bolide's own clients (``enable_trace``) against an in-process NameServer +
Broker with the trace topic: each send's Pub, each transaction's EndTransaction and each
consumption's SubBefore / SubAfter (a pull consumer's polls too) reach RMQ_SYS_TRACE_TOPIC,
keyed by message id, and the Admin reads them back; closing a client sends the traces still
waiting; a custom trace topic; a client without tracing writes none."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client import (
    ClientConfig,
    ConsumeFrom,
    LocalTransactionState,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
    TransactionProducer,
    tracing,
)
from bolide.client.admin import Admin
from bolide.client.admin_trace import TraceView
from bolide.client.errors import MQBrokerError
from bolide.client.results import SendResult, SendStatus
from bolide.client.tracing import TraceDispatcher
from bolide.common.message import MessageExt
from bolide.common.recall_handle import decode_recall_handle
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.headers.send import RecallMessageRequestHeader
from bolide.protocol.trace import TRACE_TOPIC, decode_trace_data
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers, running_servers

TOPIC, GROUP = "TracedTopic", "traced-cg"


async def _trace_of(admin: Admin, msg_id: str, types: set[str], trace_topic: str = TRACE_TOPIC,
                    ) -> list[TraceView]:
    """The message's trace once it has steps of every type in ``types`` (the index is built as
    the broker dispatches)."""
    async with asyncio.timeout(20):
        while True:
            views = await admin.message_trace(msg_id, trace_topic=trace_topic)
            if {v.type for v in views} >= types:
                return views
            await asyncio.sleep(0.05)


async def _create(s: Servers, *topics: str) -> None:
    async with Admin(s.namesrv_addr) as admin:
        for topic in topics:
            await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)


def test_producer_and_push_consumer_trace_their_messages(tmp_path: Path) -> None:
    asyncio.run(_producer_and_push_consumer(tmp_path))


async def _producer_and_push_consumer(tmp_path: Path) -> None:
    async with running_servers(tmp_path / "store", trace_topic_enable=True) as s:
        await _create(s, TOPIC)
        config = ClientConfig(s.namesrv_addr, enable_trace=True)
        async with Producer(config, group="traced-pg") as producer:
            sent = [await producer.send(Message(TOPIC, b"m%d" % i, tags="T", keys=[f"k{i}", "all"]))
                    for i in range(3)]
            delayed = await producer.send(Message(TOPIC, b"later", properties={"DELAY": "1"}))
        # closing sent the traces: no FLUSH_S to wait for
        got: list[str] = []
        done = asyncio.Event()

        def listener(msgs: list[object], ctx: object) -> None:
            got.extend(m.msg_id for m in msgs)  # type: ignore[attr-defined]
            if len(got) >= 4:
                done.set()

        consumer = PushConsumer(config, GROUP, listener=listener, consume_from=ConsumeFrom.FIRST_OFFSET,
                                rebalance_interval_ms=200)
        consumer.subscribe(TOPIC)
        await consumer.start()
        try:
            await asyncio.wait_for(done.wait(), 30)
        finally:
            await consumer.close()

        async with Admin(s.namesrv_addr) as admin:
            views = await _trace_of(admin, sent[1].msg_id, {"Pub", "SubAfter"})
            [pub] = [v for v in views if v.type == "Pub"]
            assert (pub.group, pub.status, pub.topic, pub.tags, pub.keys) == (
                "traced-pg", "success", TOPIC, "T", "k1 all")
            assert pub.offset_msg_id == sent[1].offset_msg_id and pub.store_host == s.broker_addr
            assert pub.msg_type == "Normal_Msg"
            subs = [v for v in views if v.type == "SubAfter"]
            assert [(v.group, v.status) for v in subs] == [(GROUP, "success")]
            late = await _trace_of(admin, delayed.msg_id, {"Pub"})
            assert late[0].msg_type == "Delay_Msg"
            # the raw trace messages also hold the SubBefore contexts, and are keyed by the keys
            raw = await admin.query_by_key(TRACE_TOPIC, "k1")
            contexts = [c for m in raw for c in decode_trace_data(m.body.decode())]
            assert {c.type for c in contexts} >= {"Pub", "SubBefore", "SubAfter"}
            assert all(c.group.startswith("traced-") for c in contexts)


def test_a_custom_trace_topic_and_no_traces_without_tracing(tmp_path: Path) -> None:
    asyncio.run(_custom_topic(tmp_path))


async def _custom_topic(tmp_path: Path) -> None:
    async with running_servers(tmp_path / "store", auto_create_topic_enable=True) as s:
        await _create(s, TOPIC, "MyTraces")
        traced = ClientConfig(s.namesrv_addr, enable_trace=True, trace_topic="MyTraces")
        async with Producer(traced, group="custom-pg") as producer:
            one = await producer.send(Message(TOPIC, b"x"))
        async with Producer(ClientConfig(s.namesrv_addr), group="plain-pg") as producer:
            plain = await producer.send(Message(TOPIC, b"y"))
        async with Admin(s.namesrv_addr) as admin:
            views = await _trace_of(admin, one.msg_id, {"Pub"}, trace_topic="MyTraces")
            assert [v.group for v in views] == ["custom-pg"]
            assert s.broker.topics.get(TRACE_TOPIC) is None  # nothing went to the default one
            assert await admin.message_trace(plain.msg_id, trace_topic="MyTraces") == []


def test_a_full_dispatcher_drops_and_counts(tmp_path: Path) -> None:
    asyncio.run(_full_dispatcher(tmp_path))


async def _full_dispatcher(tmp_path: Path) -> None:
    async with running_servers(tmp_path / "store", trace_topic_enable=True) as s:
        config = ClientConfig(s.namesrv_addr, enable_trace=True)
        dispatcher = TraceDispatcher(config, "g", "PRODUCE")
        msg = Message(TOPIC, b"x")
        result = SendResult(SendStatus.SEND_OK, "ID", "OFF", MessageQueue(TOPIC, "b", 0), 0)
        for _ in range(tracing.MAX_PENDING + 5):
            dispatcher.on_send(msg, result, 1, 1, store_host="h")
        await dispatcher.close()
        assert dispatcher.dropped >= 5 and dispatcher.failed == 0
        dispatcher.on_send(msg, result, 1, 1, store_host="h")  # after close: dropped, not sent
        assert dispatcher.dropped >= 6
        async with Admin(s.namesrv_addr) as admin:  # the kept ones went out (dispatched soon after)
            for _ in range(500):
                stats = await admin.topic_stats(TRACE_TOPIC)
                if sum(o.max_offset for o in stats.values()) >= 1:
                    break
                await asyncio.sleep(0.02)
        assert sum(o.max_offset for o in stats.values()) >= 1


def test_transactional_producer_traces_half_sends_and_their_ends(tmp_path: Path) -> None:
    asyncio.run(_transactions(tmp_path))


async def _transactions(tmp_path: Path) -> None:
    async with running_servers(tmp_path / "store", trace_topic_enable=True, transaction_timeout_ms=300,
                               transaction_check_interval_ms=200) as s:
        await _create(s, "TracedTx")
        config = ClientConfig(s.namesrv_addr, enable_trace=True)
        checked = asyncio.Event()

        def check(msg: object) -> LocalTransactionState:
            checked.set()
            return LocalTransactionState.ROLLBACK

        async with TransactionProducer(config, "traced-tx-pg", check_listener=check) as producer:
            now = await producer.send_message_in_transaction(
                Message("TracedTx", b"now", keys="tx-1"), lambda m, a: LocalTransactionState.COMMIT)
            later = await producer.send_message_in_transaction(
                Message("TracedTx", b"later"), lambda m, a: LocalTransactionState.UNKNOWN)
            await asyncio.wait_for(checked.wait(), 20)  # the broker asked, the listener rolled back
        async with Admin(s.namesrv_addr) as admin:
            views = await _trace_of(admin, now.msg_id, {"Pub", "EndTransaction"})
            pub = next(v for v in views if v.type == "Pub")
            end = next(v for v in views if v.type == "EndTransaction")
            assert (pub.msg_type, pub.group, end.transaction_state, end.keys) == (
                "Trans_Msg_Half", "traced-tx-pg", "COMMIT_MESSAGE", "tx-1")
            ends = [v for v in await _trace_of(admin, later.msg_id, {"EndTransaction"})
                    if v.type == "EndTransaction"]
            assert [v.transaction_state for v in ends][-1] == "ROLLBACK_MESSAGE"  # after UNKNOW
            raw = await admin.query_by_key(TRACE_TOPIC, later.msg_id)
            checks = [c for m in raw for c in decode_trace_data(m.body.decode())
                      if c.type == "EndTransaction" and c.beans[0].from_transaction_check]
            assert checks and checks[0].beans[0].transaction_state == "ROLLBACK_MESSAGE"


def test_a_pull_consumer_traces_what_it_polls(tmp_path: Path) -> None:
    asyncio.run(_pull_consumer(tmp_path))


async def _pull_consumer(tmp_path: Path) -> None:
    async with running_servers(tmp_path / "store", trace_topic_enable=True) as s:
        await _create(s, "PolledTopic")
        async with Producer(s.namesrv_addr, group="polled-pg") as producer:  # no traces of its own
            sent = await producer.send(Message("PolledTopic", b"p", keys="polled-1"))
        consumer = PullConsumer(ClientConfig(s.namesrv_addr, enable_trace=True), "polled-cg",
                                consume_from=ConsumeFrom.FIRST_OFFSET)
        consumer.subscribe("PolledTopic")
        async with consumer:
            got: list[object] = []
            async with asyncio.timeout(20):
                while not got:
                    got = await consumer.poll(timeout_ms=500)
        async with Admin(s.namesrv_addr) as admin:
            views = await _trace_of(admin, sent.msg_id, {"SubAfter"})
        assert [(v.type, v.group, v.status, v.keys) for v in views] == [
            ("SubAfter", "polled-cg", "success", "polled-1")]


def test_a_batch_send_traces_each_message_and_a_oneway_send_none(tmp_path: Path) -> None:
    asyncio.run(_batch_and_oneway(tmp_path))


async def _batch_and_oneway(tmp_path: Path) -> None:
    async with running_servers(tmp_path / "store", trace_topic_enable=True) as s:
        await _create(s, TOPIC)
        config = ClientConfig(s.namesrv_addr, enable_trace=True)
        batch = [Message(TOPIC, b"b%d" % i, tags="B", keys=[f"batch-{i}"]) for i in range(3)]
        async with Producer(config, group="batch-pg") as producer:
            result = await producer.send_batch(batch)
            oneway = Message(TOPIC, b"fire and forget", keys=["oneway"])
            await producer.send_oneway(oneway)
            # the oneway message stored (it has no result to trace), then one traced send after it
            last = await producer.send(Message(TOPIC, b"last"))
        ids = result.msg_id.split(",")
        offset_ids = result.offset_msg_id.split(",")
        assert len(ids) == len(offset_ids) == 3
        async with Admin(s.namesrv_addr) as admin:
            for i, msg_id in enumerate(ids):
                [pub] = await _trace_of(admin, msg_id, {"Pub"})
                assert (pub.group, pub.topic, pub.tags, pub.keys, pub.offset_msg_id, pub.status) == (
                    "batch-pg", TOPIC, "B", f"batch-{i}", offset_ids[i], "success"), pub
            await _trace_of(admin, last.msg_id, {"Pub"})  # every trace of the producer is stored
            stored = await admin.query_by_key(TOPIC, "oneway")
            assert [m.body for m in stored] == [b"fire and forget"]
            assert await admin.message_trace(stored[0].msg_id) == []


def test_a_simple_consumer_traces_receives_and_acknowledgements(tmp_path: Path) -> None:
    asyncio.run(_simple_consumer(tmp_path))


async def _simple_consumer(tmp_path: Path) -> None:
    async with running_servers(tmp_path / "store", trace_topic_enable=True) as s:
        await _create(s, TOPIC)
        async with Producer(s.namesrv_addr, "plain-pg") as producer:
            sent = [await producer.send(Message(TOPIC, b"s%d" % i, keys=[f"s{i}"])) for i in range(2)]
        config = ClientConfig(s.namesrv_addr, enable_trace=True)
        async with SimpleConsumer(config, "simple-traced", {TOPIC: "*"},
                                  consume_from=ConsumeFrom.FIRST_OFFSET) as consumer:
            got: list[MessageExt] = []
            async with asyncio.timeout(20):
                while len(got) < 2:
                    got += await consumer.receive(16, invisible_duration_ms=60_000, await_duration_ms=1000)
            acked = next(m for m in got if m.msg_id == sent[0].msg_id)
            await consumer.ack(acked)  # the other one is never acknowledged
        # closing sent the traces
        async with Admin(s.namesrv_addr) as admin:
            views = await _trace_of(admin, sent[0].msg_id, {"SubAfter"})
            subs = [(v.group, v.status) for v in views if v.type == "SubAfter"]
            assert subs == [("simple-traced", "success")]
            raw = await admin.query_by_key(TRACE_TOPIC, sent[1].msg_id)
            contexts = [c for m in raw for c in decode_trace_data(m.body.decode())]
            # a SubBefore for the receive, no SubAfter for the message not acknowledged
            of_it = {c.type for c in contexts if any(b.msg_id == sent[1].msg_id for b in c.beans)}
            assert of_it == {"SubBefore"}
            assert await admin.message_trace(sent[1].msg_id) == []


def test_recalls_are_traced_and_answered_with_the_region(tmp_path: Path) -> None:
    asyncio.run(_recalls(tmp_path))


async def _recalls(tmp_path: Path) -> None:
    async with running_servers(tmp_path / "store", trace_topic_enable=True) as s:
        await _create(s, "RecalledTopic", "OtherTopic")
        async with Producer(ClientConfig(s.namesrv_addr, enable_trace=True), group="recall-pg") as producer:
            msg = Message("RecalledTopic", b"later")
            msg.delay_time_ms = 60_000
            sent = await producer.send(msg)
            assert sent.recall_handle is not None
            with pytest.raises(MQBrokerError):
                await producer.recall_message("OtherTopic", sent.recall_handle)  # refused: failed
            assert await producer.recall_message("RecalledTopic", sent.recall_handle) == sent.msg_id
        async with Admin(s.namesrv_addr) as admin:
            views = await _trace_of(admin, sent.msg_id, {"Pub", "Recall"})
            async with asyncio.timeout(20):
                while len(views) < 3:  # the Pub and both recalls
                    await asyncio.sleep(0.05)
                    views = await admin.message_trace(sent.msg_id)
        assert views[0].type == "Pub" and views[0].msg_type == "Delay_Msg"
        recalls = [(v.group, v.topic, v.status) for v in views if v.type == "Recall"]
        assert sorted(recalls) == [("recall-pg", "OtherTopic", "failed"),
                                   ("recall-pg", "RecalledTopic", "success")]
        # the broker answers every recall with MSG_REGION, which the Java client's trace hook needs
        handle = sent.recall_handle
        assert decode_recall_handle(handle)[3] == sent.msg_id
        client = RemotingClient()
        answers = []
        try:
            for topic in ("RecalledTopic", "NoSuchTopic"):  # again (it stays recalled); no such topic
                header = RecallMessageRequestHeader(producer_group="pg", topic=topic, recall_handle=handle)
                recall = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header)
                answers.append(await client.invoke(s.broker_addr, recall))
        finally:
            await client.close()
        assert [a.code for a in answers] == [ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST]
        assert [a.ext_fields.get("MSG_REGION") for a in answers] == ["DefaultRegion", "DefaultRegion"]
