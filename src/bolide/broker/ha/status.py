"""Replication status: the byte rate counters of HA connections and the ``HARuntimeInfo`` a
broker answers GET_BROKER_HA_STATUS (907) with, as RocketMQ 5's DefaultHAService builds it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bolide.protocol.bodies.ha import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo

if TYPE_CHECKING:
    from bolide.broker.ha.master import HAMaster
    from bolide.broker.ha.slave import HASlave
    from bolide.store import MessageStore


class ByteRate:
    """Bytes moved per second: the count of the last whole second (RocketMQ's FlowMonitor
    reports the bytes of the previous one-second window too)."""

    __slots__ = ("_clock", "_count", "_previous", "_second")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._second = int(clock())
        self._count = 0
        self._previous = 0

    def _roll(self) -> None:
        now = int(self._clock())
        if now != self._second:
            self._previous = self._count if now == self._second + 1 else 0
            self._count = 0
            self._second = now

    def add(self, n: int) -> None:
        self._roll()
        self._count += n

    def per_second(self) -> int:
        """Bytes counted during the last whole second."""
        self._roll()
        return self._previous


def master_runtime_info(store: MessageStore, ha: HAMaster | None) -> HARuntimeInfo:
    """A master's figures: its CommitLog max offset and each connected slave's progress. A
    slave is in sync when it acknowledged data and lags less than haSlaveFallbehindMax."""
    max_offset = store.max_phy_offset
    info = HARuntimeInfo(master=True, master_commit_log_max_offset=max_offset)
    if ha is None:  # the HA port could not be bound: no slave can connect
        return info
    limit = ha.config.ha_slave_fallbehind_max
    for conn in sorted(ha.connections, key=lambda c: c.addr):
        ack = conn.ack_offset
        in_sync = ack >= 0 and max_offset - ack < limit
        info.ha_connection_info.append(HAConnectionRuntimeInfo(
            addr=conn.addr, slave_ack_offset=ack, diff=max_offset - ack, in_sync=in_sync,
            transferred_byte_in_second=conn.rate.per_second(),
            transfer_from_where=conn.next_offset))
        info.in_sync_slave_nums += in_sync
    return info


def slave_runtime_info(store: MessageStore, ha: HASlave) -> HARuntimeInfo:
    """A slave's figures: the master's HA address, its own CommitLog max offset and when it
    last heard from (read) and reported to (write) the master, in ms since the epoch."""
    return HARuntimeInfo(master=False, ha_client_runtime_info=HAClientRuntimeInfo(
        master_addr=ha.master_addr, max_offset=store.max_phy_offset,
        last_read_timestamp=ha.last_read_ms, last_write_timestamp=ha.last_write_ms,
        transferred_byte_in_second=ha.rate.per_second(), is_activated=ha.connected))
