"""A listening socket that reads what may come before a remoting connection's own bytes, then
hands the connection to asyncio over TLS or plain TCP.

Two things may come first, in this order, as RocketMQ's ``HandshakeHandler`` and
``TlsModeHandler`` take them:

- a PROXY protocol header (v1 or v2) from a load balancer (HAProxy, an AWS NLB), when the
  server accepts them: the header is read off the socket, and the address in it becomes the
  channel's remote address (:mod:`bolide.protocol.haproxy`). A malformed, truncated or too
  long header closes only that connection, with a log line naming the cause;
- a TLS handshake (0x16), in ``permissive`` and ``enforcing`` modes: the byte is only peeked
  (``MSG_PEEK``), so the TLS layer still reads the whole ClientHello.

The header is read in as many pieces as it arrives; the bytes after it are never taken off the
socket here. A connection that has not got that far within ``first_byte_timeout`` is closed,
so idle sockets cannot pile up before they are ever served. Only the first bytes of a
connection are looked at; the frames after them go straight to the channel.

A server without TLS does not need this listener: its channels look for a PROXY header in
their first bytes themselves (:class:`~bolide.remoting.channel.Channel` ``accept_proxy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable

from bolide.protocol.haproxy import ProxyHeader, ProxyHeaderError, parse_header, starts_header
from bolide.remoting.channel import Channel
from bolide.remoting.tls import TLS_HANDSHAKE, TlsMode

log = logging.getLogger(__name__)

FIRST_BYTE_TIMEOUT_S = 30.0
HANDSHAKE_TIMEOUT_S = 10.0
PEEK_BYTES = 256  # a v1 header (107 bytes at most) or a v2 header with its usual TLVs at once

ChannelFactory = Callable[..., Channel]  # (header, sniffed=True)


class _Pending:
    """A connection accepted and not served yet."""

    __slots__ = ("header", "proxy_read", "read", "timer")

    def __init__(self, timer: asyncio.TimerHandle, proxy: bool) -> None:
        self.timer = timer
        self.proxy_read = not proxy  # done with (or not looking for) a PROXY header
        self.read = bytearray()  # the header bytes taken off the socket so far
        self.header: ProxyHeader | None = None


class SniffingListener:
    """Accepts on ``sock`` (bound and listening) and serves with ``factory(header, sniffed=True)``
    channels (``header``: the PROXY header read, or None).

    ``context`` and ``mode``: TLS as RocketMQ's ``tls.server.mode`` (None / ``disabled``:
    plain TCP only). ``proxy_protocol``: accept a PROXY protocol header first. Offers what
    :class:`bolide.remoting.RemotingServer` uses of an ``asyncio.Server``: ``sockets``,
    ``close()``, ``wait_closed()`` and ``is_serving()``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, factory: ChannelFactory,
                 context: ssl.SSLContext | None, mode: TlsMode, *, proxy_protocol: bool = True,
                 first_byte_timeout: float = FIRST_BYTE_TIMEOUT_S) -> None:
        self.sockets = [sock]
        self._loop = loop
        self._sock = sock
        self._factory = factory
        self._context = context if mode is not TlsMode.DISABLED else None
        self._mode = mode
        self._proxy = proxy_protocol
        self._first_byte_timeout = first_byte_timeout
        self._waiting: dict[socket.socket, _Pending] = {}  # accepted, not served yet
        self._handshakes: set[asyncio.Task[object]] = set()
        self._serving = True
        sock.setblocking(False)
        loop.add_reader(sock.fileno(), self._accept)

    def is_serving(self) -> bool:
        return self._serving

    def close(self) -> None:
        if not self._serving:
            return
        self._serving = False
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        for conn in list(self._waiting):
            self._drop(conn)
        for task in self._handshakes:
            task.cancel()

    async def wait_closed(self) -> None:
        if self._handshakes:
            await asyncio.wait(list(self._handshakes))

    def _accept(self) -> None:
        for _ in range(64):  # a burst, then back to the loop
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. EMFILE: the next readiness retries
                log.warning("cannot accept a connection: %s", exc)
                return
            conn.setblocking(False)
            timer = self._loop.call_later(self._first_byte_timeout, self._timed_out, conn)
            self._waiting[conn] = _Pending(timer, self._proxy)
            self._loop.add_reader(conn.fileno(), self._readable, conn)

    def _timed_out(self, conn: socket.socket) -> None:
        pending = self._waiting.get(conn)
        if pending is not None and pending.read:
            log.warning("closed the connection from %s: its PROXY protocol header did not arrive "
                        "within %.0f s (%d bytes of it read)", _peer(conn), self._first_byte_timeout,
                        len(pending.read))
        self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        pending = self._waiting.pop(conn, None)
        if pending is not None:
            pending.timer.cancel()
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(conn.fileno())
        conn.close()

    def _readable(self, conn: socket.socket) -> None:
        pending = self._waiting[conn]
        try:
            peeked = conn.recv(PEEK_BYTES, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            peeked = b""
        if not peeked:  # closed before its first bytes
            if pending.read:
                log.warning("closed the connection from %s: it ended within its PROXY protocol "
                            "header (%d bytes of it read)", _peer(conn), len(pending.read))
            self._drop(conn)
            return
        after = 0  # where the connection's own bytes start in ``peeked``
        if not pending.proxy_read:
            try:
                after = self._read_proxy_header(conn, pending, peeked)
            except (ProxyHeaderError, OSError) as exc:
                log.warning("closed the connection from %s: %s", _peer(conn), exc)
                self._drop(conn)
                return
            if after < 0:  # more of the header to come
                return
        if self._context is None:
            self._start(conn, pending, tls=False)
        elif after < len(peeked):
            self._start(conn, pending, tls=peeked[after] == TLS_HANDSHAKE)
        # else: the header is read and the first byte after it has not come yet

    def _read_proxy_header(self, conn: socket.socket, pending: _Pending, peeked: bytes) -> int:
        """Take the PROXY header's bytes off ``conn``: where the connection's own bytes start
        in ``peeked``, or -1 when more of the header is to come."""
        data = pending.read + peeked if pending.read else peeked
        if not pending.read and starts_header(peeked) is False:  # the usual case: no header
            pending.proxy_read = True
            return 0
        header = parse_header(data)
        if header is None:  # every byte so far belongs to the header: take them
            pending.read += _take(conn, len(peeked))
            return -1
        taken = header.length - len(pending.read)
        _take(conn, taken)
        pending.read.clear()
        pending.header, pending.proxy_read = header, True
        return taken

    def _start(self, conn: socket.socket, pending: _Pending, tls: bool) -> None:
        del self._waiting[conn]
        pending.timer.cancel()
        self._loop.remove_reader(conn.fileno())
        if not tls and self._mode is TlsMode.ENFORCING:
            log.warning("closed a plain connection from %s: tls.server.mode=enforcing accepts TLS "
                        "only (the client needs TLS on, e.g. -Dtls.enable=true)", _peer(conn))
            conn.close()
            return
        header = pending.header
        if header is not None and header.client is not None:
            log.debug("connection from %s through the proxy at %s", header.client, _peer(conn))
        task = self._loop.create_task(self._serve(conn, tls, header))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _serve(self, conn: socket.socket, tls: bool, header: ProxyHeader | None) -> None:
        peer = _peer(conn)
        try:
            await self._loop.connect_accepted_socket(
                lambda: self._factory(header, sniffed=True), conn,
                ssl=self._context if tls else None,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if tls else None)
        except asyncio.CancelledError:  # the server is closing
            conn.close()
            raise
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            log.warning("%s with %s failed: %s", "TLS handshake" if tls else "serving the connection",
                        peer, exc)
            conn.close()


def _take(conn: socket.socket, n: int) -> bytes:
    """``n`` bytes already peeked on ``conn``, taken off it."""
    data = conn.recv(n)
    if len(data) != n:
        raise OSError(f"read {len(data)} of the {n} bytes of its PROXY protocol header peeked")
    return data


def _peer(conn: socket.socket) -> str:
    try:
        host, port = conn.getpeername()[:2]
    except OSError:
        return "?"
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
