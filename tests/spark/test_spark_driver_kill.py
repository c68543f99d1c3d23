"""A streaming query's driver process is SIGKILLed mid-stream; the same query restarted on
its checkpoint delivers every message to the Parquet file sink exactly once (no gap, no
duplicate), and the consumer group's committed offsets trail by at most one batch. Batches
of 20 (a micro-batch costs seconds here): the driver dies once the first is committed, with
two more to go."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from spark_cluster import ServerThread, create_topic, produce

from bolide.client.blocking import Admin

pytestmark = pytest.mark.spark

BATCH = 20  # maxOffsetsPerTrigger

DRIVER = r'''
import sys
from pyspark.sql import SparkSession
import bolide.spark

ns, out, checkpoint, mode, BATCH = *sys.argv[1:5], int(sys.argv[5])
spark = (SparkSession.builder.master("local[1]").appName("killed-driver")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
         .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
         .getOrCreate())
bolide.spark.register(spark)
df = (spark.readStream.format("rocketmq").option("nameserver", ns).option("topic", "Killed")
      .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(BATCH))
      .option("consumerGroup", "killed-cg").load())
writer = (df.selectExpr("queueId", "queueOffset", "body").writeStream.format("parquet")
          .option("path", out).option("checkpointLocation", checkpoint))
if mode == "forever":
    writer = writer.trigger(processingTime="200 milliseconds")
else:
    writer = writer.trigger(availableNow=True)
query = writer.start()
print("started", flush=True)
query.awaitTermination()
'''


def _query(spark: Any, ns: str, tmp_path: Path) -> Any:
    """The DRIVER's query (the same source, options and sink), as a writer to start."""
    df = (spark.readStream.format("rocketmq").option("nameserver", ns).option("topic", "Killed")
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(BATCH))
          .option("consumerGroup", "killed-cg").load())
    return (df.selectExpr("queueId", "queueOffset", "body").writeStream.format("parquet")
            .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "checkpoint")))


def _driver(tmp_path: Path, ns: str, mode: str) -> subprocess.Popen[str]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.Popen([sys.executable, str(script), ns, str(tmp_path / "out"),
                             str(tmp_path / "checkpoint"), mode, str(BATCH)],
                            stdout=subprocess.PIPE, stderr=(tmp_path / f"{mode}.log").open("w"),
                            text=True, env=env, start_new_session=True)


def _committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else 0


def test_a_killed_driver_restarts_without_duplicates_or_gaps(spark: Any, tmp_path: Path) -> None:
    st = ServerThread(tmp_path / "store").start()
    try:
        create_topic(st.namesrv, "Killed", queues=2)
        produce(st.namesrv, "Killed", [b"first-%d" % i for i in range(60)])

        first = _driver(tmp_path, st.namesrv, "forever")
        try:
            deadline = time.monotonic() + 120
            while _committed_batches(tmp_path / "checkpoint") < 1:  # a batch committed
                assert first.poll() is None, (tmp_path / "forever.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "no batch committed in time"
                time.sleep(0.05)
        finally:  # the driver dies mid-stream, its JVM with it (same process group)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
        assert _committed_batches(tmp_path / "checkpoint") < 3  # 60 messages, BATCH per batch

        produce(st.namesrv, "Killed", [b"second-%d" % i for i in range(20)])
        # the same query restarts from the checkpoint, here in the test's own session
        query = _query(spark, st.namesrv, tmp_path).trigger(availableNow=True).start()
        query.awaitTermination(180)
        assert query.exception() is None

        rows = spark.read.parquet(str(tmp_path / "out")).collect()
        keys = [(r.queueId, r.queueOffset) for r in rows]
        assert len(keys) == len(set(keys)) == 80  # each message exactly once
        bodies = sorted(bytes(r.body) for r in rows)
        assert bodies == sorted([b"first-%d" % i for i in range(60)] + [b"second-%d" % i for i in range(20)])
        with Admin(st.namesrv) as admin:
            progress = admin.consumer_progress("killed-cg")
        # the group trails the checkpoint by the last batch at most (docs/pipeline.md)
        assert 80 - BATCH <= sum(q.consumer_offset for q in progress.queues) <= 80
    finally:
        st.stop()
