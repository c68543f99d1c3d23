"""The ``archive`` job: old segments to Parquet by topic and date, idempotent re-runs with a
manifest, incremental exports, archive plus live store after retention, and interrupted runs."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bolide.common.message import Message
from bolide.spark.jobs import archive as archive_module
from bolide.spark.jobs.archive import ARCHIVE_COLUMNS, MANIFEST, archive, read_archive_and_live
from bolide.store import MessageStore, PutStatus
from conftest import SMALL_COMMIT_LOG, small_config

pytestmark = pytest.mark.spark

HOURS = 24.0
TOPICS = ("Orders", "Audit", "%RETRY%billing")  # the last one needs escaping in a path


@dataclass(frozen=True)
class Written:
    root: Path
    msgs: list[dict[str, Any]]
    old: list[int]  # segments holding only the first batch: old at ``now_old``
    later: list[int]  # the segments after them, except the last one (never archived)
    now_old: int
    now_all: int


def _put(store: MessageStore, msgs: list[dict[str, Any]], first: int, count: int) -> None:
    for i in range(first, first + count):
        topic, qid = TOPICS[i % 3], i % 2
        body = (b"%05d" % i) * 400
        r = store.put_message(Message(topic, body, tags=f"t{i % 4}"), qid)
        assert r.status is PutStatus.PUT_OK, r
        msgs.append({"key": (topic, qid, r.queue_offset, body), "segment": r.wrote_offset // SMALL_COMMIT_LOG,
                     "ts": r.store_timestamp})


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    """Two batches of messages, the second stored strictly later than the first."""
    root = tmp_path_factory.mktemp("archive-src") / "store"
    msgs: list[dict[str, Any]] = []
    with MessageStore(small_config(root)) as store:
        _put(store, msgs, 0, 100)
        boundary = max(m["ts"] for m in msgs)
        deadline = time.monotonic() + 5
        while int(time.time() * 1000) <= boundary:  # the clock must move past the first batch
            assert time.monotonic() < deadline, "the wall clock did not advance"
        _put(store, msgs, 100, 100)
    first_new = msgs[100]["segment"]
    old, later = list(range(first_new)), list(range(first_new, msgs[-1]["segment"]))
    assert len(old) >= 2 and len(later) >= 2, (old, later)
    hour_ms = int(HOURS * 3_600_000)
    return Written(root, msgs, old, later, boundary + hour_ms + 1, max(m["ts"] for m in msgs) + hour_ms + 1)


def _copy(written: Written, tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(written.root, store)
    return store


def _names(segments: list[int]) -> tuple[str, ...]:
    return tuple(f"{s * SMALL_COMMIT_LOG:020d}" for s in segments)


def _expected(written: Written, segments: list[int] | None = None) -> Counter[tuple[Any, ...]]:
    return Counter(m["key"] for m in written.msgs if segments is None or m["segment"] in segments)


def _rows(df: Any) -> Counter[tuple[Any, ...]]:
    rows = df.selectExpr("topic", "queueId", "queueOffset", "body").collect()
    return Counter((r.topic, r.queueId, r.queueOffset, bytes(r.body)) for r in rows)


def _parquet_files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*.parquet")}


def _utc_day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def test_old_segments_exported_by_topic_and_date(spark: Any, written: Written, tmp_path: Path) -> None:
    store, out = _copy(written, tmp_path), tmp_path / "archive"
    result = archive(spark, store, out, HOURS, now_ms=written.now_old)

    expected = _expected(written, written.old)
    assert result.segments_exported == _names(written.old)
    assert result.segments_skipped == ()
    assert result.rows == sum(expected.values())
    files = _parquet_files(out)
    assert files and result.bytes == sum(len(b) for b in files.values())
    assert result.manifest_path == str(out / MANIFEST)

    df = spark.read.parquet(str(out))  # a plain Parquet reader sees exactly the old segments
    assert sorted(df.columns) == sorted(ARCHIVE_COLUMNS)
    rows = df.select("topic", "queueId", "queueOffset", "body", "date").collect()
    assert Counter((r.topic, r.queueId, r.queueOffset, bytes(r.body)) for r in rows) == expected
    old_msgs = [m for m in written.msgs if m["segment"] in written.old]
    ts = {m["key"][:3]: m["ts"] for m in old_msgs}
    assert all(str(r.date) == _utc_day(ts[(r.topic, r.queueId, r.queueOffset)]) for r in rows)
    partitions = {p.relative_to(out).as_posix() for p in out.glob("topic=*/date=*")}
    topic_dir = {t: t.replace("%", "%25") for t in TOPICS}  # Spark escapes % in partition values
    assert partitions == {f"topic={topic_dir[m['key'][0]]}/date={_utc_day(m['ts'])}" for m in old_msgs}

    manifest = json.loads((out / MANIFEST).read_text())
    entries = manifest["segments"]
    assert [e["file"] for e in entries] == list(_names(written.old))
    for seg, entry in zip(written.old, entries, strict=True):
        start = seg * SMALL_COMMIT_LOG
        assert (entry["start_offset"], entry["end_offset"]) == (start, start + SMALL_COMMIT_LOG)
        assert entry["rows"] == sum(1 for m in written.msgs if m["segment"] == seg)
        assert entry["exported_at_ms"] > 0 and entry["parquet_files"]
    assert sorted(f for e in entries for f in e["parquet_files"]) == sorted(files)
    assert sum(e["bytes"] for e in entries) == result.bytes


def test_rerun_skips_and_later_segments_follow(spark: Any, written: Written, tmp_path: Path) -> None:
    store, out = _copy(written, tmp_path), tmp_path / "archive"
    archive(spark, store, out, HOURS, now_ms=written.now_old)
    files, manifest = _parquet_files(out), (out / MANIFEST).read_bytes()

    again = archive(spark, store, out, HOURS, now_ms=written.now_old)
    assert (again.segments_exported, again.rows, again.bytes) == ((), 0, 0)
    assert again.segments_skipped == _names(written.old)
    assert _parquet_files(out) == files and (out / MANIFEST).read_bytes() == manifest

    later = archive(spark, store, out, HOURS, now_ms=written.now_all)  # the last segment stays
    assert later.segments_exported == _names(written.later)
    assert later.segments_skipped == _names(written.old)
    assert later.rows == sum(_expected(written, written.later).values())
    assert all(_parquet_files(out)[name] == data for name, data in files.items())
    assert _rows(spark.read.parquet(str(out))) == _expected(written, written.old + written.later)


def test_archive_and_live_after_retention(spark: Any, written: Written, tmp_path: Path) -> None:
    store, out = _copy(written, tmp_path), tmp_path / "archive"
    archive(spark, store, out, HOURS, now_ms=written.now_old)
    for name in _names(written.old[:-1]):  # retention deletes all but one archived segment
        (store / "commitlog" / name).unlink()

    df = read_archive_and_live(spark, out, store)
    assert df.columns == list(ARCHIVE_COLUMNS)
    rows = df.select("topic", "queueId", "queueOffset", "body", "commitLogOffset", "date").collect()
    assert Counter((r.topic, r.queueId, r.queueOffset, bytes(r.body)) for r in rows) == _expected(written)
    ts = {m["key"][:3]: m["ts"] for m in written.msgs}
    assert all(r.date == _utc_day(ts[(r.topic, r.queueId, r.queueOffset)]) for r in rows)

    again = archive(spark, store, out, HOURS, now_ms=written.now_old)
    assert again.segments_exported == () and again.segments_skipped == _names(written.old[-1:])


def test_topic_subset(spark: Any, written: Written, tmp_path: Path) -> None:
    store, out = _copy(written, tmp_path), tmp_path / "archive"
    result = archive(spark, store, out, HOURS, now_ms=written.now_old, topics="Orders")
    orders = Counter({k: n for k, n in _expected(written, written.old).items() if k[0] == "Orders"})
    assert result.rows == sum(orders.values()) and _rows(spark.read.parquet(str(out))) == orders
    (store / "commitlog" / _names(written.old)[0]).unlink()
    # Orders come from the archive, the other topics from the store while it has them
    gone = Counter({k: n for k, n in _expected(written, written.old[:1]).items() if k[0] != "Orders"})
    assert _rows(read_archive_and_live(spark, out, store)) == _expected(written) - gone


def test_interrupted_run_leaves_a_rerunnable_archive(spark: Any, written: Written, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    store, out = _copy(written, tmp_path), tmp_path / "archive"
    archive(spark, store, out, HOURS, now_ms=written.now_old)
    files, manifest = _parquet_files(out), (out / MANIFEST).read_bytes()

    def fail(*args: object) -> None:
        raise OSError("disk gone while writing the manifest")

    monkeypatch.setattr(archive_module, "_write_manifest", fail)
    with pytest.raises(OSError, match="disk gone"):
        archive(spark, store, out, HOURS, now_ms=written.now_all)
    monkeypatch.undo()
    # nothing of the failed run is visible, even to a plain Parquet reader
    assert (out / MANIFEST).read_bytes() == manifest and _parquet_files(out) == files
    assert not list(out.glob("_staging-*"))
    assert _rows(read_archive_and_live(spark, out, store)) == _expected(written)

    # what a killed run would leave: a staging directory and a file moved but not listed
    (out / "_staging-crashed").mkdir()
    (out / "_staging-crashed" / "part-x.parquet").write_bytes(b"half")
    name, data = next(iter(files.items()))
    (out / name).with_name("part-99999-orphan.c000.snappy.parquet").write_bytes(data)
    result = archive(spark, store, out, HOURS, now_ms=written.now_all)
    assert result.segments_exported == _names(written.later)
    assert not list(out.glob("_staging-*"))
    assert _rows(spark.read.parquet(str(out))) == _expected(written, written.old + written.later)


def test_clear_errors(written: Written, tmp_path: Path) -> None:
    not_a_store = tmp_path / "empty"
    not_a_store.mkdir()
    with pytest.raises(ValueError, match="not a message store: pass the store directory"):
        archive(None, not_a_store, tmp_path / "a", HOURS)
    with pytest.raises(ValueError, match="not a message store"):
        read_archive_and_live(None, tmp_path / "a", tmp_path / "missing")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="cannot write to the archive directory"):
        archive(None, written.root, blocker / "out", HOURS)
    with pytest.raises(ValueError, match=r"holds no _bolide_manifest\.json: archive into a new or empty"):
        archive(None, written.root, tmp_path, HOURS)
    with pytest.raises(ValueError, match="older_than_hours must be 0 or more"):
        archive(None, written.root, tmp_path / "b", -1)
    # nothing is old at time 0, so Spark is not needed; the directory keeps its topic set
    assert archive(None, written.root, tmp_path / "c", HOURS, now_ms=0).segments_exported == ()
    with pytest.raises(ValueError, match="archive other topics into another directory"):
        archive(None, written.root, tmp_path / "c", HOURS, now_ms=0, topics="Orders")
