"""PullHoldService: dispatch batches wake the held pulls of their queues, and hop to the loop
only when a pull is held there."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from bolide.broker.long_polling import PullHoldService


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the callbacks other threads hand it."""

    hops = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.hops += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def _from_thread(fn: Any, *args: Any) -> None:
    t = threading.Thread(target=fn, args=args)
    t.start()
    t.join()


def test_dispatch_wakes_only_the_queues_it_reached_and_hops_only_for_them() -> None:
    loop = CountingLoop()
    try:
        async def scenario() -> None:
            holds = PullHoldService(asyncio.get_running_loop())
            _from_thread(holds.on_dispatch, {("T", 0), ("T", 1)})  # nothing held: no hop
            assert loop.hops == 0
            fut = holds.hold("T", 1)
            assert fut is not None and holds.held == 1
            _from_thread(holds.on_dispatch, {("T", 0), ("U", 1)})  # other queues: no hop
            assert loop.hops == 0
            _from_thread(holds.on_dispatch, {("T", 0), ("T", 1)})
            assert loop.hops == 1
            await asyncio.wait_for(fut, 5)
            assert holds.held == 0

        loop.run_until_complete(scenario())
    finally:
        loop.close()
