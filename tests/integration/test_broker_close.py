"""A broker closes even when its services are woken as they are cancelled (the hang of a
cancellation lost by a timed wait)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.testing.servers import Servers
from conftest import run_with_servers


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
def test_services_woken_as_they_close_end(tmp_path: Path, turns: int) -> None:
    async def test(s: Servers) -> None:
        schedule, checks = s.broker.schedule, s.broker.transaction_check
        assert schedule is not None and schedule.running and checks.running
        for _ in range(3):
            schedule.on_dispatch([("SCHEDULE_TOPIC_XXXX", 0)])  # as the dispatcher wakes it
            checks.wakeup()
            for _ in range(turns):
                await asyncio.sleep(0)
            closing = asyncio.ensure_future(asyncio.gather(schedule.close(), checks.close()))
            done, _ = await asyncio.wait({closing}, timeout=10)
            assert done == {closing}, "a service did not end when cancelled as it was woken"
            closing.result()
            assert not schedule.running and not checks.running
            schedule.start()
            checks.start()
            await asyncio.sleep(0)

    run_with_servers(tmp_path, test)
