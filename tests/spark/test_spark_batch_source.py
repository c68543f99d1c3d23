"""``spark.read.format("rocketmq")`` against an in-process Bolide: every column, offsets as
words and JSON, timestamps, the tag filter, minPartitions, several topics, and errors."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.datasource import DataSource
from spark_cluster import ServerThread, create_topic, produce

from bolide.client.blocking import Admin
from bolide.spark import cluster as cluster_module
from bolide.spark import register
from bolide.spark.cluster import Cluster
from bolide.spark.offsets import DataLossError, QueueRange
from bolide.spark.options import SparkOptionError
from bolide.spark.source import RocketMQDataSource

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    st = ServerThread(tmp_path_factory.mktemp("spark-batch") / "store").start()
    create_topic(st.namesrv, "Orders", queues=2)
    for qid in (0, 1):
        produce(st.namesrv, "Orders", [b"q%d-%d" % (qid, i) for i in range(5)], queue_id=qid,
                tags=lambda i: "even" if i % 2 == 0 else "odd", keys=lambda i: f"k{i} order",
                properties={"source": "test"})
    create_topic(st.namesrv, "Audit", queues=1)
    produce(st.namesrv, "Audit", [b"a0", b"a1", b"a2"])
    yield st
    st.stop()


def read(spark: Any, ns: str, **options: str) -> Any:
    reader = spark.read.format("rocketmq").option("nameserver", ns)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_every_column_of_every_message(spark: Any, cluster: ServerThread) -> None:
    df = read(spark, cluster.namesrv, topic="Orders")
    assert df.columns == ["topic", "brokerName", "queueId", "queueOffset", "commitLogOffset", "msgId", "keys",
                          "tags", "body", "properties", "bornTimestamp", "storeTimestamp", "bornHost",
                          "storeHost", "reconsumeTimes", "sysFlag"]
    rows = sorted(df.collect(), key=lambda r: (r.queueId, r.queueOffset))
    assert [(r.queueId, r.queueOffset, bytes(r.body)) for r in rows] == [
        (q, i, b"q%d-%d" % (q, i)) for q in (0, 1) for i in range(5)]
    first = rows[0]
    assert first.topic == "Orders" and first.brokerName == cluster.servers.broker.config.broker_name
    assert first.tags == "even" and first.keys == "k0 order"
    assert first.properties["source"] == "test" and first.properties["TAGS"] == "even"
    assert first.msgId == first.properties["UNIQ_KEY"]
    assert first.storeHost == cluster.servers.broker_addr and re.fullmatch(r"[\d.]+:\d+", first.bornHost)
    assert first.bornTimestamp <= first.storeTimestamp and first.storeTimestamp.year >= 2024
    assert first.reconsumeTimes == 0 and first.sysFlag == 0
    assert len({r.commitLogOffset for r in rows}) == 10


def test_a_schema_of_some_columns(spark: Any, cluster: ServerThread) -> None:
    df = (spark.read.format("rocketmq").schema("body BINARY, queueOffset BIGINT, tags STRING")
          .option("nameserver", cluster.namesrv).option("topic", "Orders")
          .option("subExpression", "odd").load())
    assert df.columns == ["body", "queueOffset", "tags"]
    got = sorted((bytes(r.body), r.queueOffset, r.tags) for r in df.collect())
    assert got == sorted((b"q%d-%d" % (q, i), i, "odd") for q in (0, 1) for i in (1, 3))


def test_json_offsets_per_broker_and_queue(spark: Any, cluster: ServerThread) -> None:
    broker = cluster.servers.broker.config.broker_name
    df = read(spark, cluster.namesrv, topic="Orders",
              startingOffsets=json.dumps({"Orders": {broker: {"0": 3, "1": -2}}}),
              endingOffsets=json.dumps({"Orders": {"0": -1, "1": 2}}))  # no broker level: every broker
    got = sorted((r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect())
    assert got == [(0, 3), (0, 4), (1, 0), (1, 1)]


def test_several_topics_tag_filter_and_min_partitions(spark: Any, cluster: ServerThread) -> None:
    df = read(spark, cluster.namesrv, topic="Orders,Audit", minPartitions="6")
    assert df.rdd.getNumPartitions() >= 6
    assert df.count() == 13
    odd = read(spark, cluster.namesrv, topic="Orders", subExpression="odd")
    got = sorted((r.queueId, r.queueOffset) for r in odd.collect())
    assert got == [(q, i) for q in (0, 1) for i in (1, 3)]


def test_timestamps(spark: Any, cluster: ServerThread) -> None:
    times = sorted(r.storeTimestamp for r in read(spark, cluster.namesrv, topic="Audit").collect())
    ms = [int(t.timestamp() * 1000) for t in times]
    after = read(spark, cluster.namesrv, topic="Audit", startingTimestamp=str(ms[1]))
    assert sorted(bytes(r.body) for r in after.collect()) == [b"a%d" % i for i in range(3) if ms[i] >= ms[1]]
    before = read(spark, cluster.namesrv, topic="Audit", endingTimestamp=str(ms[1]))
    assert sorted(bytes(r.body) for r in before.collect()) == [b"a%d" % i for i in range(3) if ms[i] < ms[1]]


def test_registered_statically_and_explicitly(spark: Any, cluster: ServerThread) -> None:
    # Spark's lookup imports every top-level pyspark_* module and registers its DefaultSource
    found = {m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")}
    assert "pyspark_bolide" in found
    default = importlib.import_module("pyspark_bolide").DefaultSource
    assert issubclass(default, DataSource) and default.name() == "rocketmq"
    register(spark)  # registering again replaces the statically found source
    assert read(spark, cluster.namesrv, topic="Audit").count() == 3
    assert spark.sql("SELECT 1").count() == 1


# -- planning without Spark's engine ---------------------------------------------------------
def reader(ns: str, **options: str) -> Any:
    return RocketMQDataSource({"nameserver": ns, **{k.lower(): v for k, v in options.items()}}).reader(None)


def test_partitions_split_large_ranges(cluster: ServerThread) -> None:
    parts = reader(cluster.namesrv, topic="Orders", minPartitions="4").plan()
    assert sum(p.size for p in parts) == 10 and len(parts) >= 4
    assert max(p.size for p in parts) <= 3
    assert [(p.start, p.end) for p in parts if p.queue_id == 0] == [(0, 3), (3, 5)]


def test_read_yields_arrow_batches(cluster: ServerThread) -> None:
    r = reader(cluster.namesrv, topic="Orders", readBatchSize="2")
    part = r.partitions()[0]
    batches = list(r.read(part))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert batches[0].column("queueOffset").to_pylist() == [0, 1]


def test_bad_options_say_what_to_do(cluster: ServerThread) -> None:
    with pytest.raises(SparkOptionError, match="option topic is required"):
        reader(cluster.namesrv)
    with pytest.raises(SparkOptionError, match="unknown read option"):
        reader(cluster.namesrv, topic="Orders", startOffsets="earliest")
    with pytest.raises(SparkOptionError, match="does not have"):
        reader(cluster.namesrv, topic="Orders", startingOffsets='{"Orders": {"nobroker": {"0": 1}}}').plan()
    with pytest.raises(SparkOptionError, match="after its end"):
        reader(cluster.namesrv, topic="Orders", startingOffsets='{"Orders": {"0": 4}}',
               endingOffsets='{"Orders": {"0": 2}}').plan()


def test_data_loss_is_named_or_skipped(cluster: ServerThread, tmp_path: Path) -> None:
    broker = cluster.servers.broker.config.broker_name
    store = cluster.servers.broker.store
    start = json.dumps({"Orders": {broker: {"0": 1}}})
    original = store.get_min_offset_in_queue

    def fake_min(topic: str, queue_id: int) -> int:  # fault injection: retention removed 0..2
        return 3 if (topic, queue_id) == ("Orders", 0) else original(topic, queue_id)

    store.get_min_offset_in_queue = fake_min
    try:
        with pytest.raises(DataLossError, match=r"messages 1\.\.2 of queue Orders/.*/0 were deleted"):
            reader(cluster.namesrv, topic="Orders", startingOffsets=start).plan()
        parts = reader(cluster.namesrv, topic="Orders", startingOffsets=start, failOnDataLoss="false").plan()
        assert [(p.start, p.end) for p in parts if p.queue_id == 0] == [(3, 5)]
    finally:
        store.get_min_offset_in_queue = original


@pytest.fixture(scope="module")
def small_pulls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A broker answering each pull with about 2,000 bytes of records (10 messages, not 32)."""
    st = ServerThread(tmp_path_factory.mktemp("spark-small-pulls") / "store",
                      store_options={"max_transfer_bytes_on_message_in_memory": 2000}).start()
    create_topic(st.namesrv, "Windows", queues=1)
    produce(st.namesrv, "Windows", [b"w%03d" % i + b"." * 60 for i in range(230)],
            tags=lambda i: "rare" if i % 7 == 0 else "common")
    yield st
    st.stop()


def test_pulls_in_flight_leave_no_gap_and_no_duplicate(small_pulls: ServerThread) -> None:
    """Several pulls go out at once; answers shorter than their window (the broker's byte limit)
    or reaching past it (skipping other tags) give each message once, in order."""
    def offsets(**options: str) -> list[int]:
        r = reader(small_pulls.namesrv, topic="Windows", **options)
        (part,) = r.partitions()
        batches = list(r.read(part))
        assert all(b.num_rows <= int(options.get("readBatchSize", 65536)) for b in batches)
        got = [row["queueOffset"] for b in batches for row in b.to_pylist()]
        assert [bytes(row["body"])[:4] for b in batches for row in b.to_pylist()] == [
            b"w%03d" % i for i in got]
        return got

    assert offsets() == list(range(230))
    assert offsets(readBatchSize="50") == list(range(230))
    assert offsets(pullBatchSize="3") == offsets(pullBatchSize="500") == list(range(230))
    assert offsets(subExpression="rare") == list(range(0, 230, 7))
    assert offsets(subExpression="common", startingOffsets='{"Windows": {"0": 100}}') == [
        i for i in range(100, 230) if i % 7]


def test_the_next_round_of_pulls_goes_out_before_a_round_is_decoded(
        small_pulls: ServerThread, monkeypatch: pytest.MonkeyPatch) -> None:
    """When a round's answers are in and the range goes on, the next round is sent before the
    rows are decoded and handed over: its answers travel while Spark takes the batch."""
    sent: list[int] = []
    real = Admin.pull_records_later

    def recording(self: Admin, mq: Any, offsets: Any, **kwargs: Any) -> Any:  # observes only
        sent.append(offsets[0])
        return real(self, mq, offsets, **kwargs)

    monkeypatch.setattr(Admin, "pull_records_later", recording)
    monkeypatch.setattr(cluster_module, "PULLS_IN_FLIGHT", (1, 1))  # a round: one pull of 5
    with Cluster(small_pulls.namesrv) as cl:
        (key,) = [k for k in cl.queues(["Windows"])]
        lo, hi = cl.bounds([key])[key]
        batches = cl.read_batches(QueueRange(*key, lo, hi), batch_size=5, pull_batch=5)
        first = next(batches)
        assert first.num_rows == 5
        assert sent == [0, 5]  # the second round went out before the first was handed over
        rows = first.num_rows + sum(b.num_rows for b in batches)
    assert rows == 230
    assert sent == list(range(0, 230, 5))  # each round once, in queue order
