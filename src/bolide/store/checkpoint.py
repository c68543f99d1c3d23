"""The ``checkpoint``, ``abort`` and ``lock`` files at the store root."""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import threading
from pathlib import Path

from bolide.common.config_persist import sync_dir
from bolide.errors import StoreLockedError

CHECKPOINT_SIZE = 4096
_FIELDS = struct.Struct(">qqqqq")


class Checkpoint:
    """4096-byte file of big-endian i64 timestamps and offsets (StoreCheckpoint)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < CHECKPOINT_SIZE:
                os.ftruncate(fd, CHECKPOINT_SIZE)
            self._mm = mmap.mmap(fd, CHECKPOINT_SIZE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd  # flushed with fdatasync, which releases the GIL (mmap.flush keeps it)
        (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
         self.master_flushed_offset, self.confirm_phy_offset) = _FIELDS.unpack_from(self._mm, 0)

    @property
    def min_timestamp(self) -> int:
        """Store time before which everything is known to be durable and dispatched."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    @property
    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp, self.index_msg_timestamp)

    def _write(self) -> None:
        _FIELDS.pack_into(self._mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                          self.index_msg_timestamp, self.master_flushed_offset,
                          self.confirm_phy_offset)

    def flush(self) -> None:
        """Write every field and make the file durable."""
        self._write()
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Write every field (durable only after :meth:`flush`) and close the file."""
        if self._fd < 0:
            return
        self._write()
        self._mm.close()
        os.close(self._fd)
        self._fd = -1


def abort_file_exists(root: Path) -> bool:
    return (root / "abort").exists()


def create_abort_file(root: Path) -> None:
    """Mark the store as running; present at the next open means the last exit was unclean."""
    fd = os.open(root / "abort", os.O_WRONLY | os.O_CREAT, 0o644)
    os.fsync(fd)
    os.close(fd)
    sync_dir(root)


def delete_abort_file(root: Path) -> None:
    try:
        (root / "abort").unlink()
    except FileNotFoundError:
        return
    sync_dir(root)


_HELD: set[str] = set()
_HELD_LOCK = threading.Lock()


class StoreLock:
    """Exclusive lock on byte 0 of ``lock`` (fcntl, as Java's FileChannel.lock takes it).

    POSIX locks do not exclude the same process, so locks held here are also tracked in
    a process-wide set.
    """

    def __init__(self, root: Path) -> None:
        self.path = root / "lock"
        self._key = str(self.path.resolve())
        self._fd = -1

    def acquire(self) -> None:
        with _HELD_LOCK:
            if self._key in _HELD:
                raise StoreLockedError(
                    f"the store at {self.path.parent} is already open in this process; "
                    "close it first or use another storePathRootDir"
                )
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                os.close(fd)
                raise StoreLockedError(
                    f"the store at {self.path.parent} is locked by another running process "
                    "(a broker?); stop it first or use another storePathRootDir"
                ) from None
            os.pwrite(fd, b"lock", 0)
            os.fsync(fd)
            self._fd = fd
            _HELD.add(self._key)

    def release(self) -> None:
        if self._fd < 0:
            return
        with _HELD_LOCK:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
            os.close(self._fd)
            self._fd = -1
            _HELD.discard(self._key)


def is_locked_by_other_process(root: Path) -> bool:
    """True when another process holds the store's lock (for offline tools)."""
    path = root / "lock"
    if not path.exists():
        return False
    with _HELD_LOCK:
        if str(path.resolve()) in _HELD:
            return False  # ours; opening and closing it here would drop the lock
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        return False
    finally:
        os.close(fd)
