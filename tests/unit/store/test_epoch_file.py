"""The epoch file (epochFileCheckpoint): RocketMQ 5.3.3's CheckpointFile bytes both ways, and
EpochFileCache's entry rules and findConsistentPoint."""

from __future__ import annotations

import zlib
from itertools import pairwise
from pathlib import Path

import pytest

from bolide.store.epoch_file import (
    MAX_OFFSET,
    EpochEntry,
    EpochFile,
    EpochFileError,
    decode,
    encode,
    find_consistent_point,
)

# CheckpointFile's javadoc example (RocketMQ 5.3.3, common/utils/CheckpointFile.java)
ROCKETMQ_EXAMPLE = b"2\n773307083\n7-7000\n8-8000\n"


def test_encode_matches_checkpoint_file_write() -> None:
    data = encode([EpochEntry(7, 7000), EpochEntry(8, 8000)])
    assert data == ROCKETMQ_EXAMPLE
    assert zlib.crc32(b"7-7000\n8-8000\n") & 0x7FFFFFFF == 773307083


def test_decode_links_end_offsets() -> None:
    entries = decode(ROCKETMQ_EXAMPLE)
    assert entries == [EpochEntry(7, 7000, 8000), EpochEntry(8, 8000, MAX_OFFSET)]


def test_decode_zero_crc_is_not_checked_and_bad_ones_are_refused() -> None:
    assert len(decode(b"1\n0\n3-100\n")) == 1
    with pytest.raises(EpochFileError, match="crc"):
        decode(b"1\n12345\n3-100\n")
    with pytest.raises(EpochFileError, match="says 2 entries"):
        decode(b"2\n0\n3-100\n")
    with pytest.raises(EpochFileError, match="count and a crc"):
        decode(b"")


def test_file_append_writes_bak_of_previous_content(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    f.load()
    assert f.last_epoch == -1 and len(f) == 0
    assert f.append(1, 0)
    assert f.append(2, 500)
    assert not f.append(2, 900)  # not a newer epoch
    assert not f.append(3, 500)  # not a later offset
    assert (tmp_path / "epochFileCheckpoint").read_bytes() == encode(
        [EpochEntry(1, 0), EpochEntry(2, 500)])
    assert (tmp_path / "epochFileCheckpoint.bak").read_bytes() == encode([EpochEntry(1, 0)])
    again = EpochFile.in_store(tmp_path)
    assert again.entries() == [EpochEntry(1, 0, 500), EpochEntry(2, 500)]
    assert again.find_by_offset(499) == EpochEntry(1, 0, 500)
    assert again.find_by_offset(10**12) == EpochEntry(2, 500)
    assert again.next_entry(1) == EpochEntry(2, 500)
    assert again.next_entry(2) is None


def test_damaged_file_falls_back_to_bak(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    f.append(1, 0)
    f.append(2, 100)
    (tmp_path / "epochFileCheckpoint").write_bytes(b"2\n1\n1-0\n2-100\n")  # wrong crc
    again = EpochFile.in_store(tmp_path)
    assert again.entries() == [EpochEntry(1, 0)]  # the .bak: the state before the last write
    (tmp_path / "epochFileCheckpoint.bak").write_bytes(b"junk")
    with pytest.raises(EpochFileError, match="move them away"):
        EpochFile.in_store(tmp_path)


def test_truncation(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    for epoch, start in ((1, 0), (2, 100), (3, 200), (4, 300)):
        f.append(epoch, start)
    f.truncate_suffix_by_offset(200)
    assert f.entries() == [EpochEntry(1, 0, 100), EpochEntry(2, 100)]
    f.append(5, 250)
    f.truncate_suffix_by_epoch(5)
    assert f.last_epoch == 2
    f.truncate_prefix_by_offset(100)
    assert f.entries() == [EpochEntry(2, 100)]
    assert EpochFile.in_store(tmp_path).entries() == [EpochEntry(2, 100)]
    f.truncate_suffix_by_offset(0)
    assert len(f) == 0
    assert not (tmp_path / "epochFileCheckpoint").exists()  # RocketMQ reads no file as none
    assert len(EpochFile.in_store(tmp_path)) == 0


def _closed(entries: list[tuple[int, int]], end: int) -> list[EpochEntry]:
    f = [EpochEntry(e, s) for e, s in entries]
    for a, b in pairwise(f):
        a.end_offset = b.start_offset
    f[-1].end_offset = end
    return f


# EpochFileCacheTest (5.3.3) cases
def test_consistent_point_same_epochs_diverging_tail() -> None:
    master = _closed([(1, 100), (2, 300), (3, 500)], 700)
    slave = _closed([(1, 100), (2, 300)], 500)  # the slave got epoch 2 up to 500
    assert find_consistent_point(slave, master) == 500


def test_consistent_point_other_start_of_the_last_epoch() -> None:
    # the old master wrote epoch 3 from 500 to 800; the new master has epoch 3 from 500 too
    # but only up to 700, then epoch 4
    master = _closed([(1, 100), (2, 300), (3, 500), (4, 700)], 900)
    old = _closed([(1, 100), (2, 300), (3, 500)], 800)
    assert find_consistent_point(old, master) == 700
    # an epoch that started elsewhere does not count: the one before it decides
    other = _closed([(1, 100), (2, 300), (3, 550)], 800)
    assert find_consistent_point(other, master) == 500


def test_consistent_point_none() -> None:
    assert find_consistent_point(_closed([(5, 0)], 10), _closed([(6, 0)], 10)) == -1
