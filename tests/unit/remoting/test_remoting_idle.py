"""Idle connections (RocketMQ's serverChannelMaxIdleTimeSeconds): a server closes a connection
that read and wrote nothing for the timeout and has no request in progress; traffic or a
request being processed keeps it. Checks run at given times (``close_idle(now)``), and once
with the server's own timer."""

from __future__ import annotations

import asyncio

import pytest
from remoting_kit import ECHO, LOOPS, run, serving

from bolide.protocol import RemotingCommand
from bolide.remoting import RequestContext


@pytest.mark.parametrize("loop", LOOPS)
def test_idle_connections_are_closed_and_busy_ones_kept(loop: str) -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def slow(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            await release.wait()
            return request.make_response()

        async with serving(idle_timeout_s=3600) as (server, client, addr):  # no timer run here
            server.register(ECHO + 1, slow)
            server.idle_timeout_s = 10
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)
            [quiet] = server.channels
            assert server.close_idle(100.0) == 0  # first sight
            assert server.close_idle(109.0) == 0
            await client.invoke(addr, RemotingCommand.request(ECHO), 2000)  # traffic: a new start
            assert server.close_idle(111.0) == 0 and server.close_idle(120.0) == 0

            busy = asyncio.ensure_future(client.invoke(addr, RemotingCommand.request(ECHO + 1), 5000))
            async with asyncio.timeout(5):
                while quiet.idle:
                    await asyncio.sleep(0)
            assert server.close_idle(200.0) == 0  # a request in progress: kept, however long
            assert server.close_idle(300.0) == 0
            release.set()
            await busy
            assert server.close_idle(301.0) == 0  # its answer was traffic
            assert server.close_idle(311.0) == 1
            async with asyncio.timeout(5):
                await quiet.wait_closed()
            # the client reconnects on its next call
            assert (await client.invoke(addr, RemotingCommand.request(ECHO), 2000)).code == 0

    run(loop, scenario())


@pytest.mark.parametrize("loop", LOOPS)
def test_the_servers_timer_closes_a_silent_connection(loop: str) -> None:
    async def scenario() -> None:
        async with serving(idle_timeout_s=0.2) as (_, _, addr):
            reader, writer = await asyncio.open_connection(*addr.rsplit(":", 1))
            async with asyncio.timeout(10):
                assert await reader.read() == b""  # closed by the server
            writer.close()

    run(loop, scenario())
