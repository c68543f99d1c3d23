"""The slave's HA client (RocketMQ's HAClient): connects to the master's HA port, reports its
CommitLog max offset, and writes the frames it receives with ``MessageStore.append_raw`` on
the loop thread. Reconnects after a drop; the master resends from the reported offset."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import cast

from bolide.broker.config import BrokerConfig
from bolide.broker.ha.links import MasterLink
from bolide.broker.ha.protocol import FrameDecoder, encode_offset
from bolide.broker.ha.status import ByteRate
from bolide.common.waiting import cancel_and_wait, wait_for
from bolide.errors import BolideError
from bolide.store import MessageStore

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT = 3.0  # s


class _SlaveProtocol(MasterLink):
    """One connection to the master."""

    def __init__(self, client: HASlave) -> None:
        super().__init__()
        self.client = client
        self.store = client.store
        self.decoder = FrameDecoder()
        self.reported = -1
        self.last_report = 0.0
        self.last_read = time.monotonic()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.report()  # the request offset (4.9.x waits haSendHeartbeatInterval first)
        self._schedule()

    def report(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        offset = self.store.max_phy_offset
        self.transport.write(encode_offset(offset))
        self.reported = offset
        self.last_report = time.monotonic()
        self.client.last_write_ms = int(time.time() * 1000)

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(min(1.0, self.client.heartbeat), self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self.last_read > self.client.housekeeping:
            log.warning("HA: nothing from master %s for haHousekeepingInterval=%d ms; "
                        "reconnecting", self.client.master_addr, self.client.housekeeping * 1000)
            self.abort()
            return
        if now - self.last_report >= self.client.heartbeat:
            self.report()
        self._schedule()

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        self.client.last_read_ms = int(time.time() * 1000)
        self.client.rate.add(len(data))
        store = self.store
        try:
            for offset, body in self.decoder.feed(data):
                if body:
                    store.append_raw(offset, body)
                elif store.max_phy_offset and offset != store.raw_received:
                    raise BolideError(f"the master is at offset {offset} but this slave has "
                                      f"received up to {store.raw_received}")
                else:
                    self.client.heartbeats += 1
        except BolideError as exc:
            log.error("HA: bad data from master %s (%s); reconnecting", self.client.master_addr,
                      exc)
            self.abort()
            return
        if store.max_phy_offset > self.reported:
            self.report()



class HASlave:
    """Keeps a slave connected to its master's HA address (configured, or learned from the
    NameServer's answer to REGISTER_BROKER)."""

    def __init__(self, store: MessageStore, config: BrokerConfig) -> None:
        self.store = store
        self.config = config
        self.master_addr: str | None = config.ha_master_address or None
        self.heartbeat = config.ha_send_heartbeat_interval_ms / 1000
        self.housekeeping = config.ha_housekeeping_interval_ms / 1000
        self.connected = False
        self.connects = 0  # connections made to a master
        self.heartbeats = 0  # empty frames received (the master idles)
        self.last_read_ms = 0  # ms since the epoch: last bytes from the master
        self.last_write_ms = 0  # ms since the epoch: last offset report to the master
        self.rate = ByteRate()  # bytes received per second
        self._protocol: _SlaveProtocol | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def set_master(self, ha_addr: str | None) -> None:
        """Use ``ha_addr`` ("ip:port" of the master's HA port) from now on; a change drops the
        current connection. None keeps the current address."""
        if not ha_addr or ha_addr == self.master_addr:
            return
        log.info("HA: master HA address is now %s", ha_addr)
        self.master_addr = ha_addr
        self.disconnect()
        self._wakeup.set()

    def disconnect(self) -> None:
        """Drop the current connection (it is made again, resuming from the slave's offset)."""
        if self._protocol is not None:
            self._protocol.abort()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        retry = self.config.ha_reconnect_interval_ms / 1000
        while True:
            addr = self.master_addr
            if addr:
                host, _, port = addr.rpartition(":")
                try:
                    _, protocol = await wait_for(
                        loop.create_connection(lambda: _SlaveProtocol(self), host, int(port)),
                        _CONNECT_TIMEOUT)
                except (OSError, TimeoutError, ValueError) as exc:
                    log.warning("HA: cannot connect to master %s (%s); retrying in %.1f s",
                                addr, exc, retry)
                else:
                    self._protocol = protocol
                    self.connected = True
                    self.connects += 1
                    log.info("HA: connected to master %s, reporting offset %d", addr,
                             protocol.reported)
                    began = loop.time()
                    try:
                        await protocol.closed
                    finally:
                        self.connected = False
                        self._protocol = None
                    log.info("HA: connection to master %s closed", addr)
                    if loop.time() - began > 1.0 or addr != self.master_addr:
                        continue  # reconnect at once, unless the master drops us at once
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await wait_for(self._wakeup.wait(), retry)

    async def close(self) -> None:
        self.disconnect()
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
