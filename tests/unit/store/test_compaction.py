"""Compacted topics in the store: records copied into compaction logs, compaction keeping the
newest message per key at its original offset, reads below the ConsumeQueue's minimum, reopen
and interrupted compactions, the bounded offset map."""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
import time
from pathlib import Path

import pytest

import bolide.store.compaction_log as L
from bolide.common import Message
from bolide.errors import ConfigError, StoreFormatError
from bolide.store import GetStatus, MessageStore
from bolide.store.compaction import encode_positions
from bolide.store.compaction_files import UNIT_SIZE, log_file_size
from bolide.store.offset_map import OffsetMap
from conftest import assert_consistent, expire_all_but_the_last_segment, small_config

TOPIC = "Compacted"
CQ_SIZE = 46 * 10  # ten records per compaction file pair


def config(root: Path, **overrides: object):  # type: ignore[no-untyped-def]
    values: dict[str, object] = {"compaction_cq_mapped_file_size": CQ_SIZE,
                                 "compaction_mapped_file_size": 64 * 1024,
                                 "compaction_schedule_interval_ms": 3_600_000}
    values.update(overrides)
    return small_config(root, **values)


def read_all(store: MessageStore, start: int = 0) -> list[tuple[int, str, bytes]]:
    """(queue offset, keys, body) of every message served from ``start`` to the end."""
    assert store.wait_dispatched()
    out = []
    offset = start
    while True:
        result = store.get_message("g", TOPIC, 0, offset, 32)
        if result.status is not GetStatus.FOUND and result.next_begin_offset == offset:
            return out
        for qoff, msg in zip(result.queue_offsets, result.messages, strict=True):
            out.append((qoff, msg.properties.get("KEYS", ""), msg.body))
            assert msg.queue_offset == qoff
        if result.next_begin_offset <= offset:
            return out
        offset = result.next_begin_offset


def put_values(store: MessageStore, rounds: int, keys: int = 5, first: int = 0) -> None:
    for r in range(first, first + rounds):
        for k in range(keys):
            assert store.put_message(Message(TOPIC, b"v%d-%d" % (k, r), keys=f"k{k}")).ok


def test_log_file_size_is_rounded_as_rocketmq_does() -> None:
    assert log_file_size(460, 100) == 2300  # at least five queue files
    assert log_file_size(460, 460 * 7) == 460 * 8
    assert log_file_size(460, 460 * 7 + 100) == 460 * 7
    assert UNIT_SIZE == 46


def test_offset_map_keeps_the_newest_offset_and_stops_when_full() -> None:
    m = OffsetMap(24 * 100)
    assert m.put("a", 1) and m.put("b", 2) and m.put("a", 3)
    assert (m.get("a"), m.get("b"), m.get("c"), m.last_offset) == (3, 2, -1, 3)
    for i in range(200):
        if not m.put(f"key{i}", 10 + i):
            break
    assert m.full and m.count == 75 and m.put("a", 500)  # a known key still updates
    assert len(m._data) == 2400  # the buffer never grows


def test_compaction_keeps_the_newest_value_per_key_at_its_offset(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=6)  # 30 messages: three file pairs
        assert store.put_message(Message(TOPIC, b"no key")).ok  # offset 30: never served
        put_values(store, rounds=1, first=6)  # 31..35
        assert store.wait_dispatched()
        assert store.compact_now() >= 1
        served = read_all(store)
        # nine records a file pair: 0-8, 9-17, 18-26 are compacted (the newest of each key
        # there: 22-26); the pair being written (27-35) is not
        kept = [(o, k) for o, k, _ in served]
        assert [o for o, _ in kept] == [22, 23, 24, 25, 26, 27, 28, 29, 31, 32, 33, 34, 35]
        latest = {k: b for _, k, b in served}
        assert latest == {f"k{k}": b"v%d-6" % k for k in range(5)}  # 30 had no keys: never served
        # an offset compacted away gives the next message kept
        first = store.get_message("g", TOPIC, 0, 0, 1)
        assert first.status is GetStatus.FOUND and first.queue_offsets[0] == kept[0][0]
        assert (tmp_path / "s/compaction/position-checkpoint").is_file()
        position = json.loads((tmp_path / "s/compaction/position-checkpoint").read_text())
        assert position["queueOffsetMap"][f"{TOPIC}_0"] >= 24
    assert_consistent(cfg)


def test_compacted_messages_outlive_the_commit_log(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s", mapped_file_size_commit_log=4096)
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=8, keys=4)  # ~32 records of ~150 bytes: several segments
        store.compact_now()
        before = read_all(store)
        expire_all_but_the_last_segment(store)
        assert store.get_min_offset_in_queue(TOPIC, 0) > 0  # the ConsumeQueue lost its head
        assert read_all(store) == before
        assert {k: b for _, k, b in before} == {f"k{k}": b"v%d-7" % k for k in range(4)}
    with MessageStore(cfg) as store:  # reopened: declared compacted again, same answers
        store.set_topic_compaction(TOPIC, True)
        assert read_all(store) == before


def test_reopen_keeps_compacted_files_and_goes_on(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=5)
        store.compact_now()
        first = read_all(store)
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        assert read_all(store) == first
        put_values(store, rounds=5, first=5)  # 25..49, newer values
        store.compact_now()
        latest = {k: b for _, k, b in read_all(store)}
        assert latest == {f"k{k}": b"v%d-9" % k for k in range(5)}
        offsets = [o for o, _, _ in read_all(store)]
        assert offsets[-1] == 49 and len(offsets) < 50


def test_an_interrupted_compaction_leaves_the_previous_files(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=6)
        store.wait_dispatched()
        assert store.compaction is not None
        store.compaction.ingest_now()
        before = read_all(store)
    # a compaction killed while writing its new files: compacting/ without swap.json
    qlog = tmp_path / "s/compaction/compactionLog" / TOPIC / "0"
    qcq = tmp_path / "s/compaction/compactionCq" / TOPIC / "0"
    for d in (qlog, qcq):
        (d / "compacting").mkdir()
        shutil.copy(d / "00000000000000000000", d / "compacting" / "00000000000000000000")
        with open(d / "compacting" / "00000000000000000000", "r+b") as f:
            f.truncate(100)  # torn
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        assert not (qlog / "compacting").exists() and not (qcq / "compacting").exists()
        assert read_all(store) == before
        assert store.compact_now() >= 1
        after = read_all(store)
    assert len(after) < len(before)


@pytest.mark.parametrize("cut", ["queue file empty", "log file missing", "log file short"])
def test_a_file_pair_whose_creation_was_cut_short_is_dropped_at_open(tmp_path: Path, cut: str) -> None:
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=4)
        store.compact_now()
        before = read_all(store)
        assert store.compaction is not None
        log_size, cq_size = store.compaction.log_size, store.compaction.cq_size
    qlog = tmp_path / "s/compaction/compactionLog" / TOPIC / "0"
    qcq = tmp_path / "s/compaction/compactionCq" / TOPIC / "0"
    newest = "9" * 20  # after every pair written so far
    if cut == "queue file empty":  # killed between creating the queue file and sizing it
        (qlog / newest).write_bytes(bytes(log_size))
        (qcq / newest).write_bytes(b"")
    elif cut == "log file missing":
        (qcq / newest).write_bytes(bytes(cq_size))
    else:
        (qlog / newest).write_bytes(bytes(100))
        (qcq / newest).write_bytes(bytes(cq_size))
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        assert read_all(store) == before
        assert not (qlog / newest).exists() and not (qcq / newest).exists()
        put_values(store, rounds=2, first=4)
        store.compact_now()
        assert {k: b for _, k, b in read_all(store)} == {f"k{k}": b"v%d-5" % k for k in range(5)}
    (qcq / "1" .zfill(20)).write_bytes(bytes(cq_size))  # an older file without its pair: refused
    with pytest.raises(StoreFormatError, match="no matching file"):
        MessageStore(cfg).open()


def test_a_compaction_killed_during_its_swap_is_finished_at_open(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=6)
        before = read_all(store)
        assert store.compaction is not None
        store.compaction.ingest_now()
        clog = store.compaction.logs[(TOPIC, 0)]
        real = L._apply_swap

        def die_in_swap(log_dir: Path, cq_dir: Path, old: list[str], new: list[str]) -> None:
            os.replace(log_dir / "compacting" / new[0], log_dir / new[0])  # one file moved
            raise KeyboardInterrupt  # then the process dies

        L._apply_swap = die_in_swap  # type: ignore[assignment]
        try:
            with pytest.raises(KeyboardInterrupt):
                clog.compact(-1, 1 << 20, lambda _o: None)
        finally:
            L._apply_swap = real  # type: ignore[assignment]
    qlog = tmp_path / "s/compaction/compactionLog" / TOPIC / "0"
    assert (qlog / "compacting" / "swap.json").is_file()
    with MessageStore(cfg) as store:  # the swap is finished, its position stored
        store.set_topic_compaction(TOPIC, True)
        assert not (qlog / "compacting").exists()
        after = read_all(store)
        position = json.loads((tmp_path / "s/compaction/position-checkpoint").read_text())
        assert position["queueOffsetMap"][f"{TOPIC}_0"] == 26
    newest = {k: o for o, k, _ in before if o <= 26}
    assert [o for o, _, _ in after] == sorted(newest.values()) + [o for o, _, _ in before if o > 26]


def test_compacted_files_have_rocketmq_layout(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=3)
        store.compact_now()
    qcq = tmp_path / "s/compaction/compactionCq" / TOPIC / "0"
    qlog = tmp_path / "s/compaction/compactionLog" / TOPIC / "0"
    names = sorted(p.name for p in qcq.iterdir())
    assert names == sorted(p.name for p in qlog.iterdir())
    data = (qcq / names[0]).read_bytes()
    assert len(data) == CQ_SIZE
    phys, size, _tags, _ts, qoff, batch, compacted, _r = struct.unpack_from(">qiqqqhii", data, 0)
    assert (phys, batch, compacted) == (0, 1, -1)
    record = (qlog / names[0]).read_bytes()[phys - int(names[0]) :][:size]
    assert struct.unpack_from(">i", record, 0)[0] == size
    assert struct.unpack_from(">q", record, 28)[0] == phys  # PHYSICALOFFSET: its place here
    assert struct.unpack_from(">q", record, 20)[0] == qoff  # QUEUEOFFSET: the original


def test_a_compactions_last_file_ends_without_marks_as_rocketmq(tmp_path: Path) -> None:
    """RocketMQ 5.3.3 writes no BLANK record and no end unit after a compaction's last
    records (its end callback writes nothing): zeros follow them; the store reopens, goes on
    and compacts again over such files."""
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=6)  # 0-29: file pairs 0-8, 9-17, 18-26 compacted to one
        assert store.compact_now() >= 1
    qcq = tmp_path / "s/compaction/compactionCq" / TOPIC / "0"
    qlog = tmp_path / "s/compaction/compactionLog" / TOPIC / "0"
    first = sorted(p.name for p in qcq.iterdir())[0]
    units = [struct.unpack_from(">qiqqqhii", (qcq / first).read_bytes(), i)
             for i in range(0, CQ_SIZE - UNIT_SIZE + 1, UNIT_SIZE)]
    kept = [u for u in units if u[1] > 0]
    assert [u[4] for u in kept] == [22, 23, 24, 25, 26]
    assert all(u == (0,) * 8 for u in units[len(kept):])  # no end unit
    end = kept[-1][0] + kept[-1][1] - int(first)
    assert not any((qlog / first).read_bytes()[end:])  # no BLANK record
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        assert [o for o, _, _ in read_all(store)] == [22, 23, 24, 25, 26, 27, 28, 29]
        put_values(store, rounds=6, first=6)  # 30-59
        assert store.compact_now() >= 1
        served = read_all(store)
        assert {k: b for _, k, b in served} == {f"k{k}": b"v%d-11" % k for k in range(5)}
        assert [o for o, _, _ in served] == sorted({o for o, _, _ in served})


def test_position_checkpoint_is_written_as_rocketmq_writes_it(tmp_path: Path) -> None:
    """Byte for byte what RocketMQ 5.3.3's CompactionPositionMgr wrote in the interop test."""
    assert encode_positions({"CompactedInterop_0": 19}) == (
        b'{\n\t"empty":false,\n\t"queueOffsetMap":{\n\t\t"CompactedInterop_0":19\n\t}\n}')
    assert encode_positions({}) == b'{\n\t"empty":true,\n\t"queueOffsetMap":{}\n}'
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=6)
        store.compact_now()
    text = (tmp_path / "s/compaction/position-checkpoint").read_bytes()
    assert text.startswith(b'{\n\t"empty":false,\n\t"queueOffsetMap":{\n\t\t"Compacted_0":')
    assert json.loads(text)["queueOffsetMap"] == {f"{TOPIC}_0": 26}


def test_a_compacted_get_answers_the_compaction_queues_minimum(tmp_path: Path) -> None:
    """RocketMQ serves a compacted topic from its compaction queue and answers that queue's
    first offset as minOffset, whether the offset asked for was compacted away or not."""
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=6)
        assert store.wait_dispatched()
        assert store.compaction is not None
        store.compaction.ingest_now()
        assert store.get_message("g", TOPIC, 0, 0, 1).min_offset == 0  # nothing compacted yet
        store.compact_now()
        assert store.get_min_offset_in_queue(TOPIC, 0) == 0  # the ConsumeQueue's, as RocketMQ
        for offset in (0, 22, 29, 30, 40):
            result = store.get_message("g", TOPIC, 0, offset, 2)
            assert (result.min_offset, result.max_offset) == (22, 30), offset
        assert store.get_message("g", TOPIC, 0, 40, 2).status is GetStatus.OFFSET_OVERFLOW_BADLY


def test_bounded_offset_map_compacts_in_passes(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s", max_offset_map_size=24 * 100, compaction_thread_num=1,
                 compaction_cq_mapped_file_size=46 * 200)
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=3, keys=150)  # 450 messages of 150 keys; the map holds 75
        put_values(store, rounds=1, keys=1)
        assert store.compact_now() >= 2
        served = read_all(store)
        latest = {k: b for _, k, b in served}
        assert latest["k149"] == b"v149-2" and latest["k0"] == b"v0-0"


def test_topics_not_compacted_are_served_as_before(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s")
    with MessageStore(cfg) as store:
        put_values(store, rounds=3)
        assert store.compact_now() == 0
        assert len(read_all(store)) == 15
        assert not (tmp_path / "s/compaction/compactionLog").exists()


def test_bad_compaction_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="compactionCqMappedFileSize"):
        config(tmp_path, compaction_cq_mapped_file_size=46)


def test_the_compaction_thread_runs_at_the_configured_interval(tmp_path: Path) -> None:
    cfg = config(tmp_path / "s", compaction_schedule_interval_ms=20)
    position = tmp_path / "s/compaction/position-checkpoint"
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        put_values(store, rounds=6)
        deadline = time.monotonic() + 10
        while not position.is_file():  # copied in when dispatched, compacted by the thread
            assert time.monotonic() < deadline, "no compaction within 10 s"
            threading.Event().wait(0.01)
        assert store.compaction is not None and store.compaction.last_error is None
        assert next(o for o, _, _ in read_all(store)) > 0
