"""One remoting connection: an ``asyncio.Protocol`` that both servers and clients use.

Either side of a connection may send requests (spec 1.1): a :class:`Channel` answers the
requests it receives through a :class:`~bolide.remoting.processor.ProcessorTable` and
completes the futures of the requests it sent when their responses arrive (matched by
opaque). Frames are decoded straight from the bytes the transport hands over; frames are
written with ``transport.writelines`` so body buffers (memoryviews of store segments) are
passed on as they are.

Flow control, per connection:

- at most ``max_in_flight`` requests are processed at once; later ones queue, and reading
  pauses while the queue holds ``max_queued`` requests or ``max_queued_bytes`` bytes of
  bodies;
- reading pauses while the transport's write buffer is above its high-water mark
  (``pause_writing``), so a peer that does not read its responses stops being served.

Frames sent during one event loop iteration are handed to the transport together at its end
(or as soon as they reach ``WRITE_COALESCE_BYTES``): many small responses to a pipelining
client cost one system call instead of one each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from bolide.errors import ProtocolError, RemotingSendError, RemotingTimeoutError
from bolide.protocol import MAX_FRAME_SIZE, ONEWAY_FLAG, RemotingCommand, ResponseCode
from bolide.protocol.codec import decode_command, encode_command
from bolide.protocol.codes import code_name
from bolide.protocol.command import next_opaque
from bolide.protocol.frame import Buffer, FrameDecoder
from bolide.protocol.haproxy import HeaderReader, ProxyHeader, ProxyHeaderError, starts_header
from bolide.remoting.processor import HOOKS_RAN, NOT_NOW, ProcessorTable, RequestContext, error_remark

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_MAX_QUEUED = 1024
DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024
DEFAULT_WRITE_HIGH_WATER = 4 * 1024 * 1024
DEFAULT_WRITE_LOW_WATER = 1024 * 1024
# frames sent within one loop iteration are written together, up to this many bytes
WRITE_COALESCE_BYTES = 64 * 1024

_PAUSED_BY_WRITES = 1
_PAUSED_BY_QUEUE = 2
_PAUSED_BY_OWNER = 4

ChannelCallback = Callable[["Channel"], None]


def format_address(sockname: Any) -> str:
    """A socket address as ``"host:port"`` (``"[v6]:port"`` for IPv6); ``"?"`` if unknown."""
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        host, port = sockname[0], sockname[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return "?" if not sockname else str(sockname)


class Channel(asyncio.Protocol):
    """A remoting connection: answers requests, sends requests and oneways, matches responses.

    ``attrs`` is free for the owner (the broker keeps the client id there). ``on_open`` and
    ``on_close`` are called with the channel when the connection is made and lost.

    :attr:`remote_address` is the client's address everything else uses (client tables, ACL
    white lists, logs): the source of the PROXY protocol header ``proxy`` the connection began
    with (a load balancer passing its client on), else the socket's peer. :attr:`peer_address`
    is always the socket's peer (RocketMQ's ``channel.remoteAddress()``, the born host of the
    messages sent on it). With ``accept_proxy`` the channel reads such a header itself from its
    first bytes (a server without TLS; with TLS its listener reads it and passes ``proxy``): a
    malformed one closes the connection with a log line naming the cause.
    """

    def __init__(
        self,
        processors: ProcessorTable,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_queued: int = DEFAULT_MAX_QUEUED,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        write_high_water: int = DEFAULT_WRITE_HIGH_WATER,
        write_low_water: int = DEFAULT_WRITE_LOW_WATER,
        on_open: ChannelCallback | None = None,
        on_close: ChannelCallback | None = None,
        proxy: ProxyHeader | None = None,
        accept_proxy: bool = False,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._processors = processors
        self._max_frame_size = max_frame_size
        self._max_in_flight = max_in_flight
        self._max_queued = max_queued
        self._max_queued_bytes = max_queued_bytes
        self._write_limits = (write_high_water, write_low_water)
        self._on_open = on_open
        self._on_close = on_close
        self._ctx = RequestContext(self)
        self._frames = FrameDecoder(max_frame_size)
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed: asyncio.Future[None] | None = None
        self._pending: dict[int, tuple[asyncio.Future[RemotingCommand], int]] = {}
        self._queue: deque[tuple[RemotingCommand, float]] = deque()  # with its arrival time
        self._queued_bytes = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._paused_by = 0
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._out: list[bytes | memoryview] = []  # frames to write at the end of this iteration
        self._out_bytes = 0
        self.remote_address = "?"
        self.peer_address = "?"
        self.local_address = "?"
        self.proxy = proxy  # the PROXY protocol header the connection began with, if any
        self._proxy_reader = HeaderReader() if accept_proxy else None  # until its header is read
        self.attrs: dict[str, Any] = {}
        self.activity = 0  # bumped by every read and write: a server closes channels it stops moving

    # -- state ------------------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        """True while the connection is open and not closing."""
        return self._transport is not None and not self._transport.is_closing()

    @property
    def writable(self) -> bool:
        """False while the transport's write buffer is above its high-water mark."""
        return not self._write_paused

    @property
    def in_flight(self) -> int:
        """Requests being processed now (queued ones not counted)."""
        return len(self._tasks)

    @property
    def reading(self) -> bool:
        """False while reading is paused by back-pressure or the owner."""
        return self._paused_by == 0

    def __repr__(self) -> str:
        state = "active" if self.is_active else "closed"
        return f"<Channel {self.local_address}->{self.remote_address} {state}>"

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._closed = self._loop.create_future()
        self.peer_address = format_address(transport.get_extra_info("peername"))
        client = self.proxy.client if self.proxy is not None else None
        self.remote_address = format_address(client) if client is not None else self.peer_address
        self.local_address = format_address(transport.get_extra_info("sockname"))
        high, low = self._write_limits
        transport.set_write_buffer_limits(high=high, low=low)
        if self._on_open is not None:
            _call(self._on_open, self, "open")

    def data_received(self, data: bytes) -> None:
        self.activity += 1
        if self._proxy_reader is not None:  # the connection's first bytes: a PROXY header?
            rest = self._read_proxy_header(data)
            if rest is None:
                return
            data = rest
        try:
            frames = self._frames.feed(data)
        except ProtocolError as exc:
            self._drop(exc if self.activity > 1 or self.proxy is not None or not starts_header(data)
                       else ProtocolError("it starts with a PROXY protocol header (a load "
                                          "balancer's), which this server does not accept: set "
                                          "bolideProxyProtocolEnable=true, or turn the proxy "
                                          "protocol off in the load balancer"))
            return
        for frame in frames:
            try:
                cmd = decode_command(frame)
            except ProtocolError as exc:
                self._drop(exc)
                return
            except Exception as exc:  # a codec bug must not take the loop's callback down
                log.exception("cannot decode a frame from %s", self.remote_address)
                self._drop(ProtocolError(error_remark(exc)))
                return
            if cmd.is_response:
                self._on_response(cmd)
            else:
                self._on_request(cmd)

    def _read_proxy_header(self, data: bytes) -> bytes | None:
        """The bytes after a PROXY header at the start of the connection (all of ``data`` when
        it starts none), or None while more of the header is to come or after a bad one."""
        reader = self._proxy_reader
        assert reader is not None
        try:
            rest = reader.feed(data)
        except ProxyHeaderError as exc:
            self._proxy_reader = None
            self._drop(exc)
            return None
        if rest is None:
            return None
        self._proxy_reader = None
        header = reader.header
        client = header.client if header is not None else None
        if header is not None:
            self.proxy = header
        if client is not None:
            self.remote_address = format_address(client)
            log.debug("connection from %s through the proxy at %s", self.remote_address,
                      self.peer_address)
        return rest

    def eof_received(self) -> bool | None:
        return None  # close our side too, as Netty does

    def connection_lost(self, exc: Exception | None) -> None:
        if self._closed is None or self._closed.done():
            return
        if self._proxy_reader is not None and self._proxy_reader.pending:
            log.warning("the connection from %s ended within its PROXY protocol header (%d bytes "
                        "of it read)", self.peer_address, self._proxy_reader.pending)
        reason = f": {exc}" if exc else ""
        for opaque, (fut, code) in self._pending.items():
            if not fut.done():
                fut.set_exception(RemotingSendError(
                    f"connection to {self.remote_address} closed{reason} before the response to "
                    f"{code_name(code, False)} (opaque {opaque}) arrived: retry the call"))
        self._pending.clear()
        self._queue.clear()
        self._queued_bytes = 0
        self._wake_drainers()
        self._closed.set_result(None)
        if self._on_close is not None:
            _call(self._on_close, self, "close")

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pause(_PAUSED_BY_WRITES)

    def resume_writing(self) -> None:
        self._write_paused = False
        self._resume(_PAUSED_BY_WRITES)
        self._wake_drainers()

    # -- sending ----------------------------------------------------------------------------
    def send(self, cmd: RemotingCommand) -> None:
        """Write ``cmd`` as it is; raises RemotingSendError when the connection is closed."""
        transport = self._transport
        if transport is None or transport.is_closing():
            raise RemotingSendError(
                f"connection to {self.remote_address} is closed: {code_name(cmd.code, cmd.is_response)} "
                "was not sent; retry (clients reconnect on demand)")
        self._queue_frames(encode_command(cmd, self._max_frame_size))

    def _queue_frames(self, frames: list[Buffer]) -> None:
        """Write ``frames`` with the others of this loop iteration (see :meth:`_write_out`)."""
        out = self._out
        if not out:  # the first frame of this loop iteration: write them all at its end
            self._loop.call_soon(self._write_out)  # type: ignore[union-attr]
        out.extend(frames)
        self._out_bytes += sum(map(len, frames))
        if self._out_bytes >= WRITE_COALESCE_BYTES:  # enough to be worth a write of its own
            self._write_out()

    def _write_out(self) -> None:
        """Hand the frames sent during one loop iteration to the transport in one call (one
        system call for many responses to a pipelining client, instead of one each)."""
        out, self._out = self._out, []
        self._out_bytes = 0
        self.activity += 1
        transport = self._transport
        if out and transport is not None and not transport.is_closing():
            transport.writelines(out)

    def oneway(self, cmd: RemotingCommand) -> None:
        """Send ``cmd`` as a oneway request (sets the oneway flag); no response is read."""
        cmd.flag |= ONEWAY_FLAG
        self.send(cmd)

    async def drain(self) -> None:
        """Wait until the write buffer is below its low-water mark (or the connection closed)."""
        if not self._write_paused or not self.is_active:
            return
        assert self._loop is not None
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    async def invoke(self, cmd: RemotingCommand, timeout_ms: int = 3000, *,
                     deadline: float | None = None) -> RemotingCommand:
        """Send request ``cmd`` and return its response.

        Raises RemotingTimeoutError when no response arrives within ``timeout_ms`` (including
        any wait for the write buffer to drain; ``deadline``, a loop time, overrides it when a
        caller already spent part of its budget) and RemotingSendError when the connection
        is or becomes closed. If ``cmd.opaque`` is already awaiting a response here, ``cmd``
        gets a fresh opaque.
        """
        if self._loop is None:
            raise RemotingSendError("the channel is not connected yet: wait for the connection")
        if deadline is None:
            deadline = self._loop.time() + timeout_ms / 1000
        fut: asyncio.Future[RemotingCommand] | None = None
        try:
            async with asyncio.timeout_at(deadline):
                await self.drain()
                fut = self._expect(cmd)
                self.send(cmd)
                return await fut
        except TimeoutError:
            raise RemotingTimeoutError(
                f"no response to {code_name(cmd.code, False)} (opaque {cmd.opaque}) from "
                f"{self.remote_address} within {timeout_ms} ms: the peer is overloaded or "
                "unreachable; retry, or raise the timeout") from None
        finally:
            if fut is not None:
                self._forget(cmd, fut)

    async def invoke_many(self, cmds: list[RemotingCommand], timeout_ms: int = 3000, *,
                          deadline: float | None = None) -> list[RemotingCommand]:
        """:meth:`invoke` for several requests at once: all written in one go (one system
        call), their responses in the order of ``cmds``, within one timeout. The first error
        (a timeout, the connection closing) is raised; the other requests are then dropped."""
        if self._loop is None:
            raise RemotingSendError("the channel is not connected yet: wait for the connection")
        if deadline is None:
            deadline = self._loop.time() + timeout_ms / 1000
        futs: list[asyncio.Future[RemotingCommand]] = []
        try:
            async with asyncio.timeout_at(deadline):
                await self.drain()
                for cmd in cmds:
                    futs.append(self._expect(cmd))
                    self.send(cmd)
                return list(await asyncio.gather(*futs))
        except TimeoutError:
            waiting = [cmd for cmd, fut in zip(cmds, futs, strict=False)  # (gather cancels them)
                       if not fut.done() or fut.cancelled()]
            first = waiting[0] if waiting else cmds[0]
            raise RemotingTimeoutError(
                f"no response to {code_name(first.code, False)} (opaque {first.opaque}) and "
                f"{max(0, len(waiting) - 1)} other requests from {self.remote_address} within "
                f"{timeout_ms} ms: the peer is overloaded or unreachable; retry, or raise the "
                "timeout") from None
        finally:
            for cmd, fut in zip(cmds, futs, strict=False):
                self._forget(cmd, fut)
                if not fut.done():
                    fut.cancel()

    def _expect(self, cmd: RemotingCommand) -> asyncio.Future[RemotingCommand]:
        """A future for the response to ``cmd``, kept by its opaque (a fresh one when the
        opaque already awaits a response here)."""
        while cmd.opaque in self._pending:
            cmd.opaque = next_opaque()
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()  # type: ignore[union-attr]
        self._pending[cmd.opaque] = (fut, cmd.code)
        return fut

    def _forget(self, cmd: RemotingCommand, fut: asyncio.Future[RemotingCommand]) -> None:
        """Stop waiting for ``cmd``'s response (unless its opaque went to another request)."""
        entry = self._pending.get(cmd.opaque)
        if entry is not None and entry[0] is fut:
            del self._pending[cmd.opaque]

    # -- closing ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close after the buffered writes are sent."""
        if self._transport is not None:
            self._write_out()
            self._transport.close()

    def abort(self) -> None:
        """Close at once, dropping buffered writes."""
        if self._transport is not None:
            self._transport.abort()

    def wake_on_close(self, fut: asyncio.Future[None]) -> Callable[[], None]:
        """Complete ``fut`` once the connection is lost (at once if it is lost already): a
        request held for a client, such as a long poll, stops waiting when nobody can read its
        answer. Returns the function that stops watching."""
        closed = self._closed

        def wake(_: object = None) -> None:
            if not fut.done():
                fut.set_result(None)

        if closed is None or closed.done() or not self.is_active:
            wake()
            return lambda: None
        closed.add_done_callback(wake)
        return lambda: closed.remove_done_callback(wake)

    async def wait_closed(self) -> None:
        """Wait until the connection is lost (returns at once if it never opened)."""
        if self._closed is not None:
            await asyncio.shield(self._closed)

    def pause_reading(self) -> None:
        """Stop taking requests from this connection (e.g. while shutting down)."""
        self._pause(_PAUSED_BY_OWNER)

    def resume_reading(self) -> None:
        self._resume(_PAUSED_BY_OWNER)

    @property
    def idle(self) -> bool:
        """No request is being processed or waiting."""
        return not self._tasks and not self._queue

    async def wait_idle(self) -> None:
        """Wait until the requests being processed now and queued ones are done."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def cancel_requests(self) -> None:
        """Cancel the processing of every request of this connection."""
        self._queue.clear()
        self._queued_bytes = 0
        for task in self._tasks:
            task.cancel()

    # -- internals --------------------------------------------------------------------------
    def _drop(self, exc: Exception) -> None:
        log.warning("closing the connection from %s: %s", self.remote_address, exc)
        if self._transport is not None:
            self._transport.abort()

    def _on_response(self, cmd: RemotingCommand) -> None:
        entry = self._pending.pop(cmd.opaque, None)
        if entry is None:
            log.debug("response from %s to unknown opaque %d dropped (timed out?)",
                      self.remote_address, cmd.opaque)
        elif not entry[0].done():
            entry[0].set_result(cmd)

    def _on_request(self, cmd: RemotingCommand) -> None:
        served = self._processors.on_served
        arrived = time.perf_counter() if served is not None else 0.0
        if len(self._tasks) < self._max_in_flight and not self._queue:
            response = self._processors.dispatch_now(self._ctx, cmd)
            if response is NOT_NOW or response is HOOKS_RAN:
                self._start(cmd, arrived, hooks_ran=response is HOOKS_RAN)
            elif response is not None:
                self._reply(cmd, response)  # type: ignore[arg-type]
                if served is not None:
                    served(cmd.code, _code_of(response), time.perf_counter() - arrived, False)  # type: ignore[arg-type]
            return
        self._queue.append((cmd, arrived))
        self._queued_bytes += cmd.body_length
        if len(self._queue) >= self._max_queued or self._queued_bytes >= self._max_queued_bytes:
            self._pause(_PAUSED_BY_QUEUE)

    def _start(self, cmd: RemotingCommand, arrived: float, hooks_ran: bool = False) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._serve(cmd, arrived, hooks_ran))
        self._tasks.add(task)
        task.add_done_callback(self._served)

    def _served(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("serving a request from %s failed", self.remote_address,
                      exc_info=task.exception())
        while self._queue and len(self._tasks) < self._max_in_flight:
            cmd, arrived = self._queue.popleft()
            self._queued_bytes -= cmd.body_length
            self._start(cmd, arrived)
        if len(self._queue) < self._max_queued and self._queued_bytes < self._max_queued_bytes:
            self._resume(_PAUSED_BY_QUEUE)

    async def _serve(self, request: RemotingCommand, arrived: float, hooks_ran: bool) -> None:
        response = await self._processors.dispatch(self._ctx, request, hooks_ran=hooks_ran)
        if response is not None:
            self._reply(request, response)
            served = self._processors.on_served
            if served is not None:
                served(request.code, response.code, time.perf_counter() - arrived, True)

    def _reply(self, request: RemotingCommand, response: RemotingCommand | bytes) -> None:
        """Write the response to ``request`` (a command, or its encoded frame), unless the
        connection is closed."""
        transport = self._transport
        if transport is None or transport.is_closing():  # not self.is_active
            return
        if type(response) is bytes:
            self._queue_frames([response])
            return
        try:
            self.send(response)
        except ProtocolError as exc:  # e.g. a body over the frame limit: still answer
            log.warning("cannot send the response to %s: %s", self.remote_address, exc)
            self.send(request.make_response(ResponseCode.SYSTEM_ERROR, error_remark(exc)))

    def _pause(self, reason: int) -> None:
        transport = self._transport
        if not self._paused_by and transport is not None and not transport.is_closing():
            transport.pause_reading()
        self._paused_by |= reason

    def _resume(self, reason: int) -> None:
        if not self._paused_by & reason:
            return
        self._paused_by &= ~reason
        transport = self._transport
        if not self._paused_by and transport is not None and not transport.is_closing():
            transport.resume_reading()

    def _wake_drainers(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _call(callback: ChannelCallback, channel: Channel, what: str) -> None:
    try:
        callback(channel)
    except Exception:
        log.exception("channel %s callback failed for %s", what, channel)


def _code_of(response: RemotingCommand | bytes) -> int:
    """A response's code (a ready-made frame is a plain success)."""
    return ResponseCode.SUCCESS if type(response) is bytes else response.code  # type: ignore[union-attr]
