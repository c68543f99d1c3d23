"""The controller's metrics under RocketMQ 5.3.3's names and labels (its
``ControllerMetricsManager``, exported by OpenTelemetry's Prometheus exporter), so dashboards made
for a RocketMQ controller read a Bolide one:

- ``role``: this peer's role as RocketMQ shows it (its up-down counter starts at follower):
  1 leader, 0 follower, -1 candidate (a lone controller leads);
- ``dledger_disk_usage_bytes``: bytes of this controller's files (its event log, or its Raft log
  and snapshot: where RocketMQ keeps its DLedger store);
- ``active_broker_num{cluster, broker_set}``: brokers whose heartbeat is current, per group;
- ``request_total{request_type, request_handle_status}`` and
  ``request_latency_microseconds{request_type}`` (answered requests only);
- ``election_total{cluster, broker_set, election_result}``;
- ``dledger_op_total{dledger_operation, dLedger_operation_status}`` and
  ``dledger_op_latency_microseconds`` (successful appends): each change made durable, in the
  event log alone or through the Raft group (RocketMQ's DLedger append).

Every series carries ``address``, ``group`` and ``peer_id`` (this peer's
``controllerDLegerPeers`` entry and ``controllerDLegerGroup``) and the ``metricsLabel`` pairs.
Counting costs two clock reads and a dict update per request; the label sets are bounded by the
request codes, the statuses and results, and the broker groups (at most ``MAX_GROUPS``
(cluster, group) pairs are counted by name, the rest under ``__other__``).
"""

from __future__ import annotations

import itertools
import os
from bisect import bisect_left
from collections.abc import Callable, Iterable
from pathlib import Path

from bolide.controller.heartbeat import HeartbeatManager
from bolide.metrics.exposition import Family, HistogramValue, Labels
from bolide.protocol.codes import RequestCode

# RocketMQ's latency buckets (microseconds) of request_latency and dledger_op_latency
LATENCY_BOUNDS_US = (1, 3, 5, 10, 30, 50, 100, 300, 500, 1_000, 3_000, 5_000, 10_000, 30_000, 50_000,
                     100_000, 300_000, 500_000, 1_000_000, 3_000_000, 5_000_000, 10_000_000)
SUCCESS, FAILED, TIMEOUT = "success", "failed", "timeout"  # request and append statuses
NEW_MASTER_ELECTED, KEEP_CURRENT_MASTER, NO_MASTER_ELECTED = (
    "new_master_elected", "keep_current_master", "no_master_elected")
APPEND = "append"
# RocketMQ counts roles from follower: the value shown is the role's number less follower's
ROLE_NUMBERS = {"unknown": 0, "candidate": 1, "follower": 2, "leader": 3}
MAX_GROUPS = 10_000
OTHER = "__other__"


def request_type(code: int) -> str:
    """RocketMQ's request_type label: the code's name with a ``CONTROLLER_`` prefix."""
    try:
        name = RequestCode(code).name
    except ValueError:
        return str(code)
    return name if name.startswith("CONTROLLER_") else f"CONTROLLER_{name}"


def role_value(role: str) -> int:
    return ROLE_NUMBERS.get(role, 0) - ROLE_NUMBERS["follower"]


def directory_bytes(path: Path) -> int | None:
    """Bytes of the files under ``path``; None when it does not exist."""
    if not path.exists():
        return None
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:  # removed while walking (a compaction)
                continue
    return total


def _histogram() -> list[int]:
    return [0] * (3 + len(LATENCY_BOUNDS_US))  # count, sum, one per bound and +Inf


def _observe(counts: list[int], micros: int) -> None:
    counts[0] += 1
    counts[1] += micros
    counts[2 + bisect_left(LATENCY_BOUNDS_US, micros)] += 1


class ControllerMetrics:
    """What a controller counts and shows. ``common``: the labels of every series (computed at
    each scrape: the address is known once the port is bound); ``role``: this peer's role
    (leader, follower, candidate or unknown)."""

    def __init__(self, common: Callable[[], Labels], heartbeats: HeartbeatManager,
                 role: Callable[[], str], store_dir: Path) -> None:
        self.common = common
        self.heartbeats = heartbeats
        self.role = role
        self.store_dir = store_dir
        self._requests: dict[tuple[int, str], int] = {}  # (code, status) -> requests
        self._request_latency: dict[int, list[int]] = {}  # code -> histogram of answered ones
        self._appends: dict[str, int] = {}  # status -> appends
        self._append_latency = _histogram()
        self._elections: dict[tuple[str, str, str], int] = {}  # (cluster, group, result) -> count

    # -- counting -------------------------------------------------------------------------------
    def on_request(self, code: int, status: str, micros: int) -> None:
        """A request of ``code`` handled (``status``: success, failed or timeout) in ``micros``."""
        key = (code, status)
        self._requests[key] = self._requests.get(key, 0) + 1
        if status == SUCCESS:
            counts = self._request_latency.get(code)
            if counts is None:
                counts = self._request_latency[code] = _histogram()
            _observe(counts, micros)

    def on_append(self, status: str, micros: int) -> None:
        """Events made durable (success) or not (failed, timeout) after ``micros``."""
        self._appends[status] = self._appends.get(status, 0) + 1
        if status == SUCCESS:
            _observe(self._append_latency, micros)

    def on_election(self, cluster: str, group: str, result: str) -> None:
        key = (cluster, group, result)
        if key not in self._elections and len(self._elections) >= MAX_GROUPS:
            key = (OTHER, OTHER, result)
        self._elections[key] = self._elections.get(key, 0) + 1

    # -- a scrape -------------------------------------------------------------------------------
    def families(self) -> list[Family]:
        """Every metric family as it stands now."""
        common = self.common()
        role = Family("role", "gauge", "role of current node")
        role.add(common, role_value(self.role()))
        disk = Family("dledger_disk_usage_bytes", "gauge", "disk usage of dledger")
        used = directory_bytes(self.store_dir)
        if used is not None:
            disk.add(common, used)
        return [role, disk, self._active_brokers(common), *self._requests_families(common),
                *self._append_families(common), self._election_family(common)]

    def _active_brokers(self, common: Labels) -> Family:
        family = Family("active_broker_num", "gauge", "now active brokers num")
        for (cluster, group), count in sorted(self.heartbeats.active_counts().items()):
            family.add((*common, ("cluster", cluster), ("broker_set", group)), count)
        return family

    def _requests_families(self, common: Labels) -> Iterable[Family]:
        total = Family("request_total", "counter", "total request num")
        for (code, status), count in sorted(self._requests.items()):
            total.add((*common, ("request_type", request_type(code)), ("request_handle_status", status)),
                      count)
        latency = Family("request_latency_microseconds", "histogram", "request latency")
        for code, counts in sorted(self._request_latency.items()):
            latency.add((*common, ("request_type", request_type(code))), _value(counts))
        return total, latency

    def _append_families(self, common: Labels) -> Iterable[Family]:
        total = Family("dledger_op_total", "counter", "total dledger operation num")
        for status, count in sorted(self._appends.items()):
            total.add((*common, ("dledger_operation", APPEND), ("dLedger_operation_status", status)), count)
        latency = Family("dledger_op_latency_microseconds", "histogram", "dledger operation latency")
        if self._append_latency[0]:
            latency.add((*common, ("dledger_operation", APPEND), ("dLedger_operation_status", SUCCESS)),
                        _value(self._append_latency))
        return total, latency

    def _election_family(self, common: Labels) -> Family:
        family = Family("election_total", "counter", "total elect num")
        for (cluster, group, result), count in sorted(self._elections.items()):
            family.add((*common, ("cluster", cluster), ("broker_set", group), ("election_result", result)),
                       count)
        return family


def _value(counts: list[int]) -> HistogramValue:
    return HistogramValue(LATENCY_BOUNDS_US, list(itertools.accumulate(counts[2:])), counts[1])
