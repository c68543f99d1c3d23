"""Orderly consumers' queue locks (RocketMQ's RebalanceLockManager).

A lock gives one client of a consumer group a queue; it lasts ``max_live_ms`` after its last
renewal (the client renews every 20 s and stops trusting its lock after 30 s). Bounded in the
number of groups; expired locks are dropped when their group is next touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from bolide.protocol.bodies.client import MessageQueue

LOCK_MAX_LIVE_MS = 60_000


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class QueueLocks:
    """(group, queue) -> (client id, last renewal)."""

    def __init__(self, max_groups: int = 10_000, max_live_ms: int = LOCK_MAX_LIVE_MS,
                 clock: Callable[[], int] = _monotonic_ms) -> None:
        self.max_groups = max_groups
        self.max_live_ms = max_live_ms
        self._clock = clock
        self._groups: dict[str, dict[MessageQueue, tuple[str, int]]] = {}

    def lock(self, group: str, client_id: str, queues: Iterable[MessageQueue]) -> set[MessageQueue]:
        """Lock or renew ``queues`` for ``client_id``; the queues it now holds."""
        now = self._clock()
        locks = self._group(group, now)
        if locks is None:
            return set()
        held = set()
        for mq in queues:
            owner = locks.get(mq)
            if owner is None or owner[0] == client_id or now - owner[1] > self.max_live_ms:
                locks[mq] = (client_id, now)
                held.add(mq)
        return held

    def unlock(self, group: str, client_id: str, queues: Iterable[MessageQueue]) -> None:
        """Release the queues of ``queues`` that ``client_id`` holds."""
        locks = self._groups.get(group)
        if locks is None:
            return
        for mq in queues:
            owner = locks.get(mq)
            if owner is not None and owner[0] == client_id:
                del locks[mq]
        if not locks:
            del self._groups[group]

    def owner(self, group: str, mq: MessageQueue) -> str | None:
        """The client holding a live lock on ``mq``, if any."""
        owner = self._groups.get(group, {}).get(mq)
        if owner is None or self._clock() - owner[1] > self.max_live_ms:
            return None
        return owner[0]

    def _group(self, group: str, now: int) -> dict[MessageQueue, tuple[str, int]] | None:
        """The group's table, created when missing; None when the group table is full."""
        locks = self._groups.get(group)
        if locks is None:
            if len(self._groups) >= self.max_groups:
                self._drop_expired(now)
                if len(self._groups) >= self.max_groups:
                    return None
            locks = self._groups[group] = {}
        return locks

    def _drop_expired(self, now: int) -> None:
        for group in list(self._groups):
            locks = self._groups[group]
            for mq in [mq for mq, (_, at) in locks.items() if now - at > self.max_live_ms]:
                del locks[mq]
            if not locks:
                del self._groups[group]
