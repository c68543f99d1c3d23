"""RemotingServer: listens on a TCP port and serves remoting connections on the event loop.

::

    server = RemotingServer("0.0.0.0", 10911)
    server.register(RequestCode.SEND_MESSAGE_V2, send_processor)
    server.on_channel_close(consumer_manager.drop_channel)
    await server.start()
    ...
    await server.close()

Each connection is a :class:`~bolide.remoting.channel.Channel`; processors get it as
``ctx.channel`` and may call the client back on it (NOTIFY_CONSUMER_IDS_CHANGED,
CHECK_TRANSACTION_STATE). Run the process's loop with :func:`run` to get uvloop when it is
installed (``pip install 'bolide[speed]'``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Self, TypeVar

from bolide.protocol import MAX_FRAME_SIZE
from bolide.protocol.haproxy import ProxyHeader
from bolide.remoting.channel import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_QUEUED_BYTES,
    DEFAULT_WRITE_HIGH_WATER,
    DEFAULT_WRITE_LOW_WATER,
    Channel,
    ChannelCallback,
    format_address,
)
from bolide.remoting.hooks import RPCHook
from bolide.remoting.listener import SniffingListener
from bolide.remoting.processor import Processor, ProcessorTable
from bolide.remoting.tls import TlsMode

log = logging.getLogger(__name__)

T = TypeVar("T")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's loop factory when uvloop is importable, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop  # type: ignore[no-any-return]


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """``asyncio.run(main)`` on uvloop when it is installed."""
    with asyncio.Runner(debug=debug, loop_factory=event_loop_factory()) as runner:
        return runner.run(main)


class RemotingServer:
    """A remoting listener with a processor table, channel hooks and graceful close.

    ``port=0`` binds a free port; :attr:`port` tells which. ``processors`` may be a table
    shared with another server (a broker's VIP port serves the same codes). ``hooks`` run
    around every request (e.g. :class:`~bolide.remoting.hooks.AclVerifyRPCHook`). The channel
    limits (``max_in_flight`` concurrent requests per connection, queue bounds, write
    buffer high/low water marks in bytes) are described in :mod:`bolide.remoting.channel`.
    ``idle_timeout_s`` > 0 closes connections that read and wrote nothing for that long and
    have no request in progress (RocketMQ's ``serverChannelMaxIdleTimeSeconds``, 120).
    ``proxy_protocol`` accepts a PROXY protocol header (v1 or v2) at the start of a connection,
    as RocketMQ does, and takes the client's address from it
    (:mod:`bolide.remoting.listener`).
    """

    def __init__(
        self,
        host: str | None = "0.0.0.0",
        port: int = 10911,
        *,
        processors: ProcessorTable | None = None,
        hooks: Iterable[RPCHook] = (),
        max_frame_size: int = MAX_FRAME_SIZE,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_queued: int = DEFAULT_MAX_QUEUED,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        write_high_water: int = DEFAULT_WRITE_HIGH_WATER,
        write_low_water: int = DEFAULT_WRITE_LOW_WATER,
        backlog: int = 1024,
        tls: ssl.SSLContext | None = None,
        tls_mode: TlsMode = TlsMode.DISABLED,
        idle_timeout_s: float = 0.0,
        proxy_protocol: bool = True,
    ) -> None:
        if tls is None and tls_mode is not TlsMode.DISABLED:
            raise ValueError(f"TLS mode {tls_mode.value} needs an SSL context")
        self.host = host
        self.tls = tls
        self.tls_mode = tls_mode
        self.proxy_protocol = proxy_protocol
        self._requested_port = port
        self.processors = processors if processors is not None else ProcessorTable()
        for hook in hooks:
            self.processors.add_hook(hook)
        self._channel_options: dict[str, Any] = {
            "max_frame_size": max_frame_size, "max_in_flight": max_in_flight,
            "max_queued": max_queued, "max_queued_bytes": max_queued_bytes,
            "write_high_water": write_high_water, "write_low_water": write_low_water,
        }
        self._backlog = backlog
        self._server: asyncio.Server | SniffingListener | None = None
        self._channels: set[Channel] = set()
        # lost connections whose requests are still being processed, kept for close()
        self._draining: dict[Channel, asyncio.Future[None]] = {}
        self._open_callbacks: list[ChannelCallback] = []
        self._close_callbacks: list[ChannelCallback] = []
        self._closing = False
        self.idle_timeout_s = idle_timeout_s
        self._idle_marks: dict[Channel, tuple[int, float]] = {}  # activity seen, and since when
        self._idle_task: asyncio.Task[None] | None = None

    # -- configuration ----------------------------------------------------------------------
    def register(self, code: int, processor: Processor) -> None:
        """Answer requests with ``code`` by ``processor``."""
        self.processors.register(code, processor)

    def register_default(self, processor: Processor) -> None:
        """Answer codes without a processor by ``processor`` (default: REQUEST_CODE_NOT_SUPPORTED)."""
        self.processors.register_default(processor)

    def add_hook(self, hook: RPCHook) -> None:
        self.processors.add_hook(hook)

    def on_channel_open(self, callback: ChannelCallback) -> None:
        """Call ``callback(channel)`` for every accepted connection."""
        self._open_callbacks.append(callback)

    def on_channel_close(self, callback: ChannelCallback) -> None:
        """Call ``callback(channel)`` when a connection is lost, whoever closed it."""
        self._close_callbacks.append(callback)

    # -- state ------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (the real one when constructed with port 0)."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the server is not listening: await start() first")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        """``"host:port"`` of the first listening socket."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the server is not listening: await start() first")
        return format_address(self._server.sockets[0].getsockname())

    @property
    def channels(self) -> list[Channel]:
        """The open connections (a snapshot)."""
        return list(self._channels)

    @property
    def is_serving(self) -> bool:
        return self._server is not None and self._server.is_serving()

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> Self:
        """Bind and start accepting connections."""
        if self._server is not None:
            raise RuntimeError("the server was already started")
        loop = asyncio.get_running_loop()
        self._closing = False
        if self.tls is None or self.tls_mode is TlsMode.DISABLED:  # channels read PROXY headers
            self._server = await loop.create_server(
                self._make_channel, self.host, self._requested_port,
                backlog=self._backlog, reuse_address=True)
        else:  # each connection's first bytes say whether a PROXY header or TLS comes first
            sock = socket.create_server((self.host or "0.0.0.0", self._requested_port),
                                        backlog=self._backlog, reuse_port=False)
            self._server = SniffingListener(loop, sock, self._make_channel, self.tls, self.tls_mode,
                                            proxy_protocol=self.proxy_protocol)
        log.info("remoting server listening on %s%s%s", self.address,
                 "" if self.tls is None else f" (TLS {self.tls_mode.value})",
                 "" if self.proxy_protocol else " (PROXY protocol headers refused)")
        if self.idle_timeout_s > 0:
            self._idle_task = loop.create_task(self._close_idle_forever(), name="remoting-idle")
        return self

    async def _close_idle_forever(self) -> None:
        period = max(self.idle_timeout_s / 4, 0.05)
        while True:
            await asyncio.sleep(period)
            try:
                self.close_idle(time.monotonic())
            except Exception:  # keep checking: one bad channel must not end the timer
                log.exception("closing idle connections failed")

    def close_idle(self, now: float) -> int:
        """Close the connections idle for ``idle_timeout_s`` at ``now`` (monotonic seconds):
        no read or write since a check found them so, no request in progress. Returns how
        many were closed."""
        marks, closed = self._idle_marks, 0
        for channel in list(self._channels):
            seen = marks.get(channel)
            if seen is None or seen[0] != channel.activity or not channel.idle:
                marks[channel] = (channel.activity, now)
            elif now - seen[1] >= self.idle_timeout_s:
                log.info("closing the connection from %s: idle for %.0f s "
                         "(serverChannelMaxIdleTimeSeconds)", channel.remote_address, now - seen[1])
                channel.close()
                del marks[channel]
                closed += 1
        for gone in [ch for ch in marks if ch not in self._channels]:
            del marks[gone]
        return closed

    async def close(self, grace_ms: int = 3000) -> None:
        """Stop accepting, let requests in progress finish (up to ``grace_ms``), close.

        Connections stop being read at once; responses of requests finished within the grace
        period are still written. Requests still running after it are cancelled, and
        connections that do not flush their write buffers in a further grace period are
        aborted.
        """
        server = self._server
        if server is None or self._closing:
            return
        self._closing = True
        if self._idle_task is not None:
            self._idle_task.cancel()
            self._idle_task = None
        server.close()
        grace = grace_ms / 1000
        channels = list(self._channels)
        everyone = channels + list(self._draining)
        for channel in channels:
            channel.pause_reading()
        busy = {asyncio.ensure_future(ch.wait_idle()): ch for ch in everyone if not ch.idle}
        if busy:
            await asyncio.wait(busy, timeout=grace)
        for channel in everyone:
            channel.cancel_requests()
        for channel in channels:
            channel.close()
        ends = {asyncio.ensure_future(ch.wait_closed()): ch for ch in channels}
        ends.update(busy)
        if ends:
            _, stuck = await asyncio.wait(ends, timeout=grace)
            for waiter in stuck:
                ends[waiter].abort()
                waiter.cancel()
            if stuck:
                log.warning("%d connection(s) did not finish within %d ms of closing: aborted",
                            len(stuck), grace_ms)
                await asyncio.wait(stuck)
        await server.wait_closed()
        self._server = None
        log.info("remoting server closed")

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- channels ---------------------------------------------------------------------------
    def _make_channel(self, proxy: ProxyHeader | None = None, *, sniffed: bool = False) -> Channel:
        """A channel for a new connection: ``proxy`` is the PROXY header the listener read off
        it (``sniffed``: the listener looked for one); else the channel looks for one itself."""
        return Channel(self.processors, on_open=self._channel_opened, on_close=self._channel_closed,
                       proxy=proxy, accept_proxy=self.proxy_protocol and not sniffed,
                       **self._channel_options)

    def _channel_opened(self, channel: Channel) -> None:
        if self._closing:
            channel.abort()
            return
        self._channels.add(channel)
        log.debug("connection from %s", channel.remote_address)
        for callback in self._open_callbacks:
            _safe(callback, channel)

    def _channel_closed(self, channel: Channel) -> None:
        if channel not in self._channels:
            return
        self._channels.discard(channel)
        log.debug("connection from %s closed", channel.remote_address)
        if not channel.idle:
            drained = asyncio.ensure_future(channel.wait_idle())
            self._draining[channel] = drained
            drained.add_done_callback(lambda _: self._draining.pop(channel, None))
        for callback in self._close_callbacks:
            _safe(callback, channel)


def _safe(callback: ChannelCallback, channel: Channel) -> None:
    try:
        callback(channel)
    except Exception:
        log.exception("channel callback %r failed for %s", callback, channel)
