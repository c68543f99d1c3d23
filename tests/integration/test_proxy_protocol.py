"""A NameServer and a Broker behind a load balancer that sends PROXY protocol headers (a
loopback forwarder, as HAProxy ``send-proxy``): the address in the header is the client's
everywhere RocketMQ uses it (consumerConnection, producerConnection, the plain-ACL white
list), while the born host of a message stays the socket's peer, as RocketMQ records it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bolide.client import Admin, ClientConfig
from bolide.common.msgid import decode_offset_msg_id
from bolide.common.records import decode_records
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from bolide.protocol.haproxy import Address, encode_v1, encode_v2
from bolide.protocol.headers import SendMessageRequestHeader, ViewMessageRequestHeader
from bolide.remoting import RemotingClient
from bolide.testing.proxy_forwarder import HeaderFn, ProxyForwarder
from bolide.testing.servers import Servers, running_servers

TOPIC = "ProxiedTopic"


def v1_from(source: Address) -> HeaderFn:
    return lambda client, server: encode_v1(source, server)


def v2_from(source: Address, tlvs: tuple[tuple[int, bytes], ...] = ()) -> HeaderFn:
    def header(client: Address, server: Address) -> bytes:
        if ":" in source[0]:  # one family in a header: an IPv6 address of the balancer
            server = ("2001:db8::1", server[1])
        return encode_v2(source, server, tlvs=tlvs)

    return header


def heartbeat(client_id: str, group: str) -> RemotingCommand:
    consumer = ConsumerData(group_name=f"{group}-cg", consume_type="CONSUME_PASSIVELY",
                            message_model="CLUSTERING", consume_from_where="CONSUME_FROM_LAST_OFFSET",
                            subscription_data_set=[SubscriptionData.of(TOPIC, "*")])
    beat = HeartbeatData(client_id=client_id, producer_data_set=[ProducerData(group_name=f"{group}-pg")],
                         consumer_data_set=[consumer])
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=beat.encode())


def send(body: bytes) -> RemotingCommand:
    header = SendMessageRequestHeader(producer_group="pp-pg", topic=TOPIC, default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                      born_timestamp=1, flag=0, properties="")
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2(), body)


async def born_host(client: RemotingClient, response: RemotingCommand) -> str:
    addr, offset = decode_offset_msg_id(response.ext_fields["msgId"])
    view = await client.invoke(addr, RemotingCommand.request(
        RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=offset)), 3000)
    assert view.code == ResponseCode.SUCCESS, view.remark
    return str(decode_records(view.body_bytes())[0].born_host)


async def run(tmp_path: Path, test, **options: object) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", **options) as s:
            await test(s)

    await asyncio.wait_for(main(), 60)


def test_the_headers_address_is_the_clients(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        tlvs = ((0xE0, b"vpce-0123456789abcdef"), (0x01, b"h2"))
        async with Admin(ClientConfig(s.namesrv_addr)) as admin, RemotingClient() as client:
            await admin.create_topic(TOPIC)
            async with ProxyForwarder(s.broker_addr, v1_from(("203.0.113.7", 41001))) as v1, \
                    ProxyForwarder(s.broker_addr, v2_from(("2001:db8::7", 41002), tlvs)) as v2, \
                    ProxyForwarder(s.namesrv_addr, v2_from(("198.51.100.3", 41003))) as ns:
                for fwd, group in ((v1, "v1"), (v2, "v2")):
                    beat = await client.invoke(fwd.address, heartbeat(f"10.9.9.9@{group}", group), 3000)
                    assert beat.code == ResponseCode.SUCCESS, beat.remark
                conn = await admin.consumer_connection("v1-cg")
                assert [c.client_addr for c in conn.connection_set] == ["203.0.113.7:41001"]
                conn = await admin.consumer_connection("v2-cg")
                assert [c.client_addr for c in conn.connection_set] == ["[2001:db8::7]:41002"]
                producers = await admin.producer_connection("v2-pg", TOPIC)
                assert [c.client_addr for c in producers.connection_set] == ["[2001:db8::7]:41002"]
                # the broker's channel keeps the socket's peer and the header's TLVs
                [channel] = [ch for ch in s.broker.server.channels
                             if ch.remote_address == "[2001:db8::7]:41002"]
                assert channel.peer_address == v2.upstream[0]
                assert channel.proxy is not None and channel.proxy.tlv_text() == {
                    "proxy_protocol_tlv_0xe0": "vpce-0123456789abcdef", "proxy_protocol_tlv_0x01": "h2"}
                # the born host is the socket's peer (RocketMQ's channel.remoteAddress())
                sent = await client.invoke(v1.address, send(b"through a proxy"), 3000)
                assert sent.code == ResponseCode.SUCCESS, sent.remark
                assert await born_host(client, sent) == v1.upstream[0]
                # the NameServer too
                topics = await client.invoke(ns.address, RemotingCommand.request(
                    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), 3000)
                assert topics.code == ResponseCode.SUCCESS
                assert "198.51.100.3:41003" in [ch.remote_address for ch in s.namesrv.server.channels]

    asyncio.run(run(tmp_path, test))


ACL = """\
globalWhiteRemoteAddresses:
  - 198.51.100.*
accounts:
  - accessKey: acl-admin
    secretKey: acl-admin-secret
    admin: true
"""


def test_the_acl_white_list_checks_the_headers_address(tmp_path: Path) -> None:
    acl = tmp_path / "conf" / "plain_acl.yml"
    acl.parent.mkdir()
    acl.write_text(ACL)

    async def test(s: Servers) -> None:
        async with RemotingClient() as client, \
                ProxyForwarder(s.broker_addr, v2_from(("198.51.100.9", 5000))) as white, \
                ProxyForwarder(s.broker_addr, v1_from(("192.0.2.9", 5000))) as other:
            allowed = await client.invoke(white.address, heartbeat("c@1", "white"), 3000)
            assert allowed.code == ResponseCode.SUCCESS, allowed.remark
            for addr in (other.address, s.broker_addr):  # not white-listed: must sign
                refused = await client.invoke(addr, heartbeat("c@2", "other"), 3000)
                assert refused.code != ResponseCode.SUCCESS and "No accessKey" in (refused.remark or "")

    asyncio.run(run(tmp_path, test, acl_enable=True, acl_file=str(acl)))
