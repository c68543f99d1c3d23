"""LITE_PULL_MESSAGE (361), what RocketMQ 5's DefaultLitePullConsumer pulls with: served as
PULL_MESSAGE, refused with NO_PERMISSION when the broker has litePullMessageEnable=false."""

from __future__ import annotations

from pathlib import Path

from bolide.client import Admin
from bolide.common.message import Message
from bolide.protocol import RemotingCommand
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import PullMessageRequestHeader
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers
from conftest import run_with_servers

TOPIC = "LitePulled"
LITE_FLAG = 0x10 | 0x4  # PullSysFlag FLAG_LITE_PULL_MESSAGE | FLAG_SUBSCRIPTION, as 5.x sets them


def lite_pull(offset: int = 0) -> RemotingCommand:
    header = PullMessageRequestHeader(consumer_group="lite_cg", topic=TOPIC, queue_id=0,
                                      queue_offset=offset, max_msg_nums=32, sys_flag=LITE_FLAG,
                                      commit_offset=0, suspend_timeout_millis=0,
                                      subscription="*", sub_version=0)
    return RemotingCommand.request(RequestCode.LITE_PULL_MESSAGE, header)


async def put(s: Servers) -> None:
    async with Admin(s.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
    store = s.broker.store
    assert store.put_message(Message(TOPIC, b"lite"), queue_id=0).ok
    assert store.wait_dispatched()


def test_lite_pull_is_served_as_a_pull(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await put(s)
        async with RemotingClient() as client:
            r = await client.invoke(s.broker_addr, lite_pull())
        assert r.code == ResponseCode.SUCCESS, r
        assert r.ext_fields["nextBeginOffset"] == "1" and r.body

    run_with_servers(tmp_path, test)


def test_lite_pull_is_refused_when_disabled(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await put(s)
        async with RemotingClient() as client:
            r = await client.invoke(s.broker_addr, lite_pull())
        assert r.code == ResponseCode.NO_PERMISSION
        assert "for lite pull consumer is forbidden: set litePullMessageEnable=true" in (r.remark or "")

    run_with_servers(tmp_path, test, lite_pull_message_enable=False)
