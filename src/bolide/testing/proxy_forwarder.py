"""A loopback TCP forwarder that begins every connection it relays with a PROXY protocol
header, as HAProxy (``send-proxy`` / ``send-proxy-v2``) or an AWS NLB with proxy protocol on
does in front of a NameServer or a broker::

    header = lambda client, server: encode_v2(("198.51.100.7", 40001), server)
    async with ProxyForwarder("127.0.0.1:10911", header) as fwd:
        await remoting_client.invoke(fwd.address, request)   # the broker sees 198.51.100.7:40001

``header(client, server)`` gets the connecting client's and the target's ``(host, port)`` and
returns the bytes to send first (None: the v1 header of the real client). :attr:`upstream` lists
the forwarder's own ``host:port`` towards the target, one per relayed connection (the socket
peer the server sees).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Self

from bolide.protocol.haproxy import Address, encode_v1

log = logging.getLogger(__name__)

HeaderFn = Callable[[Address, Address], bytes]


class ProxyForwarder:
    """Relays connections to ``target`` (``host:port``) on 127.0.0.1, a header first."""

    def __init__(self, target: str, header: HeaderFn | None = None) -> None:
        host, _, port = target.rpartition(":")
        self.target: Address = (host, int(port))
        self.header: HeaderFn = header or encode_v1
        self.upstream: list[str] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        if self._server is None:
            raise RuntimeError("the forwarder is not started: use it in `async with`")
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        local = up_writer.get_extra_info("sockname")
        self.upstream.append(f"{local[0]}:{local[1]}")
        try:
            up_writer.write(self.header(writer.get_extra_info("peername")[:2], self.target))
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        except Exception:  # a header function's error: this connection ends, the others go on
            log.exception("forwarding a connection to %s:%d failed", *self.target)
        finally:
            for w in (writer, up_writer):
                w.close()
            self._tasks.discard(task)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until EOF, then half-close ``writer``."""
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    with contextlib.suppress(OSError):
        writer.write_eof()
