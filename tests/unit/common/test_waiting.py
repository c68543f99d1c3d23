"""Timed waits and cancellation that keep the caller's cancellation (Python 3.11's
asyncio.wait_for loses one that arrives as the awaited thing completes)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from bolide.common.waiting import cancel_and_wait, wait_for


async def _service(wake: asyncio.Event) -> None:
    """A service loop as the broker's schedule and transaction-check services are."""
    while True:
        with contextlib.suppress(TimeoutError):
            await wait_for(wake.wait(), 60)
        wake.clear()


@pytest.mark.parametrize("turns", range(6))
def test_a_service_cancelled_as_it_is_woken_ends(turns: int) -> None:
    async def main() -> None:
        wake = asyncio.Event()
        task = asyncio.create_task(_service(wake))
        for _ in range(3):
            await asyncio.sleep(0)
        wake.set()
        for _ in range(turns):  # the wake-up and the cancellation land in the same loop turn or near it
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        assert done == {task} and task.cancelled()

    asyncio.run(main())


def test_wait_for_returns_the_value_or_times_out() -> None:
    async def main() -> None:
        assert await wait_for(asyncio.sleep(0, result=7), 1) == 7
        with pytest.raises(TimeoutError):
            await wait_for(asyncio.Event().wait(), 0.01)
        assert await wait_for(asyncio.sleep(0, result="no limit"), None) == "no limit"

    asyncio.run(main())


def test_cancel_and_wait_keeps_the_callers_cancellation(caplog: pytest.LogCaptureFixture) -> None:
    async def stubborn(started: asyncio.Event, release: asyncio.Event) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # ends only when released: the caller waits meanwhile
            raise

    async def failing() -> None:
        raise RuntimeError("boom")

    async def main() -> None:
        started, release = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(stubborn(started, release))
        await started.wait()
        closer = asyncio.create_task(cancel_and_wait([task]))
        await asyncio.sleep(0)
        closer.cancel()  # the caller is cancelled while it waits: that is not swallowed
        with pytest.raises(asyncio.CancelledError):
            await closer
        release.set()
        await cancel_and_wait([task])  # its own cancellation is not raised
        assert task.cancelled()
        broken = asyncio.create_task(failing())
        await asyncio.wait({broken})
        with caplog.at_level(logging.ERROR, logger="bolide.common.waiting"):
            await cancel_and_wait([broken])
        assert "boom" in caplog.text
        await cancel_and_wait([])

    asyncio.run(main())
