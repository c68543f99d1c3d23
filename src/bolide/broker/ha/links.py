"""What both HA protocols share: a slave's link to its master (transport, tick timer, a future
done when it closes), a master's timed read of a slave's reports and its senders' wake-up when
the CommitLog grows."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bolide.common.waiting import wait_for

log = logging.getLogger(__name__)


class MasterLink(asyncio.Protocol):
    """A slave's connection to its master; subclasses set ``_timer`` for their ticks."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._timer: asyncio.TimerHandle | None = None

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self.closed.done():
            self.closed.set_result(None)


async def read_report(reader: asyncio.StreamReader, size: int, housekeeping_ms: int,
                      addr: str) -> bytes:
    """The next bytes a slave sent, b"" when it closed, failed or sent nothing for
    ``haHousekeepingInterval`` (then logged): the master drops the connection."""
    try:
        return await wait_for(reader.read(size), housekeeping_ms / 1000)
    except TimeoutError:
        log.warning("HA: slave %s sent nothing for haHousekeepingInterval=%d ms; closing its "
                    "connection", addr, housekeeping_ms)
    except (OSError, ConnectionError):
        pass
    return b""


class NewData:
    """A master's senders wait in :meth:`data_written` until :meth:`notify` (the CommitLog grew)."""

    _new_data: asyncio.Future[None] | None = None

    def notify(self) -> None:
        """Wake the senders: the CommitLog grew."""
        fut, self._new_data = self._new_data, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def data_written(self, timeout: float) -> None:
        """Return when :meth:`notify` is called, or after ``timeout`` seconds."""
        if self._new_data is None or self._new_data.done():
            self._new_data = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await wait_for(asyncio.shield(self._new_data), timeout)
