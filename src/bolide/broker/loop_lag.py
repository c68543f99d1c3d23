"""How late the broker's event loop runs: every request waits while anything holds it (a long
callback, a page fault or system call made with the GIL held, another thread keeping the GIL).

A timer asks to wake every :data:`INTERVAL_S`; how much later it wakes is the lag. The figures
go into GET_BROKER_RUNTIME_INFO (``bolide admin brokerStatus``) as Bolide's keys
``bolideLoopLagMaxMs`` and ``bolideLoopLagDistribution``, the latter in the format of
RocketMQ's ``putMessageDistributeTime``.
"""

from __future__ import annotations

import asyncio
import math

from bolide.broker.loop_service import LoopService

INTERVAL_S = 0.01  # 100 wake-ups a second: a few microseconds of the loop's time each
BUCKETS: tuple[tuple[float, str], ...] = (
    (1, "<=1ms"), (5, "1~5ms"), (10, "5~10ms"), (50, "10~50ms"), (100, "50~100ms"),
    (500, "100~500ms"), (1000, "500ms~1s"), (math.inf, "1s~"),
)


def parse_distribution(text: str) -> dict[str, int]:
    """The counts of a :meth:`LoopLagMonitor.distribution_text` by bucket name (``{}`` for an
    empty text, as from a broker that does not report it)."""
    return {name: int(n) for name, n in (part.split("]:") for part in text[1:].split(" [") if "]:" in part)}


class LoopLagMonitor(LoopService):
    """Counts the event loop's lateness per bucket and keeps the largest since the start."""

    TASK_NAME = "bolide-loop-lag"

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.counts = [0] * len(BUCKETS)
        self.max_ms = 0.0

    def record(self, late_ms: float) -> None:
        """Count one wake-up ``late_ms`` milliseconds late."""
        for i, (bound, _) in enumerate(BUCKETS):
            if late_ms <= bound:
                self.counts[i] += 1
                break
        self.max_ms = max(self.max_ms, late_ms)

    def distribution_text(self) -> str:
        """``[<=1ms]:N [1~5ms]:N ...``, as RocketMQ prints its put latency distribution."""
        return " ".join(f"[{name}]:{n}" for (_, name), n in zip(BUCKETS, self.counts, strict=True))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.record(max(0.0, loop.time() - asked) * 1000)
