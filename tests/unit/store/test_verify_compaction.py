"""The offline reader of compaction files (:mod:`bolide.store.verify_compaction`) on files a
store wrote and then damaged: a unit pointing at another record, an invalid unit with units after
it, queue offsets going back across files, an interrupted swap, a file pair whose creation was
cut short; and the library repair of each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.store import MessageStore, StoreConfig
from bolide.store.compaction_files import UNIT, UNIT_SIZE
from bolide.store.repair import apply_repair, plan_repair
from bolide.store.verify import verify_store
from bolide.store.verify_compaction import scan_compaction
from conftest import assert_consistent, small_config

TOPIC = "Scanned"
CQ_SIZE = 46 * 10


@pytest.fixture
def cfg(tmp_path: Path) -> StoreConfig:
    config = small_config(tmp_path / "s", compaction_cq_mapped_file_size=CQ_SIZE,
                          compaction_mapped_file_size=64 * 1024,
                          compaction_schedule_interval_ms=3_600_000)
    with MessageStore(config) as store:  # 20 records, no compaction: pairs 0-8, 9-17, 18-19
        store.set_topic_compaction(TOPIC, True)
        for i in range(20):
            assert store.put_message(Message(TOPIC, b"v%d" % i, keys=f"k{i % 3}")).ok
        assert store.wait_dispatched()
        store.compaction.ingest_now()  # type: ignore[union-attr]
    return config


def cq_files(cfg: StoreConfig) -> list[Path]:
    return sorted((cfg.root / "compaction/compactionCq" / TOPIC / "0").iterdir())


def set_unit(path: Path, index: int, **fields: int) -> None:
    data = bytearray(path.read_bytes())
    names = ("phys", "size", "tags", "ts", "qoff", "batch", "compacted", "reserved")
    unit = dict(zip(names, UNIT.unpack_from(data, index * UNIT_SIZE), strict=True))
    unit.update(fields)
    UNIT.pack_into(data, index * UNIT_SIZE, *unit.values())
    path.write_bytes(bytes(data))


def test_a_sound_queue_scans_clean(cfg: StoreConfig) -> None:
    [q] = scan_compaction(cfg).queues
    assert [(p.units, p.first, p.last) for p in q.pairs] == [(9, 0, 8), (9, 9, 17), (2, 18, 19)]
    assert not q.problems and not q.warnings and (q.first, q.last, q.records) == (0, 19, 20)
    assert_consistent(cfg)


def test_a_unit_pointing_at_another_record_is_cut_there(cfg: StoreConfig) -> None:
    first = cq_files(cfg)[0]
    other = UNIT.unpack_from(first.read_bytes(), 4 * UNIT_SIZE)
    set_unit(first, 5, phys=other[0], size=other[1])
    [q] = scan_compaction(cfg).queues
    [problem] = q.problems
    assert "unit 5: the record has queue offset 4, its unit 5" in problem.message
    assert q.pairs[0].units == 5 and not q.needs_rebuild
    plan = apply_repair(cfg, plan_repair(cfg))
    assert [a.kind for a in plan.actions] == ["truncate-compaction"]
    [q] = scan_compaction(cfg).queues
    assert [p.units for p in q.pairs] == [5, 9, 2] and not q.problems
    assert verify_store(cfg.root, cfg).ok


def test_an_invalid_unit_with_units_after_it(cfg: StoreConfig) -> None:
    second = cq_files(cfg)[1]
    set_unit(second, 2, batch=0)
    [q] = scan_compaction(cfg).queues
    [problem] = q.problems
    assert problem.offset == 2 * UNIT_SIZE and "unit 2 is not valid but bytes follow it" in problem.message
    apply_repair(cfg, plan_repair(cfg))
    assert [p.units for p in scan_compaction(cfg).queues[0].pairs] == [9, 2, 2]
    assert_consistent(cfg)


def test_offsets_going_back_across_files_need_a_rebuild(cfg: StoreConfig) -> None:
    third = cq_files(cfg)[2]
    for i in range(2):  # the last pair's units claim offsets 3 and 4
        set_unit(third, i, qoff=3 + i)
    [q] = scan_compaction(cfg).queues
    assert q.needs_rebuild and "queue offset 3 does not follow 17" in q.problems[0].message
    report = verify_store(cfg.root, cfg)
    assert not report.ok
    assert plan_repair(cfg).actions == []
    apply_repair(cfg, plan_repair(cfg, rebuild_compaction=[f"{TOPIC}:0"]))
    assert scan_compaction(cfg).queues == [] and verify_store(cfg.root, cfg).ok


def test_a_pending_swap_and_an_unwritten_pair_are_warnings(cfg: StoreConfig) -> None:
    log_dir = cfg.root / "compaction/compactionLog" / TOPIC / "0"
    (log_dir / "compacting").mkdir()
    (log_dir / "compacting/swap.json").write_text(json.dumps({"old": [], "new": [], "position": 3}))
    [q] = scan_compaction(cfg).queues
    assert not q.problems and "the store finishes it at open" in q.warnings[0].message
    (log_dir / "compacting/swap.json").write_text("{")
    [q] = scan_compaction(cfg).queues
    assert q.needs_rebuild and "does not decode" in q.problems[0].message
    (log_dir / "compacting/swap.json").unlink()
    (log_dir / "compacting").rmdir()
    (log_dir / f"{10**18:020d}").write_bytes(bytes(100))  # a creation cut short
    [q] = scan_compaction(cfg).queues
    assert not q.problems and "creation was cut short" in q.warnings[0].message
    assert verify_store(cfg.root, cfg).ok
