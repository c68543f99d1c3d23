"""Request-reply helpers: the reply a responder builds, the reply a pushed frame carries
(compressed or not), the pending-request table, and the broker's lookup of the requester's
connection by client id."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from bolide.broker.clients import ClientManager
from bolide.client import MessageError, create_reply_message
from bolide.client.request_reply import PendingReplies, is_reply, reply_from_push
from bolide.common import properties as P
from bolide.common import sysflag
from bolide.common.message import Message
from bolide.protocol import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import ReplyMessageRequestHeader


def request_received() -> Message:
    return Message("Rpc", b"q", properties={
        P.CLUSTER: "Cl", P.REPLY_TO_CLIENT: "10.0.0.1@r", P.CORRELATION_ID: "c-1",
        P.MESSAGE_TTL: "3000", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "AB"})


def test_a_reply_goes_to_the_clusters_reply_topic_with_the_requests_ids() -> None:
    reply = create_reply_message(request_received(), b"a")
    assert (reply.topic, reply.body) == ("Cl_REPLY_TOPIC", b"a")
    assert reply.properties == {P.MESSAGE_TYPE: "reply", P.CORRELATION_ID: "c-1",
                                P.REPLY_TO_CLIENT: "10.0.0.1@r", P.MESSAGE_TTL: "3000"}
    assert is_reply(reply) and not is_reply(request_received())
    with pytest.raises(MessageError, match="AB is no request"):
        create_reply_message(Message("Rpc", b"q", properties={P.CLUSTER: "Cl",
                                                             P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "AB"}),
                             b"a")


def push(body: bytes, sys_flag: int = 0, correlation: str = "c-1") -> RemotingCommand:
    header = ReplyMessageRequestHeader(
        producer_group="pg", topic="Cl_REPLY_TOPIC", default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=0, sys_flag=sys_flag, born_timestamp=5, flag=0,
        properties=P.encode_properties({P.CORRELATION_ID: correlation, "k": "v"}).decode(),
        reconsume_times=0, born_host="10.0.0.2:5000", store_host="10.0.0.3:10911",
        store_timestamp=7)
    return RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
                                   ext_fields=header.to_ext_fields(), body=body)


def test_a_pushed_reply_is_decoded_and_decompressed() -> None:
    cmd = push(zlib.compress(b"x" * 5000), sysflag.COMPRESSED)
    reply = reply_from_push(cmd.ext_fields, cmd.body_bytes(), 99)
    assert reply.body == b"x" * 5000 and reply.topic == "Cl_REPLY_TOPIC"
    assert reply.properties == {P.CORRELATION_ID: "c-1", "k": "v", P.REPLY_MESSAGE_ARRIVE_TIME: "99"}
    assert (reply.born_host, reply.store_host, reply.store_timestamp, reply.born_timestamp) == (
        "10.0.0.2:5000", "10.0.0.3:10911", 7, 5)


def test_pending_replies_complete_the_matching_request_only() -> None:
    async def test() -> None:
        pending = PendingReplies()
        fut = pending.expect("c-1")
        other = await pending.on_push(None, push(b"late", correlation="c-9"))  # type: ignore[arg-type]
        assert other.code == ResponseCode.SUCCESS and not fut.done()
        answer = await pending.on_push(None, push(b"ok"))  # type: ignore[arg-type]
        assert answer.code == ResponseCode.SUCCESS and (await fut).body == b"ok"
        assert len(pending) == 0
        bad = push(b"not zlib", sysflag.COMPRESSED)
        answer = await pending.on_push(type("Ctx", (), {"remote_address": "b"})(), bad)  # type: ignore[arg-type]
        assert answer.code == ResponseCode.SYSTEM_ERROR

    asyncio.run(test())


def test_the_broker_finds_a_requesters_connection_by_client_id() -> None:
    clients = ClientManager()
    a, b, c = object(), object(), object()
    clients.register_producer("pg1", a, "10.0.0.1@x")
    clients.register_producer("pg2", b, "10.0.0.2@y")
    clients.register_producer("pg3", c, "10.0.0.1@x")  # a newer connection of the same client
    assert clients.producer_channel("10.0.0.1@x") is c
    assert clients.producer_channel("10.0.0.2@y") is b
    clients.unregister(c)
    assert clients.producer_channel("10.0.0.1@x") is a
    assert clients.producer_channel("nobody") is None
