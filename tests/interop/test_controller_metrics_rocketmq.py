"""Bolide's controller metrics beside a real RocketMQ 5.3.3 controller's (embedded in its
NameServer, ``metricsExporterType=PROM``): the same scenario on both (a broker applies for its
id, registers, beats and is elected master), scraped while the broker is connected; every
series each shows must be one the other shows, with the same label names (OpenTelemetry's
``otel_scope_name`` aside), the same request types, buckets and role.

Needs java and the cached RocketMQ 5.3.3 jars (``make interop-deps``): without them the module
is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bolide.controller import ControllerConfig, ControllerServer
from bolide.errors import RemotingError
from bolide.protocol.codes import ResponseCode as RC
from bolide.testing import rocketmq as rmqmod
from bolide.testing.controller import ControllerBroker, ControllerRefused
from bolide.testing.rocketmq import RocketMQ, RocketMQUnavailable, free_port
from conftest import unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

Found = dict[str, list[tuple[dict[str, str], float]]]
IGNORED_LABELS = {"otel_scope_name", "le"}  # OpenTelemetry's scope; a histogram's buckets
OTEL_ONLY = {"target_info", "otel_scope_info"}  # the exporter's own
SCENARIO_SERIES = ("active_broker_num", "election_total", "request_total", "role")
PROM = {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsLabel": "env:test"}


def scrape(url: str) -> Found:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found: Found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


async def scenario(controller: str, metrics_url: str) -> Found:
    """A broker joins (retrying while the controller starts: not listening yet, or not the
    leader yet), beats, is elected; the scrape."""
    deadline = time.monotonic() + 30
    while True:
        broker = ControllerBroker(controller, "broker-a", "C1")
        try:
            await broker.join()
            break
        except (RemotingError, ControllerRefused) as exc:
            await broker.close()
            assert time.monotonic() < deadline, f"the controller at {controller} never took the broker: {exc}"
            await asyncio.sleep(0.2)
    try:
        await broker.beat(timeout_ms=30_000)
        elected = await broker.elect()
        assert elected.code == RC.SUCCESS, elected.remark
        # an exporter may show a gauge from its next collection on (RocketMQ's OpenTelemetry
        # reader, on a busy machine): scrape until the broker's series are there
        deadline = time.monotonic() + 20
        while True:
            found = await asyncio.to_thread(scrape, metrics_url)
            if all(name in found for name in SCENARIO_SERIES) or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.2)
    finally:
        await broker.close()


def label_names(samples: list[tuple[dict[str, str], float]]) -> set[frozenset[str]]:
    return {frozenset(labels) - IGNORED_LABELS for labels, _ in samples}


def values(found: Found, name: str, label: str) -> set[str]:
    return {labels[label] for labels, _ in found.get(name, [])}


def test_bolides_controller_metrics_are_rocketmqs(tmp_path: Path) -> None:
    try:
        rmqmod.classpath("5.3.3")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    rmq = RocketMQ("5.3.3", tmp_path / "rmq")
    controller_port, metrics_port = free_port(), free_port()
    try:
        rmq.start_namesrv(extra={
            **PROM, "metricsPromExporterPort": str(metrics_port),
            "enableControllerInNamesrv": "true", "controllerDLegerGroup": "group1",
            "controllerDLegerPeers": f"n0-127.0.0.1:{controller_port}", "controllerDLegerSelfId": "n0",
            "controllerStorePath": str(tmp_path / "rmq-controller"), "mappedFileSize": str(4 << 20)})
        theirs = asyncio.run(scenario(f"127.0.0.1:{controller_port}",
                                      f"http://127.0.0.1:{metrics_port}/metrics"))
    finally:
        rmq.stop()

    async def bolide() -> Found:
        config = ControllerConfig.from_mapping({
            **PROM, "metricsPromExporterPort": "0", "controllerDLegerGroup": "group1",
            "controllerStorePath": str(tmp_path / "bolide-controller")})
        async with ControllerServer(config, host="127.0.0.1", port=0) as server:
            assert server.metrics_endpoint is not None
            return await scenario(server.address, f"http://127.0.0.1:{server.metrics_endpoint.port}/metrics")

    ours = asyncio.run(bolide())
    assert set(ours) == set(theirs) - OTEL_ONLY, (sorted(ours), sorted(theirs))
    assert len(ours) >= 12, sorted(ours)  # eight families, three of them histograms
    for name in ours:
        assert label_names(ours[name]) <= label_names(theirs[name]), (name, ours[name], theirs[name])
    for found in (ours, theirs):
        assert [v for _, v in found["role"]] == [1]  # a one-peer group's leader
        assert values(found, "request_total", "request_type") == {
            "CONTROLLER_GET_NEXT_BROKER_ID", "CONTROLLER_APPLY_BROKER_ID", "CONTROLLER_REGISTER_BROKER",
            "CONTROLLER_BROKER_HEARTBEAT", "CONTROLLER_ELECT_MASTER"}
        assert [values(found, "role", label) for label in ("group", "peer_id", "env")] == [
            {"group1"}, {"n0"}, {"test"}]
        assert [(labels["cluster"], labels["broker_set"], v) for labels, v in found["active_broker_num"]] == [
            ("C1", "broker-a", 1)]
        elected = [v for labels, v in found["election_total"]
                   if labels["cluster"] == "C1" and labels["election_result"] == "new_master_elected"]
        assert elected == [1]
    assert {float(s) for s in values(ours, "request_latency_microseconds_bucket", "le")} == \
        {float(s) for s in values(theirs, "request_latency_microseconds_bucket", "le")}
