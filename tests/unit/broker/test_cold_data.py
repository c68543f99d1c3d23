"""The cold read accounting of RocketMQ 5's cold data flow control (broker/cold_data.py), on a
fake clock: per-group and broker-wide sums over 5 s windows, the thresholds, the strategies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bolide.broker.cold_data import ADAPTIVE, RESIDE_MS, WINDOW_MS, ColdDataFlowControl
from bolide.broker.config import BrokerConfig
from bolide.common.message import Message
from bolide.errors import ConfigError
from bolide.store import MessageStore, StoreConfig

KIB = 1024


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def control(max_groups: int = 100, **settings: Any) -> tuple[ColdDataFlowControl, Clock, list[BrokerConfig]]:
    config = [BrokerConfig(cold_data_flow_control_enable=True, cg_cold_read_threshold=10 * KIB,
                           global_cold_read_threshold=100 * KIB, **settings)]
    clock = Clock()
    return ColdDataFlowControl(lambda: config[0], max_groups, clock), clock, config


def test_a_group_past_its_threshold_is_throttled_and_others_not() -> None:
    cold, clock, _ = control()
    cold.cold_acc("reader", 6 * KIB)
    cold.cold_acc("light", 1 * KIB)
    assert not cold.needs_flow_control("reader")
    cold.cold_acc("reader", 4 * KIB)  # 10 KiB: at the threshold
    assert cold.needs_flow_control("reader")
    assert not cold.needs_flow_control("light")
    assert not cold.needs_flow_control("never-read-cold")
    assert cold.global_acc == 11 * KIB
    clock.now += WINDOW_MS  # the window ends: the sums start again, the groups stay
    assert not cold.needs_flow_control("reader")
    info = cold.info()
    assert info["globalAcc"] == 0
    assert info["runtimeTable"]["reader"] == {"coldAcc": 0, "createTimeMills": clock.now - WINDOW_MS,
                                              "lastColdReadTimeMills": clock.now - WINDOW_MS}


def test_groups_leave_the_table_a_minute_after_their_last_cold_read() -> None:
    cold, clock, _ = control()
    cold.cold_acc("reader", KIB)
    clock.now += RESIDE_MS - 1
    cold.cold_acc("other", KIB)
    assert set(cold.info()["runtimeTable"]) == {"reader", "other"}
    clock.now += WINDOW_MS
    assert set(cold.info()["runtimeTable"]) == {"other"}


def test_past_the_global_threshold_every_group_reading_cold_data_is_throttled() -> None:
    cold, _, _ = control()
    for i in range(11):
        cold.cold_acc(f"g{i}", 9 * KIB)  # each under its 10 KiB, 99 KiB in all
    assert not cold.needs_flow_control("g0")
    cold.cold_acc("g11", KIB)
    assert cold.needs_flow_control("g0") and cold.needs_flow_control("g11")
    assert not cold.needs_flow_control("no-cold-reads")  # not in the runtime table


def test_system_groups_are_neither_counted_nor_throttled() -> None:
    cold, _, _ = control()
    for group in ("TOOLS_CONSUMER", "CID_RMQ_SYS_TRANS", "CID_RMQ_SYS_anything", "__MONITOR_CONSUMER"):
        cold.cold_acc(group, 1024 * KIB)
        assert not cold.needs_flow_control(group)
    assert cold.global_acc == 0 and cold.info()["runtimeTable"] == {}


def test_an_administrators_threshold_replaces_the_default_until_removed() -> None:
    cold, _, _ = control()
    cold.set_threshold("reader", 2 * KIB)
    cold.cold_acc("reader", 3 * KIB)
    assert cold.needs_flow_control("reader")
    assert cold.info()["configTable"] == {"reader": 2 * KIB}
    assert cold.remove_threshold("reader") and not cold.remove_threshold("reader")
    assert not cold.needs_flow_control("reader")
    assert cold.threshold("reader") == 10 * KIB


def test_the_runtime_table_is_bounded_by_forgetting_the_least_recent_reader() -> None:
    cold, _, _ = control(max_groups=2)
    cold.cold_acc("a", KIB)
    cold.cold_acc("b", KIB)
    cold.cold_acc("a", KIB)  # a is the most recent now
    cold.cold_acc("c", KIB)
    assert list(cold.info()["runtimeTable"]) == ["a", "c"]


def test_info_has_rocketmqs_keys() -> None:
    cold, _, _ = control()
    cold.cold_acc("reader", 5)
    info = cold.info()
    assert set(info) == {"runtimeTable", "configTable", "cgColdReadThreshold", "globalColdReadThreshold",
                         "globalAcc"}
    assert (info["cgColdReadThreshold"], info["globalColdReadThreshold"], info["globalAcc"]) == (
        10 * KIB, 100 * KIB, 5)


def test_simple_strategy_raises_a_busy_groups_threshold_and_lowers_it_while_the_broker_is_busy() -> None:
    cold, clock, config = control(cold_ctr_strategy_enable=True, use_pid_cold_ctr_strategy=False)
    cold.cold_acc("reader", 12 * KIB)
    clock.now += WINDOW_MS
    cold.info()  # the window ends: promoted to 1.5 times the threshold
    assert cold.config_table == {"reader" + ADAPTIVE: 15 * KIB}
    assert cold.threshold("reader") == 15 * KIB
    cold.cold_acc("reader", 200 * KIB)  # the broker past its 100 KiB: no promotion, a deceleration
    clock.now += WINDOW_MS
    cold.info()
    assert cold.config_table == {"reader" + ADAPTIVE: 12 * KIB}
    cold.set_threshold("reader", 50 * KIB)  # an administrator's threshold wins, and is left alone
    assert cold.threshold("reader") == 50 * KIB
    config[0] = config[0].replace(cold_ctr_strategy_enable=False)
    clock.now += WINDOW_MS
    cold.info()  # the strategy turned off: its thresholds go
    assert cold.config_table == {"reader": 50 * KIB}


def test_pid_strategy_waits_for_ten_windows_of_history() -> None:
    cold, clock, _ = control(cold_ctr_strategy_enable=True)
    for _ in range(9):
        cold.cold_acc("reader", 11 * KIB)
        clock.now += WINDOW_MS
        cold.info()
    assert cold.config_table == {}  # under 10 windows of history: factor 0, no change
    cold.cold_acc("reader", 11 * KIB)
    clock.now += WINDOW_MS
    cold.info()  # the broker stays well under 80 % of its threshold: promoted
    assert cold.config_table == {"reader" + ADAPTIVE: 15 * KIB}


def test_quiet_spells_end_windows_lazily_and_the_control_off_uses_180_s_windows() -> None:
    cold, clock, config = control()
    cold.cold_acc("reader", 20 * KIB)
    clock.now += 100 * WINDOW_MS
    assert not cold.needs_flow_control("reader") and cold.info()["runtimeTable"] == {}
    config[0] = config[0].replace(cold_data_flow_control_enable=False)
    cold.cold_acc("reader", 20 * KIB)
    clock.now += 60_000
    assert cold.needs_flow_control("reader")  # still this window
    clock.now += 120_000
    assert cold.info()["globalAcc"] == 0


def test_negative_thresholds_are_refused() -> None:
    with pytest.raises(ConfigError, match="cgColdReadThreshold"):
        BrokerConfig(cg_cold_read_threshold=-1)


def test_the_store_says_which_reads_are_cold(tmp_path: Path) -> None:
    """Cold: further than accessMessageInMemoryHotRatio % of memory behind the CommitLog's end."""
    store = MessageStore(StoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=1 << 20,
                                     total_physical_memory_bytes=10_000)).open()  # 2600 bytes hot
    try:
        for _ in range(10):
            store.put_message(Message("T", b"x" * 1000))
        assert store.wait_dispatched()
        size = store.get_message("g", "T", 0, 0, 1).buffer_total_size
        assert store.hot_area_bytes() == 2600
        assert store.in_cold_area("T", 0, 6) and not store.in_cold_area("T", 0, 8)
        assert not store.in_cold_area("T", 0, 10) and not store.in_cold_area("NoTopic", 0, 0)
        body = store.get_message("g", "T", 0, 4, 6, joined=True).body  # 4 to 7 cold, 8 and 9 hot
        assert store.cold_bytes(body) == 4 * size
        assert store.cold_bytes(store.get_message("g", "T", 0, 8, 2, joined=True).body) == 0
        store.reconfigure(access_message_in_memory_hot_ratio=0)  # every stored message is cold
        assert store.cold_bytes(body) == len(body) and store.in_cold_area("T", 0, 9)
    finally:
        store.close()
