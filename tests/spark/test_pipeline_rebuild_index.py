"""The rebuild-index pipeline job: ConsumeQueue and index files rebuilt by Spark from a store's
CommitLog are the files the store itself wrote, the store opens on them without rebuilding
anything, and a store in use or with files in place is refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bolide.common import sysflag
from bolide.common.message import Message
from bolide.spark.jobs.rebuild_index import RebuildRefused, rebuild_index
from bolide.store import MessageStore, PutStatus, StoreConfig
from bolide.store.index_reader import IndexReader
from bolide.store.inspect import read_checkpoint
from conftest import assert_consistent, small_config

pytestmark = pytest.mark.spark

QUEUES = {"Orders": 3, "Audit": 2, "Pay": 1}
SHARED_KEYS = ("shared", "order-7", "k5")


@dataclass
class Written:
    config: StoreConfig
    aside: Path
    queued: dict[tuple[str, int], list[tuple[int, bytes]]] = field(default_factory=dict)
    queries: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    no_entry: int = 0
    index_entries: int = 0


def _put(store: MessageStore, w: Written, msg: Message, queue_id: int, flag: int = 0) -> int:
    """Put ``msg``, note where it goes; returns its store time."""
    result = store.put_message(msg, queue_id, sys_flag=flag)
    assert result.status == PutStatus.PUT_OK, result.remark
    if sysflag.gets_queue_entry(flag):
        topic = "SCHEDULE_TOPIC_XXXX" if "DELAY" in msg.properties else msg.topic
        qid = int(msg.properties["DELAY"]) - 1 if "DELAY" in msg.properties else queue_id
        w.queued.setdefault((topic, qid), []).append((result.queue_offset, msg.body))
    else:
        w.no_entry += 1
    if flag != sysflag.TRANSACTION_ROLLBACK_TYPE:  # UNIQ_KEY and every key
        w.index_entries += 1 + len(msg.keys)
    return result.store_timestamp


def _query_all(store: MessageStore, keys: list[tuple[str, str]]) -> dict[tuple[str, str], list[int]]:
    return {(t, k): [m.commit_log_offset for m in store.query_message(t, k, max_num=64)] for t, k in keys}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    """A closed store (5+ CommitLog segments, ConsumeQueue and index files that rolled over),
    its consumequeue/ and index/ copied aside and deleted, and what queries answered before."""
    base = tmp_path_factory.mktemp("rebuild")
    cfg = small_config(base / "store", mapped_file_size_commit_log=16 * 1024,
                       mapped_file_size_consume_queue=20 * 20, max_hash_slot_num=64, max_index_num=256)
    w = Written(cfg, base / "aside")
    with MessageStore(cfg) as store:
        for i in range(360):
            topic = ("Orders", "Audit", "Pay")[i % 3]
            keys = None if i % 10 == 9 else f"k{i % 50} {SHARED_KEYS[i % 3]}"
            tags = (None, "TagA", "标签", "b" * 40)[i % 4]
            _put(store, w, Message(topic, b"body-%d" % i + bytes(i % 90), tags=tags, keys=keys),
                 i // 3 % QUEUES[topic])
        for i, flag in enumerate((sysflag.TRANSACTION_PREPARED_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE,
                                  sysflag.TRANSACTION_COMMIT_TYPE)):
            _put(store, w, Message("Orders", b"tx-%d" % i, tags="tx", keys=f"tx-{i}"), 1, flag)
        _put(store, w, Message("Pay", b"later", tags="TagA", keys="delayed",
                               properties={"DELAY": "3"}), 0)
        batch = [Message("Audit", b"batch-%d" % i, tags="batch", keys=f"b{i}") for i in range(4)]
        result = store.put_messages(batch, 1)
        assert result.status == PutStatus.PUT_OK
        w.queued.setdefault(("Audit", 1), []).extend(
            (result.queue_offset + i, m.body) for i, m in enumerate(batch))
        w.index_entries += 2 * len(batch)
        # the last index file gets entries stored after the checkpoint's index time (that of
        # the last full file), so only the rebuild's checkpoint update keeps it after a crash
        first = _put(store, w, Message("Pay", b"tail", keys="tail-0"), 0)
        for i in range(1, 120):
            if _put(store, w, Message("Pay", b"tail", keys=f"tail-{i}"), 0) > first + 2 and i >= 30:
                break
        assert store.wait_dispatched(10)
    root = cfg.root
    shutil.copytree(root / "consumequeue", w.aside / "consumequeue")
    shutil.copytree(root / "index", w.aside / "index")
    shutil.copyfile(root / "checkpoint", w.aside / "checkpoint")
    keys = [(t, f"k{i}") for t in QUEUES for i in range(50)] + [
        (t, k) for t in QUEUES for k in SHARED_KEYS] + [
        ("Orders", "tx-0"), ("Orders", "tx-1"), ("Orders", "tx-2"), ("SCHEDULE_TOPIC_XXXX", "delayed"),
        ("Audit", "b2"), ("Pay", "nope")]
    with MessageStore(cfg) as store:
        w.queries = _query_all(store, keys)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    return w


@pytest.fixture(scope="module")
def rebuilt(spark: Any, written: Written) -> Iterator[Any]:
    yield rebuild_index(spark, written.config.root, config=written.config)


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_consume_queues_are_byte_identical(written: Written, rebuilt: Any) -> None:
    original = _files(written.aside / "consumequeue")
    again = _files(written.config.consume_queue_dir)
    # the store makes a queue's next file ahead of need (all zeros): dispatch never wrote it
    ahead = {name for name, data in original.items() if not any(data)}
    assert set(again) == set(original) - ahead
    for name, data in again.items():
        assert data == original[name], f"consumequeue/{name} differs"
    assert any(name.endswith("00000000000000000800") for name in again)  # rolled over twice
    assert ("SCHEDULE_TOPIC_XXXX/2/00000000000000000000") in again
    assert rebuilt.queues == len(written.queued) == 7
    assert rebuilt.queue_entries == sum(len(v) for v in written.queued.values())
    assert rebuilt.queue_files == len(again) and rebuilt.rejected_entries == 0
    assert rebuilt.no_queue_entry == written.no_entry == 2  # transaction half and rollback
    assert rebuilt.records == rebuilt.queue_entries + 2 and rebuilt.segments >= 5


def test_index_files_are_byte_identical(written: Written, rebuilt: Any) -> None:
    """The store's index writer is deterministic (the entries follow CommitLog order, the
    header only record times and offsets), so the files match byte for byte; only their names,
    the local time each was created, differ."""
    original = sorted((written.aside / "index").iterdir())
    again = sorted(written.config.index_dir.iterdir())
    assert len(again) == len(original) == rebuilt.index_files >= 3  # rolled over
    for old, new in zip(original, again, strict=True):
        assert new.read_bytes() == old.read_bytes(), f"{new.name} differs from {old.name}"
        assert len(new.name) == 17 and new.name.isdigit()
    assert [p.name for p in again] == sorted(p.name for p in again)
    assert rebuilt.index_entries == written.index_entries


def test_store_opens_on_the_rebuilt_files(written: Written, rebuilt: Any) -> None:
    cfg = written.config
    names = sorted(p.name for p in cfg.index_dir.iterdir())
    with IndexReader(cfg.index_dir / names[-1], cfg.max_hash_slot_num, cfg.max_index_num) as last:
        old = read_checkpoint(written.aside)
        assert old is not None and last.header.end_timestamp > old["index_msg_timestamp"]
    (cfg.root / "abort").touch()  # even after a crash: the checkpoint vouches for the new files
    with MessageStore(cfg) as store:
        assert store.recovery_report.queue_entries_rebuilt == 0
        assert sorted(p.name for p in cfg.index_dir.iterdir()) == names
        assert _query_all(store, list(written.queries)) == written.queries
        assert len(written.queries[("Orders", "shared")]) == 64  # maxMsgsNumBatch hits
        assert written.queries[("Orders", "tx-1")] == []  # a rollback is not indexed
        for (topic, qid), expected in written.queued.items():
            got: list[tuple[int, bytes]] = []
            offset = 0
            while True:
                result = store.get_message("check", topic, qid, offset, 32)
                if not result.message_count:
                    break
                got += [(m.queue_offset, m.body) for m in result.messages]
                offset = result.next_begin_offset
            assert got == expected, (topic, qid)
    assert_consistent(cfg)


def test_files_in_place_are_refused_unless_forced(spark: Any, written: Written, rebuilt: Any) -> None:
    cfg = written.config
    before = _files(cfg.consume_queue_dir)
    with pytest.raises(ValueError, match="nothing to rebuild"):
        rebuild_index(spark, cfg.root, consume_queue=False, index=False)
    with pytest.raises(RebuildRefused, match=r"already holds \d+ file\(s\): pass force=True"):
        rebuild_index(spark, cfg.root, config=cfg, index=False)
    again = rebuild_index(spark, cfg.root, config=cfg, index=False, force=True)
    assert again.queue_entries == rebuilt.queue_entries and again.index_files == 0
    assert _files(cfg.consume_queue_dir) == before
    assert not (cfg.root / ".rebuild-index.tmp").exists()


def test_a_locked_store_is_refused(spark: Any, written: Written) -> None:
    cfg = written.config
    before = _files(cfg.consume_queue_dir)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom pathlib import Path\n"
         "from bolide.store.checkpoint import StoreLock\n"
         "StoreLock(Path(sys.argv[1])).acquire()\nprint('locked', flush=True)\nsys.stdin.read()\n",
         str(cfg.root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RebuildRefused, match=r"locked by a running process .*stop it first"):
            rebuild_index(spark, cfg.root, config=cfg, force=True)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
    with MessageStore(cfg), pytest.raises(RebuildRefused, match="already open in this process"):
        rebuild_index(spark, cfg.root, config=cfg, force=True)
    assert _files(cfg.consume_queue_dir) == before
