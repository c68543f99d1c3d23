"""Bolide's Prometheus metrics beside a real RocketMQ 5.3.3 broker's (``metricsExporterType=PROM``):
the same scenario on both (a topic, five sends, a pull consumer taking them), then every
``rocketmq_*`` family Bolide shows must be one RocketMQ shows too, with the same label names,
and the message counts must agree, so dashboards made for RocketMQ read Bolide.

Needs java, javac and mvn (the jars come from Maven Central once, into ``interop/.m2``):
without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bolide.client import ClientConfig, ConsumeFrom
from bolide.client.blocking import Admin, Producer, PullConsumer
from bolide.common import Message
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable, free_port
from bolide.testing.servers import running_servers
from conftest import unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

TOPIC, GROUP, COUNT = "Metered", "metered_cg", 5
IGNORED_LABELS = {"otel_scope_name", "le"}  # OpenTelemetry's scope; a histogram's buckets


def scenario(namesrv: str, broker_addr: str, metrics_url: str) -> dict[str, Any]:
    """Create the topic, send, consume; then the scrape: name -> [(labels, value)]."""
    config = ClientConfig(namesrv, client_ip="127.0.0.1")
    with Admin(config) as admin:
        deadline = time.monotonic() + 30
        while broker_addr not in admin.master_addrs():
            assert time.monotonic() < deadline, f"{broker_addr} never registered"
            time.sleep(0.1)
        admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2, broker_addr=broker_addr)
    with Producer(config, "metered_pg") as producer:
        for i in range(COUNT):
            producer.send(Message(TOPIC, b"x" * 100, tags="A", keys=f"k{i}"))
    consumer = PullConsumer(config, GROUP, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe(TOPIC)
    consumer.start()
    try:
        got, deadline = 0, time.monotonic() + 30
        while got < COUNT:
            assert time.monotonic() < deadline, f"consumed {got} of {COUNT}"
            got += len(consumer.poll(1000))
        return scrape(metrics_url)  # while the consumer is connected
    finally:
        consumer.close()


def scrape(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def label_names(samples: list[tuple[dict[str, str], float]]) -> set[frozenset[str]]:
    return {frozenset(labels) - IGNORED_LABELS for labels, _ in samples}


def total(found: dict[str, Any], name: str, **labels: str) -> float:
    return sum(v for got, v in found.get(name, []) if labels.items() <= got.items())


def test_bolides_metrics_are_rocketmqs(tmp_path: Path) -> None:
    try:
        rmq = RocketMQ("5.3.3", tmp_path / "rocketmq")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    port = free_port()
    try:
        rmq.start_namesrv()
        rmq.start_broker(BrokerSettings(tmp_path / "rocketmq-store", extra={
            "metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": str(port)}))
        theirs = scenario(rmq.namesrv_addr, rmq.broker_addr, f"http://127.0.0.1:{port}/metrics")
    finally:
        rmq.kill_broker()  # nothing to keep: skip the clean shutdown's seconds
        rmq.stop()

    async def bolide() -> dict[str, Any]:
        async with running_servers(tmp_path / "store", metrics_exporter_type="PROM",
                                   metrics_prom_exporter_port=0) as s:
            assert s.broker.metrics_endpoint is not None
            url = f"http://127.0.0.1:{s.broker.metrics_endpoint.port}/metrics"
            return await asyncio.to_thread(scenario, s.namesrv_addr, s.broker_addr, url)

    ours = asyncio.run(bolide())
    shown = sorted(name for name in ours if name.startswith("rocketmq_"))
    assert len(shown) >= 15, shown
    for name in shown:
        assert name in theirs, f"{name}: RocketMQ 5.3.3 has no such series"
        assert label_names(ours[name]) <= label_names(theirs[name]), (name, ours[name], theirs[name])
    for found in (ours, theirs):
        assert total(found, "rocketmq_messages_in_total", topic=TOPIC, message_type="normal") == COUNT
        assert total(found, "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == COUNT
        assert total(found, "rocketmq_consumer_connections", consumer_group=GROUP) == 1
