"""A service that runs one coroutine on the broker's event loop from ``start()`` until
``close()`` cancels it: the client expiry scan, the loop-lag timer, the schedule and
transaction-check services, the slave's config sync."""

from __future__ import annotations

import asyncio

from bolide.common.waiting import cancel_and_wait


class LoopService:
    """Subclasses name their task (:attr:`TASK_NAME`) and write :meth:`_run`."""

    TASK_NAME = "bolide-service"
    _task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start :meth:`_run` on the running loop (again after close)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.TASK_NAME)

    async def close(self) -> None:
        """Cancel :meth:`_run` and wait until it has ended."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])

    async def _run(self) -> None:
        raise NotImplementedError
