"""The Spark pipeline against one real Apache RocketMQ 5.3.3 NameServer + broker, started once
for the module: the ``rocketmq`` batch source (every column, earliest/latest/JSON offsets, a tag
filter, more tasks than queues), the sink (``df.write.format("rocketmq")`` read back), a
Trigger.AvailableNow stream whose consumer group commits on the broker, and, after a clean
shutdown, ``rocketmq-store`` on the broker's own files (whole segments and segments split at
ConsumeQueue record starts) giving the rows the broker served.

The store uses 512 KiB CommitLog segments (the store reader is told with
mappedFileSizeCommitLog) and incompressible 200 KiB bodies, so the data spans two segments and
the first ends in RocketMQ's BLANK filler. RocketMQ 4.9.7 writes the same store format
(tests/interop/test_store_compat_rocketmq.py) and answers the same requests.

The brokers' JVMs boot in a background thread while the session-scoped ``spark`` fixture
starts and warms up its Python data source machinery, so the tests take ``cluster`` (which
carries the session) rather than ``spark``. Needs java, the cached RocketMQ jars (``make
interop-deps``) and the spark extra: without them the module is skipped, or fails when ``CI``
is set. Tests run in file order: the last one stops the broker.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from client_roundtrip import unavailable

from bolide.client import Message, MQClientError, SendStatus
from bolide.client.blocking import Admin, Producer
from bolide.spark import register
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable

pytestmark = [pytest.mark.interop, pytest.mark.spark, pytest.mark.timeout(300)]

VERSION = "5.3.3"
BROKER = "broker-a"
TOPIC = "SparkRmq"  # produced with bolide.client
SINK = "SparkRmqSink"  # written by df.write.format("rocketmq")
QUEUES = 4
COUNT = 40
BIG = {7: 200 * 1024, 18: 200 * 1024, 29: 200 * 1024}  # message index -> incompressible body size
SEGMENT = 512 * 1024
GROUP = "spark-rmq-stream-cg"
TIMEOUT = 30.0
ROW_COLUMNS = ["topic", "brokerName", "queueId", "queueOffset", "commitLogOffset", "msgId", "keys", "tags",
               "body", "properties", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost",
               "reconsumeTimes", "sysFlag"]


@dataclass(frozen=True)
class Sent:
    queue_id: int
    queue_offset: int
    body: bytes
    tags: str
    keys: str
    props: dict[str, str]


@dataclass
class Cluster:
    spark: Any  # the session of the ``spark`` fixture
    rmq: RocketMQ
    store: Path
    sent: dict[str, Sent]  # msgId -> what was sent and where it went
    sent_between: tuple[float, float]  # wall clock (s) before the first and after the last send

    @property
    def namesrv(self) -> str:
        return self.rmq.namesrv_addr


def until(ready: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    """Poll ``ready()`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (found := ready()):
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s"
        time.sleep(0.1)
    return found


def routed(admin: Admin, topic: str) -> bool:
    try:
        return bool(admin.topic_route(topic).queue_datas)
    except MQClientError:
        return False


def produce(namesrv: str) -> dict[str, Sent]:
    sent: dict[str, Sent] = {}
    with Producer(namesrv, "spark-rmq-pg") as producer:
        for i in range(COUNT):
            body = os.urandom(BIG[i]) if i in BIG else b"rmq-%d:" % i + b"x" * (i * 37 % 200)
            tags, keys = f"Tag{'ABC'[i % 3]}", f"k{i} shared"
            props = {"color": ("red", "blue")[i % 2], "seq": str(i)}
            r = producer.send(Message(TOPIC, body, tags=tags, keys=keys.split(), properties=props))
            assert r.status is SendStatus.SEND_OK, r
            assert r.queue.broker_name == BROKER
            sent[r.msg_id] = Sent(r.queue.queue_id, r.queue_offset, body, tags, keys, props)
    assert len({(s.queue_id, s.queue_offset) for s in sent.values()}) == COUNT
    assert {s.queue_id for s in sent.values()} == set(range(QUEUES))
    return sent


def boot(server: RocketMQ, store: Path) -> tuple[dict[str, Sent], tuple[float, float]]:
    """NameServer, broker, topics TOPIC (4 queues) and SINK (2), and TOPIC's messages."""
    server.start_namesrv()
    server.start_broker(BrokerSettings(store, mapped_file_size_commit_log=SEGMENT))
    with Admin(server.namesrv_addr) as admin:
        until(lambda: routed(admin, "TBW102"))
        for topic, queues in ((TOPIC, QUEUES), (SINK, 2)):
            admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues,
                               broker_addr=server.broker_addr)
        until(lambda: routed(admin, TOPIC) and routed(admin, SINK))
    before = time.time()
    sent = produce(server.namesrv_addr)
    return sent, (before, time.time())


def warm_up(spark: Any, run_dir: Path) -> None:
    """Spark's first Python data source read starts its Python workers (seconds): do it on an
    empty store while the broker boots."""
    register(spark)
    (run_dir / "empty" / "commitlog").mkdir(parents=True)
    assert spark.read.format("rocketmq-store").load(str(run_dir / "empty")).collect() == []


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The real NameServer + broker with TOPIC's messages, and the Spark session."""
    if shutil.which("java") is None or importlib.util.find_spec("pyspark") is None:
        request.getfixturevalue("spark")  # skips (or fails under CI) saying what is missing
    run_dir = tmp_path_factory.mktemp(f"spark-rmq-{VERSION}")
    try:
        server = RocketMQ(VERSION, run_dir)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    pool = ThreadPoolExecutor(1, thread_name_prefix="rocketmq-boot")
    booting = pool.submit(boot, server, run_dir / "store")
    try:
        spark = request.getfixturevalue("spark")
        warm_up(spark, run_dir)
        sent, between = booting.result()
        yield Cluster(spark, server, run_dir / "store", sent, between)
    finally:
        pool.shutdown(wait=True)  # the boot ends (or fails) before the servers are stopped
        server.kill_broker()  # a no-op once the last test has stopped it cleanly
        server.stop()


def online(cluster: Cluster, topic: str = TOPIC, **options: str) -> Any:
    reader = cluster.spark.read.format("rocketmq").option("nameserver", cluster.namesrv)
    reader = reader.option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def expect(cluster: Cluster, keep: Callable[[Sent], bool] = lambda s: True) -> dict[str, Sent]:
    return {msg_id: s for msg_id, s in cluster.sent.items() if keep(s)}


def check_rows(rows: list[Any], expected: dict[str, Sent], cluster: Cluster) -> None:
    """Every column of ``rows`` against what was sent: exactly the ``expected`` messages."""
    got = {r.msgId: r for r in rows}
    assert len(rows) == len(got), "a message was read twice"
    assert got.keys() == expected.keys(), (
        f"missing {sorted((s.queue_id, s.queue_offset) for k, s in expected.items() if k not in got)}, "
        f"unexpected {sorted((r.queueId, r.queueOffset) for k, r in got.items() if k not in expected)}")
    low, high = cluster.sent_between
    for msg_id, s in expected.items():
        r = got[msg_id]
        assert (r.topic, r.brokerName, r.queueId, r.queueOffset) == (TOPIC, BROKER, s.queue_id,
                                                                     s.queue_offset), msg_id
        assert (bytes(r.body), r.tags, r.keys) == (s.body, s.tags, s.keys), msg_id
        props = r.properties
        assert {k: props.get(k) for k in s.props} == s.props, msg_id
        assert (props["UNIQ_KEY"], props["TAGS"], props["KEYS"]) == (msg_id, s.tags, s.keys), msg_id
        assert "MIN_OFFSET" not in props and "MAX_OFFSET" not in props  # added by a pull, not stored
        born, stored = r.bornTimestamp.timestamp(), r.storeTimestamp.timestamp()
        assert low - 1 <= born <= stored + 1 and stored <= high + 1, (msg_id, low, born, stored, high)
        assert r.storeHost == cluster.rmq.broker_addr and re.fullmatch(r"127\.0\.0\.1:\d+", r.bornHost)
        assert r.commitLogOffset >= 0 and r.reconsumeTimes == 0 and r.sysFlag & ~1 == 0, msg_id
        assert r.sysFlag == (1 if len(s.body) > 4096 else 0), msg_id  # the producer compressed it
    offsets = sorted(r.commitLogOffset for r in rows)
    assert len(set(offsets)) == len(offsets)


def test_batch_source_reads_every_column(cluster: Cluster) -> None:
    everything = online(cluster, startingOffsets="earliest", minPartitions="6")
    assert everything.rdd.getNumPartitions() >= 6  # queues cut into sub-ranges
    check_rows(everything.collect(), cluster.sent, cluster)
    assert online(cluster, startingOffsets="latest").count() == 0

    filtered = online(cluster, subExpression="TagA || TagC", minPartitions="2").collect()
    check_rows(filtered, expect(cluster, lambda s: s.tags != "TagB"), cluster)


def test_batch_source_json_offsets(cluster: Cluster) -> None:
    starting = {TOPIC: {BROKER: {"0": 2, "1": -2, "2": -1, "3": 4}}}
    ending = {TOPIC: {"0": 7, "3": -1}}  # by queue id on every broker; queue 1 defaults to latest
    rows = online(cluster, startingOffsets=json.dumps(starting),
                  endingOffsets=json.dumps(ending)).collect()
    starts, ends = {0: 2, 1: 0, 2: 10**9, 3: 4}, {0: 7, 1: 10**9, 2: 10**9, 3: 10**9}
    wanted = expect(cluster, lambda s: starts[s.queue_id] <= s.queue_offset < ends[s.queue_id])
    assert {s.queue_id for s in wanted.values()} == {0, 1, 3} and len(wanted) < COUNT
    check_rows(rows, wanted, cluster)


def test_sink_writes_exactly_the_rows_read_back(cluster: Cluster) -> None:
    from pyspark.sql.types import BinaryType, IntegerType, MapType, StringType, StructField, StructType

    schema = StructType([
        StructField("body", BinaryType()), StructField("tags", StringType()),
        StructField("keys", StringType()), StructField("properties", MapType(StringType(), StringType())),
        StructField("queueId", IntegerType()), StructField("dedupeKey", StringType()),
        StructField("ignored", StringType()),
    ])
    data = [(b"sink-%d" % i + b"y" * (i * 53 % 120), f"S{i % 2}", f"sk{i} sink", {"n": str(i)},
             i % 2 if i < 8 else None, f"dedupe-{i}" if i % 3 == 0 else None, "x") for i in range(14)]
    df = cluster.spark.createDataFrame(data, schema)
    assert df.rdd.getNumPartitions() == 2  # two tasks, two producers
    (df.write.format("rocketmq").option("nameserver", cluster.namesrv).option("topic", SINK)
     .mode("append").save())

    rows = online(cluster, SINK).collect()
    got = sorted((bytes(r.body), r.tags, r.keys, r.properties["n"]) for r in rows)
    assert got == sorted((body, tags, keys, props["n"]) for body, tags, keys, props, *_ in data)
    by_n = {r.properties["n"]: r for r in rows}
    for i, (_, _, _, _, queue_id, dedupe, _) in enumerate(data):
        r = by_n[str(i)]
        assert r.topic == SINK and r.brokerName == BROKER and "ignored" not in r.properties
        if queue_id is not None:
            assert r.queueId == queue_id, i
        if dedupe is not None:
            assert r.msgId == dedupe == r.properties["UNIQ_KEY"], i
    per_queue = {q: sum(r.queueId == q for r in rows) for q in (0, 1)}
    assert sorted((r.queueId, r.queueOffset) for r in rows) == [
        (q, o) for q in (0, 1) for o in range(per_queue[q])]  # the only messages of SINK


def batch_ends(checkpoint: Path) -> list[dict[int, int]]:
    """End offsets of TOPIC's queues of each micro-batch, from the query's offset log."""
    logs = sorted((int(f.name), f) for f in (checkpoint / "offsets").iterdir() if f.name.isdigit())
    ends = []
    for _, path in logs:
        source = json.loads(path.read_text().splitlines()[-1])  # v1, metadata, one line per source
        ends.append({int(q): off for q, off in source[TOPIC][BROKER].items()})
    return ends


def test_available_now_stream_commits_the_group_offsets(cluster: Cluster, tmp_path: Path) -> None:
    """Spark tells a source a batch is done only when it plans the next one, so the group holds
    the end of the run's second-to-last batch (docs/pipeline.md, Consumer group), or of the
    last when Spark plans once more before the query ends."""
    spark, checkpoint = cluster.spark, tmp_path / "checkpoint"
    query = (spark.readStream.format("rocketmq").option("nameserver", cluster.namesrv).option("topic", TOPIC)
             .option("startingOffsets", "earliest").option("consumerGroup", GROUP)
             .option("maxOffsetsPerTrigger", "25").load()
             .writeStream.format("memory").queryName("spark_rmq_stream")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the AvailableNow query did not finish"
        assert query.exception() is None
        rows = spark.table("spark_rmq_stream").collect()
    finally:
        query.stop()
        spark.catalog.dropTempView("spark_rmq_stream")
    check_rows(rows, cluster.sent, cluster)

    ends = batch_ends(checkpoint)
    assert len(ends) == 2 and sum(ends[0].values()) == 25  # 40 messages, at most 25 a batch
    assert ends[1] == {q: 1 + max(s.queue_offset for s in cluster.sent.values() if s.queue_id == q)
                       for q in range(QUEUES)}
    with Admin(cluster.namesrv) as admin:
        def committed() -> dict[int, int]:  # QUERY_CONSUMER_OFFSET through consumerProgress
            progress = admin.consumer_progress(GROUP, TOPIC)
            return {q.queue.queue_id: q.consumer_offset for q in progress.queues
                    if q.queue.topic == TOPIC and q.queue.broker_name == BROKER}

        try:  # a slow run may plan one more (empty) batch before stopping: then the last end
            until(lambda: committed() in ends)
        except AssertionError:
            pytest.fail(f"group {GROUP} has offsets {committed()} on the broker, not the end of "
                        f"a batch {ends}")


def test_store_reader_on_the_stopped_brokers_files(cluster: Cluster) -> None:
    spark, topics = cluster.spark, f"{TOPIC},{SINK}"
    served = online(cluster, topics).collect()
    check_rows([r for r in served if r.topic == TOPIC], cluster.sent, cluster)
    code = cluster.rmq.stop_broker()  # SIGTERM: the broker flushes its files and deletes abort
    assert not (cluster.store / "abort").exists(), f"the broker did not stop cleanly (exit {code})"
    segments = sorted((cluster.store / "commitlog").iterdir())
    assert len(segments) >= 2 and all(os.path.getsize(s) == SEGMENT for s in segments)

    def offline(**options: str) -> Any:
        reader = (spark.read.format("rocketmq-store").option("topic", topics)
                  .option("mappedFileSizeCommitLog", str(SEGMENT)))
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load(str(cluster.store))

    def as_tuples(rows: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((*(r[c] for c in ROW_COLUMNS if c != "properties"), sorted(r.properties.items()))
                      for r in rows)

    whole = offline()
    rows = whole.collect()
    assert as_tuples(rows) == as_tuples(served)  # every column, as the broker served it
    check_rows([r for r in rows if r.topic == TOPIC], cluster.sent, cluster)

    split = offline(maxPartitionBytes="4096")
    assert split.rdd.getNumPartitions() >= whole.rdd.getNumPartitions() + len(segments)  # cuts in each
    assert as_tuples(split.collect()) == as_tuples(served)
