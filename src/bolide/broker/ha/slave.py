"""The slave's HA client (RocketMQ's HAClient): connects to the master's HA port, reports its
CommitLog max offset, and writes the frames it receives with ``MessageStore.append_raw`` on
the loop thread. Reconnects after a drop; the master resends from the reported offset."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

from bolide.broker.config import BrokerConfig
from bolide.broker.ha.links import MasterClient, MasterLink
from bolide.broker.ha.protocol import FrameDecoder, encode_offset
from bolide.broker.ha.status import ByteRate
from bolide.errors import BolideError
from bolide.store import MessageStore

log = logging.getLogger(__name__)



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



class HASlave(MasterClient):
    """Keeps a slave connected to its master's HA address (configured, or learned from the
    NameServer's answer to REGISTER_BROKER)."""

    def __init__(self, store: MessageStore, config: BrokerConfig) -> None:
        super().__init__(config.ha_master_address or None, config.ha_reconnect_interval_ms / 1000)
        self.store = store
        self.config = config
        self.heartbeat = config.ha_send_heartbeat_interval_ms / 1000
        self.housekeeping = config.ha_housekeeping_interval_ms / 1000
        self.heartbeats = 0  # empty frames received (the master idles)
        self.last_read_ms = 0  # ms since the epoch: last bytes from the master
        self.last_write_ms = 0  # ms since the epoch: last offset report to the master
        self.rate = ByteRate()  # bytes received per second

    def _new_link(self) -> _SlaveProtocol:
        return _SlaveProtocol(self)

    def _on_connected(self, addr: str, link: MasterLink) -> None:
        assert isinstance(link, _SlaveProtocol)
        log.info("HA: connected to master %s, reporting offset %d", addr, link.reported)
