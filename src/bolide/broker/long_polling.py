"""Held PULL_MESSAGE requests (RocketMQ's PullRequestHoldService): a pull that finds nothing
waits on its (topic, queue) until the store dispatches a message there or its suspend time
ends. The dispatch thread's callback hops to the loop once per dispatch batch that reaches a
queue with a held pull."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

Key = tuple[str, int]


class PullHoldService:
    """At most ``max_held`` waiting pulls, woken by :meth:`on_dispatch` from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_held: int = 10_000) -> None:
        self.loop = loop
        self.max_held = max_held
        self._held: dict[Key, list[asyncio.Future[None]]] = {}
        self._count = 0
        self._closed = False

    @property
    def held(self) -> int:
        return self._count

    def hold(self, topic: str, queue_id: int) -> asyncio.Future[None] | None:
        """A future done when (topic, queue_id) gets a message; None when the table is full
        or the service was shut down (:meth:`wake_all`)."""
        if self._count >= self.max_held or self._closed:
            return None
        fut = self.loop.create_future()
        self._held.setdefault((topic, queue_id), []).append(fut)
        self._count += 1
        return fut

    def release(self, topic: str, queue_id: int, fut: asyncio.Future[None]) -> None:
        """Forget a held pull that ended without a wakeup (timeout or cancellation)."""
        waiters = self._held.get((topic, queue_id))
        if waiters is not None and fut in waiters:
            waiters.remove(fut)
            self._count -= 1
            if not waiters:
                del self._held[(topic, queue_id)]

    def on_dispatch(self, keys: Iterable[Key]) -> None:
        """Store dispatch listener (dispatch thread): wake the held pulls of ``keys``.

        Only keys with a pull held now hop to the loop (most dispatch batches have none: no
        cross-thread wake-up of the loop then). A pull held just after this check does not
        miss the messages: it reads the queue's end again once held (see the pull processor),
        and dispatch wrote the entries before calling this."""
        held = self._held
        if not held:
            return
        waiting = [key for key in keys if key in held]
        if waiting:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                self.loop.call_soon_threadsafe(self.wake, waiting)

    def wake(self, keys: Iterable[Key]) -> None:
        """On the loop: complete the futures of every pull held on ``keys``."""
        for key in keys:
            waiters = self._held.pop(key, None)
            if waiters:
                self._count -= len(waiters)
                for fut in waiters:
                    if not fut.done():
                        fut.set_result(None)

    def wake_all(self) -> None:
        """Answer every held pull now and hold no more (shutdown)."""
        self._closed = True
        self.wake(list(self._held))
