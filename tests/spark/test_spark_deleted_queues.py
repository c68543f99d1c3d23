"""A deleted topic's records still in the CommitLog (``config/droppedQueues.json``) are left
out by the offline reader (``rocketmq-store``) and by the rebuild-index job, which writes the
ConsumeQueues the store itself has."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bolide.common.message import Message
from bolide.spark.jobs.rebuild_index import rebuild_index
from bolide.spark.store_reader import FORMAT
from bolide.store import MessageStore
from conftest import assert_consistent, small_config

pytestmark = pytest.mark.spark


def _files(directory: Path) -> dict[str, bytes]:
    """The files dispatch wrote (not the all-zero ones made ahead of need)."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and any(p.read_bytes())}


def test_deleted_queues_stay_out_of_offline_reads_and_rebuilds(spark: Any, tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "store")
    with MessageStore(cfg) as store:
        for i in range(300):
            # an IPv6 host takes the reader's per-record path; the others its columnar one
            host = "[::1]:5000" if i % 50 == 0 else "10.0.0.1:5000"
            assert store.put_message(Message("Doomed", b"old-%d|" % i + bytes(300)), i % 2,
                                     born_host=host).ok
            assert store.put_message(Message("Keep", b"keep-%d|" % i), 0).ok
        assert store.delete_queues("Doomed".__eq__) == [("Doomed", 0), ("Doomed", 1)]
        for i in range(3):
            assert store.put_message(Message("Doomed", b"new-%d|" % i), 0).ok
        assert store.wait_dispatched(10)
    assert len(list(cfg.commit_log_dir.iterdir())) >= 2

    for columns in (None, "topic STRING, body BINARY"):
        reader = spark.read.format(FORMAT)
        if columns:
            reader = reader.schema(columns)
        rows = reader.load(str(cfg.root)).collect()
        labels = sorted(bytes(r.body).split(b"|")[0].decode() for r in rows if r.topic == "Doomed")
        assert labels == ["new-0", "new-1", "new-2"], columns
        assert sum(r.topic == "Keep" for r in rows) == 300

    original = _files(cfg.consume_queue_dir)
    shutil.rmtree(cfg.consume_queue_dir)
    result = rebuild_index(spark, cfg.root, consume_queue=True, index=False, config=cfg)
    assert result.no_queue_entry == 300 and result.queue_entries == 303
    assert _files(cfg.consume_queue_dir) == original
    with MessageStore(cfg) as store:
        assert store.recovery_report.queue_entries_rebuilt == 0
        assert store.topics() == {"Doomed": [0], "Keep": [0]}
        assert store.get_max_offset_in_queue("Doomed", 0) == 3
    assert_consistent(cfg)
