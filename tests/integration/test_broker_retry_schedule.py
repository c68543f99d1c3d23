"""Delayed delivery through SCHEDULE_TOPIC_XXXX, CONSUMER_SEND_MSG_BACK to the retry topic and
the dead letter queue, the DLQ redirect of a send to a retry topic out of retries, and the
orderly consumers' queue locks."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_broker_slice import create_topic, pull_request, records, send_header

from bolide.common.fastjson import loads
from bolide.common.topic import SCHEDULE_TOPIC
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies.client import LockBatchRequestBody, LockBatchResponseBody, MessageQueue
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers, running_servers

TIMEOUT = 20.0
FAST_LEVELS = {"message_delay_level": "1s 1s 1s 1s 2s"}  # level 3 + n stays short


async def send(client: RemotingClient, s: Servers, topic: str, body: bytes, props: str,
               **fields: object) -> RemotingCommand:
    header = send_header(topic, props=props).to_v2()
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, body)
    request.ext_fields.update({k: str(v) for k, v in fields.items()})
    r = await client.invoke(s.broker_addr, request)
    assert r.code == ResponseCode.SUCCESS, r
    return r


async def pull_until(client: RemotingClient, s: Servers, topic: str, count: int,
                     group: str = "cg") -> list:
    """Long-poll ``topic`` queue 0 from offset 0 until ``count`` messages have come."""
    got: list = []
    offset = 0
    while len(got) < count:
        p = await client.invoke(s.broker_addr, pull_request(topic, offset, suspend_ms=3000,
                                                            sys_flag=6, group=group))
        assert p.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), p
        if p.code == ResponseCode.SUCCESS:
            got += records(p.body_bytes())
        offset = int(p.ext_fields["nextBeginOffset"])
    return got


async def send_back(client: RemotingClient, s: Servers, offset: int, *, delay_level: int = 0,
                    max_times: int = 2) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(offset=offset, group="cg", delay_level=delay_level,
                                              origin_msg_id=None, max_reconsume_times=max_times)
    return await client.invoke(s.broker_addr,
                               RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header))


def run(tmp_path: Path, test, store_dir: str = "store") -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        async with (running_servers(tmp_path / store_dir, store_options=FAST_LEVELS) as s,
                    RemotingClient() as client):
            await asyncio.wait_for(test(s, client), TIMEOUT)

    asyncio.run(main())


def test_delayed_message_is_delivered_after_its_delay(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, "Later", queues=1)
        await send(client, s, "Later", b"later", "TAGS\x01TagL\x02DELAY\x015\x02KEYS\x01k1\x02")
        assert s.broker.store.get_max_offset_in_queue("Later", 0) == 0
        [msg] = await pull_until(client, s, "Later", 1)
        assert msg.body == b"later" and msg.tags == "TagL" and msg.keys == ["k1"]
        assert "DELAY" not in msg.properties
        assert msg.properties["REAL_TOPIC"] == "Later" and msg.properties["REAL_QID"] == "0"
        cq = s.broker.store.find_consume_queue(SCHEDULE_TOPIC, 4)
        phys, _, deliver_at = cq.entry(0)
        original = s.broker.store.look_message_by_offset(phys)
        assert original is not None
        assert deliver_at == original.store_timestamp + 2000
        assert msg.store_timestamp >= deliver_at  # not delivered early
        assert s.broker.delay_offsets.get(5) == 1

    run(tmp_path, test)


def test_send_back_retries_then_dead_letters(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, "Work", queues=1)
        await send(client, s, "Work", b"job", "TAGS\x01TagW\x02UNIQ_KEY\x01U1\x02")
        [first] = await pull_until(client, s, "Work", 1)

        r = await send_back(client, s, first.commit_log_offset)
        assert r.code == ResponseCode.SUCCESS, r
        [retry1] = await pull_until(client, s, "%RETRY%cg", 1)
        assert retry1.body == b"job" and retry1.reconsume_times == 1
        assert retry1.properties["RETRY_TOPIC"] == "Work"
        assert retry1.properties["ORIGIN_MESSAGE_ID"] == first.offset_msg_id
        assert retry1.properties["UNIQ_KEY"] == "U1" and "DELAY" not in retry1.properties

        r = await send_back(client, s, retry1.commit_log_offset)
        assert r.code == ResponseCode.SUCCESS, r
        retries = await pull_until(client, s, "%RETRY%cg", 2)
        retry2 = retries[1]
        assert retry2.reconsume_times == 2 and retry2.properties["RETRY_TOPIC"] == "Work"
        assert retry2.properties["ORIGIN_MESSAGE_ID"] == first.offset_msg_id

        r = await send_back(client, s, retry2.commit_log_offset)  # 2 >= max 2: dead
        assert r.code == ResponseCode.SUCCESS, r
        [dead] = await pull_until(client, s, "%DLQ%cg", 1)
        assert dead.body == b"job" and dead.reconsume_times == 3
        assert dead.properties["RETRY_TOPIC"] == "Work" and "DELAY" not in dead.properties
        table = s.broker.topics.table
        assert table["%DLQ%cg"].read_queue_nums == 1 and table["%RETRY%cg"].perm == 6

        r = await send_back(client, s, first.commit_log_offset, delay_level=-1)  # straight to DLQ
        assert r.code == ResponseCode.SUCCESS
        assert len(await pull_until(client, s, "%DLQ%cg", 2)) == 2

        missing = await send_back(client, s, 10**9)
        assert missing.code == ResponseCode.SYSTEM_ERROR and "look message by offset" in missing.remark

    run(tmp_path, test)


def test_send_to_retry_topic_out_of_retries_goes_to_dlq(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        props = "RETRY_TOPIC\x01Work\x02DELAY\x013\x02"
        r = await send(client, s, "%RETRY%cg", b"again", props, j=1, l=3)
        assert r.ext_fields["queueId"] == "0"
        r = await send(client, s, "%RETRY%cg", b"gone", props, j=3, l=3)
        [dead] = await pull_until(client, s, "%DLQ%cg", 1)
        assert dead.body == b"gone" and "DELAY" not in dead.properties
        assert dead.reconsume_times == 3 and dead.properties["RETRY_TOPIC"] == "Work"
        [again] = await pull_until(client, s, "%RETRY%cg", 1)  # after its 1 s delay
        assert again.body == b"again" and again.reconsume_times == 1

    run(tmp_path, test)


def test_delay_offsets_survive_a_restart(tmp_path: Path) -> None:
    async def first_run(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, "Later", queues=1)
        await send(client, s, "Later", b"one", "DELAY\x011\x02")
        await pull_until(client, s, "Later", 1)

    async def second_run(s: Servers, client: RemotingClient) -> None:
        saved = loads((tmp_path / "store" / "config" / "delayOffset.json").read_bytes())
        assert saved["offsetTable"] == {"1": 1}  # parsed as JSON text: keys are strings
        await send(client, s, "Later", b"two", "DELAY\x011\x02")
        got = await pull_until(client, s, "Later", 2)
        # the first message was not delivered again: the second is right behind it
        assert [m.body for m in got] == [b"one", b"two"]
        assert s.broker.store.get_max_offset_in_queue("Later", 0) == 2

    run(tmp_path, first_run)
    run(tmp_path, second_run)


def test_orderly_queue_locks(tmp_path: Path) -> None:
    async def lock(client: RemotingClient, s: Servers, code: int, client_id: str,
                   queues: set[MessageQueue]) -> RemotingCommand:
        body = LockBatchRequestBody(consumer_group="cg", client_id=client_id, mq_set=queues)
        r = await client.invoke(s.broker_addr, RemotingCommand.request(code, body=body.encode()))
        assert r.code == ResponseCode.SUCCESS, r
        return r

    async def test(s: Servers, client: RemotingClient) -> None:
        q0, q1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)
        r = await lock(client, s, RequestCode.LOCK_BATCH_MQ, "c1", {q0})
        assert LockBatchResponseBody.decode(r.body_bytes()).lock_ok_mq_set == {q0}
        r = await lock(client, s, RequestCode.LOCK_BATCH_MQ, "c2", {q0, q1})
        assert LockBatchResponseBody.decode(r.body_bytes()).lock_ok_mq_set == {q1}
        await lock(client, s, RequestCode.UNLOCK_BATCH_MQ, "c1", {q0})
        r = await lock(client, s, RequestCode.LOCK_BATCH_MQ, "c2", {q0, q1})
        assert LockBatchResponseBody.decode(r.body_bytes()).lock_ok_mq_set == {q0, q1}

    run(tmp_path, test)
