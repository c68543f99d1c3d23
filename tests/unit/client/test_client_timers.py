"""ClientInstance timers: closing lets a job under way finish instead of cancelling it."""

from __future__ import annotations

import asyncio

from bolide.client.config import ClientConfig
from bolide.client.instance import ClientInstance


def test_stop_timers_lets_a_job_under_way_finish() -> None:
    """An offset commit cancelled mid-request could still reach the broker after the final
    commit of the close and overwrite it: a running job is awaited, an idle timer just ends."""
    async def main() -> None:
        instance = ClientInstance(ClientConfig(namesrv_addr="127.0.0.1:9"))
        instance._closing = asyncio.Event()
        started, release = asyncio.Event(), asyncio.Event()
        finished: list[str] = []

        async def job() -> None:
            started.set()
            await release.wait()
            finished.append("job")

        async def idle() -> None:
            finished.append("idle ran")

        instance.every(1, job, "busy", first_ms=0)
        instance.every(60_000, idle, "idle")
        await asyncio.wait_for(started.wait(), 5)
        stopping = asyncio.ensure_future(instance.stop_timers())
        await asyncio.sleep(0)
        assert not stopping.done()
        release.set()
        await asyncio.wait_for(stopping, 5)
        assert finished == ["job"]

    asyncio.run(main())
