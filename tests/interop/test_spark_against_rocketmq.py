"""The Spark sources against real Apache RocketMQ 4.9.7: ``rocketmq`` reads what Bolide's
Producer sent through the real NameServer and broker (every queue, a tag filter, more tasks
than queues), and ``rocketmq-store`` reads the same rows from the broker's CommitLog files
once the broker has stopped (whole segments, and segments split at ConsumeQueue record starts).

Needs java, the cached RocketMQ jars (``make interop-deps``) and the spark extra: without them
the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
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

VERSION = "4.9.7"  # boots and registers fastest
TOPIC = "SparkInterop"
QUEUES = 4
COUNT = 50
SEGMENT = 1024 * 1024  # not RocketMQ's default: the store reader is told (mappedFileSizeCommitLog)
COLUMNS = ["msgId", "queueId", "queueOffset", "commitLogOffset", "body"]


@dataclass(frozen=True)
class Sent:
    queue_id: int
    queue_offset: int
    broker_name: str
    body: bytes
    tags: str
    keys: str
    color: str


@dataclass
class Cluster:
    rmq: RocketMQ
    store: Path
    sent: dict[str, Sent]  # msgId -> what was sent and where it went


def wait_for_route(namesrv: str, topic: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with Admin(namesrv) as admin:
        while True:
            try:
                if admin.topic_route(topic).queue_datas:
                    return
            except MQClientError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)


def produce(namesrv: str) -> dict[str, Sent]:
    sent: dict[str, Sent] = {}
    with Producer(namesrv, "spark-interop-pg") as producer:
        for i in range(COUNT):
            body = b"spark-%d:" % i + b"z" * (i * 41 % 300)
            tags, keys, color = f"Tag{'ABC'[i % 3]}", f"k{i} shared", ("red", "blue")[i % 2]
            r = producer.send(Message(TOPIC, body, tags=tags, keys=keys.split(), properties={"color": color}))
            assert r.status is SendStatus.SEND_OK, r
            where = r.queue
            sent[r.msg_id] = Sent(where.queue_id, r.queue_offset, where.broker_name, body, tags, keys, color)
    assert len({(s.queue_id, s.queue_offset) for s in sent.values()}) == COUNT
    assert {s.queue_id for s in sent.values()} == set(range(QUEUES))
    return sent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A real NameServer + broker, a topic of 4 queues and the messages sent to it."""
    run_dir = tmp_path_factory.mktemp(f"spark-rocketmq-{VERSION}")
    try:
        server = RocketMQ(VERSION, run_dir)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    store = run_dir / "store"
    try:
        server.start_namesrv()
        server.start_broker(BrokerSettings(store, mapped_file_size_commit_log=SEGMENT))
        wait_for_route(server.namesrv_addr, "TBW102")
        with Admin(server.namesrv_addr) as admin:
            admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES,
                               broker_addr=server.broker_addr)
        wait_for_route(server.namesrv_addr, TOPIC)
        yield Cluster(server, store, produce(server.namesrv_addr))
    finally:
        server.kill_broker()  # a no-op once the test has stopped it cleanly
        server.stop()


def online(spark: Any, cluster: Cluster, **options: str) -> Any:
    reader = (spark.read.format("rocketmq").option("nameserver", cluster.rmq.namesrv_addr)
              .option("topic", TOPIC).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def offline(spark: Any, cluster: Cluster, **options: str) -> Any:
    reader = (spark.read.format("rocketmq-store").option("topic", TOPIC)
              .option("mappedFileSizeCommitLog", str(SEGMENT)))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(str(cluster.store))


def check_rows(rows: list[Any], expected: dict[str, Sent]) -> None:
    got = {r.msgId: r for r in rows}
    assert len(rows) == len(got), "a message was read twice"
    assert got.keys() == expected.keys(), (
        f"missing {sorted(expected.keys() - got.keys())[:5]}, "
        f"unexpected {sorted(got.keys() - expected.keys())[:5]}")
    for msg_id, s in expected.items():
        r = got[msg_id]
        assert (r.topic, r.queueId, r.queueOffset, r.brokerName) == (TOPIC, s.queue_id, s.queue_offset,
                                                                     s.broker_name), msg_id
        assert (bytes(r.body), r.tags, r.keys) == (s.body, s.tags, s.keys), msg_id
        assert r.properties["color"] == s.color and r.properties["UNIQ_KEY"] == msg_id, msg_id


def test_rocketmq_source_reads_a_real_broker(spark: Any, cluster: Cluster) -> None:
    everything = online(spark, cluster, minPartitions="2")
    assert everything.rdd.getNumPartitions() >= QUEUES
    check_rows(everything.collect(), cluster.sent)

    filtered = online(spark, cluster, subExpression="TagA || TagC").collect()
    check_rows(filtered, {k: s for k, s in cluster.sent.items() if s.tags != "TagB"})


def test_store_reader_reads_the_same_rows_after_a_clean_stop(spark: Any, cluster: Cluster) -> None:
    before = sorted(online(spark, cluster).select(COLUMNS).collect())
    assert len(before) == COUNT
    code = cluster.rmq.stop_broker()  # SIGTERM: the broker flushes and deletes abort
    assert not (cluster.store / "abort").exists(), f"the broker did not stop cleanly (exit {code})"

    register(spark)
    whole = offline(spark, cluster)
    rows = whole.collect()
    assert sorted(tuple(r[c] for c in COLUMNS) for r in rows) == [tuple(r) for r in before]
    check_rows(rows, cluster.sent)

    split = offline(spark, cluster, maxPartitionBytes="4096")
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    assert sorted(split.select(COLUMNS).collect()) == before
