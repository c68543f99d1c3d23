"""The gRPC port in ``permissive`` mode: TLS and plain-text clients on one port.

A grpcio port is either TLS or plain text, so the endpoint has grpcio listen on two loopback
ports, one of each, and this front takes the public port: it reads a connection's first bytes,
connects to the TLS listener when they begin a TLS handshake (0x16), to the plain one otherwise,
and relays the bytes both ways (RocketMQ's proxy tells the two apart the same way on its one
port). The relay keeps each direction's buffering bounded (a side whose writes back up stops the
other side's reads), passes a half-close on, and closes or aborts one side when the other ends.

grpcio sees the relay's loopback connection as the peer: :meth:`GrpcFront.peer` gives the
client's own address back from the relay's source port, per listener (the kernel may use one
source port towards both). With ``accept_proxy`` a connection may begin with a PROXY protocol
header (a load balancer passing its client on, :mod:`bolide.protocol.haproxy`), as RocketMQ's
proxy accepts on its gRPC port: the header is not relayed, and the client's address is the one
it names; a malformed header closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bolide.protocol.haproxy import HeaderReader, ProxyHeaderError
from bolide.remoting.tls import TLS_HANDSHAKE

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
FIRST_BYTE_TIMEOUT_S = 30.0  # a connection that sends nothing is closed after this
HIGH_WATER = 256 * 1024  # a side's unsent bytes above this pause reading the other side
LOW_WATER = 64 * 1024
BACKLOG = 1024


class _Side(asyncio.Protocol):
    """One end of a relayed connection: what it reads is written to ``other``."""

    __slots__ = ("eof", "other", "transport")

    def __init__(self, other: _Side | None = None) -> None:
        self.transport: Any = None
        self.other = other
        self.eof = False  # this end has read the peer's EOF

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(HIGH_WATER, LOW_WATER)

    def data_received(self, data: bytes) -> None:
        self.other.transport.write(data)  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        self.eof = True
        other = self.other
        if other is None:
            return False
        if other.eof:  # both directions done
            other.transport.close()
            return False
        if not other.transport.is_closing():
            other.transport.write_eof()  # after what it still has to send
        return True  # the other direction goes on

    def connection_lost(self, exc: Exception | None) -> None:
        other = self.other
        if other is not None and other.transport is not None and not other.transport.is_closing():
            if exc is None:
                other.transport.close()  # what it has to send is sent first
            else:
                other.transport.abort()

    def pause_writing(self) -> None:
        if self.other is not None and not self.other.transport.is_closing():
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and not self.other.transport.is_closing():
            self.other.transport.resume_reading()


class _Backend(_Side):
    """The relay's connection to a grpcio listener; its source port is in ``peers`` while open."""

    __slots__ = ("peers", "port")

    def __init__(self, client: _Client, peers: dict[int, _Client]) -> None:
        super().__init__(client)
        self.peers, self.port = peers, -1

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peers.get(self.port) is self.other:
            del self.peers[self.port]
        super().connection_lost(exc)


class _Client(_Side):
    """A client's connection to the public port: relayed once its first bytes are read."""

    __slots__ = ("front", "held", "peer", "proxy", "timer")

    def __init__(self, front: GrpcFront) -> None:
        super().__init__()
        self.front = front
        self.held: list[bytes] = []  # read before the relay is connected
        self.peer = "?"
        self.timer: asyncio.TimerHandle | None = None
        self.proxy = HeaderReader() if front.accept_proxy else None  # until its header is read

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        peername = transport.get_extra_info("peername")
        if isinstance(peername, tuple) and len(peername) >= 2:
            self.peer = f"{peername[0]}:{peername[1]}"  # as grpcio's peer reads (call.peer_address)
        self.timer = self.front.loop.call_later(self.front.first_byte_timeout, transport.close)
        self.front.clients.add(self)

    def data_received(self, data: bytes) -> None:
        if self.other is not None:
            self.other.transport.write(data)
            return
        if self.proxy is not None:
            rest = self._after_proxy_header(data)
            if not rest:
                return
            data = rest
        if self.timer is not None:  # the first bytes: read no more until relayed
            self.timer.cancel()
            self.timer = None
            self.transport.pause_reading()
            self.held.append(data)
            self.front.relay(self, data[0] == TLS_HANDSHAKE)
        else:  # read before the pause took hold
            self.held.append(data)

    def _after_proxy_header(self, data: bytes) -> bytes | None:
        """The bytes after a PROXY protocol header at the start of the connection (all of
        ``data`` when it starts none); None while more of the header is to come or after a
        malformed one (the connection is then closed)."""
        reader = self.proxy
        assert reader is not None
        try:
            rest = reader.feed(data)
        except ProxyHeaderError as exc:
            self.proxy = None
            log.warning("gRPC port: closing the connection from %s: %s", self.peer, exc)
            self.transport.close()
            return None
        if rest is None:
            return None
        self.proxy = None
        client = reader.header.client if reader.header is not None else None
        if client is not None:
            self.peer = f"{client[0]}:{client[1]}"
        return rest

    def eof_received(self) -> bool:
        if self.other is None:
            self.eof = True
            return self.timer is None  # connecting: its EOF follows the first bytes
        return super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.front.clients.discard(self)
        super().connection_lost(exc)


class GrpcFront:
    """The public gRPC port, relaying to grpcio's ``plain_port`` and ``tls_port`` on loopback."""

    def __init__(self, plain_port: int, tls_port: int,
                 first_byte_timeout: float = FIRST_BYTE_TIMEOUT_S, *, accept_proxy: bool = False) -> None:
        self.loop = asyncio.get_running_loop()
        self.first_byte_timeout = first_byte_timeout
        self.accept_proxy = accept_proxy  # a PROXY protocol header may come first
        self.clients: set[_Client] = set()
        self._ports = {False: plain_port, True: tls_port}
        self._peers: dict[bool, dict[int, _Client]] = {False: {}, True: {}}  # source port -> client
        self._connecting: set[asyncio.Task[None]] = set()
        self.counts = {"plain": 0, "tls": 0}  # connections relayed since the start, by kind
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port); the port bound."""
        self._server = await self.loop.create_server(
            lambda: _Client(self), host or None, port, backlog=BACKLOG, reuse_address=True)
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def relayed(self) -> int:
        """How many client connections are relayed now."""
        return len(self._peers[False]) + len(self._peers[True])

    def peer(self, address: str, tls: bool) -> str:
        """The client's ``host:port`` for grpcio's peer ``address`` (``host:port``) of a call
        over TLS or not: the relayed client's when it is one of the relay's connections."""
        host, _, port = address.rpartition(":")
        if host == LOOPBACK and port.isdigit():
            client = self._peers[tls].get(int(port))
            if client is not None:
                return client.peer
        return address

    def relay(self, client: _Client, tls: bool) -> None:
        """Connect ``client`` (reading paused, its first bytes held) to its listener."""
        task = self.loop.create_task(self._connect(client, tls))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, client: _Client, tls: bool) -> None:
        peers = self._peers[tls]
        try:
            transport, backend = await self.loop.create_connection(
                lambda: _Backend(client, peers), LOOPBACK, self._ports[tls])
        except OSError as exc:
            log.warning("gRPC port: cannot relay %s to the %s listener: %s", client.peer,
                        "TLS" if tls else "plain", exc)
            client.transport.abort()
            return
        except asyncio.CancelledError:
            client.transport.abort()
            raise
        if client.transport.is_closing() or transport.is_closing():  # one ended meanwhile
            transport.close()
            client.transport.close()
            return
        backend.port = transport.get_extra_info("sockname")[1]
        peers[backend.port] = client  # before grpcio reads a call of it
        self.counts["tls" if tls else "plain"] += 1
        client.other = backend
        held, client.held = client.held, []
        transport.writelines(held)
        if client.eof:
            transport.write_eof()
        else:
            client.transport.resume_reading()

    def close(self) -> None:
        """Stop accepting; open relays go on (:meth:`abort` ends them)."""
        if self._server is not None:
            self._server.close()

    def abort(self) -> None:
        """End every relay and connection attempt at once."""
        for task in self._connecting:
            task.cancel()
        for client in list(self.clients):
            client.transport.abort()
            if client.other is not None:
                client.other.transport.abort()
        self.clients.clear()
        for peers in self._peers.values():
            peers.clear()

    async def wait_closed(self) -> None:
        if self._connecting:
            await asyncio.wait(list(self._connecting))
        if self._server is not None:
            await self._server.wait_closed()
