"""A consumer's per-topic figures for GET_CONSUMER_RUNNING_INFO: averages and rates over the
last minute (over the time since the first figure while younger), failures over the last hour,
older events forgotten, in fixed memory."""

from __future__ import annotations

from bolide.client.consumer_stats import MINUTE_S, ConsumerStats
from bolide.protocol.bodies.admin import TopicConsumeStatus

T0 = 1000.0


def test_rates_and_averages_over_the_last_minute() -> None:
    stats = ConsumerStats()
    stats.pulled("T", 4.0, 32, now=T0)
    stats.pulled("T", 2.0, 8, now=T0 + 0.5)  # same second: no new copy
    stats.consumed("T", 10.0, ok=30, failed=0, now=T0 + 1)
    stats.consumed("T", 20.0, ok=0, failed=10, now=T0 + 2)
    report = stats.status("T", now=T0 + 20)
    assert report.pull_rt == 3.0 and report.consume_rt == 15.0
    assert report.pull_tps == 2.0 and report.consume_ok_tps == 1.5 and report.consume_failed_tps == 0.5
    assert report.consume_failed_msgs == 10
    assert stats.status("Other") == TopicConsumeStatus()


def test_events_older_than_the_window_are_forgotten() -> None:
    stats = ConsumerStats()
    stats.pulled("T", 4.0, 32, now=T0)
    stats.consumed("T", 10.0, ok=1, failed=5, now=T0)
    for i in range(1, 200):  # one pull a second, one message each, for 199 s
        stats.pulled("T", 1.0, 1, now=T0 + i)
    report = stats.status("T", now=T0 + 199.5)
    assert 0.95 <= report.pull_tps <= 1.05 and report.pull_rt == 1.0  # only the last minute
    assert report.consume_ok_tps == 0.0 and report.consume_rt == 0.0
    assert report.consume_failed_msgs == 5  # the hour is not over
    quiet = stats.status("T", now=T0 + 400)  # nothing for minutes
    assert (quiet.pull_tps, quiet.pull_rt) == (0.0, 0.0)
    later = ConsumerStats()
    later.consumed("T", 1.0, ok=0, failed=3, now=T0)
    for minute in range(1, 70):
        later.pulled("T", 1.0, 1, now=T0 + minute * MINUTE_S)
    assert later.status("T", now=T0 + 69 * MINUTE_S).consume_failed_msgs == 0  # over an hour ago


def test_memory_is_bounded() -> None:
    stats = ConsumerStats()
    for i in range(10_000):
        stats.pulled("T", 1.0, 1, now=T0 + i)
    topic = stats._topics["T"]
    assert len(topic.seconds) <= MINUTE_S + 1 and len(topic.hours) <= MINUTE_S + 1
