"""Request-reply (``Producer.request`` and ``create_reply_message``) through a broker: the
broker pushes each reply to the requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT) and
stores it in ``<cluster>_REPLY_TOPIC``; a request nobody answers times out; a reply whose
requester is gone is refused with RocketMQ's remark."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client import (
    Admin,
    MessageError,
    MQBrokerError,
    Producer,
    RequestTimeoutError,
    blocking,
    create_reply_message,
)
from bolide.common import Message
from bolide.testing.servers import Servers
from conftest import replying_consumer, run_with_servers

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def test_requests_get_their_replies(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            await admin.create_topic("Rpc", read_queue_nums=2, write_queue_nums=2)
        answered: list[str] = []
        consumer, replier = replying_consumer(s.namesrv_addr, "Rpc", "rr_responder_cg",
                                              answered=answered)
        async with consumer, replier, Producer(s.namesrv_addr, "rr_requester_pg") as requester:
            replies = await asyncio.gather(*(
                requester.request(Message("Rpc", b"q%d" % i), timeout_ms=15_000) for i in range(8)))
        assert [r.body for r in replies] == [b"re:q%d" % i for i in range(8)]
        for reply in replies:
            assert reply.topic == REPLY_TOPIC and reply.properties["MSG_TYPE"] == "reply"
            assert reply.properties["REPLY_TO_CLIENT"] == requester.client_id
            assert int(reply.properties["ARRIVE_TIME"]) >= int(reply.properties["PUSH_REPLY_TIME"])
            assert reply.properties["TTL"] == "15000" and reply.store_host == s.broker_addr
        assert len({r.properties["CORRELATION_ID"] for r in replies}) == 8
        assert sorted(answered) == sorted(f"q{i}" for i in range(8))
        store = s.broker.store
        assert store.wait_dispatched(10)
        assert store.get_max_offset_in_queue(REPLY_TOPIC, 0) == 8  # storeReplyMessageEnable

    run_with_servers(tmp_path, test, timeout=60)


def test_a_request_nobody_answers_times_out(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Producer(s.namesrv_addr, "rr_requester_pg") as requester:
            with pytest.raises(RequestTimeoutError, match="create_reply_message"):
                await requester.request(Message("Unanswered", b"hello?"), timeout_ms=1500)

    run_with_servers(tmp_path, test, auto_create_topic_enable=True)


def test_a_reply_whose_requester_is_gone_is_refused(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            await admin.create_topic("Rpc", read_queue_nums=1, write_queue_nums=1)
        requester = Producer(s.namesrv_addr, "rr_requester_pg")
        with pytest.raises(RequestTimeoutError):
            await requester.request(Message("Rpc", b"late"), timeout_ms=500)
        await requester.close()  # unregistered: the broker cannot push to it any more
        assert s.broker.store.wait_dispatched(10)
        [request] = s.broker.store.get_message("g", "Rpc", 0, 0).messages
        async with Producer(s.namesrv_addr, "rr_responder_pg", retry_times=0) as replier:
            with pytest.raises(MQBrokerError, match=r"channel of <.*> not found"):
                await replier.send(create_reply_message(request, b"too late"))
        with pytest.raises(MessageError, match="is no request"):
            create_reply_message(Message("Rpc", b"x", properties={"CLUSTER": "c"}), b"")
        with pytest.raises(MessageError, match=r"property\[CLUSTER\] is null"):
            create_reply_message(Message("Rpc", b"x"), b"")

    run_with_servers(tmp_path, test, store_reply_message_enable=False)


def test_blocking_request_and_no_stored_replies(tmp_path: Path) -> None:
    """The blocking API's request; with storeReplyMessageEnable=false replies are only pushed."""
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            await admin.create_topic("Rpc", read_queue_nums=1, write_queue_nums=1)
        consumer, replier = replying_consumer(s.namesrv_addr, "Rpc", "rr_responder_cg")

        def ask() -> bytes:
            with blocking.Producer(s.namesrv_addr, "rr_blocking_pg") as requester:
                return requester.request(Message("Rpc", b"sync"), timeout_ms=15_000).body

        async with consumer, replier:
            assert await asyncio.to_thread(ask) == b"re:sync"
        assert s.broker.store.get_max_offset_in_queue(REPLY_TOPIC, 0) == 0

    run_with_servers(tmp_path, test, timeout=60, store_reply_message_enable=False)
