"""ConsumeQueue: 20-byte entries {offset i64, size i32, tags i64} in files named by byte offset."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from bolide.errors import StoreFormatError
from bolide.store.consume_queue import ENTRY_SIZE, ConsumeQueue
from bolide.store.mapped_file import file_name

FILE_SIZE = 100 * 20  # 100 entries per file
PER_FILE = FILE_SIZE // 20
LAYOUT = struct.Struct(">qiq")
PRE_BLANK = (0, 0x7FFFFFFF, 0)
REC = 100  # every test record is 100 bytes; record n sits at n * REC


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "consumequeue"


@pytest.fixture
def cq(root: Path) -> Iterator[ConsumeQueue]:
    q = ConsumeQueue(root, "TopicTest", 3, FILE_SIZE)
    yield q
    q.close()


def put_range(q: ConsumeQueue, start: int, stop: int) -> None:
    for n in range(start, stop):
        assert q.put(n * REC, REC, 1000 + n, n) is True


def raw(q: ConsumeQueue, start: int) -> bytes:
    return (q.files.directory / file_name(start)).read_bytes()


def reopen(root: Path) -> ConsumeQueue:
    q = ConsumeQueue(root, "TopicTest", 3, FILE_SIZE)
    q.load()
    q.recover()
    return q


def test_entries_at_index_times_20(cq: ConsumeQueue, root: Path) -> None:
    put_range(cq, 0, 5)
    cq.put(5 * REC, 77, -5, 5)  # negative tags codes are stored sign-extended
    cq.flush()
    assert cq.files.directory == root / "TopicTest" / "3"
    data = raw(cq, 0)
    assert len(data) == FILE_SIZE
    for n in range(5):
        assert LAYOUT.unpack_from(data, n * 20) == (n * REC, REC, 1000 + n)
    assert data[100:120] == bytes.fromhex("00000000000001f4" "0000004d" "fffffffffffffffb")
    assert data[120:] == bytes(FILE_SIZE - 120)
    assert (cq.min_offset, cq.max_offset) == (0, 6)
    assert cq.max_physic_offset == 5 * REC + 77
    assert cq.entry(2) == (200, REC, 1002)
    assert cq.entry(6) is None


def test_files_have_exact_size_and_byte_offset_names(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 250)
    names = sorted(p.name for p in cq.files.directory.iterdir())
    assert names == [file_name(0), file_name(2000), file_name(4000)]
    assert names[1] == "00000000000000002000"
    assert all((cq.files.directory / n).stat().st_size == FILE_SIZE for n in names)
    assert cq.max_offset == 250
    assert LAYOUT.unpack_from(raw(cq, 2000), 0) == (100 * REC, REC, 1100)
    assert cq.entry(249) == (249 * REC, REC, 1249)
    view, first = cq.entries_from(120)  # type: ignore[misc]
    assert first == 120 and len(view) == 80 * 20  # to the end of that file
    assert LAYOUT.unpack_from(view, 0) == (120 * REC, REC, 1120)
    assert cq.entries_from(250) is None


def test_pre_blank_when_first_index_is_not_zero(cq: ConsumeQueue) -> None:
    assert cq.put(50_000, REC, 7, 105) is True
    cq.flush()
    assert sorted(p.name for p in cq.files.directory.iterdir()) == [file_name(2000)]
    data = raw(cq, 2000)
    for i in range(5):
        assert LAYOUT.unpack_from(data, i * 20) == PRE_BLANK
    assert data[:20] == bytes.fromhex("0000000000000000" "7fffffff" "0000000000000000")
    assert LAYOUT.unpack_from(data, 100) == (50_000, REC, 7)
    assert cq.min_offset == 105 and cq.min_logic_offset == 2100
    assert cq.max_offset == 106
    assert cq.entries_from(104) is None
    assert cq.entry(105) == (50_000, REC, 7)


def test_pre_blank_in_the_first_file(cq: ConsumeQueue) -> None:
    cq.put(9_000, REC, 0, 3)
    data = raw(cq, 0)
    assert [LAYOUT.unpack_from(data, i * 20) for i in range(4)] == [PRE_BLANK] * 3 + [(9_000, REC, 0)]
    assert (cq.min_offset, cq.max_offset) == (3, 4)


def test_first_index_at_a_file_start_needs_no_pre_blank(cq: ConsumeQueue) -> None:
    cq.put(9_000, REC, 0, PER_FILE)
    assert LAYOUT.unpack_from(raw(cq, 2000), 0) == (9_000, REC, 0)
    assert (cq.min_offset, cq.max_offset) == (PER_FILE, PER_FILE + 1)


def test_duplicate_puts_are_ignored(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 3)
    assert cq.put(2 * REC, REC, 1002, 2) is False  # same entry again
    assert cq.put(0, REC, 1000, 0) is False  # older record
    assert cq.put(10 * REC, REC, 1, 1) is False  # queue offset already written
    assert cq.max_offset == 3
    assert cq.entry(1) == (REC, REC, 1001)
    assert cq.put(3 * REC, REC, 1003, 3) is True


def test_gap_is_filled_with_pre_blank_entries(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 2)
    assert cq.put(10 * REC, REC, 5, 4) is True
    assert cq.max_offset == 5
    assert cq.entry(2) == PRE_BLANK and cq.entry(3) == PRE_BLANK
    assert cq.entry(4) == (10 * REC, REC, 5)


def test_gap_up_to_a_file_boundary(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 1)
    assert cq.put(10 * REC, REC, 5, PER_FILE) is True
    assert cq.max_offset == PER_FILE + 1
    assert cq.entry(PER_FILE - 1) == PRE_BLANK
    assert cq.entry(PER_FILE) == (10 * REC, REC, 5)
    assert LAYOUT.unpack_from(raw(cq, 2000), 0) == (10 * REC, REC, 5)


def test_gap_across_several_files(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 1)
    assert cq.put(10 * REC, REC, 5, 2 * PER_FILE + 7) is True
    assert [mf.file_from_offset for mf in cq.files.files] == [0, 2000, 4000]
    assert cq.entry(PER_FILE + 50) == PRE_BLANK
    assert cq.entry(2 * PER_FILE + 7) == (10 * REC, REC, 5)


def test_recover_finds_the_end(cq: ConsumeQueue, root: Path) -> None:
    put_range(cq, 0, 250)
    cq.close()
    q = reopen(root)
    try:
        assert q.max_offset == 250
        assert q.max_physic_offset == 250 * REC
        assert q.files.files[-1].wrote_position == 50 * 20
        assert q.entry(249) == (249 * REC, REC, 1249)
        assert q.put(250 * REC, REC, 0, 250) is True
        assert q.entry(250) == (250 * REC, REC, 0)
    finally:
        q.close()


def test_recover_of_exactly_full_files(cq: ConsumeQueue, root: Path) -> None:
    put_range(cq, 0, 2 * PER_FILE)
    cq.close()
    q = reopen(root)
    try:
        assert q.max_offset == 2 * PER_FILE and q.max_physic_offset == 2 * PER_FILE * REC
        assert q.put(2 * PER_FILE * REC, REC, 0, 2 * PER_FILE) is True
        assert sorted(p.name for p in q.files.directory.iterdir())[-1] == file_name(4000)
    finally:
        q.close()


def test_recover_stops_at_an_invalid_entry_and_clears_after_it(cq: ConsumeQueue, root: Path) -> None:
    put_range(cq, 0, 10)
    mf = cq.files.files[0]
    LAYOUT.pack_into(mf.view, 6 * 20, -1, REC, 0)  # a torn entry
    cq.close()
    q = reopen(root)
    try:
        assert q.max_offset == 6
        assert q.max_physic_offset == 6 * REC
        assert raw(q, 0)[6 * 20 :] == bytes(FILE_SIZE - 6 * 20)
    finally:
        q.close()


def test_recover_keeps_pre_blank_entries(cq: ConsumeQueue, root: Path) -> None:
    cq.put(50_000, REC, 7, 105)
    cq.put(50_100, REC, 8, 106)
    cq.close()
    q = reopen(root)
    try:
        assert q.max_offset == 107
        assert q.max_physic_offset == 50_200
        q.correct_min_offset(0)
        assert q.min_offset == 105  # the pre-blank entries are not messages
    finally:
        q.close()


def test_recover_scans_from_the_third_to_last_file(cq: ConsumeQueue, root: Path) -> None:
    put_range(cq, 0, 450)
    # a hole in the first file is older than recovery looks
    LAYOUT.pack_into(cq.files.files[0].view, 0, 0, 0, 0)
    cq.close()
    q = reopen(root)
    try:
        assert q.max_offset == 450 and len(q.files.files) == 5
    finally:
        q.close()


def test_truncate_dirty_removes_entries_at_or_after_phys(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 250)
    removed = cq.truncate_dirty(130 * REC)
    assert removed == 120
    assert cq.max_offset == 130
    assert cq.max_physic_offset == 130 * REC
    assert [mf.file_from_offset for mf in cq.files.files] == [0, 2000]
    assert not (cq.files.directory / file_name(4000)).exists()
    assert raw(cq, 2000)[30 * 20 :] == bytes(FILE_SIZE - 30 * 20)
    assert cq.entry(129) == (129 * REC, REC, 1129)
    assert cq.put(130 * REC, REC, 9, 130) is True  # the queue continues where it was cut
    assert cq.entry(130) == (130 * REC, REC, 9)


def test_truncate_dirty_at_a_record_inside_a_file_boundary(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 150)
    assert cq.truncate_dirty(PER_FILE * REC) == 50
    assert cq.max_offset == PER_FILE
    assert cq.max_physic_offset == PER_FILE * REC
    assert cq.put(PER_FILE * REC, REC, 0, PER_FILE) is True


def test_truncate_dirty_of_everything(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 150)
    assert cq.truncate_dirty(0) == 150
    assert cq.max_offset == 0 and cq.max_physic_offset == -1
    assert cq.put(0, REC, 0, 0) is True


def test_truncate_dirty_beyond_the_end_changes_nothing(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 10)
    assert cq.truncate_dirty(10 * REC) == 0
    assert cq.truncate_dirty(10**9) == 0
    assert cq.max_offset == 10 and cq.max_physic_offset == 10 * REC


def test_truncate_dirty_keeps_pre_blank_prefix(cq: ConsumeQueue) -> None:
    cq.put(50_000, REC, 7, 105)
    cq.put(50_100, REC, 8, 106)
    assert cq.truncate_dirty(50_000) == 2
    assert cq.max_offset == 105 and cq.min_offset == 105
    assert cq.max_physic_offset == -1
    assert cq.put(50_000, REC, 7, 105) is True


def test_correct_min_offset(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 150)
    cq.correct_min_offset(0)
    assert cq.min_offset == 0
    cq.correct_min_offset(42 * REC)
    assert cq.min_offset == 42
    assert cq.entries_from(41) is None
    assert cq.entry(42) == (42 * REC, REC, 1042)
    cq.correct_min_offset(42 * REC + 1)  # the first record still there is the next one
    assert cq.min_offset == 43
    cq.correct_min_offset(PER_FILE * REC)  # the whole first file is gone
    assert cq.min_offset == PER_FILE


def test_destroy(cq: ConsumeQueue) -> None:
    put_range(cq, 0, 150)
    cq.destroy()
    assert cq.files.files == [] and cq.max_offset == 0 and cq.max_physic_offset == -1
    assert list(cq.files.directory.iterdir()) == []


def test_load_rejects_wrong_file_size(root: Path) -> None:
    directory = root / "TopicTest" / "3"
    directory.mkdir(parents=True)
    (directory / file_name(0)).write_bytes(bytes(FILE_SIZE + ENTRY_SIZE))
    q = ConsumeQueue(root, "TopicTest", 3, FILE_SIZE)
    with pytest.raises(StoreFormatError):
        q.load()
