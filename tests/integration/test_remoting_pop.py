"""RocketMQ 5's consumption by pop over remoting (POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME) and the broker-side allocation that picks it (QUERY_ASSIGNMENT,
SET_MESSAGE_REQUEST_MODE), with the requests the Java 5.x client sends, over loopback."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from bolide.client import Admin, Producer
from bolide.common import Message
from bolide.common.records import decode_records
from bolide.protocol.bodies.client import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.bodies.pop import QueryAssignmentRequestBody, QueryAssignmentResponseBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from bolide.protocol.pop_info import pop_handles
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

TOPIC, GROUP = "PopTopic", "pop_cg"


def pop_request(queue_id: int = -1, poll_ms: int = 1000, invisible_ms: int = 60_000) -> RemotingCommand:
    header = PopMessageRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=queue_id, max_msg_nums=32, invisible_time=invisible_ms,
        poll_time=poll_ms, born_time=0, init_mode=0, exp_type="TAG", exp="*",
    )
    return RemotingCommand.request(RequestCode.POP_MESSAGE, header)


def pop_cks(response: RemotingCommand, broker_name: str) -> dict[bytes, tuple[int, int, str]]:
    """body -> (queue id, offset, POP_CK) as the Java client builds them from the answer."""
    header = response.read_header(PopMessageResponseHeader)
    messages = decode_records(response.body_bytes())
    handles = pop_handles(messages, header.start_offset_info, header.msg_offset_info, header.pop_time,
                          header.invisible_time, header.revive_qid, broker_name)
    return {m.body: (m.queue_id, m.queue_offset, ck) for m, ck in zip(messages, handles, strict=True)}


def ack_request(queue_id: int, offset: int, ck: str) -> RemotingCommand:
    header = AckMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=queue_id, extra_info=ck,
                                     offset=offset)
    return RemotingCommand.request(RequestCode.ACK_MESSAGE, header)


async def four_messages(s: Servers, topic: str, queues: int) -> None:
    """``topic`` created with ``queues`` queues and m0 to m3 sent, all in the ConsumeQueues."""
    async with Admin(s.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    async with Producer(s.namesrv_addr, "pop_pg") as producer:
        for i in range(4):
            await producer.send(Message(topic, b"m%d" % i))
    assert await asyncio.to_thread(s.broker.store.wait_dispatched, 10)


def test_pop_ack_change_invisible_and_batch_ack(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await four_messages(s, TOPIC, queues=2)
        name, addr = s.broker.config.broker_name, s.broker_addr
        client = RemotingClient()
        try:
            first = await client.invoke(addr, pop_request())
            assert first.code == ResponseCode.SUCCESS, first.remark
            cks = pop_cks(first, name)
            assert sorted(cks) == [b"m0", b"m1", b"m2", b"m3"]
            assert all(m.reconsume_times == 0 for m in decode_records(first.body_bytes()))
            for body in (b"m0", b"m1", b"m2"):
                answer = await client.invoke(addr, ack_request(*cks[body]))
                assert answer.code == ResponseCode.SUCCESS, answer.remark
            again = await client.invoke(addr, ack_request(*cks[b"m0"]))  # acknowledged already: no effect
            assert again.code == ResponseCode.SUCCESS
            # the fourth comes back at once after its invisible time is set to 0
            queue_id, offset, ck = cks[b"m3"]
            change = ChangeInvisibleTimeRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=queue_id,
                                                      extra_info=ck, offset=offset, invisible_time=0)
            changed = await client.invoke(addr, RemotingCommand.request(
                RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change))
            assert changed.code == ResponseCode.SUCCESS, changed.remark
            lease = changed.read_header(ChangeInvisibleTimeResponseHeader)
            assert (lease.pop_time, lease.revive_qid) != tuple(int(x) for x in ck.split(" ")[1:4:2])
            stale = await client.invoke(addr, ack_request(queue_id, offset, ck))
            assert stale.code == ResponseCode.NO_MESSAGE and "expired" in (stale.remark or "")
            second = await client.invoke(addr, pop_request())
            assert second.code == ResponseCode.SUCCESS, second.remark
            [redelivered] = decode_records(second.body_bytes())
            assert redelivered.body == b"m3" and redelivered.reconsume_times == 1
            header = second.read_header(PopMessageResponseHeader)
            start = int(header.start_offset_info.split(" ")[2])
            bits = base64.b64encode((1 << (offset - start)).to_bytes(1, "little"))
            batch = {"brokerName": name, "acks": [{
                "c": GROUP, "t": TOPIC, "r": "0", "so": start,
                "q": queue_id, "rq": header.revive_qid, "pt": header.pop_time, "it": header.invisible_time,
                "b": bits.decode()}]}
            acked = await client.invoke(addr, RemotingCommand.request(
                RequestCode.BATCH_ACK_MESSAGE, body=json.dumps(batch).encode()))
            assert acked.code == ResponseCode.SUCCESS, acked.remark
            for q in range(2):  # everything acknowledged: committed up to each queue's end
                end = s.broker.store.get_max_offset_in_queue(TOPIC, q)
                assert s.broker.offsets.query(GROUP, TOPIC, q) == end
            empty = await client.invoke(addr, pop_request(poll_ms=200))
            assert empty.code == ResponseCode.POLLING_TIMEOUT
            # a waiting pop is answered when a message arrives
            waiting = asyncio.ensure_future(client.invoke(addr, pop_request(poll_ms=10_000), 15_000))
            await wait_until(lambda: s.broker.pop._waiting == 1)
            async with Producer(s.namesrv_addr, "pop_pg") as producer:
                await producer.send(Message(TOPIC, b"late"))
            woken = await waiting
            assert woken.code == ResponseCode.SUCCESS
            assert [m.body for m in decode_records(woken.body_bytes())] == [b"late"]
            bad = await client.invoke(addr, ack_request(0, 0, "not an extra info"))
            assert bad.code == ResponseCode.MESSAGE_ILLEGAL and "fields" in (bad.remark or "")
            too_many = pop_request()
            too_many.ext_fields["maxMsgNums"] = "33"
            refused = await client.invoke(addr, too_many)
            assert refused.code == ResponseCode.INVALID_PARAMETER
        finally:
            await client.close()

    run_with_servers(tmp_path, test)


def test_assignment_follows_the_request_mode(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            await admin.create_topic(TOPIC, read_queue_nums=3, write_queue_nums=3)
        name, addr = s.broker.config.broker_name, s.broker_addr
        client = RemotingClient()
        try:
            heartbeat = HeartbeatData(client_id="cid-a", consumer_data_set=[ConsumerData(
                group_name=GROUP, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
                consume_from_where="CONSUME_FROM_LAST_OFFSET",
                subscription_data_set=[SubscriptionData.of(TOPIC, "*")])])
            beat = await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT,
                                                                    body=heartbeat.encode()))
            assert beat.code == ResponseCode.SUCCESS

            async def assignment(strategy: str = "AVG") -> QueryAssignmentResponseBody:
                body = QueryAssignmentRequestBody(topic=TOPIC, consumer_group=GROUP, client_id="cid-a",
                                                  strategy_name=strategy)
                answer = await client.invoke(addr, RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT,
                                                                          body=body.encode()))
                assert answer.code == ResponseCode.SUCCESS, answer.remark
                return QueryAssignmentResponseBody.decode(answer.body_bytes())

            pulled = await assignment()
            assert pulled.message_queue_assignments is not None
            assert sorted((a.mode, a.message_queue.queue_id) for a in pulled.message_queue_assignments) == [
                ("PULL", 0), ("PULL", 1), ("PULL", 2)]
            mode = {"topic": TOPIC, "consumerGroup": GROUP, "mode": "POP", "popShareQueueNum": 0}
            done = await client.invoke(addr, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE,
                                                                    body=json.dumps(mode).encode()))
            assert done.code == ResponseCode.SUCCESS, done.remark
            popped = await assignment()
            assert [(a.mode, a.message_queue.broker_name, a.message_queue.queue_id)
                    for a in popped.message_queue_assignments or []] == [("POP", name, -1)]
            saved = json.loads((Path(s.broker.request_modes.path)).read_text())
            assert saved["messageRequestModeMap"][TOPIC][GROUP]["mode"] == "POP"
            unknown = await assignment("NO_SUCH_STRATEGY")
            assert unknown.message_queue_assignments is None  # the client keeps what it has
            retry = {**mode, "topic": "%RETRY%" + GROUP}
            refused = await client.invoke(addr, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE,
                                                                       body=json.dumps(retry).encode()))
            assert refused.code == ResponseCode.NO_PERMISSION
        finally:
            await client.close()

    run_with_servers(tmp_path, test)


def test_a_pop_asking_for_order_holds_its_queue_until_acknowledged(tmp_path: Path) -> None:
    """RocketMQ's ``order`` header (what its proxy sends for a FIFO group): while messages of a
    queue are out, an ordered pop of that queue hands out nothing; a pop without it does."""
    topic = "PopOrderTopic"

    def pop(order: bool, max_nums: int) -> RemotingCommand:
        header = PopMessageRequestHeader(
            consumer_group=GROUP, topic=topic, queue_id=0, max_msg_nums=max_nums, invisible_time=60_000,
            poll_time=200, born_time=0, init_mode=0, exp_type="TAG", exp="*", order=order)
        return RemotingCommand.request(RequestCode.POP_MESSAGE, header)

    async def test(s: Servers) -> None:
        await four_messages(s, topic, queues=1)
        name, addr = s.broker.config.broker_name, s.broker_addr
        client = RemotingClient()
        try:
            first = await client.invoke(addr, pop(True, 2))
            assert first.code == ResponseCode.SUCCESS, first.remark
            cks = pop_cks(first, name)
            assert sorted(cks) == [b"m0", b"m1"]
            held = await client.invoke(addr, pop(True, 2))
            assert held.code == ResponseCode.POLLING_TIMEOUT  # m0 and m1 are out
            unordered = await client.invoke(addr, pop(False, 1))
            assert unordered.code == ResponseCode.SUCCESS, unordered.remark
            cks |= pop_cks(unordered, name)
            assert sorted(cks) == [b"m0", b"m1", b"m2"]
            for body in (b"m0", b"m1"):
                queue_id, offset, ck = cks[body]
                ack = AckMessageRequestHeader(consumer_group=GROUP, topic=topic, queue_id=queue_id,
                                              extra_info=ck, offset=offset)
                answer = await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack))
                assert answer.code == ResponseCode.SUCCESS, answer.remark
            still = await client.invoke(addr, pop(True, 2))
            assert still.code == ResponseCode.POLLING_TIMEOUT  # m2 is out
            queue_id, offset, ck = cks[b"m2"]
            ack = AckMessageRequestHeader(consumer_group=GROUP, topic=topic, queue_id=queue_id,
                                          extra_info=ck, offset=offset)
            answer = await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            last = await client.invoke(addr, pop(True, 2))
            assert last.code == ResponseCode.SUCCESS, last.remark
            assert [m.body for m in decode_records(last.body_bytes())] == [b"m3"]
        finally:
            await client.close()

    run_with_servers(tmp_path, test)
