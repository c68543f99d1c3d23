"""The controller's metrics collection (RocketMQ 5.3.3's ControllerMetricsManager series): what
each counter adds, the histograms' buckets, the roles' values, the bounded label sets, and the
text as Prometheus' own parser reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bolide.controller import metrics as m
from bolide.controller.config import ControllerConfig
from bolide.controller.heartbeat import HeartbeatManager
from bolide.errors import ConfigError
from bolide.metrics.exposition import render
from bolide.protocol.codes import RequestCode as C

COMMON = (("address", "127.0.0.1:9878"), ("group", "G"), ("peer_id", "n0"))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def scrape(metrics: m.ControllerMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(render(metrics.families())):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def make(tmp_path: Path, role: str = "leader", clock: Clock | None = None) -> m.ControllerMetrics:
    return m.ControllerMetrics(lambda: COMMON, HeartbeatManager(clock or Clock()), lambda: role, tmp_path)


def test_request_types_are_rocketmqs_names() -> None:
    assert m.request_type(C.CONTROLLER_REGISTER_BROKER) == "CONTROLLER_REGISTER_BROKER"
    assert m.request_type(C.BROKER_HEARTBEAT) == "CONTROLLER_BROKER_HEARTBEAT"
    assert m.request_type(C.GET_CONTROLLER_CONFIG) == "CONTROLLER_GET_CONTROLLER_CONFIG"
    assert m.request_type(C.CLEAN_BROKER_DATA) == "CONTROLLER_CLEAN_BROKER_DATA"
    assert m.request_type(99999) == "99999"


def test_roles_count_from_follower_as_rocketmqs_counter() -> None:
    assert [m.role_value(r) for r in ("leader", "follower", "candidate", "unknown")] == [1, 0, -1, -2]


def test_requests_are_counted_by_type_and_status_with_latency_of_the_answered(tmp_path: Path) -> None:
    metrics = make(tmp_path)
    metrics.on_request(C.CONTROLLER_REGISTER_BROKER, m.SUCCESS, 40)
    metrics.on_request(C.CONTROLLER_REGISTER_BROKER, m.SUCCESS, 4000)
    metrics.on_request(C.CONTROLLER_REGISTER_BROKER, m.FAILED, 7)
    metrics.on_request(C.CONTROLLER_ELECT_MASTER, m.TIMEOUT, 10_000_000)
    found = scrape(metrics)
    totals = {(s["request_type"], s["request_handle_status"]): v for s, v in found["request_total"]}
    assert totals == {("CONTROLLER_REGISTER_BROKER", "success"): 2,
                      ("CONTROLLER_REGISTER_BROKER", "failed"): 1, ("CONTROLLER_ELECT_MASTER", "timeout"): 1}
    assert found["request_latency_microseconds_count"] == [
        ({**dict(COMMON), "request_type": "CONTROLLER_REGISTER_BROKER"}, 2)]
    assert found["request_latency_microseconds_sum"][0][1] == 4040
    buckets = {s["le"]: v for s, v in found["request_latency_microseconds_bucket"]}
    assert len(buckets) == len(m.LATENCY_BOUNDS_US) + 1
    assert (buckets["30.0"], buckets["50.0"], buckets["3000.0"], buckets["5000.0"], buckets["+Inf"]) == \
        (0, 1, 1, 2, 2)


def test_appends_and_elections(tmp_path: Path) -> None:
    metrics = make(tmp_path)
    metrics.on_append(m.SUCCESS, 1)
    metrics.on_append(m.SUCCESS, 2)
    metrics.on_append(m.TIMEOUT, 10_000_000)
    metrics.on_election("C", "b", m.NEW_MASTER_ELECTED)
    metrics.on_election("", "b", m.NEW_MASTER_ELECTED)
    metrics.on_election("C", "b", m.NEW_MASTER_ELECTED)
    metrics.on_election("C", "b", m.NO_MASTER_ELECTED)
    found = scrape(metrics)
    ops = {s["dLedger_operation_status"]: v for s, v in found["dledger_op_total"]
           if s["dledger_operation"] == "append"}
    assert ops == {"success": 2, "timeout": 1}
    (labels, count), = found["dledger_op_latency_microseconds_count"]
    assert (labels["dLedger_operation_status"], count) == ("success", 2)
    assert found["dledger_op_latency_microseconds_sum"][0][1] == 3
    elections = {(s["cluster"], s["broker_set"], s["election_result"]): v for s, v in found["election_total"]}
    assert elections == {("C", "b", "new_master_elected"): 2, ("", "b", "new_master_elected"): 1,
                         ("C", "b", "no_master_elected"): 1}


def test_election_label_sets_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m, "MAX_GROUPS", 2)
    metrics = make(tmp_path)
    for name in ("a", "b", "c", "d"):
        metrics.on_election("C", name, m.NEW_MASTER_ELECTED)
    elections = {(s["broker_set"]): v for s, v in scrape(metrics)["election_total"]}
    assert elections == {"a": 1, "b": 1, "__other__": 2}


def test_gauges_role_disk_and_active_brokers(tmp_path: Path) -> None:
    clock = Clock()
    store = tmp_path / "store"
    metrics = m.ControllerMetrics(lambda: COMMON, HeartbeatManager(clock), lambda: "follower", store)
    found = scrape(metrics)
    assert found["role"] == [(dict(COMMON), 0)]
    assert "dledger_disk_usage_bytes" not in found  # no store yet: no sample, as RocketMQ
    assert "active_broker_num" not in found
    (store / "raft").mkdir(parents=True)
    (store / "raft" / "log").write_bytes(b"x" * 1000)
    (store / "hard").write_bytes(b"y" * 24)
    beats = metrics.heartbeats
    beats.on_heartbeat("C", "a", "h:1", 1, timeout_ms=1000)
    beats.on_heartbeat("C", "a", "h:2", 2, timeout_ms=1000)
    beats.on_heartbeat("C", "b", "h:3", 1, timeout_ms=10)
    beats.on_heartbeat("D", "a", "h:4", 1, timeout_ms=1000)
    clock.now += 100  # b's heartbeat expired (not yet scanned away)
    found = scrape(metrics)
    assert found["dledger_disk_usage_bytes"] == [(dict(COMMON), 1024)]
    active = {(s["cluster"], s["broker_set"]): v for s, v in found["active_broker_num"]}
    assert active == {("C", "a"): 2, ("D", "a"): 1}


def test_the_exporter_settings_are_checked() -> None:
    config = ControllerConfig.from_mapping({"metricsExporterType": "2", "metricsLabel": "a:b,c:d"})
    assert (config.metrics_exporter_type, config.metrics_prom_exporter_port) == ("2", 5557)
    with pytest.raises(ConfigError, match="metricsExporterType=PROMETHEUS is none of"):
        ControllerConfig.from_mapping({"metricsExporterType": "PROMETHEUS"})
    with pytest.raises(ConfigError, match="metricsLabel pair 'a' is not key:value"):
        ControllerConfig.from_mapping({"metricsLabel": "a"})
    with pytest.raises(ConfigError, match="metricsPromExporterPort=70000 is out of range"):
        ControllerConfig.from_mapping({"metricsPromExporterPort": "70000"})
