"""A consumer's figures per topic (Java ConsumerStatsManager), reported in
GET_CONSUMER_RUNNING_INFO: pull and consume round trips and rates over the last minute, failed
messages over the last hour. Fixed memory: one slot per second (per minute for the hour)."""

from __future__ import annotations

import time

from bolide.protocol.bodies.admin import TopicConsumeStatus


class Window:
    """Sums and counts of the last ``slots`` periods of ``period_s`` seconds each."""

    __slots__ = ("_counts", "_periods", "_started", "_sums", "period_s")

    def __init__(self, slots: int = 60, period_s: float = 1.0, now: float | None = None) -> None:
        self.period_s = period_s
        self._periods = [-1] * slots  # which period each slot holds
        self._sums = [0.0] * slots
        self._counts = [0] * slots
        self._started = time.monotonic() if now is None else now

    def add(self, value: float, count: int = 1, now: float | None = None) -> None:
        period = int((time.monotonic() if now is None else now) / self.period_s)
        i = period % len(self._periods)
        if self._periods[i] != period:
            self._periods[i], self._sums[i], self._counts[i] = period, 0.0, 0
        self._sums[i] += value
        self._counts[i] += count

    def totals(self, now: float | None = None) -> tuple[float, int, float]:
        """The sum and count over the window, and the seconds it covers (less while young)."""
        now = time.monotonic() if now is None else now
        period = int(now / self.period_s)
        oldest = period - len(self._periods)
        total, count = 0.0, 0
        for p, s, c in zip(self._periods, self._sums, self._counts, strict=True):
            if oldest < p <= period:
                total += s
                count += c
        span = min(len(self._periods) * self.period_s, max(now - self._started, 1.0))
        return total, count, span


class _TopicStats:
    __slots__ = ("consume_rt", "failed", "failed_hour", "ok", "pull_rt", "pulled")

    def __init__(self, now: float) -> None:
        self.pull_rt = Window(now=now)  # ms per pull answer that brought messages
        self.pulled = Window(now=now)  # messages pulled
        self.consume_rt = Window(now=now)  # ms per listener call
        self.ok = Window(now=now)  # messages consumed
        self.failed = Window(now=now)  # messages to consume again
        self.failed_hour = Window(60, 60.0, now=now)


class ConsumerStats:
    """Per-topic figures of one consumer; topics are those it pulls from."""

    def __init__(self) -> None:
        self._topics: dict[str, _TopicStats] = {}

    def _of(self, topic: str, now: float) -> _TopicStats:
        stats = self._topics.get(topic)
        if stats is None:
            stats = self._topics[topic] = _TopicStats(now)
        return stats

    def pulled(self, topic: str, rt_ms: float, messages: int) -> None:
        """A pull answered with ``messages`` messages after ``rt_ms``."""
        now = time.monotonic()
        stats = self._of(topic, now)
        stats.pull_rt.add(rt_ms, now=now)
        stats.pulled.add(messages, now=now)

    def consumed(self, topic: str, rt_ms: float, ok: int, failed: int) -> None:
        """A listener call over ``ok + failed`` messages that took ``rt_ms``."""
        now = time.monotonic()
        stats = self._of(topic, now)
        stats.consume_rt.add(rt_ms, now=now)
        stats.ok.add(ok, now=now)
        stats.failed.add(failed, now=now)
        stats.failed_hour.add(failed, now=now)

    def status(self, topic: str, now: float | None = None) -> TopicConsumeStatus:
        """The topic's figures as GET_CONSUMER_RUNNING_INFO reports them (zeros when none)."""
        now = time.monotonic() if now is None else now
        stats = self._topics.get(topic)
        if stats is None:
            return TopicConsumeStatus()
        rt_sum, pulls, _ = stats.pull_rt.totals(now)
        pulled, _, span = stats.pulled.totals(now)
        c_sum, calls, _ = stats.consume_rt.totals(now)
        ok, _, _ = stats.ok.totals(now)
        failed, _, _ = stats.failed.totals(now)
        failed_hour, _, _ = stats.failed_hour.totals(now)
        return TopicConsumeStatus(
            pull_rt=round(rt_sum / pulls, 3) if pulls else 0.0,
            pull_tps=round(pulled / span, 3),
            consume_rt=round(c_sum / calls, 3) if calls else 0.0,
            consume_ok_tps=round(ok / span, 3),
            consume_failed_tps=round(failed / span, 3),
            consume_failed_msgs=int(failed_hour))
