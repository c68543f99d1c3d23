"""GET_CONSUMER_RUNNING_INFO (307) end to end against an in-process NameServer + Broker: an
admin asks the broker, the broker relays the request down the consumer's connection and
answers with the consumer's report (push, orderly and pull consumers); a consumer that is
not online, that does not answer in time, or that answers an error; ``bolide admin
consumerStatus`` in table and JSON output. CONSUME_MESSAGE_DIRECTLY (309): a stored message
relayed to one push consumer's listener (``queryMsgById -g -d``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner, Result

from bolide.cli.main import cli
from bolide.client import (
    ConsumeContext,
    ConsumeFrom,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PushConsumer,
)
from bolide.client.admin import Admin
from bolide.client.errors import MQBrokerError
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.bodies.admin import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
)
from bolide.protocol.headers.admin import ConsumeMessageDirectlyResultRequestHeader
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

FAST = {"rebalance_interval_ms": 200, "suspend_ms": 1000, "pull_timeout_ms": 3000,
        "consume_from": ConsumeFrom.FIRST_OFFSET}


async def send(namesrv: str, topic: str, n: int) -> None:
    async with Producer(namesrv, "cri-pg") as producer:
        for i in range(n):
            await producer.send(Message(topic, b"m%d" % i, tags="a" if i % 2 else "b"))


def test_a_push_consumer_reports_its_settings_queues_and_figures(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "CriPush", 20)
        seen: list[MessageExt] = []
        failed_once: set[str] = set()

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            m = msgs[0]
            if m.body == b"m3" and m.msg_id not in failed_once:
                failed_once.add(m.msg_id)  # once: it comes back through %RETRY%cri-push
                return ConsumeStatus.RECONSUME_LATER
            seen.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(s.namesrv_addr, "cri-push", listener=listener, **FAST)
        consumer.subscribe("CriPush", "a || b")
        async with Admin(s.namesrv_addr) as admin, consumer:
            await wait_until(lambda: len(seen) == 19)
            info = await admin.consumer_running_info("cri-push", consumer.client_id)

            props = info.properties
            assert props[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
            assert props[PROP_CONSUME_ORDERLY] == "false"
            assert props[PROP_NAMESERVER_ADDR] == f"{s.namesrv_addr};"
            assert int(props[PROP_CONSUMER_START_TIMESTAMP]) == consumer.start_timestamp_ms > 0
            assert props["consumerGroup"] == "cri-push" and props["messageModel"] == "CLUSTERING"
            assert props["pullBatchSize"] == "32"
            assert [(sd.topic, sd.sub_string) for sd in info.subscription_set] == [
                ("%RETRY%cri-push", "*"), ("CriPush", "a || b")]
            queues = {mq.queue_id: pq for mq, pq in info.mq_table.items() if mq.topic == "CriPush"}
            assert sorted(queues) == [0, 1, 2, 3]
            assert sum(pq.commit_offset for pq in queues.values()) == 20  # every message consumed
            assert all(pq.cached_msg_count == 0 and not pq.droped for pq in queues.values())
            assert all(pq.last_pull_timestamp >= consumer.start_timestamp_ms for pq in queues.values())
            figures = info.status_table["CriPush"]
            assert figures.pull_tps > 0 and figures.consume_ok_tps > 0
            assert figures.consume_failed_msgs == 1 and figures.consume_failed_tps > 0
            assert info.jstack is None

            with_stacks = await admin.consumer_running_info("cri-push", consumer.client_id, jstack=True)
            assert with_stacks.jstack is not None
            assert '"MainThread"' in with_stacks.jstack and "_on_running_info" in with_stacks.jstack

    run_with_servers(tmp_path, test)


def test_orderly_and_pull_consumers_report_locks_and_buffered_messages(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "CriOther", 12)
        async with Admin(s.namesrv_addr) as admin:
            done: list[MessageExt] = []

            async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
                done.extend(msgs)

            orderly = PushConsumer(s.namesrv_addr, "cri-orderly", listener=listener, orderly=True,
                                   lock_interval_ms=300, **FAST)
            orderly.subscribe("CriOther")
            async with orderly:
                await wait_until(lambda: len(done) == 12)
                info = await admin.consumer_running_info("cri-orderly", orderly.client_id)
                assert info.properties[PROP_CONSUME_ORDERLY] == "true"
                held = [pq for mq, pq in info.mq_table.items() if mq.topic == "CriOther"]
                assert len(held) == 4 and all(pq.locked and pq.last_lock_timestamp > 0 for pq in held)

            puller = PullConsumer(s.namesrv_addr, "cri-pull", consume_from=ConsumeFrom.FIRST_OFFSET,
                                  rebalance_interval_ms=200, suspend_ms=1000, pull_timeout_ms=3000)
            puller.subscribe("CriOther")
            async with puller:

                async def buffered() -> dict[int, tuple[int, int, int]]:
                    info = await admin.consumer_running_info("cri-pull", puller.client_id)
                    assert info.properties[PROP_CONSUME_TYPE] == "CONSUME_ACTIVELY"
                    return {mq.queue_id: (pq.cached_msg_count, pq.cached_msg_min_offset,
                                          pq.cached_msg_max_offset) for mq, pq in info.mq_table.items()}

                async with asyncio.timeout(15):  # every message pulled, none polled yet
                    cached = await buffered()
                    while sum(n for n, _, _ in cached.values()) < 12:
                        await asyncio.sleep(0.05)
                        cached = await buffered()
                assert cached == {q: (3, 0, 2) for q in range(4)}
                polled = await puller.poll(timeout_ms=5000)
                after = await buffered()
                assert after[polled[0].queue_id][0] == 3 - len(polled)

    run_with_servers(tmp_path, test)


def test_relay_errors_name_the_consumer(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        relay = s.broker.server.processors.get(RequestCode.GET_CONSUMER_RUNNING_INFO).__self__
        relay.timeout_ms = 300  # the consumer below never answers
        stuck = asyncio.Event()

        async def never(ctx: object, request: RemotingCommand) -> None:
            await stuck.wait()

        async def refuse(ctx: object, request: RemotingCommand) -> RemotingCommand:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "busy here")

        async with Admin(s.namesrv_addr) as admin, RemotingClient() as silent, RemotingClient() as busy:
            for client, client_id, group, processor in ((silent, "10.1.1.1@silent", "cri-silent", never),
                                                        (busy, "10.1.1.1@busy", "cri-busy", refuse)):
                client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, processor)
                beat = HeartbeatData(client_id=client_id, consumer_data_set=[ConsumerData(
                    group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
                    consume_from_where="CONSUME_FROM_LAST_OFFSET",
                    subscription_data_set=[SubscriptionData.of("CriErr", "*")])])
                answer = await client.invoke(s.broker_addr, RemotingCommand.request(
                    RequestCode.HEART_BEAT, body=beat.encode()))
                assert answer.code == ResponseCode.SUCCESS

            failures = {}
            for group, client_id in (("cri-silent", "10.1.1.1@silent"), ("cri-busy", "10.1.1.1@busy"),
                                     ("cri-silent", "10.1.1.1@nobody"), ("cri-busy", "10.1.1.1@silent")):
                try:
                    await admin.consumer_running_info(group, client_id)
                except MQBrokerError as exc:
                    failures[group, client_id] = (exc.code, exc.remark)
            stuck.set()
            assert failures[("cri-silent", "10.1.1.1@silent")][0] == ResponseCode.CONSUME_MSG_TIMEOUT
            assert failures[("cri-silent", "10.1.1.1@silent")][1].startswith(
                "consumer <cri-silent> <10.1.1.1@silent> Timeout: no response")
            assert failures[("cri-busy", "10.1.1.1@busy")] == (ResponseCode.SYSTEM_ERROR, "busy here")
            for key in (("cri-silent", "10.1.1.1@nobody"), ("cri-busy", "10.1.1.1@silent")):
                assert failures[key] == (ResponseCode.SYSTEM_ERROR,
                                         f"The Consumer <{key[0]}> <{key[1]}> not online")

    run_with_servers(tmp_path, test)


def test_consumer_status_command(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "CriCli", 4)
        seen: list[MessageExt] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> None:
            seen.extend(msgs)

        first, second = (PushConsumer(s.namesrv_addr, "cri-cli", listener=listener,
                                      persist_offset_interval_ms=100, **FAST) for _ in range(2))
        for c in (first, second):
            c.subscribe("CriCli")
        async with first, second:
            await wait_until(lambda: len(seen) == 4)
            await wait_until(lambda: len(first.assignment()) + len(second.assignment()) == 5)

            def invoke(group: str, *args: str) -> Result:
                return CliRunner().invoke(cli, ["admin", "consumerStatus", "-n", s.namesrv_addr,
                                                "-g", group, *args])

            def run(*args: str) -> str:
                result = invoke("cri-cli", *args)
                assert result.exit_code == 0, result.output + repr(result.exception)
                return result.output

            summary = json.loads(await asyncio.to_thread(run, "--output", "json"))
            assert summary["sameSubscription"] is True and summary["unanswered"] == {}
            by_id = {c["clientId"]: c for c in summary["consumers"]}
            assert set(by_id) == {first.client_id, second.client_id}
            owned = [q for c in by_id.values() for q in c["queues"] if q["topic"] == "CriCli"]
            assert sorted(q["queueId"] for q in owned) == [0, 1, 2, 3]  # shared, none twice
            table = await asyncio.to_thread(run)
            assert first.client_id in table and "Same subscription in the group." in table

            detail = json.loads(await asyncio.to_thread(run, "-i", first.client_id, "-s", "--output", "json"))
            assert detail["clientId"] == first.client_id and "MainThread" in detail["jstack"]
            assert detail["properties"]["consumerGroup"] == "cri-cli"
            text = await asyncio.to_thread(run, "-i", first.client_id)
            assert "Queues held" in text and "PROP_CONSUME_TYPE" in text

            missing = await asyncio.to_thread(invoke, "cri-cli", "-i", "10.0.0.1@gone")
            assert missing.exit_code == 1
            assert "not online: check the client id with consumerConnection -g cri-cli" in missing.output
            nobody = await asyncio.to_thread(invoke, "cri-nobody")
            assert nobody.exit_code == 1 and "no consumer of group 'cri-nobody' is online" in nobody.output

            # consumerProgress -s: which consumer holds each queue
            await wait_until(lambda: all(s.broker.offsets.query("cri-cli", "CriCli", q) is not None
                                         for q in range(4)))

            def progress(*args: str) -> Result:
                return CliRunner().invoke(cli, ["admin", "consumerProgress", "-n", s.namesrv_addr, *args])

            shown = await asyncio.to_thread(progress, "-g", "cri-cli", "-s", "--output", "json")
            assert shown.exit_code == 0, shown.output
            owners = {q["queueId"]: q["client"] for q in json.loads(shown.output)["queues"]
                      if q["topic"] == "CriCli"}
            held = {mq.queue_id: c.client_id for c in (first, second) for mq in c.assignment()
                    if mq.topic == "CriCli"}
            assert owners == held and set(owners.values()) == {first.client_id, second.client_id}
            plain = await asyncio.to_thread(progress, "-g", "cri-cli", "--output", "json")
            assert {q["client"] for q in json.loads(plain.output)["queues"]} == {None}
            refused = await asyncio.to_thread(progress, "-s")
            assert refused.exit_code == 2 and "--show-client needs -g GROUP" in refused.output

    run_with_servers(tmp_path, test, timeout=60)


def test_a_message_is_consumed_directly_by_the_consumer_named(tmp_path: Path) -> None:
    """CONSUME_MESSAGE_DIRECTLY (309): the broker that stored the message relays it with the
    record to one push consumer, whose listener's verdict comes back; offsets do not move."""
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "cri-pg") as producer:
            sent = {body: await producer.send(Message("CriDirect", body))
                    for body in (b"ok", b"later", b"boom")}
        seen: list[tuple[bytes, str, int]] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeStatus:
            [m] = msgs
            seen.append((m.body, ctx.queue.broker_name, ctx.queue.queue_id))
            if m.body == b"boom":
                raise RuntimeError("cannot handle this one")
            return ConsumeStatus.RECONSUME_LATER if m.body == b"later" else ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(s.namesrv_addr, "cri-direct", listener=listener, **FAST)
        consumer.subscribe("CriDirect")
        puller = PullConsumer(s.namesrv_addr, "cri-direct-pull", suspend_ms=1000, pull_timeout_ms=3000)
        puller.subscribe("CriDirect")
        async with Admin(s.namesrv_addr) as admin, consumer, puller:
            await wait_until(lambda: len(seen) >= 3)  # consumed once as usual (later/boom: again)
            committed = {q: s.broker.offsets.query("cri-direct", "CriDirect", q) for q in range(4)}
            seen.clear()
            results = {body: await admin.consume_message_directly("cri-direct", consumer.client_id,
                                                                  r.offset_msg_id)
                       for body, r in sent.items()}
            assert {b: r.consume_result for b, r in results.items()} == {
                b"ok": "CR_SUCCESS", b"later": "CR_LATER", b"boom": "CR_THROW_EXCEPTION"}
            assert results[b"boom"].remark == "RuntimeError: cannot handle this one"
            assert not any(r.order for r in results.values())
            direct = [x for x in seen if x[0] == b"ok"]
            assert direct[0] == (b"ok", "broker-a", sent[b"ok"].queue.queue_id)
            # by the client message id (UNIQ_KEY) and its topic
            by_uniq = await admin.consume_message_directly("cri-direct", consumer.client_id,
                                                           sent[b"ok"].msg_id, topic="CriDirect")
            assert by_uniq.consume_result == "CR_SUCCESS"
            assert {q: s.broker.offsets.query("cri-direct", "CriDirect", q) for q in range(4)} == committed

            failures = {}
            for group, client_id in (("cri-direct", "10.0.0.1@gone"),
                                     ("cri-direct-pull", puller.client_id)):
                try:
                    await admin.consume_message_directly(group, client_id, sent[b"ok"].offset_msg_id)
                except MQBrokerError as exc:
                    failures[group] = (exc.code, exc.remark)
            assert failures == {
                "cri-direct": (ResponseCode.SYSTEM_ERROR,
                               "The Consumer <cri-direct> <10.0.0.1@gone> not online"),
                "cri-direct-pull": (ResponseCode.SYSTEM_ERROR,
                                    "The Consumer Group <cri-direct-pull> not exist in this consumer: "
                                    "only push consumers consume a message directly")}
            # a message id of no record: the broker says so without asking the consumer
            raw = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY,
                                          ConsumeMessageDirectlyResultRequestHeader(
                                              consumer_group="cri-direct", client_id=consumer.client_id,
                                              msg_id=sent[b"ok"].offset_msg_id[:-4] + "0001"))
            async with RemotingClient() as client:
                answer = await client.invoke(s.broker_addr, raw)
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert answer.remark == "can not find message by the offset, 1: no record starts there"

            out = await asyncio.to_thread(CliRunner().invoke, cli, [
                "admin", "queryMsgById", "-n", s.namesrv_addr, "-i", sent[b"later"].offset_msg_id,
                "-g", "cri-direct", "-d", consumer.client_id, "--output", "json"])
            assert out.exit_code == 0, out.output
            doc = json.loads(out.output)
            assert doc["message"]["body"] == "later" and doc["consumeResult"]["consumeResult"] == "CR_LATER"
            half = await asyncio.to_thread(CliRunner().invoke, cli, [
                "admin", "queryMsgById", "-n", s.namesrv_addr, "-i", sent[b"ok"].offset_msg_id, "-g", "x"])
            assert half.exit_code == 2 and "give both -g GROUP and -d CLIENT_ID" in half.output

    run_with_servers(tmp_path, test)
