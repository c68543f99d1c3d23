"""Request processors keyed by request code, and the rules every request is answered by.

A processor is ``async def process(ctx, request) -> RemotingCommand | None`` — a coroutine
function, or an object with such a ``process`` method. ``ctx.channel`` is the connection the
request came on: reply later or call the peer with ``await ctx.channel.invoke(cmd, timeout_ms)``
and ``ctx.channel.oneway(cmd)``. Returning None sends nothing.

An object may also have a plain ``process_now(ctx, request)``, tried first: it answers at once
(a response, or None for nothing) or returns :data:`NOT_NOW`, and then ``process`` runs as a
task. Requests that need no waiting (a send under ASYNC_FLUSH, a pull that finds messages) so
skip the cost of a task each. A ``process_now_frame(ctx, request)`` beside it may also answer
with the response's whole encoded frame (``bytes``, already fitted to the request); it is used
instead of ``process_now`` while no RPC hook is registered (hooks see response objects).

:meth:`ProcessorTable.dispatch` applies the Java server's rules (spec 1.5): unknown codes get
REQUEST_CODE_NOT_SUPPORTED, an exception becomes SYSTEM_ERROR with the exception text as
remark, a oneway request never gets a response, and a response echoes the request's opaque
and header codec with the response flag set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

from bolide.errors import BolideError
from bolide.protocol import ONEWAY_FLAG, RESPONSE_FLAG, RemotingCommand, ResponseCode
from bolide.protocol.codes import code_name
from bolide.remoting.hooks import RPCHook

if TYPE_CHECKING:
    from bolide.remoting.channel import Channel

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class RequestContext:
    """What a processor knows about a request besides the command: its connection."""

    channel: Channel

    @property
    def remote_address(self) -> str:
        """The client as ``"host:port"``: the address a PROXY protocol header passed on, else
        the socket's peer."""
        return self.channel.remote_address

    @property
    def peer_address(self) -> str:
        """The socket's peer as ``"host:port"`` (a load balancer's, behind one): RocketMQ's
        ``channel.remoteAddress()``, which it records as the born host of sent messages."""
        return self.channel.peer_address


ProcessFn: TypeAlias = Callable[[RequestContext, RemotingCommand], Awaitable[RemotingCommand | None]]


class NotNow:
    """The answer of a ``process_now`` that needs ``process`` (it must wait for something)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_NOW"


NOT_NOW = NotNow()
# dispatch_now's answer when the hooks passed and the processor needs ``process``: dispatch()
# is then called with ``hooks_ran=True`` (an ACL signature is not checked twice)
HOOKS_RAN = NotNow()
ImmediateFn: TypeAlias = Callable[[RequestContext, RemotingCommand], "RemotingCommand | NotNow | None"]
FrameFn: TypeAlias = Callable[[RequestContext, RemotingCommand], "RemotingCommand | bytes | NotNow | None"]
ServedFn: TypeAlias = Callable[[int, int, float, bool], None]


class RequestProcessor(Protocol):
    """An object whose ``process`` coroutine answers requests (Java NettyRequestProcessor)."""

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        ...


Processor: TypeAlias = ProcessFn | RequestProcessor


def _as_function(processor: Processor) -> ProcessFn:
    process = getattr(processor, "process", None)
    if process is not None:
        return process  # type: ignore[no-any-return]
    if not callable(processor):
        raise TypeError(f"a processor is an async function or has an async process(): {processor!r}")
    return processor


async def not_supported(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    """The default processor: REQUEST_CODE_NOT_SUPPORTED, worded like the Java server."""
    return request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                 f" request type {request.code} not supported")


def error_remark(exc: BaseException) -> str:
    """The remark of a SYSTEM_ERROR response for ``exc``: its type and text."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ProcessorTable:
    """Processors by request code, a default for the rest, and the RPC hooks around them.

    One table may serve several servers (e.g. a broker's main and VIP ports).
    """

    __slots__ = ("_default", "_frames", "_immediate", "_processors", "hooks", "on_served")

    def __init__(self, hooks: Iterable[RPCHook] = ()) -> None:
        self._processors: dict[int, ProcessFn] = {}
        self._immediate: dict[int, ImmediateFn] = {}
        self._frames: dict[int, FrameFn] = {}
        self._default: ProcessFn = not_supported
        self.hooks: list[RPCHook] = list(hooks)
        # told of each answered request: (request code, response code, seconds since it
        # arrived, whether it was answered later rather than at once); None: nobody asks
        self.on_served: ServedFn | None = None

    def register(self, code: int, processor: Processor) -> None:
        """Answer requests with ``code`` by ``processor`` (replacing any earlier one)."""
        self._processors[int(code)] = _as_function(processor)
        now = getattr(processor, "process_now", None)
        if now is not None:
            self._immediate[int(code)] = now
        else:
            self._immediate.pop(int(code), None)
        framed = getattr(processor, "process_now_frame", None) if now is not None else None
        if framed is not None:
            self._frames[int(code)] = framed
        else:
            self._frames.pop(int(code), None)

    def register_default(self, processor: Processor) -> None:
        """Answer codes without a processor of their own by ``processor``."""
        self._default = _as_function(processor)

    def add_hook(self, hook: RPCHook) -> None:
        self.hooks.append(hook)

    def get(self, code: int) -> ProcessFn:
        """The processor for ``code`` (the default one when none is registered)."""
        return self._processors.get(code, self._default)

    def __contains__(self, code: int) -> bool:
        return code in self._processors

    @property
    def codes(self) -> list[int]:
        """The request codes with a processor of their own, in order."""
        return sorted(self._processors)

    async def dispatch(self, ctx: RequestContext, request: RemotingCommand, *,
                       hooks_ran: bool = False) -> RemotingCommand | None:
        """Run hooks (unless ``dispatch_now`` did: ``hooks_ran``) and the processor for
        ``request``; the response to write, or None."""
        remote = ctx.channel.remote_address
        try:
            if not hooks_ran:
                for hook in self.hooks:
                    hook.before_request(remote, request)
            response = await self.get(request.code)(ctx, request)
            if response is not None and not request.is_oneway:
                self._answers(remote, request, response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = self._failed(remote, request, exc)
        if request.is_oneway:
            return None
        return response

    def dispatch_now(self, ctx: RequestContext, request: RemotingCommand,
                     ) -> RemotingCommand | bytes | NotNow | None:
        """:meth:`dispatch` for a processor that can answer at once (``process_now``); NOT_NOW
        when it has no ``process_now``, HOOKS_RAN when the hooks passed but it cannot answer
        now: then :meth:`dispatch` must run (with ``hooks_ran=True`` after HOOKS_RAN). The answer
        may be an encoded frame (``bytes``, from ``process_now_frame``) to write as it is."""
        hooks = self.hooks
        now = None if hooks else self._frames.get(request.code)
        if now is None and (now := self._immediate.get(request.code)) is None:
            return NOT_NOW
        flag = request.flag
        oneway = flag & ONEWAY_FLAG and not flag & RESPONSE_FLAG
        try:
            for hook in hooks:
                hook.before_request(ctx.channel.remote_address, request)
            response = now(ctx, request)
            if response is NOT_NOW:
                return HOOKS_RAN if hooks else NOT_NOW
            if type(response) is bytes:
                return None if oneway else response
            if response is not None and not oneway:
                _fit(request, response)  # type: ignore[arg-type]
                for hook in hooks:
                    hook.after_response(ctx.channel.remote_address, request, response)  # type: ignore[arg-type]
        except Exception as exc:
            response = self._failed(ctx.channel.remote_address, request, exc)
        if oneway:
            return None
        return response

    def _answers(self, remote: str, request: RemotingCommand, response: RemotingCommand) -> None:
        _fit(request, response)
        for hook in self.hooks:
            hook.after_response(remote, request, response)

    @staticmethod
    def _failed(remote: str, request: RemotingCommand, exc: Exception) -> RemotingCommand | None:
        log.warning("request %s (opaque %d) from %s failed: %s",
                    code_name(request.code, False), request.opaque, remote, error_remark(exc),
                    exc_info=not isinstance(exc, BolideError))
        if request.is_oneway:
            return None
        code = getattr(exc, "response_code", ResponseCode.SYSTEM_ERROR)  # e.g. ACL 2.0's 16
        return request.make_response(code, str(exc) if code != ResponseCode.SYSTEM_ERROR
                                     else error_remark(exc))


def _fit(request: RemotingCommand, response: RemotingCommand) -> None:
    """Make ``response`` answer ``request``: its opaque, its header codec, the response flag."""
    response.opaque = request.opaque
    response.serialize_type = request.serialize_type
    response.flag = (response.flag | RESPONSE_FLAG) & ~ONEWAY_FLAG
