"""A static topic's logic queues served by the broker that leads them (NameServer + Broker
in-process, raw requests): a hand-made mapping where logic queue 0 moved from physical queue 0
(logic offsets 0-1) to physical queue 1 (logic offsets from 10: RocketMQ leaves a gap), and
logic queue 1 is led by another broker."""

from __future__ import annotations

from pathlib import Path

from test_broker_slice import create_topic, pull_request, records, run_with_servers, send_header

from bolide.common.message import Message
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import encode_batch_body
from bolide.protocol.bodies.static_topic import LogicQueueMappingItem, TopicQueueMappingDetail
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers

TOPIC, OTHER = "StaticReq", "broker-elsewhere"


def mapping(here: str) -> TopicQueueMappingDetail:
    return TopicQueueMappingDetail(topic=TOPIC, total_queues=2, bname=here, epoch=1, hosted_queues={
        0: [LogicQueueMappingItem(gen=0, queue_id=0, bname=here, logic_offset=0, start_offset=0,
                                  end_offset=2),
            LogicQueueMappingItem(gen=1, queue_id=1, bname=here, logic_offset=10, start_offset=0)],
        1: [LogicQueueMappingItem(gen=0, queue_id=2, bname=here, logic_offset=0, start_offset=0,
                                  end_offset=0),
            LogicQueueMappingItem(gen=1, queue_id=0, bname=OTHER, logic_offset=10, start_offset=0)]})


def test_logic_queue_requests(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        async def call(code: int, header: object, body: bytes = b"",
                       ext: dict[str, str] | None = None) -> RemotingCommand:
            return await client.invoke(s.broker_addr, RemotingCommand.request(
                code, header, body, ext_fields=ext))  # type: ignore[arg-type]

        await create_topic(client, s.broker_addr, TOPIC)
        s.broker.static_topics.update(mapping(s.broker.config.broker_name))
        # lo=false: a physical request, served as it is (the old item's two messages)
        for i in range(2):
            r = await call(RequestCode.SEND_MESSAGE_V2, send_header(TOPIC, 0).to_v2(), b"old%d" % i,
                           {"lo": "false"})
            assert (r.code, r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == (0, "0", str(i))
        # sends to logic queue 0 land on physical queue 1 and answer logic offsets from 10
        answers = []
        for code, header in ((RequestCode.SEND_MESSAGE, send_header(TOPIC, 0)),
                             (RequestCode.SEND_MESSAGE_V2, send_header(TOPIC, 0).to_v2())):
            r = await call(code, header, b"new%d" % code)
            answers.append((r.code, r.ext_fields["queueId"], r.ext_fields["queueOffset"]))
        batch = encode_batch_body([Message(TOPIC, b"b1"), Message(TOPIC, b"b2")])
        r = await call(RequestCode.SEND_BATCH_MESSAGE, send_header(TOPIC, 0, props="").to_v2(), batch)
        answers.append((r.code, r.ext_fields["queueId"], r.ext_fields["queueOffset"]))
        assert answers == [(0, "0", "10"), (0, "0", "11"), (0, "0", "12")]
        s.broker.store.wait_dispatched()
        assert [s.broker.store.get_max_offset_in_queue(TOPIC, q) for q in range(3)] == [2, 4, 0]
        # pulls: logic 0 reads the old item, read to its end it moves on to the leader's 10
        p = await client.invoke(s.broker_addr, pull_request(TOPIC, 0))
        assert p.code == ResponseCode.SUCCESS, p
        assert [m.body for m in records(p.body_bytes())] == [b"old0", b"old1"]
        assert (p.ext_fields["nextBeginOffset"], p.ext_fields["offsetDelta"]) == ("2", "0")
        p = await client.invoke(s.broker_addr, pull_request(TOPIC, 2))
        assert (p.code, p.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "10")
        p = await client.invoke(s.broker_addr, pull_request(TOPIC, 11))
        assert p.code == ResponseCode.SUCCESS, p
        assert [m.body for m in records(p.body_bytes())] == [b"new310", b"b1", b"b2"]
        assert {k: p.ext_fields[k] for k in ("nextBeginOffset", "minOffset", "maxOffset",
                                             "offsetDelta")} == {
            "nextBeginOffset": "14", "minOffset": "10", "maxOffset": "14", "offsetDelta": "10"}
        p = await client.invoke(s.broker_addr, pull_request(TOPIC, 14))
        assert (p.code, p.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_NOT_FOUND, "14")
        # offsets: committed on the item's physical queue, answered as logic ones
        r = await call(RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
            consumer_group="cg", topic=TOPIC, queue_id=0, commit_offset=13))
        assert r.code == ResponseCode.SUCCESS and s.broker.offsets.query("cg", TOPIC, 1) == 3
        r = await call(RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(
            consumer_group="cg", topic=TOPIC, queue_id=0))
        assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "13")
        r = await call(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=TOPIC, queue_id=0))
        assert r.ext_fields["offset"] == "14"
        r = await call(RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(topic=TOPIC, queue_id=0))
        assert r.ext_fields["offset"] == "0"
        r = await call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                       SearchOffsetRequestHeader(topic=TOPIC, queue_id=0, timestamp=0))
        assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
        r = await call(RequestCode.GET_EARLIEST_MSG_STORETIME,
                       GetEarliestMsgStoretimeRequestHeader(topic=TOPIC, queue_id=0))
        assert r.ext_fields["timestamp"] == str(s.broker.store.get_earliest_message_time(TOPIC, 0))
        # logic queue 1 is led by another broker: refused naming it, nothing stored
        for code, header in ((RequestCode.SEND_MESSAGE, send_header(TOPIC, 1)),
                             (RequestCode.PULL_MESSAGE, None)):
            r = (await call(code, header, b"x") if header is not None
                 else await client.invoke(s.broker_addr, pull_request(TOPIC, 0, queue_id=1)))
            assert r.code == ResponseCode.NOT_LEADER_FOR_QUEUE and OTHER in (r.remark or ""), r
        assert s.broker.store.get_max_offset_in_queue(TOPIC, 2) == 0

    run_with_servers(tmp_path, test)
