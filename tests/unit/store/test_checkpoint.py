"""checkpoint (4096 bytes of big-endian i64s) and the lock and abort files (spec 5)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from bolide.errors import StoreLockedError
from bolide.store.checkpoint import (
    CHECKPOINT_SIZE,
    Checkpoint,
    StoreLock,
    abort_file_exists,
    create_abort_file,
    delete_abort_file,
    is_locked_by_other_process,
)

TRY_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
except OSError:
    sys.exit(3)
sys.exit(0)
"""

HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
print("locked", flush=True)
sys.stdin.read()
"""


def test_new_checkpoint_is_4096_zero_bytes(tmp_path: Path) -> None:
    cp = Checkpoint(tmp_path / "checkpoint")
    try:
        assert (tmp_path / "checkpoint").stat().st_size == CHECKPOINT_SIZE == 4096
        assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (0, 0, 0)
        assert (cp.master_flushed_offset, cp.confirm_phy_offset) == (0, 0)
        assert cp.min_timestamp == 0
    finally:
        cp.close()
    assert (tmp_path / "checkpoint").read_bytes() == bytes(4096)


def test_fields_are_big_endian_at_0_8_16_24_32(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    cp = Checkpoint(path)
    cp.physic_msg_timestamp = 1700000000123
    cp.logics_msg_timestamp = 1700000000456
    cp.index_msg_timestamp = 1700000000789
    cp.master_flushed_offset = 0x0102030405060708
    cp.confirm_phy_offset = -2
    cp.flush()
    data = path.read_bytes()
    assert len(data) == 4096
    assert struct.unpack_from(">q", data, 0)[0] == 1700000000123
    assert struct.unpack_from(">q", data, 8)[0] == 1700000000456
    assert struct.unpack_from(">q", data, 16)[0] == 1700000000789
    assert data[24:32] == bytes.fromhex("0102030405060708")
    assert data[32:40] == b"\xff" * 7 + b"\xfe"
    assert data[40:] == bytes(4096 - 40)
    cp.close()
    again = Checkpoint(path)
    try:
        assert again.physic_msg_timestamp == 1700000000123
        assert again.logics_msg_timestamp == 1700000000456
        assert again.index_msg_timestamp == 1700000000789
        assert again.master_flushed_offset == 0x0102030405060708
        assert again.confirm_phy_offset == -2
    finally:
        again.close()


def test_reads_a_file_written_by_java(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(struct.pack(">qqq", 50_000, 40_000, 30_000) + bytes(4096 - 24))
    cp = Checkpoint(path)
    try:
        assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (
            50_000, 40_000, 30_000)
    finally:
        cp.close()


def test_short_file_is_extended_to_4096(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(struct.pack(">q", 99))
    cp = Checkpoint(path)
    try:
        assert path.stat().st_size == 4096 and cp.physic_msg_timestamp == 99
    finally:
        cp.close()


@pytest.mark.parametrize(
    ("physic", "logics", "index", "minimum", "minimum_index"),
    [
        (10_000, 20_000, 50_000, 7_000, 7_000),
        (20_000, 10_000, 5_000, 7_000, 5_000),
        (2_000, 20_000, 0, 0, 0),  # never negative
        (0, 0, 0, 0, 0),
        (3_000, 3_000, 9_000, 0, 0),
    ],
)
def test_min_timestamp_rule(tmp_path: Path, physic: int, logics: int, index: int, minimum: int,
                            minimum_index: int) -> None:
    cp = Checkpoint(tmp_path / "checkpoint")
    try:
        cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = physic, logics, index
        assert cp.min_timestamp == minimum
        assert cp.min_timestamp_index == minimum_index
    finally:
        cp.close()


def test_abort_file(tmp_path: Path) -> None:
    assert not abort_file_exists(tmp_path)
    create_abort_file(tmp_path)
    assert abort_file_exists(tmp_path) and (tmp_path / "abort").read_bytes() == b""
    create_abort_file(tmp_path)  # create-if-absent
    delete_abort_file(tmp_path)
    assert not abort_file_exists(tmp_path)
    delete_abort_file(tmp_path)  # already gone


def test_lock_file_content_and_second_acquire_in_process(tmp_path: Path) -> None:
    first = StoreLock(tmp_path)
    first.acquire()
    try:
        assert (tmp_path / "lock").read_bytes() == b"lock"
        second = StoreLock(tmp_path)
        with pytest.raises(StoreLockedError, match="already open in this process"):
            second.acquire()
        with pytest.raises(StoreLockedError):
            first.acquire()
        assert not is_locked_by_other_process(tmp_path)  # it is ours
    finally:
        first.release()
    again = StoreLock(tmp_path)
    again.acquire()  # free again after release
    again.release()
    again.release()  # idempotent


def _try_lock(path: Path) -> int:
    return subprocess.run([sys.executable, "-c", TRY_LOCK, str(path)], timeout=30).returncode


def test_other_process_cannot_lock_while_held(tmp_path: Path) -> None:
    lock = StoreLock(tmp_path)
    lock.acquire()
    try:
        assert _try_lock(tmp_path / "lock") == 3
    finally:
        lock.release()
    assert _try_lock(tmp_path / "lock") == 0


def test_lock_held_by_another_process(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path / "lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert is_locked_by_other_process(tmp_path)
        with pytest.raises(StoreLockedError, match="another running process"):
            StoreLock(tmp_path).acquire()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        assert holder.stdout is not None
        holder.stdout.close()
    assert not is_locked_by_other_process(tmp_path)
    lock = StoreLock(tmp_path)
    lock.acquire()  # the failed attempt above did not leave anything behind
    lock.release()


def test_no_lock_file_means_unlocked(tmp_path: Path) -> None:
    assert not is_locked_by_other_process(tmp_path)
    assert not os.path.exists(tmp_path / "lock")
