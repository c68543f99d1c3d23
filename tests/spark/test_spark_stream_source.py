"""``spark.readStream.format("rocketmq")``: offsets in a fixed key order, admission control
(maxOffsetsPerTrigger, minOffsetsPerTrigger), Trigger.AvailableNow, failOnDataLoss, consumer
group commits, and a query that crashes mid-batch and restarts from its checkpoint into a file
sink with no duplicate and no gap."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows
from spark_cluster import ServerThread, create_topic, produce

from bolide.client.blocking import Admin
from bolide.spark.offsets import DataLossError
from bolide.spark.source import RocketMQDataSource

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    st = ServerThread(tmp_path_factory.mktemp("spark-stream") / "store").start()
    yield st
    st.stop()


@pytest.fixture(scope="module")
def broker(cluster: ServerThread) -> str:
    assert cluster.servers is not None
    return cluster.servers.broker.config.broker_name


def stream_reader(ns: str, topic: str, **options: str) -> Any:
    opts = {"nameserver": ns, "topic": topic, **{k.lower(): v for k, v in options.items()}}
    return RocketMQDataSource(opts).streamReader(None)


def fill(ns: str, topic: str, per_queue: dict[int, int], start: int = 0) -> None:
    for qid, n in per_queue.items():
        produce(ns, topic, [b"%s-%d-%d" % (topic.encode(), qid, start + i) for i in range(n)], queue_id=qid)


# -- the stream reader on its own ------------------------------------------------------------
def test_offsets_have_one_key_order(cluster: ServerThread, broker: str) -> None:
    create_topic(cluster.namesrv, "Wide", queues=12)
    fill(cluster.namesrv, "Wide", {11: 2, 2: 1})
    r = stream_reader(cluster.namesrv, "Wide", startingOffsets="earliest")
    start = r.initialOffset()
    assert list(start) == ["Wide"] and list(start["Wide"]) == [broker]
    assert list(start["Wide"][broker]) == [str(i) for i in range(12)]  # 2 before 10
    end = r.latestOffset(start, ReadAllAvailable())
    assert json.dumps(end) == json.dumps(r.latestOffset(json.loads(json.dumps(start)), ReadAllAvailable()))
    assert end["Wide"][broker]["11"] == 2 and end["Wide"][broker]["2"] == 1
    assert r.partitions(end, end) == []
    latest = stream_reader(cluster.namesrv, "Wide").initialOffset()  # the default: latest
    assert latest == end


def test_max_offsets_per_trigger_is_shared_by_backlog(cluster: ServerThread, broker: str) -> None:
    create_topic(cluster.namesrv, "Limited", queues=2)
    fill(cluster.namesrv, "Limited", {0: 9, 1: 3})
    r = stream_reader(cluster.namesrv, "Limited", startingOffsets="earliest", maxOffsetsPerTrigger="4")
    assert r.getDefaultReadLimit() == ReadMaxRows(4)
    start = r.initialOffset()
    first = r.latestOffset(start, ReadMaxRows(4))
    assert first["Limited"][broker] == {"0": 3, "1": 1}
    parts = r.partitions(start, first)
    assert [(p.part.queue_id, p.part.start, p.part.end) for p in parts] == [(0, 0, 3), (1, 0, 1)]
    rows = [row for p in parts for b in r.read(p) for row in b.to_pylist()]
    assert sorted(bytes(x["body"]) for x in rows) == [b"Limited-0-0", b"Limited-0-1", b"Limited-0-2",
                                                      b"Limited-1-0"]
    assert r.latestOffset(start, ReadAllAvailable())["Limited"][broker] == {"0": 9, "1": 3}


def test_min_offsets_per_trigger_waits_and_available_now_freezes(cluster: ServerThread, broker: str) -> None:
    create_topic(cluster.namesrv, "Trickle", queues=1)
    fill(cluster.namesrv, "Trickle", {0: 2})
    r = stream_reader(cluster.namesrv, "Trickle", startingOffsets="earliest", minOffsetsPerTrigger="3")
    assert r.getDefaultReadLimit() == ReadMinRows(3)
    start = r.initialOffset()
    assert r.latestOffset(start, ReadMinRows(3)) == start  # 2 < 3: no batch yet
    fill(cluster.namesrv, "Trickle", {0: 1}, start=2)
    assert r.latestOffset(start, ReadMinRows(3))["Trickle"][broker] == {"0": 3}
    delayed = stream_reader(cluster.namesrv, "Trickle", startingOffsets="earliest",
                            minOffsetsPerTrigger="100", maxTriggerDelay="0s")
    assert delayed.latestOffset(start, ReadMinRows(100))["Trickle"][broker] == {"0": 3}  # delay passed
    now = stream_reader(cluster.namesrv, "Trickle", startingOffsets="earliest", minOffsetsPerTrigger="100")
    now.prepareForTriggerAvailableNow()
    fill(cluster.namesrv, "Trickle", {0: 2}, start=3)  # after the freeze: not part of this run
    assert now.latestOffset(start, ReadMinRows(100))["Trickle"][broker] == {"0": 3}


def test_fail_on_data_loss_names_the_range(cluster: ServerThread, broker: str) -> None:
    create_topic(cluster.namesrv, "Lossy", queues=1)
    fill(cluster.namesrv, "Lossy", {0: 6})
    store = cluster.servers.broker.store
    original = store.get_min_offset_in_queue

    def fake_min(topic: str, queue_id: int) -> int:  # fault injection: retention removed 0..3
        return 4 if topic == "Lossy" else original(topic, queue_id)

    start = {"Lossy": {broker: {"0": 1}}}
    end = {"Lossy": {broker: {"0": 6}}}
    store.get_min_offset_in_queue = fake_min
    try:
        with pytest.raises(DataLossError, match=r"messages 1\.\.3 of queue Lossy/.*/0 were deleted"):
            stream_reader(cluster.namesrv, "Lossy").partitions(start, end)
        lenient = stream_reader(cluster.namesrv, "Lossy", failOnDataLoss="false")
        assert [(p.part.start, p.part.end) for p in lenient.partitions(start, end)] == [(4, 6)]
    finally:
        store.get_min_offset_in_queue = original


def test_consumer_group_mirrors_committed_offsets(cluster: ServerThread, broker: str) -> None:
    create_topic(cluster.namesrv, "Tracked", queues=2)
    fill(cluster.namesrv, "Tracked", {0: 4, 1: 2})
    r = stream_reader(cluster.namesrv, "Tracked", consumerGroup="spark-lag-cg")
    try:
        r.commit({"Tracked": {broker: {"0": 3, "1": 2}}})
    finally:
        r.stop()
    with Admin(cluster.namesrv) as admin:
        progress = admin.consumer_progress("spark-lag-cg")
    assert {(q.queue.queue_id, q.consumer_offset, q.lag) for q in progress.queues} == {(0, 3, 1), (1, 2, 0)}


# -- end to end: a file sink, a crash in the middle of a batch, restarts ----------------------
def run_query(spark: Any, ns: str, out: Path, checkpoint: Path, *, crash_at: int | None = None,
              **options: str) -> Any:
    reader = (spark.readStream.format("rocketmq").option("nameserver", ns).option("topic", "Flow")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "4"))
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load()
    fault = (f"CASE WHEN queueId = 0 AND queueOffset = {crash_at} THEN raise_error('injected crash') "
             "ELSE CAST(queueOffset AS STRING) END AS offsetText") if crash_at is not None \
        else "CAST(queueOffset AS STRING) AS offsetText"
    query = (df.selectExpr("queueId", "queueOffset", "body", fault)
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    with contextlib.suppress(Exception):  # the injected crash: the caller reads query.exception()
        query.awaitTermination(180)
    return query


def test_restart_from_checkpoint_has_no_duplicates_and_no_gaps(spark: Any, cluster: ServerThread,
                                                               tmp_path: Path) -> None:
    create_topic(cluster.namesrv, "Flow", queues=2)
    fill(cluster.namesrv, "Flow", {0: 5, 1: 5})
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    crashed = run_query(spark, cluster.namesrv, out, checkpoint, crash_at=3)
    assert crashed.exception() is not None and "injected crash" in str(crashed.exception())
    committed = sorted((r.queueId, r.queueOffset) for r in spark.read.parquet(str(out)).collect())
    assert committed == [(0, 0), (0, 1), (1, 0), (1, 1)]  # batch 0 only; batch 1 was planned, not committed

    resumed = run_query(spark, cluster.namesrv, out, checkpoint, consumerGroup="spark-flow-cg")
    assert resumed.exception() is None
    fill(cluster.namesrv, "Flow", {0: 2, 1: 1}, start=5)
    again = run_query(spark, cluster.namesrv, out, checkpoint, consumerGroup="spark-flow-cg")
    assert again.exception() is None and again.lastProgress["numInputRows"] == 3

    rows = spark.read.parquet(str(out)).collect()
    keys = sorted((r.queueId, r.queueOffset) for r in rows)
    assert keys == sorted([(0, i) for i in range(7)] + [(1, i) for i in range(6)])  # no gap, no duplicate
    assert all(bytes(r.body) == b"Flow-%d-%d" % (r.queueId, r.queueOffset) for r in rows)
    with Admin(cluster.namesrv) as admin:
        progress = admin.consumer_progress("spark-flow-cg")
    assert progress.queues and all(0 < q.consumer_offset <= q.broker_offset for q in progress.queues)
