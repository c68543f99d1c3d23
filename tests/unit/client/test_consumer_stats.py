"""A consumer's per-topic figures for GET_CONSUMER_RUNNING_INFO: averages and rates over the
last minute (over the time since the first figure while younger), failures over the last hour,
older periods forgotten, in fixed memory."""

from __future__ import annotations

import time

from bolide.client.consumer_stats import ConsumerStats, Window
from bolide.protocol.bodies.admin import TopicConsumeStatus


def test_window_sums_the_last_periods_and_forgets_older_ones() -> None:
    w = Window(slots=60, period_s=1.0, now=1000.0)
    w.add(5.0, now=1000.2)
    w.add(7.0, count=2, now=1000.9)  # same second
    w.add(1.0, now=1030.0)
    assert w.totals(now=1030.5) == (13.0, 4, 30.5)  # young: the span is its age
    assert w.totals(now=1059.5) == (13.0, 4, 59.5)
    assert w.totals(now=1060.5) == (1.0, 1, 60.0)  # second 1000 left the window
    w.add(2.0, now=1120.0)  # the slot of second 1060 reused for 1120
    assert w.totals(now=1120.0) == (2.0, 1, 60.0)
    hour = Window(60, 60.0, now=0.0)
    hour.add(3, now=10.0)
    assert hour.totals(now=3599.0)[0] == 3 and hour.totals(now=3600.0)[0] == 0


def test_consumer_stats_report_rates_and_averages_per_topic() -> None:
    stats = ConsumerStats()
    start = time.monotonic()
    stats.pulled("T", 4.0, 32)
    stats.pulled("T", 2.0, 8)
    stats.consumed("T", 10.0, ok=30, failed=0)
    stats.consumed("T", 20.0, ok=0, failed=10)
    report = stats.status("T", now=start + 20.0)
    assert report.pull_rt == 3.0 and report.consume_rt == 15.0
    assert report.pull_tps == 2.0 and report.consume_ok_tps == 1.5 and report.consume_failed_tps == 0.5
    assert report.consume_failed_msgs == 10
    later = stats.status("T", now=start + 120.0)  # the minute is over, the hour is not
    assert (later.pull_tps, later.pull_rt, later.consume_ok_tps) == (0.0, 0.0, 0.0)
    assert later.consume_failed_msgs == 10
    assert stats.status("Other") == TopicConsumeStatus()
