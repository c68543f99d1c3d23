"""The gRPC port's first-byte relay (bolide.broker.proxy.front) in front of two real TCP servers
on loopback standing in for grpcio's plain and TLS listeners: the listener chosen by the first
byte, the client's own address given back for the relay's source port, bounded buffering when a
side stops reading, a half-close passed on, and either side's end ending the other."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bolide.broker.proxy import front as front_module
from bolide.broker.proxy.front import GrpcFront
from conftest import wait_until

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Listener:
    """A loopback server standing in for a grpcio listener: each connection's peer address
    recorded, served by ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler, self.peers = handler, []  # type: ignore[var-annotated]
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.peers.append(writer.get_extra_info("peername")[:2])
            try:
                await self.handler(reader, writer)
            finally:
                writer.close()

        self.server = await asyncio.start_server(serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Everything read until EOF, answered after EOF with b"got:" before it."""
    data = await reader.read()
    writer.write(b"got:" + data)
    await writer.drain()


Test = Callable[[GrpcFront, Listener, Listener], Awaitable[None]]
LOOP: list[Callable[[], asyncio.AbstractEventLoop]] = []


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def loop_kind(request: pytest.FixtureRequest) -> None:
    """Each test on asyncio's loop and on uvloop's (the broker's)."""
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        LOOP[:] = [uvloop.new_event_loop]
    else:
        LOOP[:] = [asyncio.new_event_loop]
PORT: dict[GrpcFront, int] = {}  # each front's public port


def run(test: Test, plain: Handler = echo,
        tls: Handler = echo, **front_options: Any) -> None:
    async def main() -> None:
        listeners = Listener(plain), Listener(tls)
        ports = [await listener.start() for listener in listeners]
        front = GrpcFront(*ports, **front_options)
        PORT[front] = await front.start("127.0.0.1", 0)
        try:
            await asyncio.wait_for(test(front, *listeners), 30)
        finally:
            front.close()
            front.abort()
            await front.wait_closed()
            for listener in listeners:
                assert listener.server is not None
                listener.server.close()

    with asyncio.Runner(loop_factory=LOOP[0]) as runner:
        runner.run(main())


async def connect(front: GrpcFront) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", PORT[front])


def test_the_first_byte_picks_the_listener_and_the_client_address_is_kept() -> None:
    async def test(front: GrpcFront, plain: Listener, tls: Listener) -> None:
        for first, listener, is_tls in ((b"PRI * HTTP/2.0", plain, False), (b"\x16\x03\x01", tls, True)):
            reader, writer = await connect(front)
            writer.write(first)
            await wait_until(lambda listener=listener: len(listener.peers) == 1, timeout=5)
            host, port = writer.get_extra_info("sockname")[:2]
            relay_host, relay_port = listener.peers[0]
            assert relay_host == "127.0.0.1" and relay_port != port
            assert front.peer(f"127.0.0.1:{relay_port}", is_tls) == f"{host}:{port}"
            assert front.peer(f"127.0.0.1:{relay_port}", not is_tls) == f"127.0.0.1:{relay_port}"
            assert front.peer("10.1.2.3:4", is_tls) == "10.1.2.3:4"  # not relayed: as it is
            writer.write_eof()
            assert await reader.read() == b"got:" + first
            writer.close()
            await wait_until(lambda: front.relayed == 0 and not front.clients, timeout=5)
            # the mapping is gone with the connection
            assert front.peer(f"127.0.0.1:{relay_port}", is_tls) == f"127.0.0.1:{relay_port}"

    run(test)


def test_a_half_close_is_passed_on_both_ways() -> None:
    async def talk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello ")  # before the client is done
        await writer.drain()
        data = await reader.read()  # until the client's half-close
        writer.write(b"after " + data)
        await writer.drain()
        writer.write_eof()

    async def test(front: GrpcFront, plain: Listener, tls: Listener) -> None:
        reader, writer = await connect(front)
        writer.write(b"one ")
        assert await reader.readexactly(6) == b"hello "
        writer.write(b"two")
        writer.write_eof()
        assert await reader.read() == b"after one two"
        writer.close()
        await wait_until(lambda: not front.clients and front.relayed == 0, timeout=5)

    run(test, plain=talk)


def test_a_side_that_stops_reading_stops_the_other_and_nothing_is_lost() -> None:
    size = 24 * 1024 * 1024
    blob = bytes(range(256)) * (size // 256)
    stalled = asyncio.Event()

    async def blast(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(1)
        writer.write(blob)  # far more than the relay may hold: the kernel buffers fill
        await asyncio.sleep(0)
        stalled.set()
        await writer.drain()

    async def test(front: GrpcFront, plain: Listener, tls: Listener) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", PORT[front]))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(b"x")
        await stalled.wait()
        await wait_until(lambda: front.relayed == 1, timeout=5)
        client = next(iter(front.clients))
        await asyncio.sleep(0.3)  # the client reads nothing meanwhile
        peak = client.transport.get_write_buffer_size()
        assert peak <= front_module.HIGH_WATER + 1024 * 1024, peak  # one read past the limit at most
        digest, got = hashlib.sha256(), 0
        while got < size:
            chunk = await reader.read(1 << 20)
            assert chunk
            digest.update(chunk)
            got += len(chunk)
            peak = max(peak, client.transport.get_write_buffer_size())
        assert got == size and digest.digest() == hashlib.sha256(blob).digest()
        assert peak <= front_module.HIGH_WATER + 1024 * 1024, peak
        writer.close()

    run(test, plain=blast)


def test_either_side_ending_ends_the_other() -> None:
    hold = asyncio.Event()

    async def wait(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        await hold.wait()  # the listener ends the connection when told

    async def test(front: GrpcFront, plain: Listener, tls: Listener) -> None:
        # the client resets: the listener's side is closed too
        sock = socket.create_connection(("127.0.0.1", PORT[front]))
        sock.sendall(b"P")
        await wait_until(lambda: front.relayed == 1, timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST
        await wait_until(lambda: front.relayed == 0 and not front.clients, timeout=5)
        # the listener ends: the client sees EOF
        reader, writer = await connect(front)
        writer.write(b"P")
        await wait_until(lambda: front.relayed == 1, timeout=5)
        hold.set()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        await wait_until(lambda: front.relayed == 0 and not front.clients, timeout=5)
        # a listener that is gone: the client is closed
        assert tls.server is not None
        tls.server.close()
        await tls.server.wait_closed()
        reader, writer = await connect(front)
        writer.write(b"\x16")
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()

    run(test, plain=wait)


def test_a_connection_that_sends_nothing_is_closed() -> None:
    async def test(front: GrpcFront, plain: Listener, tls: Listener) -> None:
        reader, writer = await connect(front)
        silent_closed = asyncio.ensure_future(reader.read())
        talker_reader, talker = await connect(front)  # unaffected by the silent one
        talker.write(b"P")
        talker.write_eof()
        assert await talker_reader.read() == b"got:P"
        assert await asyncio.wait_for(silent_closed, 5) == b""
        assert plain.peers and len(plain.peers) == 1 and not tls.peers
        writer.close()
        talker.close()

    run(test, first_byte_timeout=0.3)
