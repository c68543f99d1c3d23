"""A static topic's logic queue remapped from broker-b to broker-a (NameServer and two brokers
in-process, raw requests): logic offsets 0-2 are on broker-b's physical queue 2, logic offsets
from 10 on broker-a's queue 1 (the leader). Requests to broker-a for the old offsets are
forwarded to broker-b as physical requests (``lo=false``), as RocketMQ 5's brokers do, and their
answers made logic ones."""

from __future__ import annotations

from pathlib import Path

from test_broker_slice import create_topic, pull_request, records, run_with_servers, send_header

from bolide.protocol import RemotingCommand
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
from bolide.testing.servers import Servers, another_broker

TOPIC, GROUP = "StaticFwd", "cg"


def mapping(here: str, old_broker: str, new_broker: str) -> TopicQueueMappingDetail:
    return TopicQueueMappingDetail(topic=TOPIC, total_queues=1, bname=here, epoch=2, hosted_queues={
        0: [LogicQueueMappingItem(gen=0, queue_id=2, bname=old_broker, logic_offset=0, start_offset=0,
                                  end_offset=3),
            LogicQueueMappingItem(gen=1, queue_id=1, bname=new_broker, logic_offset=10,
                                  start_offset=0)]})


def test_requests_for_offsets_on_another_broker_are_forwarded(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        async with another_broker(s, tmp_path / "b") as b:
            a_name, b_name = s.broker.config.broker_name, b.config.broker_name
            b_addr = f"127.0.0.1:{b.port}"

            async def call(code: int, header: object, body: bytes = b"", addr: str = s.broker_addr,
                           ext: dict[str, str] | None = None) -> RemotingCommand:
                return await client.invoke(addr, RemotingCommand.request(
                    code, header, body, ext_fields=ext))  # type: ignore[arg-type]

            for addr in (s.broker_addr, b_addr):
                await create_topic(client, addr, TOPIC)
            for i in range(3):  # the old item's messages, on broker-b's physical queue 2
                r = await call(RequestCode.SEND_MESSAGE, send_header(TOPIC, 2), b"b%d" % i, b_addr)
                assert r.code == ResponseCode.SUCCESS, r
            s.broker.static_topics.update(mapping(a_name, b_name, a_name))
            b.static_topics.update(mapping(b_name, b_name, a_name))  # b no longer leads it
            r = await call(RequestCode.SEND_MESSAGE, send_header(TOPIC, 0), b"a0")
            assert (r.code, r.ext_fields["queueOffset"]) == (ResponseCode.SUCCESS, "10"), r
            b.store.wait_dispatched()
            s.broker.store.wait_dispatched()

            # pulls: the old offsets read on broker-b, then on to the leader's 10
            p = await client.invoke(s.broker_addr, pull_request(TOPIC, 0))
            assert p.code == ResponseCode.SUCCESS, p
            assert [m.body for m in records(p.body_bytes())] == [b"b0", b"b1", b"b2"]
            assert {k: p.ext_fields[k] for k in ("nextBeginOffset", "minOffset", "offsetDelta")} == {
                "nextBeginOffset": "3", "minOffset": "0", "offsetDelta": "0"}
            p = await client.invoke(s.broker_addr, pull_request(TOPIC, 1, suspend_ms=20_000,
                                                                sys_flag=4 | 2 | 1))
            assert [m.body for m in records(p.body_bytes())] == [b"b1", b"b2"], p
            p = await client.invoke(s.broker_addr, pull_request(TOPIC, 3))
            assert (p.code, p.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_RETRY_IMMEDIATELY,
                                                                 "10"), p
            p = await client.invoke(s.broker_addr, pull_request(TOPIC, 10))
            assert [m.body for m in records(p.body_bytes())] == [b"a0"], p
            # offsets of the old item are committed on broker-b and read back from there
            r = await call(RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
                consumer_group=GROUP, topic=TOPIC, queue_id=0, commit_offset=2))
            assert r.code == ResponseCode.SUCCESS, r
            assert b.offsets.query(GROUP, TOPIC, 2) == 2 and s.broker.offsets.query(GROUP, TOPIC, 1) is None
            query = QueryConsumerOffsetRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=0)
            r = await call(RequestCode.QUERY_CONSUMER_OFFSET, query)
            assert (r.code, r.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "2"), r
            r = await call(RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
                consumer_group=GROUP, topic=TOPIC, queue_id=0, commit_offset=11))
            assert r.code == ResponseCode.SUCCESS and s.broker.offsets.query(GROUP, TOPIC, 1) == 1
            r = await call(RequestCode.QUERY_CONSUMER_OFFSET, query)
            assert r.ext_fields["offset"] == "11"  # the leader's first
            # queue offsets and times: the oldest item's on broker-b, the max on the leader
            r = await call(RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(topic=TOPIC, queue_id=0))
            assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0"), r
            r = await call(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=TOPIC, queue_id=0))
            assert r.ext_fields["offset"] == "11"
            r = await call(RequestCode.GET_EARLIEST_MSG_STORETIME,
                           GetEarliestMsgStoretimeRequestHeader(topic=TOPIC, queue_id=0))
            assert r.ext_fields["timestamp"] == str(b.store.get_earliest_message_time(TOPIC, 2)), r
            later = s.broker.store.get_earliest_message_time(TOPIC, 1)
            r = await call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                           SearchOffsetRequestHeader(topic=TOPIC, queue_id=0, timestamp=later))
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] in {"3", "0"}, r
            # a physical request (lo=false) to broker-b is served as it is
            r = await call(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=TOPIC, queue_id=2),
                           addr=b_addr, ext={"lo": "false"})
            assert r.ext_fields["offset"] == "3"

        # broker-b gone: the old offsets' requests fail naming it, the leader's still served
        s.broker.static_topics.update(mapping(a_name, "broker-gone", a_name), force=True)
        p = await client.invoke(s.broker_addr, pull_request(TOPIC, 0))
        assert p.code == ResponseCode.SYSTEM_ERROR and "broker-gone" in (p.remark or ""), p
        r = await call_min(client, s)
        assert r.code == ResponseCode.SYSTEM_ERROR and "broker-gone" in (r.remark or ""), r
        p = await client.invoke(s.broker_addr, pull_request(TOPIC, 10))
        assert [m.body for m in records(p.body_bytes())] == [b"a0"], p

    run_with_servers(tmp_path, test)


async def call_min(client: RemotingClient, s: Servers) -> RemotingCommand:
    return await client.invoke(s.broker_addr, RemotingCommand.request(
        RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(topic=TOPIC, queue_id=0)))
