"""Cold data flow control (RocketMQ 5's ColdDataCgCtrService): the bytes each consumer group
pulls from the cold area of the CommitLog (further than accessMessageInMemoryHotRatio percent
of memory behind its end, so likely read from disk), summed per group and for the broker over
windows of 5 s; a group past its threshold (cgColdReadThreshold, or one set by
UPDATE_COLD_DATA_FLOW_CTR_CONFIG), or any group reading cold data while the broker is past
globalColdReadThreshold, is throttled on its next pull of cold data.

Windows roll lazily, when the table is next touched (no timer). A group leaves the runtime
table 60 s after its last cold read; both tables are bounded. With coldCtrStrategyEnable, the
thresholds of groups with none set by an administrator adapt at each window's end (RocketMQ's
SimpleColdCtrStrategy, or PIDAdaptiveColdCtrStrategy with usePIDColdCtrStrategy). Runs on the
broker's event loop only."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bolide.broker.config import BrokerConfig
from bolide.common.topic import SYSTEM_GROUP_PREFIX
from bolide.protocol.bodies.admin import ColdReadAcc

WINDOW_MS = 5_000  # RocketMQ clears the sums every 5 s while the control is on
IDLE_WINDOW_MS = 180_000  # and every 180 s while it is off
RESIDE_MS = 60_000  # a group without cold reads for this long leaves the runtime table
ADAPTIVE = "||adaptive"  # the suffix of the thresholds the strategies set
MAX_ROLLS = 11  # windows replayed at once after a quiet spell (the PID history holds 10)
PID_HISTORY = 10
KP, KI, KD = 0.5, 0.3, 0.2
MAX_DECELERATE = 3

# MixAll.isSysConsumerGroupPullMessage: the groups of servers and tools, never throttled
SYSTEM_PULL_GROUPS = frozenset({
    "DEFAULT_CONSUMER", "TOOLS_CONSUMER", "SCHEDULE_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER",
    "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL"})


def is_system_group(group: str) -> bool:
    """Groups whose pulls are neither counted nor throttled."""
    return group in SYSTEM_PULL_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)


def wall_ms() -> int:
    return int(time.time() * 1000)


class _PidStrategy:
    """PIDAdaptiveColdCtrStrategy's decision: raise a group's threshold while the broker stays
    under 80 % of globalColdReadThreshold, lower it while above."""

    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.history: list[int] = []
        self.error = 0

    def collect(self, global_acc: int) -> None:
        self.error = self.expect - global_acc
        self.history = [*self.history, self.error][-PID_HISTORY:]

    def factor(self) -> float:
        if len(self.history) < PID_HISTORY:
            return 0.0
        return KP * self.error + KI * sum(self.history) + KD * (self.history[-1] - self.history[-2])


class ColdDataFlowControl:
    """The runtime table (cold bytes per group this window), the configured thresholds and the
    broker's sum. ``settings`` gives the broker's current config (UPDATE_BROKER_CONFIG replaces
    it); ``clock`` wall-clock milliseconds."""

    def __init__(self, settings: Callable[[], BrokerConfig], max_groups: int = 10_000,
                 clock: Callable[[], int] = wall_ms) -> None:
        self.settings = settings
        self.max_groups = max_groups
        self.clock = clock
        self.runtime: dict[str, ColdReadAcc] = {}  # least recently cold first
        self.config_table: dict[str, int] = {}  # admin thresholds; "<group>||adaptive" the strategies'
        self.global_acc = 0
        self._window_start = clock()
        self._pid: _PidStrategy | None = None

    # -- the pull path ------------------------------------------------------------------------
    def cold_acc(self, group: str, cold_bytes: int) -> None:
        """Count ``cold_bytes`` a pull of ``group`` read from the cold area."""
        if cold_bytes <= 0 or is_system_group(group):
            return
        now = self._roll()
        self.global_acc += cold_bytes
        entry = self.runtime.pop(group, None)
        if entry is None:
            if len(self.runtime) >= self.max_groups:  # make room: the least recent cold reader
                self._forget(next(iter(self.runtime)))
            entry = ColdReadAcc(0, now, now)
        entry.cold_acc += cold_bytes
        entry.last_cold_read_ms = now
        self.runtime[group] = entry

    def needs_flow_control(self, group: str) -> bool:
        """Whether ``group``'s next pull of cold data is throttled: it read cold data lately and
        is past its threshold this window, or the broker is past globalColdReadThreshold."""
        if not self.runtime or is_system_group(group):
            return False
        self._roll()
        entry = self.runtime.get(group)
        if entry is None:
            return False
        return (entry.cold_acc >= self.threshold(group)
                or self.global_acc >= self.settings().global_cold_read_threshold)

    # -- administration -----------------------------------------------------------------------
    def set_threshold(self, group: str, threshold: int) -> None:
        """UPDATE_COLD_DATA_FLOW_CTR_CONFIG: ``group``'s own threshold (bytes per window);
        ValueError when the table is full."""
        if group not in self.config_table and len(self.config_table) >= 2 * self.max_groups:
            raise ValueError(f"the cold data flow control table holds {len(self.config_table)} "
                             "groups already: remove some with removeColdDataFlowCtrGroupConfig")
        self.config_table[group] = threshold

    def remove_threshold(self, group: str) -> bool:
        """REMOVE_COLD_DATA_FLOW_CTR_CONFIG; whether it had one."""
        return self.config_table.pop(group, None) is not None

    def info(self) -> dict[str, Any]:
        """GET_COLD_DATA_FLOW_CTR_INFO's document, as RocketMQ's getColdDataFlowCtrInfo."""
        self._roll()
        config = self.settings()
        return {"runtimeTable": {g: e.to_json_obj() for g, e in self.runtime.items()},
                "configTable": dict(self.config_table),
                "cgColdReadThreshold": config.cg_cold_read_threshold,
                "globalColdReadThreshold": config.global_cold_read_threshold,
                "globalAcc": self.global_acc}

    def threshold(self, group: str) -> int:
        """The threshold of ``group`` (or of an adaptive key): the administrator's, else the
        strategy's while coldCtrStrategyEnable, else cgColdReadThreshold."""
        base = group.split(ADAPTIVE)[0] if group.endswith(ADAPTIVE) else group
        if base in self.config_table:
            return self.config_table[base]
        config = self.settings()
        if config.cold_ctr_strategy_enable:
            found = self.config_table.get(group if group.endswith(ADAPTIVE) else group + ADAPTIVE)
            if found is not None:
                return found
        return config.cg_cold_read_threshold

    # -- windows --------------------------------------------------------------------------------
    def _roll(self) -> int:
        """End the windows that have passed (RocketMQ's clearDataAcc for each); the time now."""
        now = self.clock()
        window = WINDOW_MS if self.settings().cold_data_flow_control_enable else IDLE_WINDOW_MS
        passed = (now - self._window_start) // window
        if passed > 0:
            self._window_start += passed * window
            for _ in range(min(passed, MAX_ROLLS)):
                self._end_window(now)
        return now

    def _end_window(self, now: int) -> None:
        config = self.settings()
        strategy = config.cold_ctr_strategy_enable
        pid = self._pid_strategy(config) if strategy else None
        if pid is not None:
            pid.collect(self.global_acc)
        for group, entry in list(self.runtime.items()):
            if now >= entry.last_cold_read_ms + RESIDE_MS:
                self._forget(group)
                continue
            threshold = self.threshold(group)
            if (entry.cold_acc >= threshold and strategy and not self._global_over(config)
                    and group not in self.config_table and (pid is None or pid.factor() > 0)):
                self.config_table[group + ADAPTIVE] = int(threshold * 1.5)  # promote
            entry.cold_acc = 0
        if strategy:
            self._decelerate(config, pid)
        else:
            for key in [k for k in self.config_table if k.endswith(ADAPTIVE)]:
                del self.config_table[key]
        self.global_acc = 0

    def _decelerate(self, config: BrokerConfig, pid: _PidStrategy | None) -> None:
        """Lower the three highest adaptive thresholds: while the broker is past its threshold
        (simple strategy), or while the PID factor says so."""
        if (not self._global_over(config)) if pid is None else pid.factor() >= 0:
            return
        adaptive = [(v, k) for k, v in self.config_table.items()
                    if k.endswith(ADAPTIVE) and k.split(ADAPTIVE)[0] not in self.config_table]
        for _, key in sorted(adaptive, reverse=True)[:MAX_DECELERATE]:
            self.config_table[key] = max(int(self.threshold(key) * 0.8), config.cg_cold_read_threshold)

    def _global_over(self, config: BrokerConfig) -> bool:
        return self.global_acc > config.global_cold_read_threshold

    def _pid_strategy(self, config: BrokerConfig) -> _PidStrategy | None:
        if not config.use_pid_cold_ctr_strategy:
            return None
        expect = int(config.global_cold_read_threshold * 0.8)
        if self._pid is None or self._pid.expect != expect:
            self._pid = _PidStrategy(expect)
        return self._pid

    def _forget(self, group: str) -> None:
        del self.runtime[group]
        self.config_table.pop(group + ADAPTIVE, None)
