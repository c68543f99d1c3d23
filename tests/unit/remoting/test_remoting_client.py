"""RemotingClient over real TCP: calls back from the server, timeouts, reconnects, failures."""

from __future__ import annotations

import asyncio

import pytest
from remoting_kit import ECHO, LOOPS, run, serving

from bolide.errors import BolideError
from bolide.protocol import ONEWAY_FLAG, RemotingCommand, RequestCode, ResponseCode
from bolide.remoting import (
    RemotingClient,
    RemotingClosedError,
    RemotingConnectError,
    RemotingError,
    RemotingSendError,
    RemotingServer,
    RemotingTimeoutError,
    RequestContext,
    split_address,
)
from bolide.remoting import run as run_main

loops = pytest.mark.parametrize("loop", LOOPS)


@loops
def test_server_calls_the_client_back_on_its_own_connection(loop: str) -> None:
    async def scenario() -> None:
        notified: asyncio.Queue[RemotingCommand] = asyncio.Queue()

        async def check_state(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            return request.make_response(ResponseCode.SUCCESS, f"state of {request.ext_fields['msgId']}")

        async def ids_changed(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            notified.put_nowait(request)
            return request.make_response(remark="never sent: the request is oneway")

        async def heartbeat(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            ctx.channel.oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                       ext_fields={"consumerGroup": "cg"}))
            check = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, ext_fields={"msgId": "M1"})
            answer = await ctx.channel.invoke(check, 2000)
            unknown = await ctx.channel.invoke(RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY),
                                               2000)
            return request.make_response(remark=f"{answer.remark}|{unknown.code}|{ctx.remote_address}")

        async with serving() as (server, client, addr):
            server.register(RequestCode.HEART_BEAT, heartbeat)
            client.register(RequestCode.CHECK_TRANSACTION_STATE, check_state)
            client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ids_changed)
            response = await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT), 3000)
            local = (await client.get_channel(addr)).local_address
            assert response.remark == f"state of M1|{ResponseCode.REQUEST_CODE_NOT_SUPPORTED}|{local}"
            note = await notified.get()
            assert note.flag == ONEWAY_FLAG and note.ext_fields == {"consumerGroup": "cg"}
            assert len(server.channels) == 1

    run(loop, scenario())


@loops
def test_timeout_raises_and_the_late_response_is_dropped(loop: str) -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        answered = asyncio.Event()

        async def late(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            await release.wait()
            answered.set()
            return request.make_response(remark="too late")

        async with serving() as (server, client, addr):
            server.register(ECHO + 1, late)
            request = RemotingCommand.request(ECHO + 1)
            with pytest.raises(RemotingTimeoutError, match="within 50 ms") as caught:
                await client.invoke(addr, request, 50)
            assert caught.value.retriable and isinstance(caught.value, BolideError)
            release.set()
            await answered.wait()
            response = await client.invoke(addr, RemotingCommand.request(ECHO, body=b"next"), 2000)
            assert response.body == b"next" and response.remark is None
            assert not (await client.get_channel(addr))._pending

    run(loop, scenario())


@loops
def test_reconnects_after_the_server_restarts(loop: str) -> None:
    async def scenario() -> None:
        async with serving() as (server, client, addr):
            first = await client.get_channel(addr)
            assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0
            lost = asyncio.Event()
            client.on_channel_close(lambda ch: lost.set())
            port = server.port
            await server.close()
            await lost.wait()
            assert client.addresses == []
            with pytest.raises(RemotingConnectError, match="could not connect") as caught:
                await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            assert caught.value.retriable
            again = RemotingServer("127.0.0.1", port)
            again.register(ECHO, lambda ctx, r: _answer(r, "new server"))
            async with again:
                response = await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
                assert response.remark == "new server"
                assert await client.get_channel(addr) is not first

    run(loop, scenario())


async def _answer(request: RemotingCommand, remark: str) -> RemotingCommand:
    return request.make_response(remark=remark)


@loops
def test_pending_calls_fail_when_the_connection_drops(loop: str) -> None:
    async def scenario() -> None:
        started = asyncio.Event()

        async def hang(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            started.set()
            ctx.channel.abort()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async with serving() as (server, client, addr):
            server.register(ECHO + 1, hang)
            with pytest.raises(RemotingSendError, match="closed") as caught:
                await client.invoke(addr, RemotingCommand.request(ECHO + 1), 5000)
            assert caught.value.retriable and started.is_set()
            assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0

    run(loop, scenario())


@loops
def test_concurrent_first_calls_share_one_connection(loop: str) -> None:
    async def scenario() -> None:
        async with serving() as (server, client, addr):
            channels = await asyncio.gather(*(client.get_channel(addr) for _ in range(10)))
            assert len(set(map(id, channels))) == 1 and len(server.channels) == 1

    run(loop, scenario())


@loops
def test_a_reused_opaque_gets_a_fresh_one(loop: str) -> None:
    async def scenario() -> None:
        async with serving() as (_, client, addr):
            first, second = (RemotingCommand.request(ECHO, body=b, opaque=5) for b in (b"a", b"b"))
            answers = await asyncio.gather(client.invoke(addr, first, 2000),
                                           client.invoke(addr, second, 2000))
            assert [a.body for a in answers] == [b"a", b"b"]
            assert first.opaque == 5 != second.opaque == answers[1].opaque

    run(loop, scenario())


@loops
def test_oneway_from_the_client(loop: str) -> None:
    async def scenario() -> None:
        got: asyncio.Queue[RemotingCommand] = asyncio.Queue()

        async def record(ctx: RequestContext, request: RemotingCommand) -> None:
            got.put_nowait(request)

        async with serving() as (server, client, addr):
            server.register(RequestCode.UPDATE_CONSUMER_OFFSET, record)
            await client.invoke_oneway(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                                     ext_fields={"offset": "5"}))
            request = await got.get()
            assert request.is_oneway and request.ext_fields == {"offset": "5"}

    run(loop, scenario())


@loops
def test_a_closed_client_refuses_calls(loop: str) -> None:
    async def scenario() -> None:
        async with serving() as (_, client, addr):
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            await client.close()
            with pytest.raises(RemotingClosedError) as caught:
                await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            assert not caught.value.retriable

    run(loop, scenario())


@loops
def test_connection_refused(loop: str) -> None:
    async def scenario() -> None:
        server = RemotingServer("127.0.0.1", 0)
        await server.start()
        addr = server.address
        await server.close()
        async with RemotingClient() as client:
            with pytest.raises(RemotingConnectError, match=addr):
                await client.invoke_oneway(addr, RemotingCommand.request(ECHO))

    run(loop, scenario())


def test_error_hierarchy() -> None:
    for cls in (RemotingConnectError, RemotingTimeoutError, RemotingSendError):
        assert issubclass(cls, RemotingError) and cls.retriable
    assert issubclass(RemotingError, BolideError) and not RemotingClosedError.retriable


def test_split_address() -> None:
    assert split_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert split_address("[::1]:10911") == ("::1", 10911)
    for bad in ("localhost", ":9876", "host:", "host:70000", "host:x"):
        with pytest.raises(ValueError, match="host:port"):
            split_address(bad)


def test_run_prefers_uvloop_when_installed() -> None:
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    expected = "uvloop" if "uvloop" in LOOPS else "asyncio"
    assert run_main(loop_module()).startswith(expected)


@pytest.mark.parametrize("loop", LOOPS)
def test_invoke_many_answers_in_order_and_times_out_as_one(loop: str) -> None:
    """Requests written together come back in their order; when some are never answered, one
    RemotingTimeoutError names them and no pending entry is left behind."""
    silent = 901

    async def never(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def scenario() -> None:
        async with serving() as (server, client, addr):
            server.register(silent, never)
            cmds = [RemotingCommand.request(ECHO, body=b"%d" % i) for i in range(6)]
            responses = await client.invoke_many(addr, cmds, 2000)
            assert [r.body for r in responses] == [b"%d" % i for i in range(6)]
            assert [r.opaque for r in responses] == [c.opaque for c in cmds]
            mixed = [RemotingCommand.request(ECHO), RemotingCommand.request(silent),
                     RemotingCommand.request(silent)]
            with pytest.raises(RemotingTimeoutError, match="and 1 other requests"):
                await client.invoke_many(addr, mixed, 300)
            channel = await client._channel_within(addr, 1000)
            assert channel._pending == {}

    run(loop, scenario())
