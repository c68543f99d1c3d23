"""Broker statistics items (VIEW_BROKER_STATS_DATA), ``bolide admin statsAll`` and
``exportMetrics`` against an in-process NameServer + Broker: sends, pulls and send-backs are
counted per topic, per ``topic@group`` and per cluster, statsAll adds them up with each group's
accumulation, and exportMetrics reports each broker group's rates and sizes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_cli_admin import ServerThread, admin_json, admin_table, bolide, servers_fixture, wait_for

from bolide.client import ConsumeFrom, Message
from bolide.client.blocking import Admin, Producer, PullConsumer, PushConsumer
from bolide.client.results import ConsumeStatus
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.bodies.admin import BrokerStatsData
from bolide.protocol.headers.admin import ViewBrokerStatsDataRequestHeader
from bolide.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader

TOPIC, GROUP = "StatsTopic", "stats-cg"


servers = servers_fixture("stats")


def test_sends_and_pulls_are_counted_and_stats_all_adds_them_up(servers: ServerThread) -> None:
    assert servers.servers is not None
    ns, addr = servers.servers.namesrv_addr, servers.servers.broker_addr
    cluster = servers.servers.broker.config.broker_cluster_name
    admin_json(ns, "updateTopic", "-t", TOPIC, "-r", "2", "-w", "2")
    admin_json(ns, "updateTopic", "-t", "StatsIdle", "-r", "1", "-w", "1")
    with Producer(ns, group="stats-pg") as producer:
        for i in range(6):
            producer.send(Message(TOPIC, b"x" * 100, tags=str(i)))
        producer.send_batch([Message(TOPIC, b"y" * 10) for _ in range(4)])
    consumer = PullConsumer(ns, GROUP, consume_from=ConsumeFrom.FIRST_OFFSET, auto_commit=False)
    consumer.subscribe(TOPIC)
    consumer.start()
    try:
        got: list[Any] = []
        wait_for(lambda: bool(got.extend(consumer.poll(timeout_ms=200))) or len(got) >= 10)
        consumer.commit({mq: 1 for mq in consumer.assignment()})  # 8 of 10 left to consume
    finally:
        consumer.close()
    back = servers.ask(addr, RemotingCommand.request(
        RequestCode.CONSUMER_SEND_MSG_BACK,
        ConsumerSendMsgBackRequestHeader(offset=got[0].commit_log_offset, group=GROUP, delay_level=0)))
    assert back.code == ResponseCode.SUCCESS, back

    with Admin(ns) as admin:
        put = admin.broker_stats(addr, "TOPIC_PUT_NUMS", TOPIC)
        assert put is not None
        assert (put.stats_minute.sum, put.stats_hour.sum, put.stats_day.sum) == (10, 10, 10)
        assert put.stats_minute.tps > 0 and put.stats_minute.avgpt == pytest.approx(10 / 7)  # 7 sends
        size = admin.broker_stats(addr, "TOPIC_PUT_SIZE", TOPIC)
        assert size is not None and size.stats_day.sum > 6 * 100 + 4 * 10  # whole records
        get = admin.broker_stats(addr, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}")
        assert get is not None and get.stats_minute.sum == 10
        broker_put = admin.broker_stats(addr, "BROKER_PUT_NUMS", cluster)
        assert broker_put is not None and broker_put.stats_minute.sum >= 10
        assert admin.broker_stats(addr, "TOPIC_PUT_NUMS", "StatsIdle") is None
        assert admin.broker_stats(addr, "GROUP_GET_NUMS", f"{TOPIC}@nobody") is None
        sent_back = admin.broker_stats(addr, "SNDBCK_PUT_NUMS", f"{TOPIC}@{GROUP}")
        assert sent_back is not None and sent_back.stats_minute.sum == 1

        rows = {r.group: r for r in admin.stats_all(TOPIC)}
        assert set(rows) == {GROUP}
        row = rows[GROUP]
        assert (row.in_24h, row.out_24h, row.accumulation) == (10, 10, 8)
        assert row.in_tps > 0 and row.out_tps is not None and row.out_tps > 0
        idle = admin.stats_all("StatsIdle")
        assert [(r.group, r.in_24h, r.out_24h) for r in idle] == [(None, 0, None)]
        active = {r.topic for r in admin.stats_all(active_only=True)}
        assert TOPIC in active and "StatsIdle" not in active

    doc = admin_json(ns, "statsAll", "-t", TOPIC)
    assert [(d["group"], d["inMsg24Hour"], d["outMsg24Hour"], d["accumulation"]) for d in doc] == [
        (GROUP, 10, 10, 8)]
    text = admin_table(ns, "statsAll", "-a")
    assert TOPIC in text and "StatsIdle" not in text
    assert "NO_CONSUMER" in admin_table(ns, "statsAll", "-t", "StatsIdle")


def test_an_unknown_stats_item_is_a_named_error(servers: ServerThread) -> None:
    assert servers.servers is not None
    answer = servers.ask(servers.servers.broker_addr, RemotingCommand.request(
        RequestCode.VIEW_BROKER_STATS_DATA,
        ViewBrokerStatsDataRequestHeader(stats_name="NO_SUCH_STATS", stats_key="k")))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == "The stats <NO_SUCH_STATS> <k> not exist"


def test_the_answer_reads_as_rocketmq_writes_it() -> None:
    body = BrokerStatsData.decode(
        b'{"statsDay":{"avgpt":1.5,"sum":30,"tps":0.25},"statsHour":{"avgpt":1.5,"sum":30,"tps":0.5},'
        b'"statsMinute":{"avgpt":1.5,"sum":3,"tps":0.05}}')
    assert (body.stats_minute.sum, body.stats_hour.tps, body.stats_day.avgpt) == (3, 0.5, 1.5)
    assert BrokerStatsData.decode(body.encode()) == body


def test_export_metrics_reports_each_broker_group(servers: ServerThread, tmp_path: Path) -> None:
    """exportMetrics: the master's rates and counts, its user topics and groups, and the client
    versions of the consumers online, in mqadmin's metrics.json; the totals add the groups up."""
    assert servers.servers is not None
    ns, broker = servers.servers.namesrv_addr, servers.servers.broker
    cluster, name = broker.config.broker_cluster_name, broker.config.broker_name
    admin_json(ns, "updateTopic", "-t", "MetricsTopic", "-r", "1", "-w", "1")
    with Producer(ns, group="metrics-pg") as producer:
        for _ in range(3):
            producer.send(Message("MetricsTopic", b"m" * 50))
    consumer = PushConsumer(ns, "metrics-cg", listener=lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS,
                            consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe("MetricsTopic")
    consumer.start()
    try:
        with Admin(ns) as admin:
            wait_for(lambda: bool(admin.consumer_connection("metrics-cg").connection_set))
            doc = admin.export_metrics(cluster)
            topics = admin.user_topics(broker.broker_addr)
            groups = admin.user_subscription_groups(broker.broker_addr)
        out = admin_json(ns, "exportMetrics", "-c", cluster, "-f", str(tmp_path))
    finally:
        consumer.close()
    report = doc["evaluateReport"][name]
    assert report["runtimeEnv"]["cpuNum"] == str(os.cpu_count())
    assert "totalMemKBytes" in report["runtimeEnv"]  # None: no RocketMQ broker reports it either
    quota = report["runtimeQuota"]
    assert quota["tps"]["normalInTps"] > 0 and set(quota["tps"]) == {
        "normalInTps", "normalOutTps", "transInTps", "scheduleInTps"}
    assert set(quota["oneDayNum"]) == {"normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum",
                                       "scheduleOneDayInNum"}
    assert (quota["topicSize"], quota["groupSize"]) == (len(topics), len(groups))
    assert "MetricsTopic" in topics and "metrics-cg" in groups
    assert float(quota["messageAverageSize"]) > 50
    assert quota["diskRatio"].keys() == {"commitLogDiskRatio", "consumeQueueDiskRatio"}
    assert "PYTHON%V4_9_8" in report["runtimeVersion"]["clientInfo"], report["runtimeVersion"]
    assert doc["totalData"]["totalTps"]["totalNormalInTps"] == quota["tps"]["normalInTps"]
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["evaluateReport"][name]["runtimeQuota"]["topicSize"] == len(topics)
    assert out["file"] == str(tmp_path / "metrics.json") and "totalTps" in out


def test_export_metrics_of_an_unknown_cluster_names_the_known_ones(servers: ServerThread) -> None:
    assert servers.servers is not None
    ns, cluster = servers.servers.namesrv_addr, servers.servers.broker.config.broker_cluster_name
    result = bolide("admin", "exportMetrics", "-n", ns, "-c", "NoSuchCluster", ok=False)
    assert result.exit_code != 0
    assert "NoSuchCluster" in result.output and cluster in result.output
