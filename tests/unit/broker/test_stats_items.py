"""StatsItems (VIEW_BROKER_STATS_DATA's items) on a fake clock: sums, rates and averages per
window, snapshots taken as items are updated, the names and keys RocketMQ asks by, the bound."""

from __future__ import annotations

import pytest
from test_broker_stats_and_clients import Clock

from bolide.broker.stats_items import StatsItems


def test_a_burst_shows_in_every_window_then_leaves_the_minute_and_the_hour() -> None:
    clock = Clock(5000.0)
    items = StatsItems("DefaultCluster", clock=clock)
    for _ in range(10):  # 10 sends of 3 messages, 100 bytes each, over 5 s
        items.on_put("T", 3, 300)
        clock.now += 0.5
    minute, hour, day = items.view("TOPIC_PUT_NUMS", "T")  # type: ignore[misc]
    assert (minute.sum, hour.sum, day.sum) == (30, 30, 30)
    assert minute.tps == pytest.approx(30 / 5)
    assert minute.avgpt == pytest.approx(3)  # messages per send
    size = items.view("TOPIC_PUT_SIZE", "T")
    assert size is not None and size[0].sum == 3000 and size[0].avgpt == pytest.approx(300)
    broker = items.view("BROKER_PUT_NUMS", "DefaultCluster")
    assert broker is not None and broker[0].sum == 30 and broker[0].avgpt == 0  # no calls counted

    clock.now += 120  # out of the minute, still in the hour and the day
    minute, hour, day = items.view("TOPIC_PUT_NUMS", "T")  # type: ignore[misc]
    assert (minute.sum, minute.tps, hour.sum, day.sum) == (0, 0, 30, 30)
    clock.now += 2 * 3600
    assert [w.sum for w in items.view("TOPIC_PUT_NUMS", "T")] == [0, 0, 30]  # type: ignore[union-attr]
    clock.now += 86_400
    assert [w.sum for w in items.view("TOPIC_PUT_NUMS", "T")] == [0, 0, 0]  # type: ignore[union-attr]


def test_steady_traffic_counts_the_last_minute_from_its_snapshots() -> None:
    clock = Clock(0.0)
    items = StatsItems("C", clock=clock)
    for _ in range(600):  # 10 minutes of one message a second
        items.on_get("g", "T", 1, 10)
        clock.now += 1
    minute, hour, _ = items.view("GROUP_GET_NUMS", "T@g")  # type: ignore[misc]
    # snapshots every 10 s: the minute starts at the first one inside it
    assert 50 <= minute.sum <= 60
    assert minute.tps == pytest.approx(1.0, rel=0.05)
    assert hour.sum == 600
    assert items.view("BROKER_GET_NUMS", "C")[0].sum == minute.sum  # type: ignore[index]


def test_unknown_names_and_keys_have_no_item() -> None:
    items = StatsItems("C", clock=Clock(1.0))
    items.on_put("T", 1, 1)
    items.on_send_back("g", "T")
    assert items.view("TOPIC_PUT_NUMS", "other") is None
    assert items.view("GROUP_GET_NUMS", "T@g") is None
    assert items.view("BROKER_PUT_NUMS", "another-cluster") is None
    assert items.view("NO_SUCH_STATS", "T") is None
    back = items.view("SNDBCK_PUT_NUMS", "T@g")
    assert back is not None and back[0].sum == 1


def test_the_table_is_bounded_and_makes_room_from_items_idle_for_a_day() -> None:
    clock = Clock(0.0)
    items = StatsItems("C", max_items=3, clock=clock)
    for topic in "ABC":
        items.on_put(topic, 1, 1)
    items.on_put("D", 1, 1)
    assert len(items) == 3 and items.view("TOPIC_PUT_NUMS", "D") is None and items.uncounted == 1
    assert items.view("BROKER_PUT_NUMS", "C")[2].sum == 4  # type: ignore[index]
    clock.now += 86_400 + 11  # a day since their last update (known to 10 s)
    items.on_put("A", 1, 1)  # A stays in use
    items.on_put("D", 1, 1)  # B and C were idle for a day: dropped for D
    assert items.view("TOPIC_PUT_NUMS", "D") is not None
    assert items.view("TOPIC_PUT_NUMS", "B") is None and len(items) == 2


def test_a_deleted_topic_leaves_no_items() -> None:
    items = StatsItems("C", clock=Clock(0.0))
    items.on_put("Gone", 1, 10)
    items.on_get("g", "Gone", 1, 10)
    items.on_send_back("g", "Gone")
    items.on_put("Kept", 1, 10)
    items.on_get("g", "Kept", 1, 10)
    items.on_get("g", "Gone2", 1, 10)  # a topic whose name starts like the deleted one's
    assert len(items) == 6
    items.forget_topic("Gone")
    assert len(items) == 3
    assert items.view("TOPIC_PUT_NUMS", "Gone") is None and items.view("GROUP_GET_NUMS", "Gone@g") is None
    assert items.view("SNDBCK_PUT_NUMS", "Gone@g") is None
    assert items.view("GROUP_GET_NUMS", "Gone2@g") is not None
    assert items.view("TOPIC_PUT_NUMS", "Kept") is not None
