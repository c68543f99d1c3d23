"""The broker's gRPC endpoint over real loopback TCP, called with the v5 messages as RocketMQ 5
clients send them: routes, settings on the Telemetry stream, send, receive (with long polling),
acknowledge, change the invisible time, transactions and their check, and the in-band errors."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from bolide.client import Admin
from bolide.protocol.bodies.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.remoting.tls import TlsServerConfig
from bolide.testing.servers import Servers, running_servers
from bolide.testing.v5calls import CLIENT, SERVICE, message, receive_request
from bolide.testing.v5calls import V5Calls as V5
from conftest import run_with_servers, wait_until


async def create_topic(s: Servers, topic: str, **options: Any) -> None:
    async with Admin(s.namesrv_addr) as admin:
        await admin.create_topic(topic, **options)


async def dispatched(s: Servers) -> None:
    """Wait until what was sent is in its queues (a receive without long polling sees it)."""
    assert await asyncio.to_thread(s.broker.store.wait_dispatched, 10)


def run(tmp_path: Path, test: Any, **options: Any) -> None:
    run_with_servers(tmp_path, test, timeout=40, grpc_server_port=0, **options)


async def endpoint(s: Servers) -> tuple[grpc.aio.Channel, V5, pb.Endpoints]:
    assert s.broker.grpc is not None
    port = s.broker.grpc.port
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return (
        channel,
        V5(channel),
        pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=port)]),
    )


def test_route_send_receive_ack(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        channel, v5, here = await endpoint(s)
        async with channel:
            route = await v5(
                "QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="V5T"), endpoints=here)
            )
            assert route.status.code == pb.OK and len(route.message_queues) == 8  # auto-created
            mq = route.message_queues[0]
            assert (mq.broker.name, mq.broker.id, mq.permission) == ("broker-a", 0, pb.READ_WRITE)
            assert mq.broker.endpoints == here and list(mq.accept_message_types) == [pb.NORMAL]
            sent = await v5(
                "SendMessage",
                pb.SendMessageRequest(
                    messages=[message("V5T", b"hello", "ID-1", tag="TagA", keys=["k1", "k2"])]
                ),
            )
            assert sent.status.code == pb.OK and sent.entries[0].message_id == "ID-1"
            msg = pb.Message(
                topic=pb.Resource(name="V5T"),
                body=b"props",
                user_properties={"color": "red"},
                system_properties=pb.SystemProperties(message_id="ID-2"),
            )
            assert (await v5("SendMessage", pb.SendMessageRequest(messages=[msg]))).status.code == pb.OK
            await dispatched(s)
            code, got = await v5.receive(receive_request("V5T", "v5g"))
            assert code == pb.OK and sorted(m.body for m in got) == [b"hello", b"props"]
            hello = next(m for m in got if m.body == b"hello")
            sp = hello.system_properties
            assert (sp.tag, list(sp.keys), sp.message_id, sp.delivery_attempt) == (
                "TagA",
                ["k1", "k2"],
                "ID-1",
                1,
            )
            assert sp.body_digest.checksum == "5D41402ABC4B2A76B9719D911017C592"  # MD5 of hello
            assert dict(next(m for m in got if m.body == b"props").user_properties) == {"color": "red"}
            code, again = await v5.receive(receive_request("V5T", "v5g"))
            assert (code, again) == (pb.MESSAGE_NOT_FOUND, [])  # both are out
            acked = await v5(
                "AckMessage",
                pb.AckMessageRequest(
                    group=pb.Resource(name="v5g"),
                    topic=pb.Resource(name="V5T"),
                    entries=[
                        pb.AckMessageEntry(
                            message_id=m.system_properties.message_id,
                            receipt_handle=m.system_properties.receipt_handle,
                        )
                        for m in got
                    ],
                ),
            )
            assert acked.status.code == pb.OK and len(acked.entries) == 2
            async with Admin(s.namesrv_addr) as admin:
                progress = await admin.consumer_progress("v5g", "V5T")
            assert progress.total_lag == 0 and sum(q.consumer_offset for q in progress.queues) == 2

    run(tmp_path, test)


def test_a_receive_waits_for_the_next_message(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        channel, v5, _ = await endpoint(s)
        async with channel:
            await create_topic(s, "Wait5", read_queue_nums=2, write_queue_nums=2)
            waiting = asyncio.ensure_future(v5.receive(receive_request("Wait5", "wg", poll_s=15), timeout=20))
            await wait_until(lambda: s.broker.pop._waiting == 1)
            started = time.monotonic()
            await v5("SendMessage", pb.SendMessageRequest(messages=[message("Wait5", b"late", "ID-L")]))
            code, got = await waiting
            assert code == pb.OK and [m.body for m in got] == [b"late"]
            assert time.monotonic() - started < 10  # woken by the message, not by the poll's end
            # nothing comes: the poll ends at its time with MESSAGE_NOT_FOUND
            code, got = await v5.receive(receive_request("Wait5", "wg", poll_s=0.3))
            assert (code, got) == (pb.MESSAGE_NOT_FOUND, [])

    run(tmp_path, test)


def test_change_invisible_duration_and_redelivery(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        channel, v5, _ = await endpoint(s)
        async with channel:
            await v5("SendMessage", pb.SendMessageRequest(messages=[message("Inv5", b"x", "ID-X")]))
            await dispatched(s)
            _, (got,) = await v5.receive(receive_request("Inv5", "ig"))
            handle = got.system_properties.receipt_handle
            changed = await v5(
                "ChangeInvisibleDuration",
                pb.ChangeInvisibleDurationRequest(
                    group=pb.Resource(name="ig"),
                    topic=pb.Resource(name="Inv5"),
                    receipt_handle=handle,
                    invisible_duration=Duration(seconds=0),
                    message_id="ID-X",
                ),
            )
            assert changed.status.code == pb.OK and changed.receipt_handle not in ("", handle)
            code, (back,) = await v5.receive(receive_request("Inv5", "ig", poll_s=5))
            assert code == pb.OK and back.system_properties.delivery_attempt == 2
            stale = await v5(
                "AckMessage",
                pb.AckMessageRequest(
                    group=pb.Resource(name="ig"),
                    topic=pb.Resource(name="Inv5"),
                    entries=[pb.AckMessageEntry(message_id="ID-X", receipt_handle=handle)],
                ),
            )
            assert stale.status.code == pb.INVALID_RECEIPT_HANDLE

    run(tmp_path, test)


def test_telemetry_answers_settings_and_carries_the_transaction_check(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        channel, v5, here = await endpoint(s)
        async with channel:
            await create_topic(
                s, "Tx5", read_queue_nums=1, write_queue_nums=1, attributes="+message.type=TRANSACTION"
            )
            stream = channel.stream_stream(
                SERVICE + "Telemetry",
                request_serializer=pb.TelemetryCommand.SerializeToString,
                response_deserializer=pb.TelemetryCommand.FromString,
            )(metadata=CLIENT)
            await stream.write(
                pb.TelemetryCommand(
                    settings=pb.Settings(
                        client_type=pb.PRODUCER,
                        access_point=here,
                        publishing=pb.Publishing(
                            topics=[pb.Resource(name="Tx5")], validate_message_type=True
                        ),
                    )
                )
            )
            reply = await stream.read()
            assert reply.status.code == pb.OK
            assert await asyncio.wait_for(stream.read(), 5) == reply  # once more (Node.js clients)
            assert reply.settings.publishing.max_body_size == 4 * 1024 * 1024
            assert reply.settings.backoff_policy.HasField("exponential_backoff")
            half = message("Tx5", b"maybe", "TX-1", message_type=pb.TRANSACTION)
            sent = await v5("SendMessage", pb.SendMessageRequest(messages=[half]))
            assert sent.status.code == pb.OK and sent.entries[0].transaction_id == "TX-1"
            # never ended: the broker's check asks this producer on its stream (after the
            # settings answered once more)
            check = await asyncio.wait_for(stream.read(), 20)
            while check.HasField("settings"):
                check = await asyncio.wait_for(stream.read(), 20)
            recover = check.recover_orphaned_transaction_command
            assert recover.transaction_id == "TX-1" and recover.message.body == b"maybe"
            commit = pb.EndTransactionRequest(
                topic=pb.Resource(name="Tx5"),
                message_id="TX-1",
                transaction_id="TX-1",
                resolution=pb.COMMIT,
                source=pb.SOURCE_SERVER_CHECK,
            )
            assert (await v5("EndTransaction", commit)).status.code == pb.OK
            code, got = await v5.receive(receive_request("Tx5", "txg", poll_s=5))
            assert code == pb.OK and [m.body for m in got] == [b"maybe"]
            again = await v5("EndTransaction", commit)
            assert again.status.code == pb.INVALID_TRANSACTION_ID
            stream.cancel()

    run(tmp_path, test, transaction_timeout_ms=500, transaction_check_interval_ms=500)


def test_errors_are_answered_in_the_response(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        channel, v5, here = await endpoint(s)
        async with channel:
            anonymous = V5(channel, metadata=())
            r = await anonymous(
                "QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="T"), endpoints=here)
            )
            assert r.status.code == pb.CLIENT_ID_REQUIRED
            empty = await v5("SendMessage", pb.SendMessageRequest(messages=[message("E5", b"", "ID-E")]))
            assert empty.status.code == pb.MESSAGE_BODY_EMPTY
            fifo = await v5(
                "SendMessage",
                pb.SendMessageRequest(messages=[message("E5", b"x", "ID-F", message_group="g")]),
            )
            assert fifo.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE  # E5 is NORMAL
            reserved = pb.Message(
                topic=pb.Resource(name="E5"),
                body=b"x",
                user_properties={"TAGS": "no"},
                system_properties=pb.SystemProperties(message_id="ID-R"),
            )
            r = await v5("SendMessage", pb.SendMessageRequest(messages=[reserved]))
            assert r.status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY
            await create_topic(s, "D5", attributes="+message.type=DELAY")
            late = message(
                "D5", b"x", "ID-D", delivery_timestamp=Timestamp(seconds=int(time.time()) + 10 * 86400)
            )
            r = await v5("SendMessage", pb.SendMessageRequest(messages=[late]))
            assert r.status.code == pb.ILLEGAL_DELIVERY_TIME
            r = await v5(
                "AckMessage",
                pb.AckMessageRequest(
                    group=pb.Resource(name="g"),
                    topic=pb.Resource(name="E5"),
                    entries=[pb.AckMessageEntry(message_id="m", receipt_handle="garbage")],
                ),
            )
            assert r.status.code == pb.INVALID_RECEIPT_HANDLE
            r = await v5("RecallMessage", pb.RecallMessageRequest(topic=pb.Resource(name="E5")))
            assert r.status.code == pb.BAD_REQUEST and "recall handle is invalid" in r.status.message
            s.broker.config = s.broker.config.replace(auto_create_topic_enable=False)
            r = await v5("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="Nope"), endpoints=here))
            assert r.status.code == pb.TOPIC_NOT_FOUND and "updateTopic" in r.status.message
            code, _ = await v5.receive(receive_request("Nope", "g"))
            assert code == pb.TOPIC_NOT_FOUND
            # the endpoint still serves
            ok = await v5("SendMessage", pb.SendMessageRequest(messages=[message("E5", b"x", "ID-OK")]))
            assert ok.status.code == pb.OK

    run(tmp_path, test)


ACCOUNTS = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: grpc-writer
    secretKey: writer-secret
    defaultTopicPerm: PUB
    defaultGroupPerm: SUB
"""


def signed(access_key: str, secret: str) -> tuple[tuple[str, str], ...]:
    """The metadata of a call signed as RocketMQ 5 clients sign (HMAC-SHA1 of the date header)."""
    when = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    signature = hmac.new(secret.encode(), when.encode(), hashlib.sha1).hexdigest()
    return (
        *CLIENT,
        ("x-mq-date-time", when),
        (
            "authorization",
            f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={signature}",
        ),
    )


def test_a_broker_with_plain_acl_checks_grpc_calls(tmp_path: Path) -> None:
    accounts = tmp_path / "conf" / "plain_acl.yml"
    accounts.parent.mkdir()
    accounts.write_text(ACCOUNTS)

    async def test(s: Servers) -> None:
        channel, anonymous, here = await endpoint(s)
        async with channel:
            writer = V5(channel, signed("grpc-writer", "writer-secret"))
            forger = V5(channel, signed("grpc-writer", "not-the-secret"))
            stranger = V5(channel, signed("nobody", "x"))
            send = pb.SendMessageRequest(messages=[message("Acl5", b"x", "ID-A")])
            for who in (anonymous, forger, stranger):
                assert (await who("SendMessage", send)).status.code == pb.UNAUTHORIZED
            assert (await writer("SendMessage", send)).status.code == pb.OK
            route = await writer(
                "QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="Acl5"), endpoints=here)
            )
            assert route.status.code == pb.OK
            code, _ = await writer.receive(receive_request("Acl5", "acl_g"))  # PUB only on topics
            assert code == pb.FORBIDDEN
            code, _ = await anonymous.receive(receive_request("Acl5", "acl_g"))
            assert code == pb.UNAUTHORIZED

    run(tmp_path, test, acl_enable=True, acl_file=str(accounts))


def test_a_broker_with_acl_2_checks_grpc_calls(tmp_path: Path) -> None:
    """ACL 2.0 on gRPC: the user name signs as the credential; its ACL decides (the super user
    from initAuthenticationUser passes everything)."""
    async def test(s: Servers) -> None:
        s.broker.auth.create_user(UserInfo(username="grpc-app", password="app-secret"))
        s.broker.auth.put_acl(AclInfo(subject="User:grpc-app", policies=[PolicyInfo(entries=[
            PolicyEntryInfo(resource="Topic:Acl2", actions=["Pub"], decision="Allow")])]), None)
        channel, anonymous, _ = await endpoint(s)
        async with channel:
            app = V5(channel, signed("grpc-app", "app-secret"))
            root = V5(channel, signed("grpc-root", "root-secret"))
            send = pb.SendMessageRequest(messages=[message("Acl2", b"x", "ID-A")])
            for who in (anonymous, V5(channel, signed("grpc-app", "wrong"))):
                assert (await who("SendMessage", send)).status.code == pb.UNAUTHORIZED
            assert (await app("SendMessage", send)).status.code == pb.OK
            code, _ = await app.receive(receive_request("Acl2", "acl2_g"))  # Pub only
            assert code == pb.FORBIDDEN
            code, _ = await root.receive(receive_request("Acl2", "acl2_g"))
            assert code == pb.OK

    run(tmp_path, test, authentication_enabled=True, authorization_enabled=True,
        init_authentication_user='{"username":"grpc-root","password":"root-secret"}')


def test_garbage_and_oversized_calls_fail_alone(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        channel, v5, _ = await endpoint(s)
        async with channel:
            raw = channel.unary_unary(SERVICE + "SendMessage")  # bytes as they are
            garbage = pb.SendMessageResponse.FromString(
                await raw(b"\xff\xff\xff\xff not protobuf", metadata=CLIENT, timeout=10)
            )
            assert garbage.status.code == pb.BAD_REQUEST and "SendMessageRequest" in garbage.status.message
            raw_receive = channel.unary_stream(SERVICE + "ReceiveMessage")
            answers = [
                pb.ReceiveMessageResponse.FromString(r)
                async for r in raw_receive(b"\xff\xff", metadata=CLIENT)
            ]
            assert answers[0].status.code == pb.BAD_REQUEST
            with pytest.raises(grpc.aio.AioRpcError) as huge:
                await raw(b"\x0a" + b"\xff" * (17 * 1024 * 1024), metadata=CLIENT, timeout=30)
            assert huge.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            unknown = channel.unary_unary("/apache.rocketmq.v2.MessagingService/NoSuchCall")
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await unknown(b"", metadata=CLIENT, timeout=10)
            assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
            ok = await v5("SendMessage", pb.SendMessageRequest(messages=[message("G5", b"x", "ID-G")]))
            assert ok.status.code == pb.OK

    run(tmp_path, test)


def test_a_recalled_delay_message_is_not_delivered(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        channel, v5, _ = await endpoint(s)
        async with channel:
            await create_topic(
                s, "Rc5", read_queue_nums=1, write_queue_nums=1, attributes="+message.type=DELAY"
            )
            due = Timestamp(seconds=int(time.time()) + 2)
            handles = []
            for body in (b"keep", b"recall-me"):
                sent = await v5(
                    "SendMessage",
                    pb.SendMessageRequest(
                        messages=[message("Rc5", body, body.decode(), delivery_timestamp=due)]
                    ),
                )
                assert sent.status.code == pb.OK and sent.entries[0].recall_handle
                handles.append(sent.entries[0].recall_handle)
            recalled = await v5(
                "RecallMessage",
                pb.RecallMessageRequest(topic=pb.Resource(name="Rc5"), recall_handle=handles[1]),
            )
            assert recalled.status.code == pb.OK and recalled.message_id == "recall-me"
            schedule = s.broker.schedule
            assert schedule is not None
            await wait_until(lambda: schedule.recalled == 1 and schedule.delivered == 1, timeout=20)
            code, got = await v5.receive(receive_request("Rc5", "rcg", poll_s=2))
            assert code == pb.OK and [m.body for m in got] == [b"keep"]

    run(tmp_path, test)


def test_an_enforcing_broker_serves_grpc_over_tls_only(tmp_path: Path) -> None:
    tls_dir = Path(__file__).resolve().parents[1] / "data" / "tls"
    cert = (tls_dir / "server.crt").read_bytes()
    tls = TlsServerConfig(
        mode="enforcing", cert_path=str(tls_dir / "server.crt"), key_path=str(tls_dir / "server.key")
    )

    async def main() -> None:
        async with running_servers(tmp_path / "store", tls=tls, use_tls=True, grpc_server_port=0) as s:
            assert s.broker.grpc is not None and s.broker.grpc.tls is not None
            target = f"127.0.0.1:{s.broker.grpc.port}"
            send = pb.SendMessageRequest(messages=[message("Tls5", b"x", "ID-T")])
            async with grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(cert)) as secure:
                assert (await V5(secure)("SendMessage", send)).status.code == pb.OK
            async with grpc.aio.insecure_channel(target) as plain:
                with pytest.raises(grpc.aio.AioRpcError):
                    await V5(plain)("SendMessage", send, timeout=5)

    asyncio.run(asyncio.wait_for(main(), 60))
