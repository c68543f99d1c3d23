"""MappedFile: one fixed-size segment file named by its start offset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bolide.errors import StoreFormatError
from bolide.store import mapped_file
from bolide.store.mapped_file import MappedFile, file_name

SIZE = 16 * 1024


def test_file_name_is_20_digit_offset() -> None:
    assert file_name(0) == "00000000000000000000"
    assert file_name(1073741824) == "00000000001073741824"
    assert file_name(2147483648) == "00000000002147483648"
    assert len(file_name(10**19)) == 20


def test_create_makes_a_zeroed_file_of_exact_size(tmp_path: Path) -> None:
    path = tmp_path / file_name(3 * SIZE)
    mf = MappedFile.create(path, SIZE)
    try:
        assert path.stat().st_size == SIZE
        assert mf.file_from_offset == 3 * SIZE
        assert mf.file_size == SIZE
        assert (mf.wrote_position, mf.flushed_position) == (0, 0)
        assert mf.end_offset == 3 * SIZE
        assert not mf.is_full
        assert bytes(mf.view) == bytes(SIZE)
    finally:
        mf.close()


def test_writes_through_the_view_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, SIZE)
    mf.view[100:105] = b"hello"
    mf.wrote_position = 105
    assert mf.flush() == 105
    assert mf.flushed_position == 105
    assert mf.end_offset == 105
    mf.close()
    assert path.read_bytes()[100:105] == b"hello"
    reopened = MappedFile.open(path, SIZE)
    try:
        assert bytes(reopened.view[100:105]) == b"hello"
        assert reopened.wrote_position == 0  # the caller decides how much is valid
    finally:
        reopened.close()


def test_is_full(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), SIZE)
    try:
        mf.wrote_position = SIZE - 1
        assert not mf.is_full
        mf.wrote_position = SIZE
        assert mf.is_full
        assert mf.end_offset == SIZE
    finally:
        mf.close()


def test_create_reuses_a_file_of_the_same_size(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    path.write_bytes(b"\x07" * SIZE)
    mf = MappedFile.create(path, SIZE)
    try:
        assert mf.view[0] == 7 and path.stat().st_size == SIZE
    finally:
        mf.close()


def test_open_with_wrong_size_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    path.write_bytes(bytes(SIZE))
    with pytest.raises(StoreFormatError) as info:
        MappedFile.open(path, 2 * SIZE)
    message = str(info.value)
    assert str(SIZE) in message and str(2 * SIZE) in message
    assert "mappedFileSizeCommitLog" in message and "mappedFileSizeConsumeQueue" in message
    assert path.stat().st_size == SIZE  # left untouched


def test_create_over_a_file_of_another_size_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    path.write_bytes(bytes(100))
    with pytest.raises(StoreFormatError, match="remove it or set the segment size"):
        MappedFile.create(path, SIZE)
    assert path.stat().st_size == 100


def test_zero_from(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), SIZE)
    try:
        mf.view[:] = b"\xab" * SIZE
        assert mf.zero_from(1000) > 0
        assert bytes(mf.view[:1000]) == b"\xab" * 1000
        assert bytes(mf.view[1000:]) == bytes(SIZE - 1000)
        assert mf.zero_from(1000) == 0  # nothing left to clear
        assert mf.zero_from(SIZE) == 0
    finally:
        mf.close()


def test_zero_from_spans_large_files(tmp_path: Path) -> None:
    size = (1 << 20) * 2 + 4096  # more than one internal chunk
    mf = MappedFile.create(tmp_path / file_name(0), size)
    try:
        mf.view[size - 1] = 1
        mf.view[10] = 1
        assert mf.zero_from(11) > 0
        assert mf.view[size - 1] == 0 and mf.view[10] == 1
    finally:
        mf.close()


def test_close_is_idempotent_and_survives_held_views(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), SIZE)
    mf.view[0:3] = b"abc"
    held = mf.view[0:3]
    mf.close()
    mf.close()
    assert mf.fd == -1
    assert bytes(held) == b"abc"  # a reader's slice stays valid
    del held


def test_destroy_deletes_the_file(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, SIZE)
    mf.destroy()
    assert not path.exists()
    mf.destroy()  # already gone: no error


def test_create_closes_its_descriptor_on_format_error(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    path.write_bytes(bytes(10))
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        with pytest.raises(StoreFormatError):
            MappedFile.create(path, SIZE)
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.skipif(mapped_file.populate_write is None, reason="the compiled module")
def test_prefault_maps_pages_for_writing_without_changing_them(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), 1 << 20)
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
        populated = mapped_file.populate_write(mf.view, 4096 + 17, 64 * 1024)
        assert populated is ((major, minor) >= (5, 14))  # MADV_POPULATE_WRITE is Linux 5.14+
        assert mf.prefault(0, 512 * 1024, populate=True) == 512 * 1024
        assert mf.prefaulted_to == 512 * 1024
        assert bytes(mf.view[: 1 << 20]) == bytes(1 << 20)
        mf.view[5000:5003] = b"abc"
        mf.wrote_position = 5003
        mf.flush()
    finally:
        mf.close()
    assert (tmp_path / file_name(0)).read_bytes()[4999:5004] == b"\x00abc\x00"
    assert not mapped_file.populate_write(memoryview(bytearray(8192)), 9000, 10)  # outside


def test_prefault_stops_when_the_mapping_is_released_under_it(tmp_path: Path) -> None:
    """A segment closed while its prefault thread runs: the thread stops, it does not fail."""
    mf = MappedFile.create(tmp_path / file_name(0), 1 << 20)
    try:
        mf.view.release()  # what close() does first, between two steps of the thread
        covered = mf.prefault(populate=True)
        assert covered == (0 if mapped_file.populate_write is not None else 1 << 20)
    finally:
        mf.close()


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_segments_are_populated_ahead_only_under_async_flush(tmp_path: Path, flush: str) -> None:
    """Populated pages are dirty: a group commit would write them as zeros before the data."""
    from bolide.store import MessageStore, StoreConfig

    cfg = StoreConfig(store_path_root_dir=str(tmp_path), flush_disk_type=flush)
    with MessageStore(cfg) as store:
        assert store._allocator is not None
        assert store._allocator.populate is (flush == "ASYNC_FLUSH")
