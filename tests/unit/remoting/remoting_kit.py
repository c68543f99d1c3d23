"""Helpers of the remoting tests (imported by name: test directories are not packages): a
runner per event loop (asyncio, and uvloop when installed), a served echo processor, and a
raw-socket peer that writes and reads frames by hand."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from bolide.protocol import CommandDecoder, RemotingCommand, encode_command_bytes
from bolide.remoting import RemotingClient, RemotingServer, RequestContext

T = TypeVar("T")
LOOPS = ["asyncio"] + (["uvloop"] if importlib.util.find_spec("uvloop") else [])
ECHO = 900  # a request code no RocketMQ processor uses


def _factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(loop: str, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
    """Run a test scenario on a fresh ``loop`` ("asyncio" or "uvloop"), failing after ``timeout`` s."""

    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coro

    with asyncio.Runner(loop_factory=_factory(loop)) as runner:
        return runner.run(bounded())


async def echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    """Answer with the request's ext fields, remark and body."""
    return request.make_response(0, request.remark, ext_fields=request.ext_fields, body=request.body)


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[RemotingServer, RemotingClient, str]]:
    """A started server on 127.0.0.1:0 with the echo processor, a client, and its address."""
    server = RemotingServer("127.0.0.1", 0, **options)
    server.register(ECHO, echo)
    await server.start()
    client = RemotingClient(connect_timeout_ms=2000)
    try:
        yield server, client, server.address
    finally:
        await client.close()
        await server.close(grace_ms=500)


class RawPeer:
    """A plain socket peer that writes and reads frames by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = CommandDecoder()
        self.ready: list[RemotingCommand] = []

    @classmethod
    async def connect(cls, addr: str) -> RawPeer:
        host, port = addr.rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)))

    def send(self, cmd: RemotingCommand) -> None:
        self.writer.write(encode_command_bytes(cmd))

    async def read_command(self, chunk: int = 65536) -> RemotingCommand:
        while not self.ready:
            data = await self.reader.read(chunk)
            if not data:
                raise ConnectionError("the server closed the connection")
            self.ready += self.decoder.feed(data)
        return self.ready.pop(0)

    async def closed_by_peer(self) -> bool:
        """True once the server has closed: reads hit EOF (or a reset). Closes this end too."""
        try:
            while await self.reader.read(65536):
                pass
        except ConnectionError:
            pass
        self.close()
        return True

    def close(self) -> None:
        self.writer.close()
