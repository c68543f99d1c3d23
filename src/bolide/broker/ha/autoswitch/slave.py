"""The slave side of AutoSwitch HA (AutoSwitchHAClient): connects to the master's HA port,
handshakes with its broker id, cuts its CommitLog where its epochs stop agreeing with the
master's, then writes what the master streams (``MessageStore.append_raw``), records the
master's epochs as their bytes arrive, takes the confirm offset from each frame and reports
its offset back. Reconnects after a drop."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

from bolide.broker.ha.autoswitch.config import AutoSwitchHAConfig
from bolide.broker.ha.autoswitch.protocol import (
    HAState,
    MasterHandshake,
    MasterMessageReader,
    SlaveHandshake,
    Transfer,
    encode_report,
    encode_slave_handshake,
)
from bolide.broker.ha.links import MasterClient, MasterLink
from bolide.broker.ha.status import ByteRate
from bolide.errors import BolideError
from bolide.store import MessageStore
from bolide.store.epoch_file import EpochFile, find_consistent_point, link

log = logging.getLogger(__name__)



class DivergedError(BolideError):
    """This replica's CommitLog cannot be brought in line with the master's."""


class _MasterConnection(MasterLink):
    """One connection to the master."""

    def __init__(self, client: SlaveClient) -> None:
        super().__init__()
        self.client = client
        self.store = client.store
        self.reader = MasterMessageReader()
        self.state = HAState.HANDSHAKE
        self.reported = -1
        self.received_epoch = -1
        self.last_report = 0.0
        self.last_read = time.monotonic()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        cfg = self.client.config
        self.transport.write(encode_slave_handshake(SlaveHandshake(
            self.client.local_broker_id, cfg.sync_from_last_file, cfg.async_learner)))
        self.last_report = time.monotonic()
        self._schedule()

    def _schedule(self) -> None:
        heartbeat = self.client.config.ha_send_heartbeat_interval_ms / 1000
        self._timer = asyncio.get_running_loop().call_later(min(1.0, heartbeat), self._tick)

    def _tick(self) -> None:
        cfg = self.client.config
        now = time.monotonic()
        if now - self.last_read > cfg.ha_housekeeping_interval_ms / 1000:
            log.warning("HA: nothing from master %s for haHousekeepingInterval=%d ms; "
                        "reconnecting", self.client.master_addr, cfg.ha_housekeeping_interval_ms)
            self.abort()
            return
        if (self.state is HAState.TRANSFER
                and now - self.last_report >= cfg.ha_send_heartbeat_interval_ms / 1000):
            self.report(force=True)
        self._schedule()

    def report(self, force: bool = False) -> None:
        offset = self.store.max_phy_offset
        if self.transport is None or self.transport.is_closing():
            return
        if force or offset > self.reported:
            self.transport.write(encode_report(offset))
            self.reported = offset
            self.last_report = time.monotonic()
            self.client.last_write_ms = int(time.time() * 1000)

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        self.client.last_read_ms = int(time.time() * 1000)
        self.client.rate.add(len(data))
        try:
            for msg in self.reader.feed(data):
                if isinstance(msg, MasterHandshake):
                    self._on_handshake(msg)
                else:
                    self._on_transfer(msg)
        except BolideError as exc:
            log.error("HA: master %s: %s; reconnecting", self.client.master_addr, exc)
            self.client.last_error = str(exc)
            self.abort()
            return
        if self.state is HAState.TRANSFER:
            self.report()

    def _on_handshake(self, msg: MasterHandshake) -> None:
        if self.state is not HAState.HANDSHAKE:
            raise DivergedError("the master sent a handshake during transfer")
        store = self.store
        epochs = self.client.epochs
        if len(epochs) == 0:
            start = store.max_phy_offset  # a new replica (or one from before controller mode)
        else:
            master = link(msg.entries)
            if master:
                master[-1].end_offset = msg.max_offset
            local = epochs.entries()
            local[-1].end_offset = store.max_phy_offset
            start = find_consistent_point(local, master)
            if start < 0:
                raise DivergedError(
                    f"no epoch of this replica ({local}) matches the master's ({master}): "
                    "empty this replica's store directory so that it copies the master afresh")
            if start < store.max_phy_offset:
                log.warning("HA: this replica's CommitLog diverges from master %s after %d; "
                            "cutting %d bytes", self.client.master_addr, start,
                            store.max_phy_offset - start)
            store.truncate_to(start)
            epochs.truncate_suffix_by_offset(start)
            self.client.truncations += 1
        self.state = HAState.TRANSFER
        self.client.handshakes += 1
        log.info("HA: handshake with master %s done; receiving from %d", self.client.master_addr,
                 start)
        self.report(force=True)

    def _on_transfer(self, msg: Transfer) -> None:
        if self.state is not HAState.TRANSFER:
            raise DivergedError("the master sent data before the handshake")
        store = self.store
        received = store.raw_received
        if received != 0 and received != msg.offset:
            raise DivergedError(f"the master sends offset {msg.offset} but this slave has "
                                f"received up to {received}")
        if msg.epoch != self.received_epoch:
            self.received_epoch = msg.epoch
            if msg.epoch > self.client.epochs.last_epoch:
                self.client.epochs.append(msg.epoch, msg.epoch_start_offset)
        if msg.body:
            store.append_raw(msg.offset, msg.body)
        else:
            self.client.heartbeats += 1
        store.set_confirm_offset(min(msg.confirm_offset, store.max_phy_offset))



class SlaveClient(MasterClient):
    """Keeps a slave connected to its master's HA address."""

    def __init__(self, store: MessageStore, epochs: EpochFile, config: AutoSwitchHAConfig,
                 local_broker_id: int, master_addr: str | None) -> None:
        self.store = store
        self.epochs = epochs
        super().__init__(master_addr, config.reconnect_interval_ms / 1000)
        self.config = config
        self.local_broker_id = local_broker_id
        self.handshakes = 0
        self.truncations = 0
        self.heartbeats = 0
        self.last_error: str | None = None
        self.last_read_ms = 0  # ms since the epoch: last bytes from the master
        self.last_write_ms = 0  # ms since the epoch: last offset report to the master
        self.rate = ByteRate()

    def _new_link(self) -> _MasterConnection:
        return _MasterConnection(self)

