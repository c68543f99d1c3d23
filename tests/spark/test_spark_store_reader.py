"""``spark.read.format("rocketmq-store")``: CommitLog segments of a store read from disk, every
column against what was written, the topic filter, a torn tail, and a store still open."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from bolide.common.compression import CompressionType, compress_body
from bolide.common.message import Message
from bolide.spark import register
from bolide.spark.options import SparkOptionError
from bolide.spark.store_reader import FORMAT, RocketMQStoreDataSource
from bolide.store import MessageStore, PutStatus, StoreConfig

pytestmark = pytest.mark.spark

SEGMENT = 4096
BORN_HOST = "10.1.2.3:4567"


def _config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT)


def _write(store: MessageStore, count: int, first: int = 0) -> list[dict[str, Any]]:
    """Messages alternating between two topics and two queues; what each row must hold."""
    expected = []
    for i in range(first, first + count):
        topic, qid = ("Alpha", "Beta")[i % 2], (i // 2) % 2
        msg = Message(topic, b"body %d " % i + bytes(range(i % 50)), tags=f"tag{i % 3}",
                      keys=[f"k{i}", "shared"], properties={"n": str(i)})
        born = 1_700_000_000_000 + i
        result = store.put_message(msg, qid, born_timestamp=born, born_host=BORN_HOST,
                                   reconsume_times=i % 4)
        assert result.status is PutStatus.PUT_OK, result
        expected.append({
            "topic": topic, "brokerName": "broker-x", "queueId": qid, "queueOffset": result.queue_offset,
            "commitLogOffset": result.wrote_offset, "msgId": result.msg_id, "keys": f"k{i} shared",
            "tags": f"tag{i % 3}", "body": msg.body, "bornMs": born, "storeMs": result.store_timestamp,
            "bornHost": BORN_HOST, "storeHost": store.config.store_address, "reconsumeTimes": i % 4,
            "sysFlag": 0, "n": str(i),
        })
    return expected


def _read(spark: Any, path: Path, **options: str) -> list[dict[str, Any]]:
    reader = spark.read.format(FORMAT).option("brokerName", "broker-x")
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load(str(path))
    rows = df.selectExpr("*", "unix_millis(bornTimestamp) AS bornMs",
                         "unix_millis(storeTimestamp) AS storeMs").collect()
    out = []
    for row in rows:
        d = row.asDict()
        props = d.pop("properties")
        del d["bornTimestamp"], d["storeTimestamp"]
        assert props["TAGS"] == d["tags"] and props["KEYS"] == d["keys"]
        assert props["UNIQ_KEY"] == d["msgId"]
        d["n"] = props["n"]
        d["body"] = bytes(d["body"])
        out.append(d)
    return sorted(out, key=lambda d: d["commitLogOffset"])


@pytest.fixture(scope="module")
def closed_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("store-reader") / "store"
    with MessageStore(_config(root)) as store:
        expected = _write(store, 80)
    return root, expected


def _segments_with_data(root: Path) -> int:
    return sum(1 for p in (root / "commitlog").iterdir() if p.read_bytes()[:8] != bytes(8))


def test_every_column_of_every_segment(spark: Any, closed_store: tuple[Path, list[dict[str, Any]]]) -> None:
    register(spark)
    root, expected = closed_store
    segments = _segments_with_data(root)
    assert segments >= 4  # the messages span several segments
    assert _read(spark, root) == expected
    df = spark.read.format(FORMAT).option("path", str(root)).load()
    assert df.rdd.getNumPartitions() == segments
    assert df.first().brokerName == "broker-a"  # the default
    # the CommitLog directory itself works too, and the batch size does not change the rows
    assert _read(spark, root / "commitlog", readBatchSize="3") == expected


def test_topic_filter(spark: Any, closed_store: tuple[Path, list[dict[str, Any]]]) -> None:
    register(spark)
    root, expected = closed_store
    assert _read(spark, root, topic="Beta") == [e for e in expected if e["topic"] == "Beta"]
    assert _read(spark, root, topic=" Beta, Alpha ") == expected
    assert _read(spark, root, topic="Gamma") == []


def test_a_schema_of_some_columns(spark: Any, closed_store: tuple[Path, list[dict[str, Any]]]) -> None:
    """``.schema(...)`` with some of the columns, in any order: only those are decoded and
    handed to Spark; a column that is not one, or has another type, is refused by name."""
    register(spark)
    root, expected = closed_store
    df = spark.read.format(FORMAT).schema("commitLogOffset BIGINT, body BINARY, tags STRING").load(str(root))
    assert df.columns == ["commitLogOffset", "body", "tags"]
    assert sorted((r.commitLogOffset, bytes(r.body), r.tags) for r in df.collect()) == [
        (e["commitLogOffset"], e["body"], e["tags"]) for e in expected]
    beta = spark.read.format(FORMAT).schema("queueOffset BIGINT").option("topic", "Beta").load(str(root))
    assert sorted(r.queueOffset for r in beta.collect()) == sorted(
        e["queueOffset"] for e in expected if e["topic"] == "Beta")
    with pytest.raises(Exception, match="column 'value' of the given schema is not a column"):
        spark.read.format(FORMAT).schema("value BINARY").load(str(root)).collect()
    with pytest.raises(Exception, match="column queueId is INT in the rocketmq sources, not BIGINT"):
        spark.read.format(FORMAT).schema("queueId BIGINT").load(str(root)).collect()


def test_torn_tail_of_a_copy_is_skipped(spark: Any, tmp_path: Path,
                                        closed_store: tuple[Path, list[dict[str, Any]]]) -> None:
    register(spark)
    root, expected = closed_store
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    last = expected[-1]
    end = last["commitLogOffset"] + 200  # inside the last record: cut it short
    segment = copy / "commitlog" / f"{end // SEGMENT * SEGMENT:020d}"
    with open(segment, "r+b") as f:
        f.seek(end % SEGMENT)
        f.write(bytes(SEGMENT - end % SEGMENT))
    assert _read(spark, copy) == expected[:-1]


def test_a_store_still_open(spark: Any, tmp_path: Path) -> None:
    register(spark)
    root = tmp_path / "live"
    with MessageStore(_config(root)) as store:
        first = _write(store, 30)
        assert _read(spark, root) == first
        more = _write(store, 30, first=30)
        assert _read(spark, root) == first + more
        assert store.running


def test_bodies_compressed_each_way_are_read_back(spark: Any, tmp_path: Path) -> None:
    """ZLIB, LZ4 and ZSTD bodies (RocketMQ 5 producers' compression types) come out as sent."""
    register(spark)
    root = tmp_path / "compressed"
    sent = {}
    with MessageStore(_config(root)) as store:
        for kind in CompressionType:
            body = (kind.name.encode() + b":" + b"rocketmq-body-" * 300)
            packed, flags = compress_body(body, kind, 3)
            assert store.put_message(Message("Packed", packed), 0, sys_flag=flags).ok
            sent[kind.name] = body
    rows = spark.read.format(FORMAT).load(str(root)).select("body").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(sent.values())


def test_options_are_checked(spark: Any, tmp_path: Path) -> None:
    register(spark)
    with pytest.raises(Exception, match="is not a directory"):
        spark.read.format(FORMAT).load(str(tmp_path / "nowhere")).collect()
    with pytest.raises(Exception, match="unknown rocketmq-store option"):
        spark.read.format(FORMAT).option("topics", "A").load(str(tmp_path)).collect()
    with pytest.raises(SparkOptionError, match="store directory is required"):
        RocketMQStoreDataSource({}).reader(RocketMQStoreDataSource({}).schema())


def test_found_by_sparks_lookup() -> None:
    default = importlib.import_module("pyspark_bolide_store").DefaultSource
    assert default is RocketMQStoreDataSource and default.name() == "rocketmq-store"
