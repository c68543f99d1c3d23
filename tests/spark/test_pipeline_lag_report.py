"""The lag-report pipeline job: exact lag per group/topic/queue from a store directory and from
a running broker (the same numbers both ways), Spark totals, and the JSON, text and PNG files."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from spark_cluster import ServerThread, create_topic, produce, wait_for

from bolide.client import Message
from bolide.client.blocking import Admin, PullConsumer
from bolide.spark.jobs.lag_report import LagReportError, lag_report, summarize, write_report
from bolide.store import MessageStore, PutStatus
from bolide.store.config_files import ConsumerOffsetManager
from conftest import small_config

pytestmark = pytest.mark.spark

COUNTS = {("Orders", 0): 10, ("Orders", 1): 6, ("Audit", 0): 4}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[tuple[str, int, int], int], int]:
    """A closed store, two groups' offsets in consumerOffset.json; (root, store times, now)."""
    cfg = small_config(tmp_path_factory.mktemp("lag") / "store")
    stored: dict[tuple[str, int, int], int] = {}
    with MessageStore(cfg) as s:
        for i in range(10):
            for (topic, qid), n in COUNTS.items():
                if i < n:
                    r = s.put_message(Message(topic, b"m%d" % i), qid)
                    assert r.status == PutStatus.PUT_OK and r.queue_offset == i
                    stored[(topic, qid, i)] = r.store_timestamp
    offsets = ConsumerOffsetManager.in_store(cfg.root)
    offsets.commit("billing", "Orders", 0, 4)
    offsets.commit("billing", "Orders", 1, 6)
    offsets.commit("audit", "Audit", 0, 1)
    offsets.commit("audit", "Orders", 0, 10)  # Orders queue 1: nothing committed, so 0
    offsets.persist()
    return cfg.root, stored, max(stored.values()) + 60_000


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def test_offline_lag_is_exact(spark: Any, store: Any) -> None:
    root, stored, now = store
    df = lag_report(spark, store_dir=root, now_ms=now)
    assert df.columns == ["group", "topic", "brokerName", "queueId", "brokerOffset", "consumerOffset",
                          "lag", "lagMs"]
    assert _rows(df) == [
        ("audit", "Audit", "broker-a", 0, 4, 1, 3, now - stored[("Audit", 0, 1)]),
        ("audit", "Orders", "broker-a", 0, 10, 10, 0, 0),
        ("audit", "Orders", "broker-a", 1, 6, 0, 6, now - stored[("Orders", 1, 0)]),
        ("billing", "Orders", "broker-a", 0, 10, 4, 6, now - stored[("Orders", 0, 4)]),
        ("billing", "Orders", "broker-a", 1, 6, 6, 0, 0),
    ]
    totals = [r.asDict() for r in summarize(df).collect()]
    assert totals == [
        {"group": "audit", "topic": "Audit", "queues": 1, "brokerOffset": 4, "consumerOffset": 1, "lag": 3,
         "maxLagMs": now - stored[("Audit", 0, 1)]},
        {"group": "audit", "topic": "Orders", "queues": 2, "brokerOffset": 16, "consumerOffset": 10,
         "lag": 6, "maxLagMs": now - stored[("Orders", 1, 0)]},
        {"group": "billing", "topic": "Orders", "queues": 2, "brokerOffset": 16, "consumerOffset": 10,
         "lag": 6, "maxLagMs": now - stored[("Orders", 0, 4)]},
    ]
    only = lag_report(spark, store_dir=root, groups=["billing"], broker_name="b1", now_ms=now)
    assert [(r.group, r.brokerName, r.queueId, r.lag) for r in only.orderBy("queueId").collect()] == [
        ("billing", "b1", 0, 6), ("billing", "b1", 1, 0)]
    assert lag_report(spark, store_dir=root, groups=["nobody"]).count() == 0


def test_report_files(spark: Any, store: Any, tmp_path: Path) -> None:
    root, stored, now = store
    files = write_report(lag_report(spark, store_dir=root, now_ms=now), tmp_path / "out")
    report = json.loads(files.json.read_text())
    assert [(r["group"], r["topic"], r["queueId"], r["lag"]) for r in report["rows"]] == [
        ("audit", "Audit", 0, 3), ("audit", "Orders", 0, 0), ("audit", "Orders", 1, 6),
        ("billing", "Orders", 0, 6), ("billing", "Orders", 1, 0)]
    assert report["rows"][0]["lagMs"] == now - stored[("Audit", 0, 1)]
    assert [(t["group"], t["topic"], t["lag"]) for t in report["totals"]] == [
        ("audit", "Audit", 3), ("audit", "Orders", 6), ("billing", "Orders", 6)]

    lines = files.txt.read_text().splitlines()
    assert lines[0].split() == ["group", "topic", "brokerName", "queueId", "brokerOffset",
                                "consumerOffset", "lag", "lagMs"]
    assert lines[3].split()[:7] == ["audit", "Orders", "broker-a", "0", "10", "10", "0"]
    lag_col = lines[0].index("lag ") + 3  # numbers are right-aligned under their header
    assert all(line[lag_col - 1] != " " for line in lines[2:7])
    assert "maxLagMs" in lines[8] and lines[11].split()[:6] == ["audit", "Orders", "2", "16", "10", "6"]

    png = files.png.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    assert width == 900 and height >= 250


def test_inputs_are_checked(spark: Any, store: Any, tmp_path: Path) -> None:
    root = store[0]
    with pytest.raises(LagReportError, match="exactly one input"):
        lag_report(spark, store_dir=root, namesrv="127.0.0.1:9876")
    with pytest.raises(LagReportError, match="exactly one input"):
        lag_report(spark)
    with pytest.raises(LagReportError, match="no commitlog/"):
        lag_report(spark, store_dir=tmp_path)


def test_online_lag_equals_committed_and_offline(spark: Any, tmp_path: Path) -> None:
    st = ServerThread(tmp_path / "store").start()
    try:
        ns = st.namesrv
        assert st.servers is not None
        broker = st.servers.broker.config.broker_name
        create_topic(ns, "Lagging", queues=2)
        sent = [produce(ns, "Lagging", [b"a%d" % i for i in range(5)], queue_id=0),
                produce(ns, "Lagging", [b"b%d" % i for i in range(3)], queue_id=1)]
        queues = {r[0].queue.queue_id: r[0].queue for r in sent}
        with PullConsumer(ns, "lag-cg", auto_commit=False) as consumer:
            consumer.subscribe("Lagging")  # its heartbeat makes the group's retry topic
            consumer.start()
            consumer.commit({queues[0]: 2, queues[1]: 3})
            assert consumer.committed(queues[0]) == 2
        with Admin(ns) as admin:
            wait_for(lambda: [o.max_offset for _, o in sorted(admin.topic_stats("Lagging").items())]
                     == [5, 3], "both queues dispatched")
            wait_for(lambda: "%RETRY%lag-cg" in admin.topic_list(), "the group's retry topic")
            first_unconsumed = admin.view_message(sent[0][2].offset_msg_id).store_timestamp
        now = first_unconsumed + 30_000
        online = lag_report(spark, namesrv=ns, now_ms=now)  # every group with a retry topic
        expected = [("lag-cg", "Lagging", broker, 0, 5, 2, 3, 30_000),
                    ("lag-cg", "Lagging", broker, 1, 3, 3, 0, 0)]
        assert _rows(online) == expected
        assert _rows(summarize(online).select("lag", "maxLagMs")) == [(3, 30_000)]
    finally:
        st.stop()
    assert st.error is None
    offline = lag_report(spark, store_dir=tmp_path / "store", groups=["lag-cg"], broker_name=broker,
                         now_ms=now)
    assert _rows(offline) == expected
