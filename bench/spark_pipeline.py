"""Benchmark of the Spark pipeline on local[2]: rows/s and MiB/s of the ``rocketmq`` source
through a broker, of ``rocketmq-store`` over the same store's files, of Spark reading the same
rows from Parquet, and of the ``rocketmq`` sink.

    .venv/bin/python bench/spark_pipeline.py --dir ./bench-data/spark
    .venv/bin/python bench/spark_pipeline.py --quick --dir ./bench-data/spark

For each body size the messages are written into a store with ``MessageStore.put_messages``
(4 queues), served by ``bolide start`` in a child process, then read with the same query
(``count(*)`` and ``sum(length(body))``, so every row is decoded), the store also with a
reader schema of the body column only, as Parquet prunes columns. Prints one JSON document
with the broker's peak RSS and anonymous memory. Figures are never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bolide.cli.bench_common import machine_info, proc_status, r
from bolide.cli.bench_server import ServerProcess
from bolide.client.blocking import Admin
from bolide.common import Message
from bolide.store import MessageStore, StoreConfig

TOPIC = "SparkBench"
LARGE_PULL = 256  # pullBatchSize of the second broker read
# Each read runs WARMUP times untimed (the JVM compiles the query's code as it runs: a first
# full read of 100 B rows through the broker went at half the speed of the fourth), then is
# timed RUNS times; the fastest run counts.
WARMUP, RUNS = 1, 3
# The broker returns up to 32 messages / 256 KiB per pull by default (as RocketMQ); raised so
# that pullBatchSize=LARGE_PULL is served. Reads with the default pullBatchSize ask for 32.
BROKER_SETTINGS = (f"maxTransferCountOnMessageInMemory={LARGE_PULL}",
                   "maxTransferBytesOnMessageInMemory=1048576")


def fill(root: Path, count: int, size: int) -> int:
    """``count`` messages of ``size`` random bytes in 4 queues; returns the CommitLog bytes.

    Every body differs and none compresses, as with real payloads: identical bodies would let
    the Parquet copy store one dictionary value and read it for free."""
    with MessageStore(StoreConfig(store_path_root_dir=str(root))) as store:
        for i in range(0, count, 64):
            n = min(64, count - i)
            data = os.urandom(n * size)
            batch = [Message(TOPIC, data[j * size:(j + 1) * size]) for j in range(n)]
            store.put_messages(batch, queue_id=(i // 64) % 4)
        store.flush()
        assert store.wait_dispatched(120)
        return store.max_phy_offset


class CeilingSource:
    """A Python data source of the readers' schema whose rows cost nothing to make: the same
    ready-made Arrow batch over and over (options ``rows``, ``size``). What Spark's Python Data
    Source API can take in at best on this machine, next to the real readers."""

    @staticmethod
    def register(spark: Any) -> None:
        from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

        from bolide.spark.schema import SCHEMA_DDL

        class Reader(DataSourceReader):
            def __init__(self, options: dict[str, str]) -> None:
                self.rows, self.size = int(options["rows"]), int(options["size"])

            def partitions(self) -> list[Any]:
                return [InputPartition(i) for i in range(2)]

            def read(self, partition: Any) -> Any:
                import numpy as np
                import pyarrow as pa

                from bolide.spark.schema import arrow_schema

                n = 4096
                offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * self.size).tobytes())
                data = pa.py_buffer(os.urandom(n * self.size))
                body = pa.Array.from_buffers(pa.binary(), n, [None, offsets, data])
                text = pa.array([TOPIC] * n)
                msg_id = pa.array(["7F0000010C9F18B4AAC2000000000000"] * n)
                i32, i64 = pa.array(np.zeros(n, np.int32)), pa.array(np.arange(n, dtype=np.int64))
                ts = pa.array(np.arange(n, dtype=np.int64) * 1000, type=pa.timestamp("us", tz="UTC"))
                props = pa.array([[("UNIQ_KEY", "7F0000010C9F18B4AAC2000000000000"), ("WAIT", "true")]] * n,
                                 type=pa.map_(pa.string(), pa.string()))
                hosts = pa.array(["127.0.0.1:10911"] * n)
                cols = {"topic": text, "brokerName": text, "queueId": i32, "queueOffset": i64,
                        "commitLogOffset": i64, "msgId": msg_id, "keys": pa.nulls(n, pa.string()),
                        "tags": pa.nulls(n, pa.string()), "body": body, "properties": props,
                        "bornTimestamp": ts, "storeTimestamp": ts, "bornHost": hosts, "storeHost": hosts,
                        "reconsumeTimes": i32, "sysFlag": i32}
                schema = arrow_schema()
                batch = pa.RecordBatch.from_arrays([cols[name] for name in schema.names], schema=schema)
                mine = self.rows // 2 + (self.rows % 2 if partition.value == 0 else 0)
                for start in range(0, mine, n):
                    yield batch.slice(0, min(n, mine - start))

        class Ceiling(DataSource):
            @classmethod
            def name(cls) -> str:
                return "bolide-bench-ceiling"

            def schema(self) -> str:
                return SCHEMA_DDL

            def reader(self, schema: Any) -> DataSourceReader:
                return Reader(dict(self.options))

        spark.dataSource.register(Ceiling)


def _routed(admin: Any) -> bool:
    try:
        return len(admin.queues(TOPIC)) == 4
    except Exception:  # not routed yet
        return False


def timed(df: Any, runs: int = 1, warmup: int = 0) -> tuple[float, int, int]:
    """The fastest of ``runs`` runs of the query after ``warmup`` untimed ones: seconds, rows
    and body bytes."""
    for _ in range(warmup):
        df.selectExpr("count(*) AS n", "sum(length(body)) AS b").collect()
    best = None
    for _ in range(runs):
        t = time.perf_counter()
        row = df.selectExpr("count(*) AS n", "sum(length(body)) AS b").collect()[0]
        took = time.perf_counter() - t, int(row.n), int(row.b or 0)
        best = took if best is None or took[0] < best[0] else best
    assert best is not None
    return best


def figures(seconds: float, rows: int, body_bytes: int) -> dict[str, Any]:
    return {"seconds": r(seconds, 3), "rows": rows, "rows_s": r(rows / seconds, 0),
            "body_mib_s": r(body_bytes / seconds / 2**20)}


def run_size(spark: Any, base: Path, count: int, size: int, sink_rows: int, runs: int = RUNS,
             warmup: int = WARMUP) -> dict[str, Any]:
    """Every figure of one body size; each read the fastest of ``runs`` after ``warmup``."""
    CeilingSource.register(spark)
    root = base / f"store-{size}"
    shutil.rmtree(root, ignore_errors=True)
    t = time.perf_counter()
    log_bytes = fill(root / "store", count, size)
    out: dict[str, Any] = {"messages": count, "body_bytes": size, "commit_log_mib": r(log_bytes / 2**20),
                           "fill_s": r(time.perf_counter() - t, 1)}
    server = ServerProcess(root, "ASYNC_FLUSH", BROKER_SETTINGS)
    server.start(120)
    try:
        with Admin(server.namesrv_addr) as admin:  # the store was written without a topic config
            admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)
            deadline = time.monotonic() + 60
            while not _routed(admin):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no route for {TOPIC} after 60 s")
                time.sleep(0.1)
        def online(pull_batch: int, schema: str | None = None) -> Any:
            reader = spark.read.format("rocketmq")
            if schema is not None:
                reader = reader.schema(schema)
            return (reader.option("nameserver", server.namesrv_addr)
                    .option("topic", TOPIC).option("startingOffsets", "earliest")
                    .option("pullBatchSize", str(pull_batch)).load())

        secs, rows, body = timed(online(32), runs, warmup)
        out["broker_read"] = figures(secs, rows, body)
        secs, rows, body = timed(online(LARGE_PULL), runs, warmup)
        out["broker_read_large_pulls"] = figures(secs, rows, body)
        # the column pruning Parquet does for this query, by a reader schema (as offline below)
        secs, rows, body = timed(online(LARGE_PULL, "body BINARY"), runs, warmup)
        out["broker_read_body_only"] = figures(secs, rows, body)
        offline = spark.read.format("rocketmq-store").load(str(root / "store"))
        secs, rows, body = timed(offline, runs, warmup)
        out["store_read"] = figures(secs, rows, body)
        out["store_read"]["commit_log_mib_s"] = r(log_bytes / secs / 2**20)
        parquet = root / "parquet"
        offline.write.mode("overwrite").parquet(str(parquet))
        secs, rows, body = timed(spark.read.parquet(str(parquet)), runs, warmup)
        out["parquet_read"] = figures(secs, rows, body)
        out["store_vs_parquet"] = r(out["store_read"]["seconds"] / secs, 2)
        # Parquet reads only the body column for this query; a reader schema does the same here
        body_only = spark.read.format("rocketmq-store").schema("body BINARY").load(str(root / "store"))
        out["store_read_body_only"] = figures(*timed(body_only, runs, warmup))
        out["store_body_only_vs_parquet"] = r(out["store_read_body_only"]["seconds"] / secs, 2)
        out["broker_body_only_vs_parquet"] = r(out["broker_read_body_only"]["seconds"] / secs, 2)
        ceiling = (spark.read.format("bolide-bench-ceiling").option("rows", str(count))
                   .option("size", str(size)).load())
        out["python_source_ceiling"] = figures(*timed(ceiling, runs, warmup))
        # the first sink_rows / 4 of each queue: a filter keeps the Parquet file's partitions,
        # where limit() would gather the rows into one task
        sink_df = (spark.read.parquet(str(parquet)).where(f"queueOffset < {sink_rows // 4}")
                   .select("body"))
        sink_rows = sink_rows // 4 * 4
        t = time.perf_counter()
        (sink_df.write.format("rocketmq").mode("append").option("nameserver", server.namesrv_addr)
         .option("topic", TOPIC).save())
        secs = time.perf_counter() - t
        out["sink"] = {"rows": sink_rows, "seconds": r(secs, 3), "rows_s": r(sink_rows / secs, 0)}
        mem = proc_status(server.pid)
        out["broker_memory"] = {"peak_rss_mib": r(mem.get("VmHWM")), "anon_mib": r(mem.get("RssAnon"))}
    finally:
        out["server_exit_status"] = server.stop()
        shutil.rmtree(root, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("bench-data/spark"))
    parser.add_argument("--quick", action="store_true", help="a smoke run with few messages")
    parser.add_argument("--small", type=int, default=1_200_000, help="messages of 100 B")
    parser.add_argument("--large", type=int, default=600_000, help="messages of 1 KiB")
    args = parser.parse_args()
    small, large, sink = (5_000, 2_000, 1_000) if args.quick else (args.small, args.large, 200_000)
    base = args.dir.resolve()
    base.mkdir(parents=True, exist_ok=True)
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        os.environ.setdefault(name, sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import bolide.spark

    spark = (SparkSession.builder.master("local[2]").appName("bolide-bench-spark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    bolide.spark.register(spark)
    try:
        started = time.perf_counter()
        sizes = {"100b": run_size(spark, base, small, 100, sink),
                 "1k": run_size(spark, base, large, 1024, sink)}
    finally:
        spark.stop()
    doc = {"benchmark": "spark_pipeline", "command": "bench/spark_pipeline.py " + " ".join(sys.argv[1:]),
           "machine": machine_info(), "master": "local[2]", "seconds": r(time.perf_counter() - started, 1),
           "sizes": sizes}
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
