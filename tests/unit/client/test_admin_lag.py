"""consumerProgress lag computations: messages and store time behind, per queue and per group."""

from __future__ import annotations

from bolide.client.admin_types import GroupProgress, QueueProgress, queue_lag
from bolide.protocol.bodies.client import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


def test_caught_up_queue_has_no_lag() -> None:
    assert queue_lag(10, 10, 1_000, 2_000) == (0, 0)
    assert queue_lag(10, 12, 1_000, 2_000) == (0, 0)  # a committed offset ahead never counts negative


def test_time_lag_is_newest_minus_last_consumed_store_time() -> None:
    assert queue_lag(10, 7, last_consumed_ms=5_000, newest_ms=9_500) == (3, 4_500)


def test_nothing_consumed_uses_the_oldest_retained_message() -> None:
    assert queue_lag(10, 0, last_consumed_ms=0, newest_ms=9_000, earliest_ms=1_000) == (10, 8_000)


def test_unknown_store_times_give_unknown_time_lag() -> None:
    assert queue_lag(10, 0, 0, 9_000, 0) == (10, None)
    assert queue_lag(10, 5, 4_000, 0) == (5, None)


def test_clock_skew_never_gives_negative_time_lag() -> None:
    assert queue_lag(3, 1, last_consumed_ms=9_000, newest_ms=8_000) == (2, 0)


def test_group_totals() -> None:
    p = GroupProgress("cg", [
        QueueProgress(MQ, 10, 7, last_consumed_ms=5_000, newest_ms=9_500),
        QueueProgress(MessageQueue("T", "broker-a", 1), 4, 4, 3_000, 3_000),
        QueueProgress(MessageQueue("T", "broker-a", 2), 6, 0, 0, 8_000, earliest_ms=1_000),
    ])
    assert p.total_lag == 3 + 0 + 6
    assert p.max_lag_ms == 7_000
    doc = p.to_dict()
    assert doc["totalLag"] == 9 and doc["maxLagMs"] == 7_000
    assert [q["lag"] for q in doc["queues"]] == [3, 0, 6]
    assert doc["queues"][0] | {"lagMs": 4_500, "topic": "T", "queueId": 0} == doc["queues"][0]


def test_group_max_lag_unknown_when_a_lagging_queue_is_unknown() -> None:
    p = GroupProgress("cg", [QueueProgress(MQ, 5, 0, 0, 9_000, 0)])
    assert p.max_lag_ms is None
    assert GroupProgress("empty").max_lag_ms == 0
