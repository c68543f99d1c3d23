"""A listening socket that hands each accepted connection to asyncio over TLS or plain TCP,
by the first byte the client sends (RocketMQ's ``permissive`` and ``enforcing`` modes).

The byte is only peeked (``MSG_PEEK``), so the TLS layer still reads the whole ClientHello.
A connection that sends nothing within ``first_byte_timeout`` is closed, so idle sockets
cannot pile up before they are ever served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable

from bolide.remoting.channel import Channel
from bolide.remoting.tls import TLS_HANDSHAKE, TlsMode

log = logging.getLogger(__name__)

FIRST_BYTE_TIMEOUT_S = 30.0
HANDSHAKE_TIMEOUT_S = 10.0


class TlsListener:
    """Accepts on ``sock`` (bound and listening) and serves with ``factory`` channels.

    Offers what :class:`bolide.remoting.RemotingServer` uses of an ``asyncio.Server``:
    ``sockets``, ``close()``, ``wait_closed()`` and ``is_serving()``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 factory: Callable[[], Channel], context: ssl.SSLContext, mode: TlsMode,
                 first_byte_timeout: float = FIRST_BYTE_TIMEOUT_S) -> None:
        self.sockets = [sock]
        self._loop = loop
        self._sock = sock
        self._factory = factory
        self._context = context
        self._mode = mode
        self._first_byte_timeout = first_byte_timeout
        self._waiting: dict[socket.socket, asyncio.TimerHandle] = {}  # accepted, nothing read
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
        for conn, timer in list(self._waiting.items()):
            timer.cancel()
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
            self._waiting[conn] = self._loop.call_later(self._first_byte_timeout, self._drop, conn)
            self._loop.add_reader(conn.fileno(), self._sniff, conn)

    def _drop(self, conn: socket.socket) -> None:
        timer = self._waiting.pop(conn, None)
        if timer is not None:
            timer.cancel()
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(conn.fileno())
        conn.close()

    def _sniff(self, conn: socket.socket) -> None:
        try:
            first = conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            first = b""
        if not first:  # closed before a byte
            self._drop(conn)
            return
        self._waiting.pop(conn).cancel()
        self._loop.remove_reader(conn.fileno())
        tls = first[0] == TLS_HANDSHAKE
        if not tls and self._mode is TlsMode.ENFORCING:
            log.warning("closed a plain connection from %s: tls.server.mode=enforcing accepts TLS "
                        "only (the client needs TLS on, e.g. -Dtls.enable=true)", _peer(conn))
            conn.close()
            return
        task = self._loop.create_task(self._serve(conn, tls))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _serve(self, conn: socket.socket, tls: bool) -> None:
        peer = _peer(conn)
        try:
            if tls:
                await self._loop.connect_accepted_socket(
                    self._factory, conn, ssl=self._context,
                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
            else:
                await self._loop.connect_accepted_socket(self._factory, conn)
        except asyncio.CancelledError:  # the server is closing
            conn.close()
            raise
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            log.warning("TLS handshake with %s failed: %s", peer, exc)
            conn.close()


def _peer(conn: socket.socket) -> str:
    try:
        host, port = conn.getpeername()[:2]
    except OSError:
        return "?"
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
