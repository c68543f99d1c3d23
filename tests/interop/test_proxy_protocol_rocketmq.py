"""PROXY protocol headers against a real RocketMQ 5.3.3 broker (Netty's HAProxyMessageDecoder)
and Bolide's broker side by side: the same loopback forwarder prepends the same v1 or v2 header
(with TLVs) to a client's connection to each, and both must report the same forwarded client
address in consumerConnection and record the same born host (the socket's peer, not the
header's) for a message sent through it. The RocketMQ broker registers with Bolide's
NameServer, so only one JVM starts.

Needs java (the jars come from Maven Central once, into ``interop/.m2``): without it the module
is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.common.msgid import decode_offset_msg_id
from bolide.common.records import decode_records
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.bodies.admin import ConsumerConnection
from bolide.protocol.haproxy import encode_v1, encode_v2
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    SendMessageRequestHeader,
    ViewMessageRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.testing import rocketmq as rmqmod
from bolide.testing.proxy_forwarder import HeaderFn, ProxyForwarder
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable
from bolide.testing.servers import running_servers
from conftest import unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSION = "5.3.3"
TOPIC = "ProxiedInterop"
HEADERS: dict[str, HeaderFn] = {
    "v1": lambda client, server: encode_v1(("203.0.113.7", 41001), server),
    "v2": lambda client, server: encode_v2(
        ("198.51.100.23", 52002), server, tlvs=((0xE0, b"vpce-0123456789abcdef"), (0x01, b"h2"))),
}
EXPECTED = {"v1": "203.0.113.7:41001", "v2": "198.51.100.23:52002"}


@pytest.fixture
def classpath() -> None:
    try:
        rmqmod.classpath(VERSION)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")


async def call(client: RemotingClient, addr: str, cmd: RemotingCommand) -> RemotingCommand:
    response = await client.invoke(addr, cmd, 10_000)
    assert response.code == ResponseCode.SUCCESS, (addr, response.code, response.remark)
    return response


async def seen_through(client: RemotingClient, broker: str, kind: str) -> tuple[list[str], str, str]:
    """Through a forwarder sending a ``kind`` header to ``broker``: a heartbeat, then a send.
    (consumerConnection's client addresses, the message's born host, the forwarder's own
    address towards the broker)."""
    group = f"proxied_{kind}_cg"
    async with ProxyForwarder(broker, HEADERS[kind]) as fwd:
        beat = HeartbeatData(client_id=f"10.9.9.9@{kind}", consumer_data_set=[ConsumerData(
            group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            subscription_data_set=[SubscriptionData.of(TOPIC, "*")])])
        await call(client, fwd.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=beat.encode()))
        header = SendMessageRequestHeader(producer_group="proxied_pg", topic=TOPIC, default_topic="TBW102",
                                          default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                          born_timestamp=1, flag=0, properties="")
        sent = await call(client, fwd.address, RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_v2(), b"via a balancer"))
        listed = await call(client, broker, RemotingCommand.request(
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            GetConsumerConnectionListRequestHeader(consumer_group=group)))
        clients = sorted(c.client_addr for c in ConsumerConnection.decode(listed.body_bytes()).connection_set)
        upstream = fwd.upstream[0]
    _, offset = decode_offset_msg_id(sent.ext_fields["msgId"])
    view = await call(client, broker, RemotingCommand.request(
        RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=offset)))
    return clients, str(decode_records(view.body_bytes())[0].born_host), upstream


def test_rocketmq_and_bolide_read_the_same_headers(tmp_path: Path, classpath: None) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "bolide") as s, RemotingClient() as client:
            rmq = RocketMQ(VERSION, tmp_path / "rmq", namesrv_port=s.namesrv.port)
            try:
                await asyncio.to_thread(rmq.start_broker, BrokerSettings(tmp_path / "rmq-store",
                                                                         broker_name="rmq-broker"))
                for broker in (s.broker_addr, rmq.broker_addr):
                    await call(client, broker, RemotingCommand.request(
                        RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(
                            topic=TOPIC, default_topic="TBW102", read_queue_nums=1,
                            write_queue_nums=1, perm=6)))
                for kind in HEADERS:
                    theirs = await seen_through(client, rmq.broker_addr, kind)
                    ours = await seen_through(client, s.broker_addr, kind)
                    assert theirs[0] == ours[0] == [EXPECTED[kind]], (kind, theirs, ours)
                    # the born host is the socket's peer on both: the forwarder's own address
                    assert theirs[1] == theirs[2] and ours[1] == ours[2], (kind, theirs, ours)
            finally:
                await asyncio.to_thread(rmq.stop)

    asyncio.run(asyncio.wait_for(main(), 200))
