"""MappedFileQueue: contiguous segments of one directory as one byte stream."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bolide.errors import StoreFormatError
from bolide.store.mapped_file import PAGE_SIZE, MappedFile, file_name
from bolide.store.mapped_file_queue import MappedFileQueue, SegmentAllocator

SIZE = 16 * 1024  # four pages


def make_files(directory: Path, starts: list[int], size: int = SIZE, fill: int = 1) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for start in starts:
        (directory / file_name(start)).write_bytes(bytes([fill]) * size)


@pytest.fixture
def queue(tmp_path: Path):  # type: ignore[no-untyped-def]
    q = MappedFileQueue(tmp_path / "segments", SIZE)
    yield q
    q.close()


def test_load_missing_directory_is_empty(queue: MappedFileQueue) -> None:
    queue.load()
    assert queue.files == [] and queue.min_offset == 0 and queue.max_offset == 0
    assert queue.find(0) is None and queue.last_file() is None


def test_load_sorts_and_counts_files_as_written(queue: MappedFileQueue) -> None:
    make_files(queue.directory, [2 * SIZE, SIZE, 3 * SIZE])
    (queue.directory / "notes.txt").write_text("ignored")
    (queue.directory / "00000000000000099999.tmp").write_text("ignored")
    queue.load()
    assert [mf.file_from_offset for mf in queue.files] == [SIZE, 2 * SIZE, 3 * SIZE]
    assert all(mf.wrote_position == mf.flushed_position == SIZE for mf in queue.files)
    assert queue.min_offset == SIZE
    assert queue.max_offset == 4 * SIZE


def test_load_rejects_non_contiguous_segments(queue: MappedFileQueue) -> None:
    make_files(queue.directory, [0, 2 * SIZE])
    with pytest.raises(StoreFormatError) as info:
        queue.load()
    assert "contiguous" in str(info.value) and file_name(2 * SIZE) in str(info.value)


def test_load_rejects_misaligned_segment(queue: MappedFileQueue) -> None:
    make_files(queue.directory, [100])
    with pytest.raises(StoreFormatError, match="aligned"):
        queue.load()


def test_load_rejects_wrong_sized_segment(queue: MappedFileQueue) -> None:
    make_files(queue.directory, [0])
    make_files(queue.directory, [SIZE], size=SIZE // 2)
    with pytest.raises(StoreFormatError, match="segments here are"):
        queue.load()


def test_load_removes_an_empty_trailing_segment(queue: MappedFileQueue) -> None:
    make_files(queue.directory, [0])
    (queue.directory / file_name(SIZE)).write_bytes(b"")
    queue.load()
    assert len(queue.files) == 1
    assert not (queue.directory / file_name(SIZE)).exists()


def test_find_by_offset(queue: MappedFileQueue) -> None:
    for start in (0, SIZE, 2 * SIZE):
        queue.new_file(start)
    assert queue.find(0) is queue.files[0]
    assert queue.find(SIZE - 1) is queue.files[0]
    assert queue.find(SIZE) is queue.files[1]
    assert queue.find(3 * SIZE - 1) is queue.files[2]
    assert queue.find(3 * SIZE) is None
    assert queue.find(-1) is None
    deleted = queue.delete_first()
    assert deleted is not None and not deleted.path.exists()
    assert queue.find(0) is None and queue.find(SIZE - 1) is None
    assert queue.find(SIZE) is queue.files[0]
    assert queue.min_offset == SIZE


def test_delete_first_keeps_the_last_file(queue: MappedFileQueue) -> None:
    queue.new_file(0)
    assert queue.delete_first() is None
    assert len(queue.files) == 1


def test_new_file_names_and_sizes(queue: MappedFileQueue) -> None:
    mf = queue.new_file(5 * SIZE)
    assert mf.path == queue.directory / "00000000000000081920"
    assert mf.path.stat().st_size == SIZE
    assert queue.last_file() is mf
    assert queue.max_offset == 5 * SIZE  # nothing written yet
    mf.wrote_position = 10
    assert queue.max_offset == 5 * SIZE + 10


def _write(mf: MappedFile, end: int) -> None:
    mf.view[mf.wrote_position : end] = b"\x05" * (end - mf.wrote_position)
    mf.wrote_position = end


def test_truncate_dirty_zeroes_the_tail_and_deletes_later_segments(queue: MappedFileQueue) -> None:
    for start in (0, SIZE, 2 * SIZE):
        _write(queue.new_file(start), SIZE)
    queue.flush()
    later = queue.files[2].path
    cut = SIZE + 1000
    removed = queue.truncate_dirty(cut)
    assert not later.exists()
    assert [mf.file_from_offset for mf in queue.files] == [0, SIZE]
    mf = queue.files[1]
    assert mf.wrote_position == mf.flushed_position == 1000
    assert bytes(mf.view[:1000]) == b"\x05" * 1000
    assert bytes(mf.view[1000:]) == bytes(SIZE - 1000)
    assert queue.files[0].wrote_position == SIZE
    assert bytes(queue.files[0].view) == b"\x05" * SIZE
    assert queue.max_offset == cut
    assert queue.flushed_where == cut
    assert (str(mf.path), cut, 2 * SIZE) in removed
    assert (str(later), 2 * SIZE, 3 * SIZE) in removed
    assert len(removed) == 2
    assert (queue.directory / file_name(SIZE)).read_bytes()[1000:] == bytes(SIZE - 1000)


def test_truncate_dirty_at_a_segment_boundary_keeps_an_empty_segment(queue: MappedFileQueue) -> None:
    _write(queue.new_file(0), SIZE)
    _write(queue.new_file(SIZE), 100)
    removed = queue.truncate_dirty(SIZE)
    assert [mf.file_from_offset for mf in queue.files] == [0, SIZE]
    assert queue.files[1].wrote_position == 0
    assert queue.files[0].wrote_position == SIZE
    assert removed == [(str(queue.files[1].path), SIZE, 2 * SIZE)]


def test_truncate_dirty_ignores_clean_preallocated_segments(queue: MappedFileQueue) -> None:
    _write(queue.new_file(0), 500)
    spare = queue.new_file(SIZE)
    removed = queue.truncate_dirty(500)
    assert removed == []  # zeros past the end and an all-zero spare are not data
    assert not spare.path.exists()
    assert queue.max_offset == 500


def test_flush_least_pages(queue: MappedFileQueue) -> None:
    big = MappedFileQueue(queue.directory.parent / "big", 16 * PAGE_SIZE)
    try:
        mf = big.new_file(0)
        mf.wrote_position = 3 * PAGE_SIZE + 100
        assert big.flush(least_pages=4) is False
        assert mf.flushed_position == 0 and big.flushed_where == 0
        mf.wrote_position = 4 * PAGE_SIZE
        assert big.flush(least_pages=4) is True
        assert mf.flushed_position == 4 * PAGE_SIZE and big.flushed_where == 4 * PAGE_SIZE
        mf.wrote_position = 7 * PAGE_SIZE + 4000  # 3 new whole pages
        assert big.flush(least_pages=4) is False
        assert big.flushed_where == 4 * PAGE_SIZE
        assert big.flush(least_pages=0) is True
        assert big.flushed_where == 7 * PAGE_SIZE + 4000
        assert big.flush(least_pages=0) is False  # nothing new
        # a full segment is always flushed, even with few dirty pages
        mf.wrote_position = 16 * PAGE_SIZE
        nxt = big.new_file(16 * PAGE_SIZE)
        nxt.wrote_position = 100
        assert big.flush(least_pages=8) is True
        assert mf.flushed_position == 16 * PAGE_SIZE
        assert nxt.flushed_position == 0  # too few pages in the active segment
        assert big.flushed_where == 16 * PAGE_SIZE
        assert big.flush(least_pages=0) is True
        assert nxt.flushed_position == 100 and big.flushed_where == 16 * PAGE_SIZE + 100
    finally:
        big.close()


def test_flush_crosses_several_full_segments(queue: MappedFileQueue) -> None:
    for start in (0, SIZE, 2 * SIZE):
        queue.new_file(start).wrote_position = SIZE
    last = queue.new_file(3 * SIZE)
    last.wrote_position = 10
    assert queue.flush() is True
    assert [mf.flushed_position for mf in queue.files] == [SIZE, SIZE, SIZE, 10]
    assert queue.flushed_where == 3 * SIZE + 10


def test_flush_of_a_queue_not_starting_at_zero(queue: MappedFileQueue) -> None:
    mf = queue.new_file(4 * SIZE)
    mf.wrote_position = 20
    assert queue.flush() is True
    assert queue.flushed_where == 4 * SIZE + 20


def test_allocator_prepares_the_next_segment(tmp_path: Path) -> None:
    allocator = SegmentAllocator()
    q = MappedFileQueue(tmp_path / "cl", SIZE, allocator)
    try:
        first = q.new_file(0)
        assert first.path.stat().st_size == SIZE
        second = q.new_file(SIZE)  # taken from the background allocation (or made now)
        assert second.file_from_offset == SIZE and second.path.stat().st_size == SIZE
        assert [mf.file_from_offset for mf in q.files] == [0, SIZE]
    finally:
        allocator.close()
        q.close()
    assert (tmp_path / "cl" / file_name(2 * SIZE)).stat().st_size == SIZE


def test_failed_load_leaves_nothing_open(queue: MappedFileQueue) -> None:
    make_files(queue.directory, [0, SIZE, 3 * SIZE])
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(StoreFormatError):
        queue.load()
    assert len(os.listdir("/proc/self/fd")) == before
    assert queue.files == []


def _wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


@pytest.mark.parametrize("prefault", [True, False])
def test_allocator_prefaults_the_segments_it_hands_out(tmp_path: Path, prefault: bool) -> None:
    """With ``prefault`` the pages of each segment come into the page cache ahead of the
    writer: of a segment made in the foreground from the start, of a prepared one too."""
    allocator = SegmentAllocator(prefault)
    q = MappedFileQueue(tmp_path / "cl", SIZE, allocator)
    try:
        first = q.new_file(0)
        second = q.new_file(SIZE)
        if prefault:
            _wait_for(lambda: first.prefaulted_to == second.prefaulted_to == SIZE)
        else:
            assert first.prefaulted_to == second.prefaulted_to == 0
    finally:
        allocator.close()
        q.close()


def test_prefault_covers_from_a_page_to_the_end_and_stops_once_closed(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), 3 * PAGE_SIZE + 100)
    try:
        assert mf.prefault(PAGE_SIZE + 10) == 2 * PAGE_SIZE + 100
        assert mf.prefaulted_to == mf.file_size
    finally:
        mf.close()
    assert mf.prefault() == 0


def test_prefault_ahead_follows_the_writer_by_a_window(tmp_path: Path) -> None:
    """Pages come in up to a window past the write position, not beyond, and further as the
    writer moves; the thread ends once the file is covered or closed."""
    mf = MappedFile.create(tmp_path / file_name(0), 64 * PAGE_SIZE)
    window = 8 * PAGE_SIZE
    follower = threading.Thread(target=mf.prefault_ahead, args=(window, 0.001))
    follower.start()
    try:
        _wait_for(lambda: mf.prefaulted_to == window)
        assert mf.prefaulted_to == window  # nothing past the window while the writer stays
        mf.wrote_position = 40 * PAGE_SIZE + 7
        _wait_for(lambda: mf.prefaulted_to >= 48 * PAGE_SIZE)
        assert mf.prefaulted_to <= 48 * PAGE_SIZE + 7
        mf.wrote_position = 60 * PAGE_SIZE
        follower.join(15)
        assert not follower.is_alive() and mf.prefaulted_to == mf.file_size
    finally:
        mf.close()
    reopened = MappedFile.open(tmp_path / file_name(0), 64 * PAGE_SIZE)
    follower = threading.Thread(target=reopened.prefault_ahead, args=(window, 0.001))
    follower.start()
    _wait_for(lambda: reopened.prefaulted_to > 0)
    reopened.close()  # the follower stops with the file
    follower.join(15)
    assert not follower.is_alive() and reopened.prefaulted_to == window
