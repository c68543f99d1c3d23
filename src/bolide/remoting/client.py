"""RemotingClient: one connection per ``"host:port"``, opened on demand, and calls over it.

::

    client = RemotingClient(hooks=[AclClientRPCHook(ak, sk)])
    client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_ids_changed)
    response = await client.invoke("127.0.0.1:9876", request, timeout_ms=3000)
    await client.invoke_oneway(broker_addr, offset_update)
    await client.close()

A lost connection leaves the pool and the next call to that address reconnects. Requests
the server sends down a client's connection (NOTIFY_CONSUMER_IDS_CHANGED,
CHECK_TRANSACTION_STATE, GET_CONSUMER_RUNNING_INFO) go to the client's processor table;
codes without a processor are answered REQUEST_CODE_NOT_SUPPORTED, as the Java client does.
Hooks run around the client's own requests.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterable
from typing import Any, Self

from bolide.errors import RemotingClosedError, RemotingConnectError, RemotingTimeoutError
from bolide.protocol import MAX_FRAME_SIZE, ONEWAY_FLAG, RemotingCommand
from bolide.remoting.channel import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_WRITE_HIGH_WATER,
    DEFAULT_WRITE_LOW_WATER,
    Channel,
    ChannelCallback,
)
from bolide.remoting.hooks import RPCHook
from bolide.remoting.processor import Processor, ProcessorTable

log = logging.getLogger(__name__)

# How long a closing TLS connection waits for the server's close_notify before it is cut, as
# Netty's clients do not wait for it (Java servers do not always answer one: each close of
# RocketMQ's TLS connections took the client's whole connect timeout, 3 s).
TLS_SHUTDOWN_TIMEOUT_S = 0.25


def split_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) as ``(host, port)``; ValueError when malformed."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address {addr!r} is not host:port (e.g. 127.0.0.1:9876)")
    return host.removeprefix("[").removesuffix("]"), int(port)


class RemotingClient:
    """Calls remoting servers over a pool of one connection per address.

    ``processors`` answers requests that servers send to this client; ``hooks`` run before
    each request is written and after its response arrives (not for oneways' responses,
    which never come). ``connect_timeout_ms`` bounds each connection attempt (and its TLS
    handshake). With ``tls`` (see :func:`bolide.remoting.tls.client_context`) every
    connection starts with a TLS handshake.
    """

    def __init__(
        self,
        *,
        processors: ProcessorTable | None = None,
        hooks: Iterable[RPCHook] = (),
        connect_timeout_ms: int = 3000,
        max_frame_size: int = MAX_FRAME_SIZE,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        write_high_water: int = DEFAULT_WRITE_HIGH_WATER,
        write_low_water: int = DEFAULT_WRITE_LOW_WATER,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.processors = processors if processors is not None else ProcessorTable()
        self.hooks: list[RPCHook] = list(hooks)
        self.tls = tls
        self.connect_timeout_ms = connect_timeout_ms
        self._channel_options: dict[str, Any] = {
            "max_frame_size": max_frame_size, "max_in_flight": max_in_flight,
            "write_high_water": write_high_water, "write_low_water": write_low_water,
        }
        self._channels: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Future[Channel]] = {}
        self._close_callbacks: list[ChannelCallback] = []
        self._closed = False

    def register(self, code: int, processor: Processor) -> None:
        """Answer requests with ``code`` coming from servers by ``processor``."""
        self.processors.register(code, processor)

    def add_hook(self, hook: RPCHook) -> None:
        self.hooks.append(hook)

    def on_channel_close(self, callback: ChannelCallback) -> None:
        """Call ``callback(channel)`` when a pooled connection is lost."""
        self._close_callbacks.append(callback)

    @property
    def addresses(self) -> list[str]:
        """Addresses with an open connection."""
        return [addr for addr, ch in self._channels.items() if ch.is_active]

    async def get_channel(self, addr: str) -> Channel:
        """The open connection to ``addr``, connecting (once, shared by callers) if needed.

        Raises RemotingConnectError when the connection cannot be made in time.
        """
        if self._closed:
            raise RemotingClosedError("the RemotingClient is closed: create a new one to call servers")
        channel = self._channels.get(addr)
        if channel is not None and channel.is_active:
            return channel
        pending = self._connecting.get(addr)
        if pending is None:
            pending = asyncio.ensure_future(self._connect(addr))
            self._connecting[addr] = pending
            pending.add_done_callback(lambda fut: self._connect_done(addr, fut))
        return await asyncio.shield(pending)

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int = 3000) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return the response.

        The timeout covers connecting, waiting for the write buffer and the response.
        Raises RemotingConnectError, RemotingTimeoutError or RemotingSendError (all
        retriable RemotingError).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        channel = await self._channel_within(addr, timeout_ms)
        remote = channel.remote_address
        for hook in self.hooks:
            hook.before_request(remote, request)
        response = await channel.invoke(request, timeout_ms, deadline=deadline)
        for hook in self.hooks:
            hook.after_response(remote, request, response)
        return response

    async def invoke_many(self, addr: str, requests: list[RemotingCommand],
                          timeout_ms: int = 3000) -> list[RemotingCommand]:
        """:meth:`invoke` for several requests to ``addr``, written together (see
        :meth:`Channel.invoke_many`); their responses in order."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        channel = await self._channel_within(addr, timeout_ms)
        remote = channel.remote_address
        hooks = self.hooks
        for hook in hooks:
            for request in requests:
                hook.before_request(remote, request)
        responses = await channel.invoke_many(requests, timeout_ms, deadline=deadline)
        for hook in hooks:
            for request, response in zip(requests, responses, strict=True):
                hook.after_response(remote, request, response)
        return responses

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout_ms: int = 3000) -> None:
        """Send ``request`` to ``addr`` as a oneway request (no response is read).

        Waits, within ``timeout_ms``, for the connection and for a write buffer below its
        high-water mark.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        channel = await self._channel_within(addr, timeout_ms)
        request.flag |= ONEWAY_FLAG
        for hook in self.hooks:
            hook.before_request(channel.remote_address, request)
        try:
            async with asyncio.timeout_at(deadline):
                await channel.drain()
        except TimeoutError:
            raise RemotingTimeoutError(
                f"the connection to {addr} did not drain its write buffer within {timeout_ms} ms: "
                "the server reads slowly; retry later") from None
        channel.send(request)

    def close_channel(self, addr: str) -> None:
        """Close the connection to ``addr`` (the next call reconnects)."""
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close()

    async def close(self) -> None:
        """Close every connection; calls after this raise RemotingClosedError."""
        self._closed = True
        for pending in list(self._connecting.values()):
            pending.cancel()
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            channel.close()
        if channels:
            waits = {asyncio.ensure_future(ch.wait_closed()): ch for ch in channels}
            _, stuck = await asyncio.wait(waits, timeout=self.connect_timeout_ms / 1000)
            for task in stuck:
                waits[task].abort()
            if stuck:
                await asyncio.wait(stuck)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- internals --------------------------------------------------------------------------
    async def _channel_within(self, addr: str, timeout_ms: int) -> Channel:
        channel = self._channels.get(addr)
        if channel is not None and channel.is_active:
            return channel
        try:
            async with asyncio.timeout(min(timeout_ms, self.connect_timeout_ms) / 1000):
                return await self.get_channel(addr)
        except TimeoutError:
            raise RemotingConnectError(
                f"could not connect to {addr} within {min(timeout_ms, self.connect_timeout_ms)} ms: "
                "check that the server runs and the address is reachable, then retry") from None

    async def _connect(self, addr: str) -> Channel:
        try:
            host, port = split_address(addr)
        except ValueError as exc:  # e.g. a broker address from a route that is not host:port
            raise RemotingConnectError(f"cannot connect: {exc}") from None
        loop = asyncio.get_running_loop()

        def factory() -> Channel:
            return Channel(self.processors, on_close=lambda ch: self._channel_closed(addr, ch),
                           **self._channel_options)

        try:
            async with asyncio.timeout(self.connect_timeout_ms / 1000):
                if self.tls is None:
                    _, channel = await loop.create_connection(factory, host, port)
                else:
                    _, channel = await loop.create_connection(
                        factory, host, port, ssl=self.tls, server_hostname=host,
                        ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT_S)
        except TimeoutError:
            raise RemotingConnectError(
                f"could not connect to {addr} within {self.connect_timeout_ms} ms: check that the "
                "server runs and the address is reachable, then retry") from None
        except ssl.SSLError as exc:
            raise RemotingConnectError(
                f"TLS handshake with {addr} failed: {exc.reason or exc}; check that the server "
                "has TLS on (tls.server.mode) and trusts this client") from None
        except OSError as exc:
            raise RemotingConnectError(
                f"could not connect to {addr}: {exc.strerror or exc}; check that the server runs "
                "and listens on that address, then retry") from exc
        if self._closed:
            channel.abort()
            raise RemotingClosedError("the RemotingClient was closed while connecting")
        self._channels[addr] = channel
        log.debug("connected to %s from %s", addr, channel.local_address)
        return channel

    def _connect_done(self, addr: str, fut: asyncio.Future[Channel]) -> None:
        if self._connecting.get(addr) is fut:
            del self._connecting[addr]
        if not fut.cancelled():
            fut.exception()  # retrieved here: callers that gave up waiting never see it

    def _channel_closed(self, addr: str, channel: Channel) -> None:
        if self._channels.get(addr) is channel:
            del self._channels[addr]
        log.debug("connection to %s closed", addr)
        for callback in self._close_callbacks:
            try:
                callback(channel)
            except Exception:
                log.exception("channel close callback %r failed for %s", callback, channel)
