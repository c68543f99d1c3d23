"""The bulk record scan (bolide.store.fastscan): the compiled and the pure-Python scans give
the same runs, and those runs are the entries dispatch would write record by record."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.common import sysflag
from bolide.common.message import Message
from bolide.common.properties import encode_properties
from bolide.store import MessageStore, StoreConfig, fastscan
from bolide.store.consume_queue import ENTRY
from bolide.store.dispatch import _tags_code_of
from bolide.store.record import (
    MAGIC_V1,
    MAGIC_V2,
    RecordInfo,
    encode_record,
    parse_record,
    write_blank,
)

IPV4 = bytes([127, 0, 0, 1, 0, 0, 0x27, 0x10])
IPV6 = bytes(16) + bytes([0, 0, 0x27, 0x10])


def test_the_compiled_scan_is_built() -> None:
    """CI installs with a C compiler: the compiled scan must be there (unless pure is asked)."""
    if os.environ.get("BOLIDE_PURE_PYTHON") == "1":
        assert not fastscan.COMPILED
    else:
        assert fastscan.COMPILED, "bolide.store._fastscan is not built: run `make venv` again"


def _compiled(buf: bytes, pos: int, base: int, check_crc: bool, max_records: int
              ) -> tuple[int, int, list[fastscan.Run]]:
    from bolide.store import _fastscan  # type: ignore[attr-defined]
    return _fastscan.scan_runs(buf, pos, base, check_crc, max_records, fastscan.Run, {})  # type: ignore[no-any-return]


record_spec = st.fixed_dictionaries({
    "topic": st.sampled_from(["T", "Orders", "SCHEDULE_TOPIC_XXXX", "Tø", "x" * 100]),
    "queue_id": st.integers(0, 3),
    "qoff_step": st.sampled_from([1, 1, 1, 0, 2]),
    "tags": st.sampled_from([None, "", "TagA", "TagB", "Tæg", "a||b"]),
    "keys": st.sampled_from([None, "k1", "k1 k2"]),
    "body": st.binary(max_size=40),
    "tx": st.sampled_from([0, 0, 0, sysflag.TRANSACTION_COMMIT_TYPE,
                           sysflag.TRANSACTION_PREPARED_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE]),
    "kind": st.sampled_from(["v1"] * 8 + ["v2", "ipv6", "bad_crc", "wrong_phys", "torn"]),
})


def _build(specs: list[dict[str, object]], tail: str) -> bytes:
    out = bytearray()
    qoffs: dict[tuple[object, object], int] = {}
    for s in specs:
        props: dict[str, str] = {}
        if s["tags"] is not None:
            props["TAGS"] = str(s["tags"])
        if s["keys"] is not None:
            props["KEYS"] = str(s["keys"])
        key = (s["topic"], s["queue_id"])
        qoff = qoffs.get(key, 0) + int(str(s["qoff_step"])) - 1
        qoffs[key] = qoff + 1
        body = bytes(s["body"])  # type: ignore[call-overload]
        kind = s["kind"]
        record = bytearray(encode_record(
            str(s["topic"]), int(str(s["queue_id"])), body, encode_properties(props),
            born_timestamp=1, born_host=IPV6 if kind == "ipv6" else IPV4, store_timestamp=2 + len(out),
            store_host=IPV4, queue_offset=qoff,
            physical_offset=len(out) + (7 if kind == "wrong_phys" else 0),
            sys_flag=int(str(s["tx"])), magic=MAGIC_V2 if kind == "v2" else MAGIC_V1,
            body_crc_value=(zlib.crc32(body) + 1) & 0x7FFFFFFF if kind == "bad_crc" else None))
        if kind == "torn" and len(record) > 91:
            record[-1] = 0
        out += record
    if tail == "blank":
        blank = bytearray(8)
        write_blank(blank, 0, 64)
        out += blank + bytes(56)
    elif tail == "garbage":
        out += b"\x01\x02\x03\x04garbage!"
    elif tail == "zeros":
        out += bytes(64)
    return bytes(out)


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(record_spec, max_size=30), tail=st.sampled_from(["", "blank", "garbage", "zeros"]),
       check_crc=st.booleans(), max_records=st.sampled_from([1, 3, 65536]),
       base=st.sampled_from([0, 1 << 30]))
def test_compiled_and_pure_scans_agree(specs: list[dict[str, object]], tail: str, check_crc: bool,
                                       max_records: int, base: int) -> None:
    if not fastscan.COMPILED:
        pytest.skip("the compiled scan is not built (BOLIDE_PURE_PYTHON=1)")
    buf = _build(specs, tail)
    if base:  # records claim offsets from 0: the same bytes at another base stop at once
        assert _compiled(buf, 0, base, check_crc, max_records)[1] == 0 or not buf
    pos = 0
    while True:
        want = fastscan.scan_runs_python(memoryview(buf), pos, 0, check_crc, max_records, {})
        got = _compiled(buf, pos, 0, check_crc, max_records)
        assert got == want
        if want[1] == 0:
            break
        pos = want[0]


@settings(max_examples=200, deadline=None)
@given(specs=st.lists(record_spec, max_size=30), tail=st.sampled_from(["", "blank", "garbage"]),
       check_crc=st.booleans())
def test_runs_are_what_dispatch_writes_record_by_record(specs: list[dict[str, object]], tail: str,
                                                        check_crc: bool) -> None:
    buf = memoryview(_build(specs, tail))
    pos, count, runs = fastscan.scan_runs(buf, 0, 0, check_crc)
    expected: list[tuple[str, int, int, bytes]] = []
    p = 0
    for _ in range(count):
        info = parse_record(buf, p, check_crc)
        assert type(info) is RecordInfo and info.size > 0
        expected.append((info.topic, info.queue_id, info.queue_offset,
                         ENTRY.pack(info.commit_log_offset, info.size, _tags_code_of(info.properties))))
        p += info.size
    assert p == pos
    got = [(r.topic, r.queue_id, r.first_queue_offset + i, r.entries[i * 20 : i * 20 + 20])
           for r in runs for i in range(len(r.entries) // 20)]
    assert got == expected
    for r in runs:  # a run is one queue with consecutive offsets
        phys = [e[0] for e in ENTRY.iter_unpack(r.entries)]
        assert r.first_phys == phys[0] and r.end_phys == phys[-1] + ENTRY.unpack(r.entries[-20:])[1]
    if pos + 8 <= len(buf):  # the scan stopped at a record of another kind, or not a record
        info = parse_record(buf, pos, check_crc)
        fast = (type(info) is RecordInfo and info.size > 0 and not info.sys_flag & 0x34
                and info.commit_log_offset == pos and info.topic != "SCHEDULE_TOPIC_XXXX"
                and int.from_bytes(buf[pos + 4 : pos + 8], "big", signed=True) == MAGIC_V1
                and (_tags_of(info.properties) or "").isascii())
        assert not fast, (pos, info)


def _tags_of(props: bytes) -> str | None:
    from bolide.store.record import property_bytes
    tags = property_bytes(props, b"TAGS\x01")
    return None if tags is None else tags.decode("utf-8", "replace")


def test_a_store_segment_scans_whole(tmp_path: Path) -> None:
    cfg = StoreConfig(store_path_root_dir=str(tmp_path / "s"), mapped_file_size_commit_log=1 << 20)
    with MessageStore(cfg) as store:
        for i in range(300):
            store.put_message(Message("T", b"b%d" % i, tags="TagA", keys=f"k{i}"), i % 3)
        store.put_messages([Message("T", b"batch", tags="TagB") for _ in range(32)], 1)
        end = store.commit_log.max_offset
        view = store.commit_log.files.files[0].view
        pos, count, runs = fastscan.scan_runs(view, 0, 0, True)
        assert (pos, count) == (end, 332)
        assert sum(len(r.entries) // 20 for r in runs) == 332
        assert runs[-1].queue_id == 1 and len(runs[-1].entries) == 20 * 32  # the batch
        del view


def _recover_in_child(root: Path, pure: bool) -> None:
    env = dict(os.environ, BOLIDE_PURE_PYTHON="1" if pure else "0")
    code = ("import sys; from bolide.store import MessageStore, StoreConfig, fastscan; "
            "assert fastscan.COMPILED is (sys.argv[2] == '0'); "
            "cfg = StoreConfig(store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=1 << 19); "
            "st = MessageStore(cfg).open(); assert st.recovery_report.abnormal; st.close()")
    subprocess.run([sys.executable, "-c", code, str(root), "1" if pure else "0"], env=env, check=True)


def test_recovery_rebuilds_the_same_queues_with_either_scan(tmp_path: Path) -> None:
    """Abnormal recovery with the compiled and with the pure-Python scan: byte-identical
    ConsumeQueues, over records of every kind (tags of both kinds, batches, transactions,
    delayed messages, several segments)."""
    if not fastscan.COMPILED:
        pytest.skip("the compiled scan is not built (BOLIDE_PURE_PYTHON=1)")
    cfg = StoreConfig(store_path_root_dir=str(tmp_path / "a"), mapped_file_size_commit_log=1 << 19)
    with MessageStore(cfg) as store:
        for i in range(3000):
            tags = ("TagA", "Tæg", "")[i % 3]
            msg = Message(f"T{i % 2}", os.urandom(i % 700), tags=tags or None, keys=f"k{i}")
            if i % 50 == 7:
                msg.properties["DELAY"] = "2"
            flag = sysflag.TRANSACTION_PREPARED_TYPE if i % 97 == 5 else 0
            store.put_message(msg, i % 4, sys_flag=flag)
            if i % 400 == 0:
                store.put_messages([Message("T1", b"batch%d" % j, tags="B") for j in range(32)], 2)
        assert store.wait_dispatched()
        assert len(store.commit_log.files.files) > 2
    copy = tmp_path / "b"
    shutil.copytree(cfg.root, copy)
    for root in (cfg.root, copy):
        (root / "abort").touch()
        (root / "checkpoint").write_bytes(bytes(4096))
        shutil.rmtree(root / "consumequeue")
    _recover_in_child(cfg.root, pure=False)
    _recover_in_child(copy, pure=True)
    queues = sorted(p.relative_to(cfg.root) for p in (cfg.root / "consumequeue").rglob("*") if p.is_file())
    assert len(queues) == 6  # T0: 0 and 2; T1: 1, 2 and 3; the schedule topic
    assert queues == sorted(p.relative_to(copy) for p in (copy / "consumequeue").rglob("*") if p.is_file())
    for rel in queues:
        assert (cfg.root / rel).read_bytes() == (copy / rel).read_bytes(), rel


def test_no_run_continues_past_the_largest_queue_offset() -> None:
    """A record at queue offset 2**63-1 ends its run: the next offset would overflow."""
    big = (1 << 63) - 1
    buf = b"".join(encode_record("T", 0, b"x", b"", born_timestamp=1, born_host=IPV4, store_timestamp=2,
                                 store_host=IPV4, queue_offset=q, physical_offset=i * 93)
                   for i, q in enumerate((big - 1, big, -(1 << 63))))
    want = fastscan.scan_runs_python(memoryview(buf), 0, 0, True, 65536, {})
    assert [len(r.entries) // 20 for r in want[2]] == [2, 1]
    if fastscan.COMPILED:
        assert _compiled(buf, 0, 0, True, 65536) == want


def _damaged_index_store(root: Path) -> StoreConfig:
    cfg = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1 << 16,
                      max_hash_slot_num=64, max_index_num=4000)
    with MessageStore(cfg) as store:
        for i in range(900):
            store.put_message(Message(f"T{i % 3}", b"v" * (i % 90), keys=f"k{i} shared{i % 5}"), i % 2)
        assert store.wait_dispatched()
    index = sorted((root / "index").iterdir())[-1]
    data = bytearray(index.read_bytes())
    entries_at = 40 + 64 * 4
    for n, (field, value) in {5: (16, 9999), 17: (0, -5), 40: (16, 3), 333: (4, 12345)}.items():
        at = entries_at + n * 20 + field
        data[at : at + (8 if field == 4 else 4)] = value.to_bytes(8 if field == 4 else 4, "big", signed=True)
    index.write_bytes(data)
    return cfg


def test_the_compiled_and_pure_index_checks_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index part of verify: the same problems, stale entries and late records with the
    compiled entry loop and with the pure-Python one, on an index with broken links and
    entries pointing at no record, against a CommitLog cut short."""
    from bolide.store import verify_index
    from bolide.store.offline import open_commit_log

    if not fastscan.COMPILED:
        pytest.skip("the compiled scan is not built (BOLIDE_PURE_PYTHON=1)")
    cfg = _damaged_index_store(tmp_path / "s")
    log = open_commit_log(cfg)
    try:
        cut = log.maps[-1][0] + 100  # as if the CommitLog ended early in its last segment
        for late_from in (None, log.maps[-1][0] - 91):
            compiled = verify_index._check_all(cfg, log, log.start, cut, late_from)
            monkeypatch.setattr(verify_index, "_compiled", None)
            pure = verify_index._check_all(cfg, log, log.start, cut, late_from)
            monkeypatch.undo()
            assert compiled == pure
            assert compiled.problems and sum(compiled.stale.values()) > 0
    finally:
        log.close()


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=64))
def test_compiled_java_hash_agrees(text: str) -> None:
    """The compiled String.hashCode() (index keys) equals the Python one, surrogates included."""
    module = fastscan.compiled_module()
    if module is None:
        pytest.skip("the compiled module is not built (BOLIDE_PURE_PYTHON=1)")
    from bolide.common.hashing import java_string_hash
    assert module.java_hash(text) == java_string_hash.__wrapped__(text)
