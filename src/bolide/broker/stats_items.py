"""RocketMQ's per-topic and per-group message statistics (its BrokerStatsManager's items), which
VIEW_BROKER_STATS_DATA answers to ``mqadmin statsAll`` and ``exportMetrics``: for a stats name
and key, the sum, the rate per second and the average per call over the last minute, hour and
day.

The names kept, with their keys: TOPIC_PUT_NUMS / TOPIC_PUT_SIZE (topic), GROUP_GET_NUMS /
GROUP_GET_SIZE (``topic@group``), SNDBCK_PUT_NUMS (``topic@group``), BROKER_PUT_NUMS /
BROKER_GET_NUMS (the cluster name). A NUMS and a SIZE name share one item.

No timer samples the items: an update that comes at least 10 s (10 min, 1 h) after an item's
last minute (hour, day) snapshot first records the item's totals, which are exactly those of
that moment. A window then counts from its first snapshot inside it, so at most one snapshot
interval at its start goes uncounted, and its rate is over the time actually counted. Snapshots
are kept in flat ``array('q')``, and the table is bounded: past :data:`MAX_ITEMS`, items idle
for a day are dropped to make room, and new keys are not counted while none are.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass

MAX_ITEMS = 8192
TOPIC_PUT_NUMS, TOPIC_PUT_SIZE = "TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE"
GROUP_GET_NUMS, GROUP_GET_SIZE = "GROUP_GET_NUMS", "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS, BROKER_GET_NUMS = "BROKER_PUT_NUMS", "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
               BROKER_PUT_NUMS, BROKER_GET_NUMS)
_SIZE_NAMES = frozenset({TOPIC_PUT_SIZE, GROUP_GET_SIZE})

# (window, spacing of its snapshots, snapshots kept): RocketMQ's minute, hour and day lists
_WINDOWS_MS = ((60_000, 10_000, 8), (3_600_000, 600_000, 8), (86_400_000, 3_600_000, 26))
_STRIDE = 4  # a snapshot: monotonic ms, times, nums, size
_IDLE_MS = _WINDOWS_MS[-1][0]
_PURGE_EVERY_MS = 60_000


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One window of an item, as RocketMQ's BrokerStatsItem: ``sum`` of the values, ``tps``
    (values per second) and ``avgpt`` (values per call)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0


class _Item:
    """Totals of one key and their snapshots per window."""

    __slots__ = ("due", "dues", "nums", "size", "snaps", "times")

    def __init__(self, now: int) -> None:
        self.nums = self.size = self.times = 0
        self.snaps = tuple(array("q", (now, 0, 0, 0)) for _ in _WINDOWS_MS)
        self.dues = [now + spacing for _, spacing, _ in _WINDOWS_MS]
        self.due = self.dues[0]  # the earliest: checked on every update

    def snapshot(self, now: int) -> None:
        """Record the totals for each window whose snapshot is due (before an update)."""
        for i, (_, spacing, kept) in enumerate(_WINDOWS_MS):
            if now >= self.dues[i]:
                snaps = self.snaps[i]
                snaps.extend((now, self.times, self.nums, self.size))
                if len(snaps) > kept * _STRIDE:
                    del snaps[:_STRIDE]
                self.dues[i] = now + spacing
        self.due = self.dues[0]

    def idle(self, now: int) -> bool:
        """Not updated for a day (an update after the minute's spacing takes a snapshot, so
        the last one is at most that spacing older than the last update)."""
        return now - (self.due - _WINDOWS_MS[0][1]) > _IDLE_MS + _WINDOWS_MS[0][1]

    def window(self, index: int, now: int, size: bool) -> Snapshot:
        span_ms = _WINDOWS_MS[index][0]
        snaps = self.snaps[index]
        since = now - span_ms
        for at in range(0, len(snaps), _STRIDE):
            if snaps[at] >= since:
                break
        else:
            return Snapshot()  # no snapshot in the window: no update in it either
        total = (self.size - snaps[at + 3]) if size else (self.nums - snaps[at + 2])
        calls = self.times - snaps[at + 1]
        seconds = max((now - snaps[at]) / 1000, 1.0)
        return Snapshot(total, total / seconds, total / calls if calls > 0 else 0.0)


class StatsItems:
    """The broker's table of stats items, fed by the send and pull paths."""

    def __init__(self, cluster: str, *, max_items: int = MAX_ITEMS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.max_items = max_items
        self._clock = clock
        now = int(clock() * 1000)
        self._broker_put, self._broker_get = _Item(now), _Item(now)
        # by kind: T topic puts, G group gets, S send-backs; key -> item
        self._tables: dict[str, dict[str, _Item]] = {"T": {}, "G": {}, "S": {}}
        self._topics, self._groups = self._tables["T"], self._tables["G"]
        self._next_purge = 0
        self.uncounted = 0  # updates of keys the full table had no room for

    # -- hot path (on_put and on_get spell out the same update: a call less per request) ------
    def on_put(self, topic: str, nums: int, size: int) -> None:
        """A send stored ``nums`` messages of ``size`` bytes in all to ``topic``."""
        now = int(self._clock() * 1000)
        item = self._topics.get(topic)
        if item is None or now >= item.due:
            item = self._due("T", topic, now)
        if item is not None:
            item.nums += nums
            item.size += size
            item.times += 1
        broker = self._broker_put  # RocketMQ counts no calls for the broker
        if now >= broker.due:
            broker.snapshot(now)
        broker.nums += nums

    def on_get(self, group: str, topic: str, nums: int, size: int) -> None:
        """A pull or pop of ``group`` took ``nums`` messages (``size`` bytes) from ``topic``."""
        now = int(self._clock() * 1000)
        key = f"{topic}@{group}"
        item = self._groups.get(key)
        if item is None or now >= item.due:
            item = self._due("G", key, now)
        if item is not None:
            item.nums += nums
            item.size += size
            item.times += 1
        broker = self._broker_get
        if now >= broker.due:
            broker.snapshot(now)
        broker.nums += nums

    def on_send_back(self, group: str, topic: str) -> None:
        """``group`` sent a message of ``topic`` back for a retry."""
        now = int(self._clock() * 1000)
        item = self._due("S", f"{topic}@{group}", now)
        if item is not None:
            item.nums += 1
            item.times += 1

    def _due(self, kind: str, key: str, now: int) -> _Item | None:
        """The item of ``key``, created or with its due snapshots taken; None when the table is
        full."""
        table = self._tables[kind]
        item = table.get(key)
        if item is not None:
            if now >= item.due:
                item.snapshot(now)
            return item
        if len(self) >= self.max_items and not self._make_room(now):
            self.uncounted += 1
            return None
        item = table[key] = _Item(now)
        return item

    def _make_room(self, now: int) -> bool:
        """Drop the items idle for a day (at most once a minute); whether there is room now."""
        if now < self._next_purge:
            return False
        self._next_purge = now + _PURGE_EVERY_MS
        for table in self._tables.values():
            for key in [k for k, item in table.items() if item.idle(now)]:
                del table[key]
        return len(self) < self.max_items

    def forget_topic(self, topic: str) -> None:
        """Drop the items of a deleted topic (its puts, and its groups' gets and send-backs),
        as RocketMQ's onTopicDeleted."""
        self._topics.pop(topic, None)
        prefix = f"{topic}@"
        for kind in ("G", "S"):
            table = self._tables[kind]
            for key in [k for k in table if k.startswith(prefix)]:
                del table[key]

    # -- reading ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return sum(len(table) for table in self._tables.values())

    def view(self, name: str, key: str) -> tuple[Snapshot, Snapshot, Snapshot] | None:
        """The minute, hour and day of ``name`` / ``key``, or None when the broker has no such
        item (RocketMQ: "The stats <name> <key> not exist")."""
        item = self._item(name, key)
        if item is None:
            return None
        now = int(self._clock() * 1000)
        size = name in _SIZE_NAMES
        minute, hour, day = (item.window(i, now, size) for i in range(len(_WINDOWS_MS)))
        return minute, hour, day

    def _item(self, name: str, key: str) -> _Item | None:
        if name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            return self._topics.get(key)
        if name in (GROUP_GET_NUMS, GROUP_GET_SIZE):
            return self._groups.get(key)
        if name == SNDBCK_PUT_NUMS:
            return self._tables["S"].get(key)
        if key == self.cluster and name in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
            return self._broker_put if name == BROKER_PUT_NUMS else self._broker_get
        return None
