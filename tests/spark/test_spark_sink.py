"""``df.write.format("rocketmq")`` and ``writeStream``: bodies, topics, tags, keys,
properties, queue ids and dedupe keys arrive as sent; bad input is refused before sending."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_cluster import ServerThread, create_topic, produce

from bolide.client.blocking import Admin

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    st = ServerThread(tmp_path_factory.mktemp("spark-sink") / "store").start()
    for topic in ("Out", "OutA", "OutB", "Source", "Mirror", "Ordered"):
        create_topic(st.namesrv, topic, queues=2)
    yield st
    st.stop()


def messages(ns: str, topic: str) -> list[Any]:
    """Every message of ``topic``, by queue and offset."""
    out = []
    with Admin(ns) as admin:
        for mq, addr in admin.queues(topic):
            low, high = admin.min_max_offset(mq, addr)
            out += admin.read_messages(mq, low, high - low + 1) if high > low else []
    return sorted(out, key=lambda m: (m.queue_id, m.queue_offset))


def test_batch_write_with_every_column(spark: Any, cluster: ServerThread) -> None:
    rows = [(f"body-{i}", "OutA" if i % 2 else "OutB", f"t{i % 3}", f"key-{i}", {"n": str(i)}, i % 2,
             f"dedupe-{i}") for i in range(8)]
    df = spark.createDataFrame(rows, "body STRING, topic STRING, tags STRING, keys STRING, "
                                     "properties MAP<STRING,STRING>, queueId INT, dedupeKey STRING")
    df.repartition(2).write.format("rocketmq").option("nameserver", cluster.namesrv).mode("append").save()
    got = messages(cluster.namesrv, "OutA") + messages(cluster.namesrv, "OutB")
    assert sorted(m.body for m in got) == sorted(f"body-{i}".encode() for i in range(8))
    for m in got:
        i = int(m.body.decode().split("-")[1])
        assert m.topic == ("OutA" if i % 2 else "OutB") and m.queue_id == i % 2
        expected = (f"t{i % 3}", [f"key-{i}"], str(i), f"dedupe-{i}")
        assert (m.tags, m.keys, m.properties["n"], m.msg_id) == expected


def test_topic_option_wins_and_binary_bodies(spark: Any, cluster: ServerThread) -> None:
    df = spark.createDataFrame([(b"\x00\x01", "Ignored"), (b"\xff", "Ignored")], "body BINARY, topic STRING")
    df.write.format("rocketmq").option("nameserver", cluster.namesrv).option("topic", "Out") \
        .mode("append").save()
    assert sorted(m.body for m in messages(cluster.namesrv, "Out")) == [b"\x00\x01", b"\xff"]


def test_batches_in_flight_keep_the_order_of_a_queue(spark: Any, cluster: ServerThread) -> None:
    """Several batches are in flight per task, but one at a time for a given queueId."""
    rows = [(f"row-{i:04d}", i % 2) for i in range(1200)]
    df = spark.createDataFrame(rows, "body STRING, queueId INT").coalesce(1)
    (df.write.format("rocketmq").option("nameserver", cluster.namesrv).option("topic", "Ordered")
     .option("batchSize", "16").mode("append").save())
    got = messages(cluster.namesrv, "Ordered")
    for qid in (0, 1):
        assert [m.body for m in got if m.queue_id == qid] == [
            f"row-{i:04d}".encode() for i in range(qid, 1200, 2)]


def test_bad_input_is_refused(spark: Any, cluster: ServerThread) -> None:
    writer = spark.createDataFrame([(1,)], "value INT").write.format("rocketmq") \
        .option("nameserver", cluster.namesrv).option("topic", "Out").mode("append")
    with pytest.raises(Exception, match="needs a column body"):
        writer.save()
    no_topic = spark.createDataFrame([("x",)], "body STRING").write.format("rocketmq") \
        .option("nameserver", cluster.namesrv).mode("append")
    with pytest.raises(Exception, match="needs a topic"):
        no_topic.save()
    bad_queue = spark.createDataFrame([("x", 7)], "body STRING, queueId INT").write.format("rocketmq") \
        .option("nameserver", cluster.namesrv).option("topic", "Out").mode("append")
    with pytest.raises(Exception, match="has no writable queue 7"):
        bad_queue.save()


def test_write_stream_mirrors_a_topic(spark: Any, cluster: ServerThread, tmp_path: Path) -> None:
    produce(cluster.namesrv, "Source", [b"m%d" % i for i in range(6)], tags=lambda i: "T")
    query = (spark.readStream.format("rocketmq").option("nameserver", cluster.namesrv)
             .option("topic", "Source").option("startingOffsets", "earliest").load()
             .selectExpr("body", "tags", "queueId",
                         "concat('Source-', queueId, '-', queueOffset) AS dedupeKey")
             .writeStream.format("rocketmq").option("nameserver", cluster.namesrv).option("topic", "Mirror")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    mirrored = messages(cluster.namesrv, "Mirror")
    assert sorted(m.body for m in mirrored) == [b"m%d" % i for i in range(6)]
    source = {(m.queue_id, m.queue_offset): m for m in messages(cluster.namesrv, "Source")}
    for m in mirrored:
        _, qid, offset = m.msg_id.split("-")
        original = source[(int(qid), int(offset))]
        assert (m.body, m.tags, m.queue_id) == (original.body, "T", original.queue_id)
