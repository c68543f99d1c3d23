"""Long polls whose connection closes while the broker holds them (a consumer shut down or
killed mid-poll): the broker stops holding them at once, answers nothing, and a pop held for
a gone client hands out nothing (the messages stay for the consumers still there)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import CreateTopicRequestHeader, SendMessageRequestHeader
from bolide.protocol.headers.consumer import PULL_SUBSCRIPTION, PULL_SUSPEND, PullMessageRequestHeader
from bolide.protocol.headers.pop import PopMessageRequestHeader
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers, running_servers
from conftest import wait_until

TOPIC, GROUP = "AbandonedPolls", "abandoned_cg"


async def _with_servers(tmp_path: Path, test) -> None:  # type: ignore[no-untyped-def]
    async with running_servers(tmp_path / "store") as s, RemotingClient() as client:
        header = CreateTopicRequestHeader(topic=TOPIC, default_topic="TBW102", read_queue_nums=1,
                                          write_queue_nums=1, perm=6)
        create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        r = await client.invoke(s.broker_addr, create)
        assert r.code == ResponseCode.SUCCESS, r
        await asyncio.wait_for(test(s, client), 60)


async def _send(client: RemotingClient, s: Servers) -> None:
    header = SendMessageRequestHeader(producer_group="pg", topic=TOPIC, default_topic="TBW102",
                                      default_topic_queue_nums=1, queue_id=0, sys_flag=0,
                                      born_timestamp=int(time.time() * 1000), flag=0, properties="")
    r = await client.invoke(s.broker_addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, header, b"m"))
    assert r.code == ResponseCode.SUCCESS, r
    assert s.broker.store.wait_dispatched(10)


def _pop(poll_ms: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.POP_MESSAGE, PopMessageRequestHeader(
        consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=8, invisible_time=60_000,
        poll_time=poll_ms, born_time=int(time.time() * 1000), init_mode=0, exp_type="TAG", exp="*"))


def test_a_held_pull_ends_when_its_connection_closes(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        header = PullMessageRequestHeader(
            consumer_group=GROUP, topic=TOPIC, queue_id=0, queue_offset=0, max_msg_nums=32,
            sys_flag=PULL_SUSPEND | PULL_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=30_000,
            subscription="*", sub_version=0, expression_type="TAG")
        poller = RemotingClient()
        channel = await poller.get_channel(s.broker_addr)
        channel.send(RemotingCommand.request(RequestCode.PULL_MESSAGE, header))
        await wait_until(lambda: s.broker.pull_holds.held == 1, 10)
        connections = len(s.broker.server.channels)
        await poller.close()
        # well before the 30 s suspend time: the hold and the connection's last request are gone
        await wait_until(lambda: s.broker.pull_holds.held == 0, 5)
        await wait_until(lambda: len(s.broker.server.channels) == connections - 1, 5)
        await wait_until(lambda: all(c.in_flight == 0 for c in s.broker.server.channels), 5)

    asyncio.run(_with_servers(tmp_path, test))


def test_a_held_pop_of_a_gone_client_hands_nothing_out(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        poller = RemotingClient()
        channel = await poller.get_channel(s.broker_addr)
        channel.send(_pop(30_000))
        await wait_until(lambda: s.broker.pop.sizes()["PopWaiters"] == 1, 10)
        await poller.close()
        await wait_until(lambda: s.broker.pop.sizes()["PopWaiters"] == 0, 5)
        await _send(client, s)
        r = await client.invoke(s.broker_addr, _pop(0))  # the consumer still there gets it at once
        assert r.code == ResponseCode.SUCCESS, r
        assert s.broker.pop.sizes()["PopLeases"] == 1

    asyncio.run(_with_servers(tmp_path, test))
