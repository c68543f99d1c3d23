"""Broker liveness as the controller sees it (RocketMQ's DefaultBrokerHeartbeatManager): the
last BROKER_HEARTBEAT of each (cluster, broker name, broker id), with the replication figures
the elect policy compares. A broker is alive until its heartbeat timeout passes; the periodic
scan drops the expired ones and their connections, and a closed connection drops its broker."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000  # BrokerHeartbeatManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
JAVA_INT_MAX = (1 << 31) - 1

BrokerKey = tuple[str, str, int]  # cluster name, broker name, broker id


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class BrokerLiveInfo:
    broker_name: str
    broker_addr: str
    broker_id: int
    last_update_ms: int
    heartbeat_timeout_ms: int
    channel: object | None
    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = JAVA_INT_MAX


class HeartbeatManager:
    """Live brokers by identity; ``clock`` gives milliseconds."""

    def __init__(self, clock: Callable[[], int] = wall_clock_ms) -> None:
        self._clock = clock
        self.table: dict[BrokerKey, BrokerLiveInfo] = {}

    def on_heartbeat(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int, *,
                     timeout_ms: int | None = None, channel: object | None = None,
                     epoch: int | None = None, max_offset: int | None = None,
                     confirm_offset: int | None = None, election_priority: int | None = None) -> None:
        """Record a heartbeat; the epoch and offsets only move forward, as RocketMQ keeps them."""
        now = self._clock()
        real_epoch = -1 if epoch is None else epoch
        real_max = -1 if max_offset is None else max_offset
        real_confirm = -1 if confirm_offset is None else confirm_offset
        timeout = DEFAULT_HEARTBEAT_TIMEOUT_MS if timeout_ms is None else timeout_ms
        priority = JAVA_INT_MAX if election_priority is None else election_priority
        key = (cluster, broker_name, broker_id)
        prev = self.table.get(key)
        if prev is None:
            self.table[key] = BrokerLiveInfo(broker_name, broker_addr, broker_id, now, timeout, channel,
                                             real_epoch, real_max, real_confirm, priority)
            return
        prev.last_update_ms = now
        prev.heartbeat_timeout_ms = timeout
        prev.election_priority = priority
        prev.broker_addr = broker_addr
        prev.channel = channel if channel is not None else prev.channel
        if real_epoch > prev.epoch or (real_epoch == prev.epoch and real_max > prev.max_offset):
            prev.epoch, prev.max_offset, prev.confirm_offset = real_epoch, real_max, real_confirm

    def is_active(self, cluster: str, broker_name: str, broker_id: int | None) -> bool:
        if broker_id is None:
            return False
        info = self.table.get((cluster, broker_name, broker_id))
        return info is not None and info.last_update_ms + info.heartbeat_timeout_ms >= self._clock()

    def active_counts(self) -> dict[tuple[str, str], int]:
        """Brokers whose heartbeat is current, by (cluster, broker name)."""
        now = self._clock()
        counts: dict[tuple[str, str], int] = {}
        for (cluster, broker_name, _), info in self.table.items():
            if info.last_update_ms + info.heartbeat_timeout_ms >= now:
                counts[cluster, broker_name] = counts.get((cluster, broker_name), 0) + 1
        return counts

    def live_info(self, cluster: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.table.get((cluster, broker_name, broker_id))

    def scan_not_active(self) -> list[tuple[BrokerKey, BrokerLiveInfo]]:
        """Remove and return the brokers whose heartbeat timed out."""
        now = self._clock()
        expired = [(k, v) for k, v in self.table.items() if now - v.last_update_ms > v.heartbeat_timeout_ms]
        for key, _ in expired:
            del self.table[key]
        return expired

    def on_channel_close(self, channel: object) -> BrokerKey | None:
        """Remove the broker whose heartbeats came on ``channel``; its identity, or None."""
        for key, info in self.table.items():
            if info.channel is channel:
                del self.table[key]
                return key
        return None
