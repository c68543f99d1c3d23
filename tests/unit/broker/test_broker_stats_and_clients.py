"""BrokerStats rates and day totals on fake clocks; ClientManager's per-connection details,
consumer listeners and topic lookups."""

from __future__ import annotations

import time

import pytest

from bolide.broker.clients import ClientManager
from bolide.broker.stats import BrokerStats
from bolide.protocol.bodies.client import SubscriptionData


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_rates_over_each_window_and_uptime() -> None:
    mono, wall = Clock(1000.0), Clock(time.mktime((2026, 6, 1, 12, 0, 0, 0, 0, -1)))
    stats = BrokerStats(mono, wall)
    for _ in range(20):  # 20 sends of 2 messages over the first 4 seconds
        mono.now += 0.2
        stats.on_put(2)
    stats.on_get(0)
    stats.on_get(3)
    # 4 s of uptime: every window is the uptime
    put, get, found, transferred = stats.tps(10)
    assert put == pytest.approx(40 / 4)
    assert (get, found, transferred) == pytest.approx((2 / 4, 1 / 4, 3 / 4))
    mono.now = 1070.0  # the 10 s and 60 s windows start after the burst
    assert stats.tps(10)[0] == 0 and stats.tps(60)[0] == 0
    assert stats.tps(600)[0] == pytest.approx(40 / 70)  # uptime: 70 s
    mono.now = 1100.0
    stats.on_put(5)
    mono.now = 1105.0
    assert stats.tps(10)[0] == pytest.approx(5 / 10)
    assert stats.tps(60)[0] == pytest.approx(5 / 60)
    assert stats.tps(600)[0] == pytest.approx(45 / 105)
    text = stats.tps_text()
    assert text["putTps"] == f"0.50 0.08 {45 / 105:.2f}"
    assert text["getMissTps"] == f"0.00 0.00 {(2 - 1) / 105:.2f}"
    assert stats.counts().put == 45


def test_day_totals_roll_at_local_midnight() -> None:
    mono = Clock(50.0)
    wall = Clock(time.mktime((2026, 6, 1, 23, 59, 58, 0, 0, -1)))
    stats = BrokerStats(mono, wall)
    stats.on_put(3)
    mono.now += 1
    wall.now += 5  # past midnight: the first event of the new day rolls
    stats.on_put(1)
    assert (stats.today_morning.put, stats.yesterday_morning.put) == (3, 0)
    mono.now += 1
    wall.now += 86_400
    stats.on_get(2)
    assert (stats.today_morning.put, stats.yesterday_morning.put) == (4, 3)
    assert stats.today_morning.transferred == 0 and stats.counts().transferred == 2
    mono.now += 1
    wall.now += 3 * 86_400  # days without traffic: yesterday's morning total is today's
    stats.refresh()
    assert stats.today_morning.put == stats.yesterday_morning.put == 4


def test_client_details_listeners_and_topics() -> None:
    clients = ClientManager(max_groups=2)
    seen: list[str] = []
    clients.on_consumer.append(seen.append)
    a, b = object(), object()
    sub = [SubscriptionData.of("T", "*")]
    assert clients.register_consumer("cg", a, "c@1", sub, "CONSUME_PASSIVELY", "CLUSTERING", None,
                                     language="GO", version=317, client_addr="10.0.0.1:5")
    assert clients.register_consumer("cg2", b, "c@2", [SubscriptionData.of("U", "*")], None, None, None)
    assert clients.register_producer("pg", a, "c@1")  # old positional form still works
    assert seen == ["cg", "cg2"]
    info = clients.channel_info(a)
    assert info is not None and (info.client_id, info.language, info.version, info.client_addr) == (
        "c@1", "GO", 317, "10.0.0.1:5")
    default = clients.channel_info(b)
    assert default is not None and (default.language, default.version, default.client_addr) == ("JAVA", 0, "")
    assert clients.groups_of_topic("T") == {"cg"} and clients.groups_of_topic("V") == set()
    assert not clients.register_consumer("cg3", b, "c@2", sub, None, None, None)  # table full
    clients.unregister(a, consumer_group="cg")  # a named group: the connection's details stay
    assert clients.channel_info(a) is not None and "cg" not in clients.consumers
    clients.unregister(a)
    assert clients.channel_info(a) is None and clients.channel_info(b) is not None
