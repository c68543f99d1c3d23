"""Message counters of a broker for GET_BROKER_RUNTIME_INFO: puts and gets since start, their
rates over the last 10 s, 60 s and 600 s (RocketMQ's ``putTps`` "10s 60s 600s" triple) and
the totals at midnight for ``clusterList -m``.

The hot path (:meth:`BrokerStats.on_put` / :meth:`BrokerStats.on_get`) adds to a few ints and
reads the clock; once a second it also appends one sample to a bounded history.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

WINDOWS_S = (10, 60, 600)
_HISTORY = WINDOWS_S[-1] + 2


@dataclass(slots=True, frozen=True)
class Counts:
    """Totals since start: messages put, get requests, those that found messages, messages
    transferred to consumers."""

    put: int = 0
    get: int = 0
    get_found: int = 0
    transferred: int = 0

    def minus(self, other: Counts) -> Counts:
        return Counts(self.put - other.put, self.get - other.get,
                      self.get_found - other.get_found, self.transferred - other.transferred)


class BrokerStats:
    """Counters fed by the send and pull processors; rates computed when asked."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._wall = wall_clock
        self.put = self.get = self.get_found = self.transferred = 0
        self.put_bytes = 0  # of the records stored (RocketMQ's putMessageSizeTotal)
        self.started = clock()
        self.boot_timestamp_ms = int(wall_clock() * 1000)
        self._second = int(self.started)
        # (second, totals at the start of that second); the counts did not change between
        # a sample's second and the next sample's second, apart from within the first.
        self._samples: deque[tuple[int, Counts]] = deque([(self._second, Counts())], maxlen=_HISTORY)
        self._day = self._local_day()
        self.today_morning = Counts()
        self.yesterday_morning = Counts()

    # -- hot path -------------------------------------------------------------------------
    def on_put(self, messages: int = 1, size: int = 0) -> None:
        """``messages`` were stored by one send, in records of ``size`` bytes in all."""
        second = int(self._clock())
        if second != self._second:
            self._roll(second)
        self.put += messages
        self.put_bytes += size

    def on_get(self, found: int) -> None:
        """A pull answered with ``found`` messages (0: nothing)."""
        second = int(self._clock())
        if second != self._second:
            self._roll(second)
        self.get += 1
        if found:
            self.get_found += 1
            self.transferred += found

    # -- reading ----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Bring the day totals up to date after a quiet spell (call before reading them)."""
        second = int(self._clock())
        if second != self._second:
            self._roll(second)

    def counts(self) -> Counts:
        return Counts(self.put, self.get, self.get_found, self.transferred)

    def _roll(self, second: int) -> None:
        self._second = second
        now = self.counts()
        self._samples.append((second, now))
        day = self._local_day()
        if day != self._day:
            self.yesterday_morning = self.today_morning if day - self._day == 1 else now
            self.today_morning = now
            self._day = day

    def _local_day(self) -> int:
        t = time.localtime(self._wall())
        return t.tm_year * 1000 + t.tm_yday

    def tps(self, window_s: float) -> tuple[float, float, float, float]:
        """Per-second rates of (put, get, get_found, transferred) over the last ``window_s``
        seconds (over the uptime while it is shorter)."""
        now = self._clock()
        since = now - window_s
        if since <= self.started:
            since, base = self.started, Counts()
        else:
            base = self.counts()  # no sample after ``since``: nothing happened since then
            for second, counts in reversed(self._samples):
                if second < since:
                    break
                base = counts  # the totals at ``since`` are those of the first sample after it
        elapsed = now - since
        if elapsed <= 0:
            return 0.0, 0.0, 0.0, 0.0
        d = self.counts().minus(base)
        return d.put / elapsed, d.get / elapsed, d.get_found / elapsed, d.transferred / elapsed

    def tps_text(self) -> dict[str, str]:
        """RocketMQ's rate keys: ``"<10s> <60s> <600s>"`` with two decimals each (4.x and 5.x
        spell the transferred rate differently: both are given)."""
        rates = [self.tps(w) for w in WINDOWS_S]
        names = ("putTps", "getTotalTps", "getFoundTps", "getTransferedTps")
        table = {name: " ".join(f"{r[i]:.2f}" for r in rates) for i, name in enumerate(names)}
        table["getMissTps"] = " ".join(f"{r[1] - r[2]:.2f}" for r in rates)
        table["getTransferredTps"] = table["getTransferedTps"]  # 5.x's spelling (exportMetrics)
        return table
