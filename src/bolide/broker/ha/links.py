"""What both HA protocols share: a slave's link to its master (transport, tick timer, a future
done when it closes) and the client keeping it connected, a master's timed read of a slave's
reports and its senders' wake-up when the CommitLog grows."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bolide.common.waiting import cancel_and_wait, wait_for

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


class MasterClient:
    """Keeps a slave connected to its master's HA address: connects (within 3 s), waits while
    the link lives, reconnects at once unless the master dropped it within a second, else
    retries every ``retry_s``. Subclasses make the link (:meth:`_new_link`)."""

    CONNECT_TIMEOUT = 3.0  # s

    def __init__(self, master_addr: str | None, retry_s: float) -> None:
        self.master_addr = master_addr
        self.retry_s = retry_s
        self.connected = False
        self.connects = 0  # connections made to a master
        self.link: MasterLink | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()

    def _new_link(self) -> MasterLink:
        raise NotImplementedError

    def _on_connected(self, addr: str, link: MasterLink) -> None:
        """Called once a link is up (logging)."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def set_master(self, addr: str | None) -> None:
        """Use ``addr`` ("ip:port" of the master's HA port) from now on; a change drops the
        current link. None keeps the current address."""
        if not addr or addr == self.master_addr:
            return
        log.info("HA: master HA address is now %s", addr)
        self.master_addr = addr
        self.disconnect()
        self._wakeup.set()

    def disconnect(self) -> None:
        """Drop the current link (it is made again, resuming from the slave's offset)."""
        if self.link is not None:
            self.link.abort()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            addr = self.master_addr
            if addr:
                host, _, port = addr.rpartition(":")
                try:
                    _, link = await wait_for(loop.create_connection(self._new_link, host, int(port)),
                                             self.CONNECT_TIMEOUT)
                except (OSError, TimeoutError, ValueError) as exc:
                    log.warning("HA: cannot connect to master %s (%s); retrying in %.1f s",
                                addr, exc, self.retry_s)
                else:
                    self.link = link
                    self.connected = True
                    self.connects += 1
                    self._on_connected(addr, link)
                    began = loop.time()
                    try:
                        await link.closed
                    finally:
                        self.connected = False
                        self.link = None
                    log.info("HA: connection to master %s closed", addr)
                    if loop.time() - began > 1.0 or addr != self.master_addr:
                        continue  # reconnect at once, unless the master drops us at once
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await wait_for(self._wakeup.wait(), self.retry_s)

    async def close(self) -> None:
        self.disconnect()
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None


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
