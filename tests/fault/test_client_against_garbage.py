"""The client against a server that answers every request at random, from a fixed seed: any
response code, header fields of any name with plausible and wrong values, and bodies that are
routes (with queue counts up to 2**31 and broker addresses that are not addresses), message
records (whole, cut short or with a byte changed), other JSON beans with values of the wrong
types, or random bytes. Every Admin, Producer and PullConsumer call must either work or raise a
BolideError naming the problem (never a KeyError, ValueError, MemoryError, ...), and nothing
may be logged with a traceback. The other way round, a real broker's connections to a
TransactionProducer and a PushConsumer carry random requests of the codes a broker sends
clients."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from test_request_sweep import FIELDS, WRONG, bean_like, body, ext_fields

from bolide.client.admin import Admin
from bolide.client.config import ClientConfig
from bolide.client.producer import Producer
from bolide.client.pull_consumer import PullConsumer
from bolide.client.push_consumer import PushConsumer
from bolide.client.results import ConsumeStatus
from bolide.client.transaction import LocalTransactionState, TransactionProducer
from bolide.common import Message
from bolide.common.hosts import encode_host
from bolide.common.topic import MAX_QUEUE_NUMS
from bolide.errors import BolideError, ProtocolError
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import MessageQueue, SubscriptionGroupConfig
from bolide.protocol.codes import RequestCode, ResponseCode, SerializeType
from bolide.remoting.processor import RequestContext
from bolide.remoting.server import RemotingServer
from bolide.store.record import encode_record
from bolide.testing.servers import running_servers
from conftest import no_traceback_logged, wait_until

SEED = 20261127
ROUNDS = 100  # calls of each kind
CODES = (0,) * 8 + (1, 2, 3, 14, 16, 17, 19, 20, 21, 22, 24, 25, 26, 206, 207, 208)
MSG_ID = "7F00000100002A9F0000000000000000"


class RandomServer:
    """Answers every request with a response made at random."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.server = RemotingServer("127.0.0.1", 0)
        self.server.register_default(self.answer)

    @property
    def addr(self) -> str:
        return self.server.address

    def route(self) -> bytes:
        rnd = self.rnd
        if rnd.random() < 0.3:
            return json.dumps(bean_like(rnd, 0)).encode()
        addrs = rnd.choice(({"0": self.addr}, {"1": self.addr}, {}, {"0": "5"}, {"x": self.addr}, []))
        return json.dumps({
            "brokerDatas": [{"brokerName": rnd.choice(("b", "", None, 1)), "cluster": "c",
                             "brokerAddrs": addrs}],
            "queueDatas": [{"brokerName": rnd.choice(("b", "x")),
                            "readQueueNums": rnd.choice((0, 4, -1, 2**31 - 1)),
                            "writeQueueNums": rnd.choice((0, 4, -1, 2**31 - 1)),
                            "perm": rnd.choice((6, 0, 2, 4, -1)), "topicSysFlag": 0}],
            "orderTopicConf": rnd.choice((None, "b:4", "b:99999999999", "b:x;:3")),
        }).encode()

    def records(self) -> bytes:
        rnd = self.rnd
        out = b"".join(encode_record(
            rnd.choice(("T", "%RETRY%g", "", "x" * 100)), rnd.choice((0, 1, -1)),
            rnd.randbytes(rnd.randint(0, 40)),
            rnd.choice((b"", b"TAGS\x01a\x02", b"UNIQ_KEY\x01x\x02KEYS\x01k\x02", b"\x01\x02\x02",
                        b"TRAN_MSG\x01true\x02PGROUP\x01g\x02")),
            born_timestamp=rnd.choice((0, -1, 2**62)), born_host=encode_host("1.2.3.4:5"),
            store_timestamp=1, store_host=encode_host("1.2.3.4:6"),
            queue_offset=rnd.choice((0, 5, -1)), physical_offset=rnd.choice((0, 100, -5)),
            sys_flag=rnd.choice((0, 1, 2, 4, 8, 0x41, 0x80))) for _ in range(rnd.randint(1, 4)))
        r = rnd.random()
        if r < 0.2:
            return out[:rnd.randint(0, len(out))]
        if r < 0.4:
            changed = bytearray(out)
            changed[rnd.randrange(len(changed))] = rnd.randrange(256)
            return bytes(changed)
        return out

    async def answer(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        rnd = self.rnd
        r = rnd.random()
        payload = self.route() if r < 0.35 else self.records() if r < 0.55 else body(rnd)
        response = request.make_response(rnd.choice(CODES), rnd.choice((None, "", "a remark")))
        if rnd.random() < 0.8:
            response.ext_fields = {
                k: rnd.choice(WRONG) if rnd.random() < 0.3 else
                rnd.choice(("0", "1", "5", "100", "-1", "x", self.addr, "b"))
                for k in rnd.sample(FIELDS, rnd.randint(0, 20))}
        response.body = payload
        return response


def calls(admin: Admin, producer: Producer, consumer: PullConsumer,
          addr: str) -> list[Callable[[], Awaitable[Any]]]:
    mq = MessageQueue("T", "b", 0)

    async def send() -> Any:
        await producer.start()
        return await producer.send(Message("T", b"x", tags="a", keys="k"))

    async def send_batch() -> Any:
        await producer.start()
        return await producer.send_batch([Message("T", b"x"), Message("T", b"y")])

    async def send_oneway() -> Any:
        await producer.start()
        return await producer.send_oneway(Message("T", b"x"))

    async def poll() -> Any:
        await consumer.start()
        return await consumer.poll(20)

    async def seek() -> Any:
        await consumer.start()
        await consumer.seek_to_end(mq)
        return await consumer.committed(mq)

    return [
        admin.cluster_info, admin.topic_list, lambda: admin.topic_route("T"), admin.master_addrs,
        lambda: admin.broker_runtime_info(addr), lambda: admin.ha_status(addr),
        lambda: admin.topic_stats("T"), lambda: admin.create_topic("T"), lambda: admin.delete_topic("T"),
        lambda: admin.consumer_progress("g"), lambda: admin.consumer_progress("g", "T"),
        lambda: admin.consumer_connection("g"), lambda: admin.producer_connection("g", "T"),
        lambda: admin.online_consumers("g", "T"), lambda: admin.queues("T"),
        lambda: admin.reset_offset_by_time("g", "T", 0), lambda: admin.view_message(MSG_ID),
        lambda: admin.view_message(MSG_ID, "T"), lambda: admin.query_by_key("T", "k"),
        lambda: admin.read_messages(mq, 0, 5), lambda: admin.pull_records(mq, [0]),
        lambda: admin.min_max_offset(mq, addr), lambda: admin.search_offset(mq, addr, 0),
        lambda: admin.create_subscription_group(SubscriptionGroupConfig(group_name="g")),
        lambda: admin.delete_subscription_group("g"),
        send, send_batch, send_oneway, poll, seek, consumer.commit,
    ]


def test_every_client_call_raises_only_bolide_errors_on_random_answers() -> None:

    async def main() -> list[str]:
        fake = RandomServer(random.Random(SEED))
        await fake.server.start()
        config = ClientConfig(namesrv_addr=fake.addr, api_timeout_ms=2000)
        admin, producer = Admin(config), Producer(config, "pg")
        consumer = PullConsumer(config, "cg")
        consumer.assign([MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)])
        wrong: list[str] = []
        outcomes = {"ok": 0, "error": 0}
        try:
            for _ in range(ROUNDS):
                for i, call in enumerate(calls(admin, producer, consumer, fake.addr)):
                    try:
                        await asyncio.wait_for(call(), 20)
                        outcomes["ok"] += 1
                    except BolideError:
                        outcomes["error"] += 1
                    except Exception as exc:
                        wrong.append(f"call {i}: {type(exc).__name__}: {exc}")
        finally:
            await admin.close()
            await producer.close()
            await consumer.close()
            await fake.server.close()
        assert outcomes["ok"] > ROUNDS and outcomes["error"] > ROUNDS, outcomes  # both paths ran
        return wrong

    with no_traceback_logged():
        wrong = asyncio.run(asyncio.wait_for(main(), 300))
    assert not wrong, "\n".join(wrong[:10])


def test_requests_down_a_client_s_connection_get_no_traceback(tmp_path: Path) -> None:
    """What a broker may send a client (transaction checks, rebalance notices, offset resets,
    and codes the client does not serve) with random fields and bodies: answered or dropped
    without a traceback, and the clients keep working."""
    rnd = random.Random(SEED)
    codes = (RequestCode.CHECK_TRANSACTION_STATE, RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
             RequestCode.RESET_CONSUMER_CLIENT_OFFSET, RequestCode.GET_CONSUMER_RUNNING_INFO,
             RequestCode.CONSUME_MESSAGE_DIRECTLY)
    oneway = codes[:3]  # brokers send these oneway; clients answer none of them, as Java's

    async def main() -> int:
        async with running_servers(tmp_path / "store", auto_create_topic_enable=True) as servers:
            config = ClientConfig(namesrv_addr=servers.namesrv_addr)
            states = random.Random(SEED + 1)  # its own: checks run as they come
            producer = TransactionProducer(config, "tpg", check_listener=lambda msg: states.choice(
                list(LocalTransactionState)))
            consumer = PushConsumer(config, "cg", listener=lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
            consumer.subscribe("CallbackTopic", "*")
            try:
                await producer.start()
                first = await producer.send(Message("CallbackTopic", b"creates the topic"))
                assert first.msg_id
                await consumer.start()
                clients = servers.broker.clients
                await wait_until(lambda: bool(clients.producers.get("tpg") and clients.consumers.get("cg")),
                                 20)
                channels: list[Any] = [*clients.producers["tpg"], *clients.consumer_channels("cg")]
                made = RandomServer(rnd)  # for its record bodies
                answered = 0
                for _ in range(ROUNDS):
                    for code in codes:
                        request = RemotingCommand(
                            code, ext_fields=ext_fields(rnd, servers),
                            body=made.records() if rnd.random() < 0.5 else body(rnd),
                            serialize_type=rnd.choice(list(SerializeType)))
                        channel = rnd.choice(channels)
                        if code in oneway or rnd.random() < 0.5:
                            channel.oneway(request)
                        else:
                            answer = await channel.invoke(request, 10_000)
                            assert answer.is_response
                            answered += 1
                sent = await producer.send(Message("CallbackTopic", b"still works"))
                assert sent.msg_id
                return answered
            finally:
                await producer.close()
                await consumer.close()

    with no_traceback_logged():
        answered = asyncio.run(asyncio.wait_for(main(), 120))
    assert answered > ROUNDS // 2  # two codes of five are two-way, sent so half of the time


def one_broker_route(addr: str, queues: int) -> bytes:
    """A route body: broker ``b`` at ``addr``, master, with ``queues`` read and write queues."""
    return json.dumps({
        "brokerDatas": [{"brokerName": "b", "cluster": "c", "brokerAddrs": {"0": addr}}],
        "queueDatas": [{"brokerName": "b", "readQueueNums": queues, "writeQueueNums": queues,
                        "perm": 6, "topicSysFlag": 0}]}).encode()


def test_every_route_reader_refuses_a_route_of_too_many_queues() -> None:
    """A NameServer's route giving a broker more queues than any broker serves is malformed for
    each caller that lists the queues (65,537: one past the limit; 2**31 - 1 took the memory)."""
    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)

        async def answer(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            return request.make_response(body=one_broker_route(server.address, MAX_QUEUE_NUMS + 1))

        server.register_default(answer)
        await server.start()
        config = ClientConfig(namesrv_addr=server.address)
        admin, producer = Admin(config), Producer(config, "pg")
        try:
            with pytest.raises(ProtocolError, match=r"65537 (read|write) queues"):
                await admin.queues("T")
            with pytest.raises(ProtocolError, match="65537 write queues"):
                await producer.send(Message("T", b"x"))
        finally:
            await admin.close()
            await producer.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 60))


async def answered_with(code: int, fields: dict[str, str],
                        call: Callable[[ClientConfig], Awaitable[object]]) -> None:
    """Run ``call`` against a broker (and NameServer) that answers every request but route
    lookups with ``code`` and the ext ``fields``; it must raise ProtocolError naming them."""
    server = RemotingServer("127.0.0.1", 0)

    async def answer(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return request.make_response(body=one_broker_route(server.address, 1))
        response = request.make_response(code)
        response.ext_fields = dict(fields)
        return response

    server.register_default(answer)
    await server.start()
    try:
        with pytest.raises(ProtocolError, match="not integers"):
            await call(ClientConfig(namesrv_addr=server.address))
    finally:
        await server.close()


@pytest.mark.parametrize("fields", [{"queueId": "x", "queueOffset": "1"},
                                    {"queueId": "0", "queueOffset": "b"}], ids=["queue-id", "queue-offset"])
def test_a_send_answer_with_fields_that_are_not_numbers_is_a_protocol_error(fields: dict[str, str]) -> None:
    async def send(config: ClientConfig) -> None:
        async with Producer(config, "pg") as producer:
            await producer.send(Message("T", b"x"))

    asyncio.run(asyncio.wait_for(answered_with(ResponseCode.SUCCESS, {"msgId": "m", **fields}, send), 60))


@pytest.mark.parametrize("fields", [{"nextBeginOffset": "abc"}, {"minOffset": "1.5"},
                                    {"suggestWhichBrokerId": "127.0.0.1:10911"}])
def test_a_pull_answer_with_offsets_that_are_not_numbers_is_a_protocol_error(fields: dict[str, str]) -> None:
    async def read(config: ClientConfig) -> None:
        async with Admin(config) as admin:
            await admin.read_messages(MessageQueue("T", "b", 0), 0, 1)

    offsets = {"nextBeginOffset": "0", "minOffset": "0", "maxOffset": "0", **fields}
    asyncio.run(asyncio.wait_for(answered_with(ResponseCode.PULL_NOT_FOUND, offsets, read), 60))
