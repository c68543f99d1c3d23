"""Flow control over real TCP: large bodies, a slow reader, in-flight and queue limits."""

from __future__ import annotations

import asyncio

import pytest
from remoting_kit import ECHO, LOOPS, RawPeer, run, serving

from bolide.protocol import RemotingCommand, encode_command_bytes
from bolide.remoting import RequestContext

pytestmark = pytest.mark.parametrize("loop", LOOPS)
MIB = 1024 * 1024


def test_eight_mib_bodies_round_trip(loop: str) -> None:
    payload = bytes(range(256)) * (8 * MIB // 256)
    store = memoryview(payload)

    async def sliced(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        assert request.body == payload
        half = len(store) // 2  # the body as store slices, handed to writelines uncopied
        return request.make_response(body=[store[:half], store[half:]])

    async def scenario() -> None:
        async with serving() as (server, client, addr):
            server.register(ECHO + 1, sliced)
            response = await client.invoke(addr, RemotingCommand.request(ECHO + 1, body=payload), 5000)
            assert response.body == payload

    run(loop, scenario(), timeout=15)


def test_a_slow_reader_pauses_its_connection_without_deadlock(loop: str) -> None:
    n, size = 24, MIB
    blob = b"r" * size

    async def scenario() -> None:
        unwritable = asyncio.Event()

        async def big(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            if not ctx.channel.writable:
                unwritable.set()
            return request.make_response(body=blob)

        async with serving(write_high_water=256 * 1024, write_low_water=64 * 1024) as (server, client, addr):
            server.register(ECHO + 1, big)
            slow = await RawPeer.connect(addr)
            for opaque in range(n):
                slow.send(RemotingCommand.request(ECHO + 1, opaque=opaque))
            await unwritable.wait()  # its responses fill the write buffer: reading stops
            channel = next(ch for ch in server.channels if not ch.writable)
            assert not channel.reading
            # another client is served meanwhile
            assert (await client.invoke(addr, RemotingCommand.request(ECHO, body=b"hi"), 2000)).body == b"hi"
            got = [await slow.read_command(chunk=16 * 1024) for _ in range(n)]
            assert sorted(r.opaque for r in got) == list(range(n))
            assert all(r.body == blob for r in got)
            assert channel.writable and channel.reading
            slow.send(RemotingCommand.request(ECHO, opaque=99))
            assert (await slow.read_command()).opaque == 99
            slow.close()

    run(loop, scenario(), timeout=15)


def test_in_flight_requests_are_bounded_per_connection(loop: str) -> None:
    limit, n = 4, 20

    async def scenario() -> None:
        active = 0
        peak = 0
        full = asyncio.Event()
        release = asyncio.Event()

        async def gated(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            if active == limit:
                full.set()
            await release.wait()
            active -= 1
            return request.make_response(body=request.body)

        async with serving(max_in_flight=limit) as (server, client, addr):
            server.register(ECHO + 1, gated)
            calls = [asyncio.ensure_future(client.invoke(
                addr, RemotingCommand.request(ECHO + 1, body=b"%d" % i), 5000)) for i in range(n)]
            await full.wait()
            channel = server.channels[0]
            assert channel.in_flight == limit
            release.set()
            responses = await asyncio.gather(*calls)
            assert [r.body for r in responses] == [b"%d" % i for i in range(n)]
            assert peak == limit and channel.idle

    run(loop, scenario())


def test_a_full_queue_pauses_reading_until_requests_finish(loop: str) -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        started = asyncio.Event()

        async def gated(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            started.set()
            await release.wait()
            return request.make_response()

        async with serving(max_in_flight=1, max_queued=2) as (server, _, addr):
            server.register(ECHO + 1, gated)
            peer = await RawPeer.connect(addr)
            # one write, read at once by the server: one request runs, two fill the queue
            peer.writer.write(b"".join(encode_command_bytes(RemotingCommand.request(ECHO + 1, opaque=i))
                                       for i in range(3)))
            await started.wait()
            channel = server.channels[0]
            assert not channel.reading and channel.in_flight == 1
            release.set()
            got = sorted([(await peer.read_command()).opaque for _ in range(3)])
            assert got == [0, 1, 2] and channel.reading
            peer.close()

    run(loop, scenario())

