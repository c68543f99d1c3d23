"""Timed waits and task cancellation that never lose the caller's cancellation.

Python 3.11's ``asyncio.wait_for`` drops a cancellation that arrives as the awaited thing
completes (CPython gh-86296, fixed in 3.12): a service loop whose wake-up event is set as it is
cancelled waits on, and whoever awaits its end hangs. ``contextlib.suppress(CancelledError)``
around ``await task`` has the same flaw: it swallows a cancellation of the awaiting task too.
Bolide's asyncio code uses these instead (ruff bans ``asyncio.wait_for`` in ``src/``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """``await aw``, raising TimeoutError after ``timeout`` seconds (None: no limit); as
    ``asyncio.wait_for`` does in Python 3.12, on ``asyncio.timeout``."""
    async with asyncio.timeout(timeout):
        return await aw


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended. Their cancellation is not raised here,
    nor an error one ended with (it is logged); a cancellation of the caller is."""
    waiting = set(tasks)
    if not waiting:
        return
    for task in waiting:
        task.cancel()
    await asyncio.wait(waiting)
    for task in waiting:
        if not task.cancelled() and task.exception() is not None:
            log.error("%r ended with an error", task, exc_info=task.exception())
