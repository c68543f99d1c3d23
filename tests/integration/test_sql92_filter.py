"""SQL92 subscriptions against an in-process NameServer + Broker: refused without
enablePropertyFilter (CHECK_CLIENT_CONFIG and pulls, with the key to set), a parse error
answered 23, and with the filter on the broker delivers only the matching messages, to
pulls that carry the expression and to consumers whose heartbeat registered it; the Python
push and pull consumers subscribe with MessageSelector.by_sql."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.client import (
    ClientConfigError,
    ConsumeFrom,
    Message,
    MessageExt,
    MessageSelector,
    Producer,
    PullConsumer,
    PushConsumer,
)
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies.client import (
    EXPRESSION_SQL92,
    CheckClientRequestBody,
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
)
from bolide.protocol.headers import PullMessageRequestHeader
from bolide.remoting import RemotingClient
from bolide.store.record import decode_record, read_total_size
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

TOPIC = "SqlTopic"
EXPRESSION = "n >= 10 AND TAGS = 'even'"
MATCHING = [10, 12, 14, 16, 18]


async def send_numbered(namesrv: str, count: int = 20) -> None:
    """Messages with the user property n = i, tagged even or odd, all to queue 0."""
    async with Producer(namesrv, "sql-pg") as producer:
        queue = (await producer.publish_queues(TOPIC))[0]
        for i in range(count):
            msg = Message(TOPIC, b"m%d" % i, tags="even" if i % 2 == 0 else "odd")
            msg.properties["n"] = str(i)
            await producer.send(msg, queue=queue)


def pull_header(sub: bool, offset: int = 0) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group="sql-raw", topic=TOPIC, queue_id=0, queue_offset=offset, max_msg_nums=32,
        sys_flag=0x4 if sub else 0, commit_offset=0, suspend_timeout_millis=0,
        subscription=EXPRESSION if sub else None, sub_version=1, expression_type=EXPRESSION_SQL92)


def numbers(body: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(body):
        out.append(int(decode_record(body, pos).properties["n"]))
        pos += read_total_size(body, pos)
    return out


async def check(client: RemotingClient, s: Servers, expression: str) -> RemotingCommand:
    body = CheckClientRequestBody(client_id="c", group="sql-raw", subscription_data=SubscriptionData.of(
        TOPIC, expression, 1, EXPRESSION_SQL92))
    return await client.invoke(s.broker_addr, RemotingCommand.request(
        RequestCode.CHECK_CLIENT_CONFIG, body=body.encode()))


def test_without_enable_property_filter_sql92_is_refused_with_the_key_to_set(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send_numbered(s.namesrv_addr)
        async with RemotingClient() as client:
            r = await check(client, s, EXPRESSION)
            assert r.code == ResponseCode.SYSTEM_ERROR and "enablePropertyFilter=true" in (r.remark or "")
            r = await client.invoke(s.broker_addr, RemotingCommand.request(
                RequestCode.PULL_MESSAGE, pull_header(sub=True)))
            assert r.code == ResponseCode.SYSTEM_ERROR and "enablePropertyFilter=true" in (r.remark or "")
        consumer = PushConsumer(s.namesrv_addr, "sql-push", listener=lambda msgs, ctx: None)
        consumer.subscribe(TOPIC, MessageSelector.by_sql(EXPRESSION))
        with pytest.raises(ClientConfigError, match="enablePropertyFilter=true"):
            await consumer.start()
        await consumer.close()

    run_with_servers(tmp_path, test)


def test_the_broker_delivers_only_what_the_expression_selects(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send_numbered(s.namesrv_addr)
        assert s.broker.store.wait_dispatched(10)
        async with RemotingClient() as client:
            assert (await check(client, s, EXPRESSION)).code == ResponseCode.SUCCESS
            r = await check(client, s, "n >= ")
            assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "expected a value" in (r.remark or "")
            # the expression with the pull
            r = await client.invoke(s.broker_addr, RemotingCommand.request(
                RequestCode.PULL_MESSAGE, pull_header(sub=True)))
            assert r.code == ResponseCode.SUCCESS and numbers(r.body_bytes()) == MATCHING
            assert r.ext_fields["nextBeginOffset"] == "20"
            r = await client.invoke(s.broker_addr, RemotingCommand.request(
                RequestCode.PULL_MESSAGE, pull_header(sub=True, offset=19)))
            assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY  # scanned, nothing matched
            # the expression registered by a heartbeat
            beat = HeartbeatData(client_id="10.0.0.1@sql", consumer_data_set=[ConsumerData(
                group_name="sql-raw", consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
                consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                subscription_data_set=[SubscriptionData.of(TOPIC, EXPRESSION, 1, EXPRESSION_SQL92)])])
            r = await client.invoke(s.broker_addr, RemotingCommand.request(RequestCode.HEART_BEAT,
                                                                           body=beat.encode()))
            assert r.code == ResponseCode.SUCCESS
            r = await client.invoke(s.broker_addr, RemotingCommand.request(
                RequestCode.PULL_MESSAGE, pull_header(sub=False)))
            assert r.code == ResponseCode.SUCCESS and numbers(r.body_bytes()) == MATCHING
            bad = pull_header(sub=True)
            bad.subscription = "n >>> 3"
            r = await client.invoke(s.broker_addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, bad))
            assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED

        seen: list[MessageExt] = []

        async def listener(msgs: list[MessageExt], ctx: object) -> None:
            seen.extend(msgs)

        push = PushConsumer(s.namesrv_addr, "sql-push", listener=listener,
                            consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval_ms=200,
                            suspend_ms=500, pull_timeout_ms=3000, persist_offset_interval_ms=100)
        push.subscribe(TOPIC, MessageSelector.by_sql(EXPRESSION))
        pull = PullConsumer(s.namesrv_addr, "sql-pull", consume_from=ConsumeFrom.FIRST_OFFSET,
                            rebalance_interval_ms=200, suspend_ms=1000, pull_timeout_ms=3000)
        pull.subscribe(TOPIC, MessageSelector.by_sql("n < 3"))
        polled: list[MessageExt] = []
        async with push, pull:
            await wait_until(lambda: len(seen) >= len(MATCHING))
            while len(polled) < 3:
                polled += await pull.poll(timeout_ms=5000)
            # past the last message, filtered out or not, once a pull finds nothing more
            await wait_until(lambda: s.broker.offsets.query("sql-push", TOPIC, 0) == 20)
        assert sorted(int(m.properties["n"]) for m in seen) == MATCHING
        assert sorted(int(m.properties["n"]) for m in polled) == [0, 1, 2]

    run_with_servers(tmp_path, test, enable_property_filter=True)


def test_a_selector_that_does_not_parse_is_refused_by_the_client() -> None:
    consumer = PushConsumer("127.0.0.1:9876", "sql-bad", listener=lambda msgs, ctx: None)
    with pytest.raises(ClientConfigError, match="not a SQL92 selector"):
        consumer.subscribe(TOPIC, MessageSelector.by_sql("n >"))
    with pytest.raises(ClientConfigError, match=r"MessageSelector\.by_sql"):
        consumer.subscribe(TOPIC, "n > 3")
