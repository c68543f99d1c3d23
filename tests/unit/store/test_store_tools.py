"""The offline store tools (inspect, dump, query, verify's extra checks, repair) on stores
written by Bolide, intact and damaged."""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.store import MessageStore, StoreConfig
from bolide.store.config_files import ConsumerOffsetManager
from bolide.store.consume_queue import ENTRY
from bolide.store.dump import DumpError, dump_commit_log, dump_queue, record_fields
from bolide.store.index_file import HEADER_SIZE
from bolide.store.index_reader import index_paths
from bolide.store.inspect import inspect_store
from bolide.store.mapped_file import file_name
from bolide.store.query import QueryError, query_by_key, query_by_msg_id
from bolide.store.record import HEADER_V4
from bolide.store.repair import RepairRefused, apply_repair, plan_repair
from bolide.store.verify import verify_store
from bolide.testing.crash import flip_byte
from conftest import SMALL_COMMIT_LOG, assert_consistent, small_config

TOPIC = "ToolsTopic"
OTHER = "ToolsOther"
SLOTS, ENTRIES = 1000, 4000


@dataclass(frozen=True)
class Put:
    topic: str
    queue_id: int
    queue_offset: int
    offset: int
    size: int
    msg_id: str
    offset_msg_id: str
    body: bytes


@pytest.fixture
def config(tmp_path: Path) -> StoreConfig:
    return small_config(tmp_path / "store", max_hash_slot_num=SLOTS, max_index_num=ENTRIES)


def fill(config: StoreConfig, count: int = 120) -> list[Put]:
    """``count`` messages over TOPIC queues 0-1 and OTHER queue 0 (every 5th), with keys;
    consumer offsets for group g1; closed cleanly."""
    puts = []
    with MessageStore(config) as store:
        for i in range(count):
            topic, qid = (OTHER, 0) if i % 5 == 4 else (TOPIC, i % 2)
            body = f"body {i} ".encode() + bytes([0x80 + i % 64]) * (200 + i * 13 % 900)
            r = store.put_message(Message(topic, body, tags=f"t{i % 3}", keys=[f"k{i}", "common"]),
                                  qid)
            assert r.ok and r.msg_id and r.offset_msg_id
            puts.append(Put(topic, qid, r.queue_offset, r.wrote_offset, r.wrote_bytes, r.msg_id,
                            r.offset_msg_id, body))
        assert store.wait_dispatched()
    offsets = ConsumerOffsetManager.in_store(config.root)
    offsets.commit("g1", TOPIC, 0, 10)
    offsets.commit("g1", TOPIC, 1, 48)
    offsets.persist()
    return puts


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# -- inspect --------------------------------------------------------------------------------
def test_inspect_reports_segments_queues_index_and_lag(config: StoreConfig) -> None:
    puts = fill(config)
    info = inspect_store(config)
    end = max(p.offset + p.size for p in puts)
    cl = info["commit_log"]
    assert (cl["min_offset"], cl["max_offset"], cl["end_reason"]) == (0, end, "")
    assert len(cl["segments"]) >= 3 and cl["segments"][0]["name"] == file_name(0)
    counts = {(p.topic, p.queue_id): 0 for p in puts}
    for p in puts:
        counts[(p.topic, p.queue_id)] += 1
    got = {(t, int(q)): (v["min_offset"], v["max_offset"], v["count"])
           for t, qs in info["topics"].items() for q, v in qs.items()}
    assert got == {k: (0, n, n) for k, n in counts.items()}
    assert info["abort"] is False and info["lock_held"] is False
    assert info["checkpoint"]["physic_msg_timestamp"] > 0
    assert sum(f["entries"] for f in info["index_files"]) == 3 * len(puts)  # UNIQ_KEY + 2 keys
    lag = info["consumer_groups"]["g1"][TOPIC]
    assert lag["0"] == {"offset": 10, "max_offset": counts[(TOPIC, 0)],
                        "lag": counts[(TOPIC, 0)] - 10}
    assert lag["1"]["lag"] == counts[(TOPIC, 1)] - 48
    assert info["config_files"]["consumerOffset.json"] == "ok"
    assert info["config_files"]["topics.json"] == "missing"


# -- dump -----------------------------------------------------------------------------------
def test_dump_queue_and_commit_log_offsets_decode_the_written_records(config: StoreConfig) -> None:
    puts = fill(config)
    mine = [p for p in puts if (p.topic, p.queue_id) == (TOPIC, 1)]
    records = dump_queue(config, TOPIC, 1, 3, 5)
    assert [r.queue_offset_in_cq for r in records] == [3, 4, 5, 6, 7]
    for rec, put in zip(records, mine[3:8], strict=True):
        js = rec.to_json()
        assert (js["commit_log_offset"], js["queue_offset"], js["msg_id"]) == (
            put.offset, put.queue_offset, put.msg_id)
        assert js["offset_msg_id"] == put.offset_msg_id
        assert "body" not in js and js["body_base64"]  # not UTF-8: base64
    crossing = [p for p in puts if p.offset // SMALL_COMMIT_LOG > puts[0].offset // SMALL_COMMIT_LOG]
    start = puts.index(crossing[0]) - 2
    from_log = dump_commit_log(config, puts[start].offset, 4)
    assert [r.offset for r in from_log] == [p.offset for p in puts[start : start + 4]]


def test_hex_fields_cover_the_record_exactly(config: StoreConfig) -> None:
    puts = fill(config, 5)
    raw = dump_commit_log(config, puts[2].offset, 1)[0].raw
    fields = record_fields(raw)
    assert fields[0].start == 0 and fields[-1].end == len(raw) == puts[2].size
    assert all(a.end == b.start for a, b in itertools.pairwise(fields))
    named = {f.name: f for f in fields}
    assert named["PHYSICALOFFSET"].value == str(puts[2].offset)
    assert raw[named["BODY"].start : named["BODY"].end] == puts[2].body
    assert named["TOPIC"].value == TOPIC
    json_fields = dump_commit_log(config, puts[2].offset, 1)[0].to_json(True)["fields"]
    assert [f["name"] for f in json_fields] == [f.name for f in fields]


def test_dump_errors_say_where_to_look(config: StoreConfig) -> None:
    puts = fill(config, 10)
    with pytest.raises(DumpError, match=r"inside the record at 0 .*--phy-offset 0"):
        dump_commit_log(config, 10, 1)
    with pytest.raises(DumpError, match=r"no ConsumeQueue for topic 'Nope'.*inspect"):
        dump_queue(config, "Nope", 0, None, 1)
    with pytest.raises(DumpError, match="in no segment"):
        dump_commit_log(config, 50 * SMALL_COMMIT_LOG, 1)
    with pytest.raises(DumpError, match="no message at or after offset 99"):
        dump_queue(config, TOPIC, 0, 99, 1)
    assert len(dump_queue(config, TOPIC, 0, None, 100)) == sum(
        1 for p in puts if (p.topic, p.queue_id) == (TOPIC, 0))


# -- query ----------------------------------------------------------------------------------
def test_query_by_key_uniq_key_and_offset_msg_id(config: StoreConfig) -> None:
    puts = fill(config)
    found = query_by_key(config, TOPIC, "k7")
    assert [m.commit_log_offset for m in found] == [puts[7].offset]
    common = query_by_key(config, OTHER, "common", max_num=200)
    assert [m.commit_log_offset for m in common] == [p.offset for p in puts if p.topic == OTHER]
    assert query_by_key(config, OTHER, "k7") == []  # k7 is a TOPIC message
    by_uniq = query_by_msg_id(config, puts[9].msg_id.lower())
    assert [(m.topic, m.commit_log_offset) for m in by_uniq] == [(OTHER, puts[9].offset)]
    by_offset = query_by_msg_id(config, puts[33].offset_msg_id)
    assert [m.msg_id for m in by_offset] == [puts[33].msg_id]
    with pytest.raises(QueryError, match="neither an offsetMsgId"):
        query_by_msg_id(config, "not-an-id")


def test_query_without_index_names_the_fix(config: StoreConfig) -> None:
    fill(config.replace(message_index_enable=False), 5)
    with pytest.raises(QueryError, match="repair --rebuild-index"):
        query_by_key(config, TOPIC, "k1")


# -- verify: the extra checks ---------------------------------------------------------------
def test_verify_passes_a_store_with_ipv6_hosts_through_the_slow_path(config: StoreConfig) -> None:
    with MessageStore(config) as store:
        for i in range(30):
            host = "[::1]:4000" if i % 2 else None
            assert store.put_message(Message(TOPIC, b"x" * (i * 50), keys=[f"k{i}"]), 0,
                                     born_host=host).ok
    report = verify_store(config.root, config)
    assert report.ok, report.problems
    assert (report.records, report.queue_entries) == (30, 30)


def test_verify_reports_a_flipped_body_byte_at_its_global_offset(config: StoreConfig) -> None:
    puts = fill(config)
    bad = puts[len(puts) // 2]
    seg = config.commit_log_dir / file_name(bad.offset - bad.offset % SMALL_COMMIT_LOG)
    flip_byte(seg, bad.offset % SMALL_COMMIT_LOG + HEADER_V4.size + 5)
    report = verify_store(config.root, config)
    assert not report.ok
    assert report.problems[0].where == "commitlog"
    assert (report.problems[0].offset, report.problems[0].message) == (bad.offset, "body CRC mismatch")


def _entry_position(config: StoreConfig, number: int) -> tuple[Path, int]:
    path = index_paths(config)[0]
    return path, HEADER_SIZE + SLOTS * 4 + number * 20


def test_verify_reports_a_broken_index_chain(config: StoreConfig) -> None:
    fill(config)
    path, at = _entry_position(config, 50)
    with open(path, "r+b") as f:
        f.seek(at + 16)  # the previous-entry link
        f.write(struct.pack(">i", 300))  # points forward
    report = verify_store(config.root, config)
    assert [(p.where, p.offset) for p in report.problems] == [(f"index/{path.name}", at)]
    assert "does not point at an older entry" in report.problems[0].message


def test_verify_warns_about_index_entries_pointing_at_no_record(config: StoreConfig) -> None:
    fill(config)
    path, at = _entry_position(config, 7)
    with open(path, "r+b") as f:
        f.seek(at + 4)
        f.write(struct.pack(">q", 12345))  # a CommitLog offset inside some record
    report = verify_store(config.root, config)
    assert report.ok
    assert len(report.warnings) == 1 and "1 entries point at no record" in report.warnings[0].message


def test_verify_checks_config_files(config: StoreConfig) -> None:
    fill(config)
    offsets = ConsumerOffsetManager.in_store(config.root)
    offsets.load()
    offsets.commit("g2", TOPIC, 0, 10_000)
    offsets.persist()
    report = verify_store(config.root, config)
    assert report.ok and report.config_files == 1
    assert any("g2 on ToolsTopic queue 0: offset 10000 is outside" in w.message
               for w in report.warnings)
    offsets.path.write_text('{"offsetTable": {"broken')
    report = verify_store(config.root, config)
    assert [p.where for p in report.problems] == ["config/consumerOffset.json"]
    assert "copy consumerOffset.json.bak over it" in report.problems[0].message


def test_verify_reports_a_consume_queue_entry_pointing_elsewhere(config: StoreConfig) -> None:
    puts = fill(config)
    cq = config.consume_queue_dir / TOPIC / "0" / file_name(0)
    data = bytearray(cq.read_bytes())
    phys, size, tags = ENTRY.unpack_from(data, 20 * 4)
    ENTRY.pack_into(data, 20 * 4, puts[0].offset, puts[0].size, tags)
    cq.write_bytes(bytes(data))
    report = verify_store(config.root, config)
    where = {(p.where, p.offset) for p in report.problems}
    assert (f"consumequeue/{TOPIC}/0", 4) in where
    assert (phys, size) != (puts[0].offset, puts[0].size)


# -- repair ---------------------------------------------------------------------------------
def test_repair_dry_run_changes_nothing_then_repair_cuts_the_corrupt_tail(config: StoreConfig) -> None:
    puts = fill(config)
    bad = puts[-15]
    seg = config.commit_log_dir / file_name(bad.offset - bad.offset % SMALL_COMMIT_LOG)
    flip_byte(seg, bad.offset % SMALL_COMMIT_LOG + HEADER_V4.size + 1)
    before = digest(config.root)
    plan = plan_repair(config)
    assert digest(config.root) == before
    kinds = [a.kind for a in plan.actions]
    assert kinds == ["truncate", "rebuild-index", "recover"]
    assert f"cut at offset {bad.offset}" in plan.actions[0].detail
    apply_repair(config, plan)
    assert plan.recovery is not None and plan.recovery.commit_log_end == bad.offset
    assert_consistent(config)
    report = verify_store(config.root, config)
    assert report.records == puts.index(bad)
    # the index was rebuilt (no stale entries); g1's offset is now past its cut queue
    assert [w.where for w in report.warnings] == ["config/consumerOffset.json"]
    last = puts[puts.index(bad) - 1]
    kept = query_by_key(config, last.topic, f"k{puts.index(bad) - 1}")
    assert [m.commit_log_offset for m in kept] == [last.offset]
    assert query_by_msg_id(config, bad.msg_id) == []
    assert plan_repair(config).actions == []


def test_repair_rebuilds_a_damaged_consume_queue(config: StoreConfig) -> None:
    puts = fill(config)
    cq = config.consume_queue_dir / OTHER / "0" / file_name(0)
    data = bytearray(cq.read_bytes())
    ENTRY.pack_into(data, 20 * 2, 7, 99, 0)
    cq.write_bytes(bytes(data))
    plan = plan_repair(config)
    assert [a.kind for a in plan.actions] == ["rebuild-queues", "rebuild-index", "recover"]
    apply_repair(config, plan)
    assert_consistent(config)
    mine = [p for p in puts if p.topic == OTHER]
    assert [r.offset for r in dump_queue(config, OTHER, 0, None, 100)] == [p.offset for p in mine]


def test_repair_extends_a_last_segment_cut_short(config: StoreConfig) -> None:
    puts = fill(config)
    segs = sorted(config.commit_log_dir.iterdir())
    last_used = max(p.offset for p in puts) // SMALL_COMMIT_LOG * SMALL_COMMIT_LOG
    for p in segs:
        if int(p.name) > last_used:
            p.unlink()  # the spare segment made ahead of need
    tail = config.commit_log_dir / file_name(last_used)
    cut = (puts[-3].offset % SMALL_COMMIT_LOG) + 40  # inside the third-to-last record
    os.truncate(tail, cut)
    assert not verify_store(config.root, config).ok
    plan = plan_repair(config)
    assert plan.actions[0].kind == "extend-segment"
    apply_repair(config, plan)
    assert_consistent(config)
    assert verify_store(config.root, config).records == len(puts) - 3


def test_repair_restores_a_config_file_from_its_backup(config: StoreConfig) -> None:
    fill(config)
    offsets = ConsumerOffsetManager.in_store(config.root)
    offsets.load()
    offsets.commit("g1", TOPIC, 0, 11)
    offsets.persist()  # the .bak now holds the earlier text
    offsets.path.write_text("{garbage")
    plan = plan_repair(config)
    assert [a.kind for a in plan.actions] == ["restore-config"]
    apply_repair(config, plan)
    assert_consistent(config)
    restored = ConsumerOffsetManager.in_store(config.root)
    restored.load()
    assert restored.query("g1", TOPIC, 0) == 10


@pytest.fixture
def locked(config: StoreConfig) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the store's lock (as a running broker does)."""
    fill(config, 10)
    code = ("import sys; from pathlib import Path; from bolide.store.checkpoint import StoreLock\n"
            f"StoreLock(Path({str(config.root)!r})).acquire(); print('locked', flush=True)\n"
            "sys.stdin.readline()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def test_repair_refuses_a_store_locked_by_another_process(config: StoreConfig,
                                                          locked: subprocess.Popen[str]) -> None:
    before = digest(config.root)
    with pytest.raises(RepairRefused, match=r"locked by a running process .*stop it first"):
        plan_repair(config, rebuild_queues=True)
    assert digest(config.root) == before
    assert verify_store(config.root, config).ok  # the read-only tools still work
    assert inspect_store(config)["lock_held"] is True


def test_verify_reports_a_torn_record_the_crc_does_not_cover(config: StoreConfig) -> None:
    puts = fill(config, 10)
    bad = puts[6]
    seg = config.commit_log_dir / file_name(0)
    data = bytearray(seg.read_bytes())
    data[bad.offset + bad.size - 1] = 0  # the properties' last 0x02: outside the body CRC
    seg.write_bytes(bytes(data))
    report = verify_store(config.root, config)
    assert (report.problems[0].where, report.problems[0].offset) == ("commitlog", bad.offset)
    assert "a write cut short" in report.problems[0].message
