"""RemotingServer over real TCP on 127.0.0.1: answers, processing rules, broken peers, hooks."""

from __future__ import annotations

import asyncio
import logging
import struct

import pytest
from remoting_kit import ECHO, LOOPS, RawPeer, run, serving

from bolide.protocol import (
    RESPONSE_FLAG,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_command_bytes,
)
from bolide.remoting import Channel, RemotingServer, RequestContext

pytestmark = pytest.mark.parametrize("loop", LOOPS)


@pytest.mark.parametrize("codec", [SerializeType.JSON, SerializeType.ROCKETMQ], ids=["json", "binary"])
def test_round_trip_answers_in_the_request_codec(loop: str, codec: SerializeType) -> None:
    async def scenario() -> None:
        async with serving() as (server, client, addr):
            request = RemotingCommand.request(ECHO, ext_fields={"topic": "T", "queueId": "3"},
                                              body=b"payload", serialize_type=codec, remark="hi")
            response = await client.invoke(addr, request, 2000)
            assert response.code == ResponseCode.SUCCESS
            assert response.serialize_type == codec
            assert response.opaque == request.opaque
            assert response.flag == RESPONSE_FLAG
            assert response.ext_fields == {"topic": "T", "queueId": "3"}
            assert response.body == b"payload" and response.remark == "hi"
            assert server.port == int(addr.rsplit(":", 1)[1]) != 0

    run(loop, scenario())


def test_concurrent_invokes_are_matched_by_opaque(loop: str) -> None:
    n = 40
    arrived: list[asyncio.Future[None]] = []

    async def scenario() -> None:
        everyone = asyncio.Event()

        async def gated(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            gate = asyncio.get_running_loop().create_future()
            arrived.append(gate)
            if len(arrived) == n:
                everyone.set()
            await gate
            return request.make_response(body=request.body)

        async with serving() as (server, client, addr):
            server.register(ECHO + 1, gated)
            calls = [asyncio.ensure_future(client.invoke(
                addr, RemotingCommand.request(ECHO + 1, body=b"%d" % i), 5000)) for i in range(n)]
            await everyone.wait()
            for gate in reversed(arrived):  # answer in the reverse order of arrival
                gate.set_result(None)
            responses = await asyncio.gather(*calls)
            assert [r.body for r in responses] == [b"%d" % i for i in range(n)]
            assert len(server.channels) == 1  # one pooled connection carried them all

    run(loop, scenario())


def test_oneway_request_is_processed_and_never_answered(loop: str) -> None:
    async def scenario() -> None:
        seen: list[RemotingCommand] = []

        async def record(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            seen.append(request)
            return request.make_response(remark="must not be sent")

        async with serving() as (server, _, addr):
            server.register(RequestCode.UPDATE_CONSUMER_OFFSET, record)
            server.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, record)  # raises nothing either
            peer = await RawPeer.connect(addr)
            peer.send(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, opaque=1, oneway=True))
            peer.send(RemotingCommand.request(9999, opaque=2, oneway=True))  # unknown: still silent
            peer.send(RemotingCommand.request(ECHO, opaque=3))
            first = await peer.read_command()
            assert first.opaque == 3 and first.code == ResponseCode.SUCCESS
            assert [r.opaque for r in seen] == [1]
            peer.close()

    run(loop, scenario())


def test_unknown_code_gets_request_code_not_supported(loop: str) -> None:
    async def scenario() -> None:
        async with serving() as (_, client, addr):
            response = await client.invoke(addr, RemotingCommand.request(9999), 2000)
            assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert response.remark == " request type 9999 not supported"

    run(loop, scenario())


def test_processor_error_answers_system_error_and_keeps_the_connection(loop: str) -> None:
    async def boom(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("disk on fire")

    async def scenario() -> None:
        async with serving() as (server, client, addr):
            server.register(RequestCode.SEND_MESSAGE_V2, boom)
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                              serialize_type=SerializeType.ROCKETMQ)
            response = await client.invoke(addr, request, 2000)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert response.remark == "ValueError: disk on fire"
            assert response.serialize_type == SerializeType.ROCKETMQ
            channel = server.channels[0]
            assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
            assert server.channels == [channel] and channel.is_active

    run(loop, scenario())


def _bad_header_frame() -> bytes:
    header = b"{not json"
    return struct.pack(">ii", 4 + len(header), len(header)) + header


@pytest.mark.parametrize("garbage", [
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http"),
    pytest.param(struct.pack(">ii", 0x7FFFFFF0, 10), id="huge-length"),
    pytest.param(struct.pack(">ii", 100, 200) + b"x" * 100, id="header-past-frame"),
    pytest.param(_bad_header_frame(), id="undecodable-header"),
    pytest.param(struct.pack(">ii", 100, 2 << 24 | 10) + b"x" * 96, id="unknown-codec"),
])
def test_a_broken_peer_is_dropped_and_others_are_served(loop: str, garbage: bytes,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with serving() as (server, client, addr):
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)  # a good peer, connected
            closed: asyncio.Queue[Channel] = asyncio.Queue()
            server.on_channel_close(closed.put_nowait)
            bad = await RawPeer.connect(addr)
            bad.send(RemotingCommand.request(ECHO, opaque=7))  # served before the garbage
            assert (await bad.read_command()).opaque == 7
            bad.writer.write(garbage)
            assert await bad.closed_by_peer()
            dropped = await closed.get()
            assert dropped.remote_address == f"127.0.0.1:{bad.writer.get_extra_info('sockname')[1]}"
            response = await client.invoke(addr, RemotingCommand.request(ECHO, body=b"still here"), 2000)
            assert response.body == b"still here" and len(server.channels) == 1
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert any(dropped.remote_address in w for w in warnings), warnings

    with caplog.at_level(logging.WARNING, logger="bolide.remoting"):
        run(loop, scenario())


def test_a_truncated_frame_then_close_only_drops_that_peer(loop: str) -> None:
    async def scenario() -> None:
        async with serving() as (server, client, addr):
            closed = asyncio.Event()
            server.on_channel_close(lambda ch: closed.set())
            peer = await RawPeer.connect(addr)
            frame = encode_command_bytes(RemotingCommand.request(ECHO, body=b"x" * 1000))
            peer.writer.write(frame[: len(frame) // 2])
            await peer.writer.drain()
            peer.close()
            await closed.wait()
            assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
            assert len(server.channels) == 1

    run(loop, scenario())


def test_channel_open_and_close_callbacks(loop: str) -> None:
    async def scenario() -> None:
        async with serving() as (server, client, addr):
            opened: asyncio.Queue[Channel] = asyncio.Queue()
            closed: asyncio.Queue[Channel] = asyncio.Queue()
            server.on_channel_open(opened.put_nowait)
            server.on_channel_open(lambda ch: 1 / 0)  # a failing callback is logged, not fatal
            server.on_channel_close(closed.put_nowait)
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            channel = await opened.get()
            assert channel.remote_address == (await client.get_channel(addr)).local_address
            channel.attrs["clientId"] = "10.0.0.1@1"
            await client.close()
            gone = await closed.get()
            assert gone is channel and gone.attrs["clientId"] == "10.0.0.1@1" and not gone.is_active
            assert server.channels == []

    run(loop, scenario())


def test_close_lets_running_requests_answer_then_closes_connections(loop: str) -> None:
    async def scenario() -> None:
        started = asyncio.Event()
        release = asyncio.Event()

        async def slow(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            started.set()
            await release.wait()
            return request.make_response(remark="finished")

        async with serving() as (server, client, addr):
            server.register(ECHO + 2, slow)
            closed = asyncio.Event()
            client.on_channel_close(lambda ch: closed.set())
            call = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(ECHO + 2), 5000))
            await started.wait()
            closing = asyncio.ensure_future(server.close(grace_ms=3000))
            release.set()  # close() runs first: the request finishes while the server closes
            assert (await call).remark == "finished"
            await closing
            assert not server.is_serving
            await closed.wait()
            assert server.channels == []

    run(loop, scenario())


def test_close_cancels_requests_that_outlive_the_grace_period(loop: str) -> None:
    async def scenario() -> None:
        started = asyncio.Event()
        cancelled = asyncio.Event()

        async def stuck(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                cancelled.set()
            raise AssertionError("unreachable")

        server = RemotingServer("127.0.0.1", 0)
        server.register(ECHO, stuck)
        await server.start()
        peer = await RawPeer.connect(server.address)
        peer.send(RemotingCommand.request(ECHO))
        await started.wait()
        await server.close(grace_ms=50)
        await cancelled.wait()
        assert await peer.closed_by_peer()

    run(loop, scenario())


def test_a_lost_connection_s_requests_run_on_until_close_cancels_them(loop: str) -> None:
    async def scenario() -> None:
        started: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()
        outcome: asyncio.Queue[str] = asyncio.Queue()

        async def slow(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            gate = asyncio.get_running_loop().create_future()
            started.put_nowait(gate)
            try:
                await gate
            except asyncio.CancelledError:
                outcome.put_nowait("cancelled")
                raise
            outcome.put_nowait("finished")
            return request.make_response()

        server = RemotingServer("127.0.0.1", 0)
        server.register(ECHO, slow)
        await server.start()
        lost: asyncio.Queue[Channel] = asyncio.Queue()
        server.on_channel_close(lost.put_nowait)

        async def leave_mid_request() -> asyncio.Future[None]:
            peer = await RawPeer.connect(server.address)
            peer.send(RemotingCommand.request(ECHO))
            gate = await started.get()
            peer.close()
            await lost.get()
            return gate

        (await leave_mid_request()).set_result(None)  # finishes although its peer left
        assert await outcome.get() == "finished"
        await leave_mid_request()  # never released: close() cancels it
        await server.close(grace_ms=50)
        assert await outcome.get() == "cancelled"

    run(loop, scenario())


def test_port_is_unavailable_before_start(loop: str) -> None:
    server = RemotingServer("127.0.0.1", 0)
    with pytest.raises(RuntimeError, match="start"):
        _ = server.port
