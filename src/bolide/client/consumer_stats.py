"""A consumer's figures per topic (Java ConsumerStatsManager), reported in
GET_CONSUMER_RUNNING_INFO: pull and consume round trips and rates over the last minute, failed
messages over the last hour.

Each event only adds to running totals; the totals are copied once a second (and the failure
count once a minute) into a short ring, and a report subtracts the copy of a minute (an hour)
ago. Fixed memory per topic, a few additions per pull or listener call.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TypeVar

from bolide.protocol.bodies.admin import TopicConsumeStatus

MINUTE_S = 60
T = TypeVar("T")


def _since(ring: deque[tuple[float, T]], now: float, window_s: float, current: T) -> tuple[float, T]:
    """The oldest copy within ``window_s`` of ``now``; ``current`` (nothing in the window) when
    every copy is older (a copy is taken at the first event of each second, or minute, so the
    events after the newest copy are as old as it)."""
    for at, values in ring:
        if now - at <= window_s:
            return at, values
    return now, current


class _TopicStats:
    """Running totals of one topic and their copies of the last minute (one per second) and
    of the last hour's failures (one per minute)."""

    __slots__ = ("_minute", "_second", "calls", "consume_ms", "failed", "hours", "ok", "pull_ms",
                 "pulled", "pulls", "seconds")

    def __init__(self, now: float) -> None:
        self.pulls = self.pulled = self.calls = self.ok = self.failed = 0
        self.pull_ms = self.consume_ms = 0.0
        self._second = int(now)
        self.seconds: deque[tuple[float, tuple[float, ...]]] = deque([(now, self.totals())],
                                                                     maxlen=MINUTE_S + 1)
        self._minute = self._second // MINUTE_S
        self.hours: deque[tuple[float, int]] = deque([(now, 0)], maxlen=MINUTE_S + 1)

    def totals(self) -> tuple[float, ...]:
        return (self.pulls, self.pull_ms, self.pulled, self.calls, self.consume_ms, self.ok,
                self.failed)

    def tick(self, now: float) -> None:
        """Before an event at ``now``: copy the totals when a new second began."""
        second = int(now)
        if second == self._second:
            return
        self._second = second
        self.seconds.append((now, self.totals()))
        if second // MINUTE_S != self._minute:
            self._minute = second // MINUTE_S
            self.hours.append((now, self.failed))


class ConsumerStats:
    """Per-topic figures of one consumer; topics are those it pulls from."""

    def __init__(self) -> None:
        self._topics: dict[str, _TopicStats] = {}

    def _of(self, topic: str, now: float) -> _TopicStats:
        stats = self._topics.get(topic)
        if stats is None:
            stats = self._topics[topic] = _TopicStats(now)
        stats.tick(now)
        return stats

    def pulled(self, topic: str, rt_ms: float, messages: int, now: float | None = None) -> None:
        """A pull answered with ``messages`` messages after ``rt_ms``."""
        stats = self._of(topic, time.monotonic() if now is None else now)
        stats.pulls += 1
        stats.pull_ms += rt_ms
        stats.pulled += messages

    def consumed(self, topic: str, rt_ms: float, ok: int, failed: int, now: float | None = None) -> None:
        """A listener call over ``ok + failed`` messages that took ``rt_ms``."""
        stats = self._of(topic, time.monotonic() if now is None else now)
        stats.calls += 1
        stats.consume_ms += rt_ms
        stats.ok += ok
        stats.failed += failed

    def status(self, topic: str, now: float | None = None) -> TopicConsumeStatus:
        """The topic's figures as GET_CONSUMER_RUNNING_INFO reports them (zeros when none)."""
        now = time.monotonic() if now is None else now
        stats = self._topics.get(topic)
        if stats is None:
            return TopicConsumeStatus()
        at, before = _since(stats.seconds, now, MINUTE_S, stats.totals())
        pulls, pull_ms, pulled, calls, consume_ms, ok, failed = (
            cur - old for cur, old in zip(stats.totals(), before, strict=True))
        span = max(now - at, 1.0)
        _, failed_before = _since(stats.hours, now, 60 * MINUTE_S, stats.failed)
        return TopicConsumeStatus(
            pull_rt=round(pull_ms / pulls, 3) if pulls else 0.0,
            pull_tps=round(pulled / span, 3),
            consume_rt=round(consume_ms / calls, 3) if calls else 0.0,
            consume_ok_tps=round(ok / span, 3),
            consume_failed_tps=round(failed / span, 3),
            consume_failed_msgs=stats.failed - failed_before)
