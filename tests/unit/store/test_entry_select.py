"""get_message's entry loop (bolide.store.entry_select): the compiled and the pure-Python loops
select the same records, and get_message answers exactly as its general one-entry step alone
does, across segments, tags (ASCII or not), pre-blank entries, transfer limits, removed
segments and ConsumeQueueExt addresses in place of tag codes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.common.hashing import java_string_hash
from bolide.common.message import Message
from bolide.common.properties import encode_properties
from bolide.store import MessageStore, StoreConfig, entry_select
from bolide.store.consume_queue import ENTRY
from bolide.store.record import MAGIC_V1, MAGIC_V2, encode_record

IPV4 = bytes([127, 0, 0, 1, 0, 0, 0x27, 0x10])
IPV6 = bytes(16) + bytes([0, 0, 0x27, 0x10])
TAGS = [None, "", "TagA", "TagB", "Tæg"]


def test_the_compiled_loop_is_built() -> None:
    if os.environ.get("BOLIDE_PURE_PYTHON") == "1":
        assert not entry_select.COMPILED
    else:
        assert entry_select.COMPILED, "bolide.store._fastscan is not built: run `make venv` again"


def _segment(specs: list[tuple[str | None, str, int]], base: int) -> tuple[bytes, list[tuple[int, int, int]]]:
    """Records of the given (tags, kind, body size) at global offset ``base``, and an entry
    (offset, size, tags code) per record."""
    out = bytearray()
    entries = []
    for tags, kind, body_size in specs:
        props = encode_properties({"TAGS": tags} if tags is not None else {})
        record = encode_record("T", 0, b"b" * body_size, props, born_timestamp=1,
                               born_host=IPV6 if kind == "ipv6" else IPV4, store_timestamp=2,
                               store_host=IPV4, physical_offset=base + len(out),
                               magic=MAGIC_V2 if kind == "v2" else MAGIC_V1)
        if kind == "cut":  # the entry claims a size the record's fields do not fit
            record = record[:60]
        code = java_string_hash(tags) if tags else 0
        entries.append((base + len(out), len(record), code))
        out += record
    return bytes(out), entries


entry_kind = st.sampled_from(["record"] * 6 + ["pre_blank", "outside", "negative_size",
                                              "negative_offset", "ext_address"])
spec = st.tuples(st.sampled_from(TAGS), st.sampled_from(["v1"] * 6 + ["v2", "ipv6", "cut"]),
                 st.integers(0, 300))


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(spec, min_size=1, max_size=24), kinds=st.lists(entry_kind, min_size=24, max_size=24),
       tag_filter=st.sampled_from([None, ("TagA",), ("TagA", "Tæg"), ("",), ("TagB", "TagC")]),
       by_code_only=st.booleans(), start=st.integers(0, 3),
       limits=st.tuples(st.integers(0, 1 << 20), st.sampled_from([0, 1 << 19, 1 << 40]),
                        st.integers(1, 32), st.integers(1, 4096), st.integers(1, 32), st.integers(1, 4096)),
       accepted_before=st.integers(0, 2))
def test_compiled_and_pure_loops_agree(specs: list[tuple[str | None, str, int]], kinds: list[str],
                                       tag_filter: tuple[str, ...] | None, by_code_only: bool,
                                       start: int, limits: tuple[int, int, int, int, int, int],
                                       accepted_before: int) -> None:
    """Both loops, each with a view per record and with the records joined into one buffer."""
    if not entry_select.COMPILED:
        pytest.skip("the compiled loop is not built (BOLIDE_PURE_PYTHON=1)")
    from bolide.store import _fastscan  # type: ignore[attr-defined]

    base = 1 << 30
    seg_bytes, records = _segment(specs, base)
    seg = memoryview(seg_bytes)
    entries = bytearray()
    for n, (phys, size, code) in enumerate(records):
        kind = kinds[n]
        if kind == "pre_blank":
            entries += ENTRY.pack(0, entry_select.PRE_BLANK_SIZE, 0)
        elif kind == "outside":
            entries += ENTRY.pack(base + len(seg_bytes) + 100, size, code)
        elif kind == "negative_size":  # damaged entries (found by the fuzzer)
            entries += ENTRY.pack(phys, -(phys - base) - 5, code)
        elif kind == "negative_offset":
            entries += ENTRY.pack(-phys, size, code)
        elif kind == "ext_address":  # RocketMQ's ConsumeQueueExt: the unit's offset + Long.MIN_VALUE
            entries += ENTRY.pack(phys, size, -(2**63) + 24 * n)
        else:
            entries += ENTRY.pack(phys, size, code)
    codes = tuple(java_string_hash(t) if t else 0 for t in tag_filter) if tag_filter is not None else None
    tags = None if tag_filter is None or by_code_only else tuple(t.encode() for t in tag_filter)
    n = len(records)
    i = min(start, n)
    state = (100, i, 7 * accepted_before, base)
    outputs = []
    for loop in (_fastscan.select_entries, entry_select.select_entries_python):
        for joined in (False, True):
            buffers: list[memoryview] | bytearray = (
                bytearray(b"x" * 7 * accepted_before) if joined
                else [memoryview(b"x" * 7)] * accepted_before)
            qoffsets = [0] * accepted_before
            result = loop(bytes(entries), i, n, seg, base, base + len(seg_bytes), codes, tags,
                          (base + limits[0], *limits[1:]), buffers, qoffsets, state)
            body = bytes(buffers) if joined else b"".join(buffers)  # type: ignore[arg-type]
            outputs.append((result, body, qoffsets))
    assert outputs[0] == outputs[1] == outputs[2] == outputs[3]


def _store(root: Path) -> MessageStore:
    """Two queues over several 4 KiB segments, tags of every kind, the first segment deleted."""
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=4096,
                         mapped_file_size_consume_queue=20 * 64)
    store = MessageStore(config)
    store.open()
    for n in range(160):
        tags = TAGS[n % len(TAGS)]
        store.put_message(Message(topic="T", body=b"m%03d" % n + b"." * (n % 37), tags=tags),
                          queue_id=n % 2)
    assert store.wait_dispatched(30)
    return store


GETS = [(q, offset, max_count, tags) for q in (0, 1) for offset in (0, 3, 17, 40)
        for max_count in (1, 7, 32) for tags in (None, ["*"], ["TagA"], ["TagA", "Tæg"], ["Tæg"], [""],
                                                 ["TagB", "TagZ"], [f"t{k}" for k in range(20)])]


def _answers(store: MessageStore) -> list[tuple[object, ...]]:
    """Every get of GETS, read with a view per record and joined (a pull's body): both must
    give the same records."""
    out = []
    for q, offset, max_count, tags in GETS:
        r = store.get_message("g", "T", q, offset, max_count, tags)
        joined = store.get_message("g", "T", q, offset, max_count, tags, joined=True)
        answer = (r.status, r.next_begin_offset, r.queue_offsets, r.buffer_total_size, r.body)
        assert (joined.status, joined.next_begin_offset, joined.queue_offsets,
                joined.buffer_total_size, bytes(joined.body)) == answer
        assert joined.message_count == r.message_count == len(r.buffers)
        assert [m.body for m in joined.messages] == [m.body for m in r.messages]
        out.append(answer)
    return out


def test_get_message_answers_as_its_general_step_does(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path / "store")
    try:
        files = store.commit_log.files
        reference_before = None
        for removed in (False, True):
            if removed:  # a deleted first segment: its entries answer MESSAGE_WAS_REMOVING
                first = files.files[0]
                files.files.remove(first)
            with monkeypatch.context() as m:
                m.setattr(entry_select, "ENABLED", False)  # every entry by the general step
                reference = _answers(store)
            if removed:
                assert reference != reference_before
            reference_before = reference
            assert _answers(store) == reference  # the compiled loop where built
            with monkeypatch.context() as m:
                m.setattr(entry_select, "_compiled", None)
                assert _answers(store) == reference  # the pure-Python loop
            if removed:
                files.files.insert(0, first)
    finally:
        store.close()


def test_a_damaged_entry_is_skipped_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A ConsumeQueue entry whose size or offset is below zero points at no record: the get
    skips it (its offset is consumed), serves none of the segment for it, and logs an error
    naming the fix. The size is chosen so that slicing the segment with it would have given
    most of the segment."""
    config = StoreConfig(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4096)
    with MessageStore(config) as store:
        for n in range(5):
            store.put_message(Message(topic="T", body=b"m%d" % n), queue_id=0)
        assert store.wait_dispatched(30)
        cq_file = tmp_path / "store" / "consumequeue" / "T" / "0" / ("0" * 20)
        with open(cq_file, "r+b") as f:
            phys = ENTRY.unpack(os.pread(f.fileno(), ENTRY.size, 2 * ENTRY.size))[0]
            os.pwrite(f.fileno(), (-(phys % 4096) - 5).to_bytes(4, "big", signed=True),
                      2 * ENTRY.size + 8)
            os.pwrite(f.fileno(), (-1).to_bytes(8, "big", signed=True), 3 * ENTRY.size)
        for enabled, compiled in ((True, True), (True, False), (False, True)):
            with monkeypatch.context() as m:
                m.setattr(entry_select, "ENABLED", enabled)
                if not compiled:
                    m.setattr(entry_select, "_compiled", None)
                caplog.clear()
                r = store.get_message("g", "T", 0, 0, 32)
                assert [m.body for m in r.messages] == [b"m0", b"m1", b"m4"]
                assert r.queue_offsets == [0, 1, 4] and r.next_begin_offset == 5
                assert "2 damaged entries" in caplog.text and "bolide store verify" in caplog.text


def test_consume_queue_ext_addresses_give_the_answers_of_tag_codes(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A store RocketMQ wrote with enableConsumeQueueExt holds, in its entries' tagsCode, the
    address of a ConsumeQueueExt unit (offset + Long.MIN_VALUE) instead of the tag's code: a
    get filtered by tags takes the tag from each record, so it answers as with the codes."""
    store = _store(tmp_path / "store")
    try:
        reference = _answers(store)
        unit = 0
        for cq_file in sorted((tmp_path / "store" / "consumequeue" / "T").glob("*/*")):
            data = bytearray(cq_file.read_bytes())
            for pos in range(0, len(data), ENTRY.size):
                phys, size, _code = ENTRY.unpack_from(data, pos)
                if size > 0 and size != entry_select.PRE_BLANK_SIZE:
                    ENTRY.pack_into(data, pos, phys, size, -(2**63) + unit)
                    unit += 24
            with open(cq_file, "r+b") as f:  # in place: the store's mapping sees it
                os.pwrite(f.fileno(), data, 0)
        assert unit > 0
        for enabled, compiled in ((True, True), (True, False), (False, True)):
            with monkeypatch.context() as m:
                m.setattr(entry_select, "ENABLED", enabled)
                if not compiled:
                    m.setattr(entry_select, "_compiled", None)
                assert _answers(store) == reference, (enabled, compiled)
    finally:
        store.close()
