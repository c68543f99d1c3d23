"""One fixed-size memory-mapped segment file, named by the global offset of its first byte."""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import time
from pathlib import Path

from bolide.errors import StoreFormatError
from bolide.store.compiled import load

_append = load("_append")  # without it pages are faulted in by the writes; flushes fdatasync
populate_write = getattr(_append, "populate_write", None)
sync_range = getattr(_append, "sync_range", None)

PAGE_SIZE = 4096
PREFAULT_CHUNK = 4 << 20  # bytes per POSIX_FADV_WILLNEED call of MappedFile.prefault
PREFAULT_WINDOW = 64 << 20  # how far MappedFile.prefault_ahead stays ahead of the writer
_ZERO_CHUNK = bytes(1 << 20)


def file_name(offset: int) -> str:
    """RocketMQ's segment name: the start offset, zero-padded to 20 digits."""
    return f"{offset:020d}"


class MappedFile:
    """A segment: its mapping, how far it is written and how far it is durable.

    Positions are relative to the file. Writes go through :attr:`view` (the mapping);
    durability comes from ``msync`` of the written range or ``fdatasync``, both releasing the
    GIL.
    """

    __slots__ = ("fd", "file_from_offset", "file_size", "flushed_position", "mm", "path",
                 "prefaulted_to", "view", "wrote_position")

    def __init__(self, path: Path, file_size: int, fd: int) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        self.fd = fd
        self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = memoryview(self.mm)
        self.wrote_position = 0
        self.flushed_position = 0
        self.prefaulted_to = 0  # how far :meth:`prefault` got

    @classmethod
    def create(cls, path: Path, file_size: int) -> MappedFile:
        """Create (or reuse an all-allocated) file of exactly ``file_size`` bytes.

        Space is reserved with ``posix_fallocate`` so a full disk fails here with
        ``OSError(ENOSPC)`` instead of a SIGBUS in the middle of a write.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, file_size):
                raise StoreFormatError(
                    f"{path} exists with {size} bytes, expected {file_size}; remove it or set "
                    "the segment size it was written with"
                )
            os.posix_fallocate(fd, 0, file_size)
            return cls(path, file_size, fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno == errno.ENOSPC:
                _remove_quietly(path)
            raise
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def open(cls, path: Path, file_size: int) -> MappedFile:
        """Open an existing segment; its length must be exactly ``file_size``."""
        size = path.stat().st_size
        if size != file_size:
            raise StoreFormatError(
                f"{path} has {size} bytes but segments here are {file_size} bytes; "
                "set the segment size the store was written with (mappedFileSizeCommitLog / "
                "mappedFileSizeConsumeQueue), or move the file away"
            )
        fd = os.open(path, os.O_RDWR)
        try:
            return cls(path, file_size, fd)
        except BaseException:
            os.close(fd)
            raise

    def advise(self, advice: int) -> None:
        """``madvise`` the whole mapping (``mmap.MADV_NORMAL`` read-ahead, ``MADV_RANDOM`` none);
        a segment unmapped meanwhile, or a kernel refusing the advice, is left as it is."""
        with contextlib.suppress(ValueError, OSError):
            self.mm.madvise(advice)

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def end_offset(self) -> int:
        """Global offset just past the written bytes."""
        return self.file_from_offset + self.wrote_position

    def flush(self) -> int:
        """Make everything written so far durable; returns the new flushed position.

        Only the pages written since the last flush are synced (``msync`` of that range, the
        GIL released, through the compiled module; else ``fdatasync`` of the file): pages
        mapped for writing ahead of the writer stay dirty until they hold data, instead of
        being written as zeros and faulted in again."""
        target = self.wrote_position
        start = self.flushed_position
        if target > start:
            synced = False
            if sync_range is not None:
                try:
                    sync_range(self.view, start, target - start)
                    synced = True
                except (TypeError, ValueError):  # the mapping is closed: fdatasync says so
                    pass
            if not synced:
                os.fdatasync(self.fd)
            self.flushed_position = target
        return target

    def prefault(self, start: int = 0, end: int | None = None, populate: bool = False) -> int:
        """Bring the file's pages from ``start`` to ``end`` (default: its end) into the page
        cache (``POSIX_FADV_WILLNEED`` in 4 MiB steps, each releasing the GIL), so that the
        writer's first touch of a page is a cheap minor fault: a fresh page of a new file can
        otherwise hold the writer, and the GIL with it, for tens of milliseconds on some VMs
        and filesystems. With ``populate`` the pages are also mapped for writing
        (``MADV_POPULATE_WRITE`` through the compiled module, without the GIL): no fault at
        all, which batched puts gain a third of their speed from, but the pages are dirty at
        once, so a flush may write them as zeros before the writer fills them (only worth it
        when flushes are far apart: ASYNC_FLUSH). Stops early once the file is closed;
        returns the bytes covered."""
        stop = self.file_size if end is None else min(end, self.file_size)
        if self.fd < 0:
            return 0
        try:
            fd = os.dup(self.fd)  # the file stays open for this loop even if closed meanwhile
        except OSError:
            return 0
        pos = begin = max(0, start - start % PAGE_SIZE)
        try:
            while pos < stop and self.fd >= 0:
                step = min(PREFAULT_CHUNK, stop - pos)
                os.posix_fadvise(fd, pos, step, os.POSIX_FADV_WILLNEED)
                if populate and populate_write is not None:
                    try:
                        populate_write(self.view, pos, step)
                    except (TypeError, ValueError):  # the mapping was released meanwhile
                        break
                pos += step
                self.prefaulted_to = max(self.prefaulted_to, pos)
        except OSError:
            pass  # a hint only
        finally:
            os.close(fd)
        return pos - begin

    def prefault_ahead(self, window: int = PREFAULT_WINDOW, poll_s: float = 0.02,
                       populate: bool = False) -> None:
        """Keep the pages up to ``window`` bytes past the write position prefaulted (see
        :meth:`prefault`), checking every ``poll_s``, until the whole file is or it is closed:
        the kernel's work is spread over the writing instead of done for the whole file at once."""
        while self.fd >= 0 and self.prefaulted_to < self.file_size:
            written = self.wrote_position
            target = min(self.file_size, written + window)
            if self.prefaulted_to < target:  # written pages are in already (or on disk: not read)
                self.prefault(max(self.prefaulted_to, written), target, populate)
            else:
                time.sleep(poll_s)

    def zero_from(self, position: int) -> int:
        """Zero every non-zero byte from ``position`` to the end; returns bytes cleared."""
        cleared = 0
        pos = position
        mm = self.mm
        while pos < self.file_size:
            end = min(pos + len(_ZERO_CHUNK), self.file_size)
            n = end - pos
            if mm[pos:end] != _ZERO_CHUNK[:n]:
                mm[pos:end] = _ZERO_CHUNK[:n]
                cleared += n
            pos = end
        if cleared:
            os.fdatasync(self.fd)
        return cleared

    def close(self) -> None:
        """Unmap and close. Views still held by readers keep the mapping alive until dropped."""
        if self.fd < 0:
            return
        try:
            self.view.release()
            self.mm.close()
        except BufferError:
            pass  # a reader still holds a slice; the mapping goes when it is collected
        os.close(self.fd)
        self.fd = -1

    def retire(self) -> None:
        """Delete the file and close its descriptor but keep the mapping: readers may still
        hold views of it. :meth:`unmap` frees the pages (and the disk space) later."""
        _remove_quietly(self.path)
        self.close_descriptor()

    def close_descriptor(self) -> None:
        """Close the file descriptor (the mapping stays); for a file already unlinked, whose
        name a new file may have taken."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def unmap(self) -> bool:
        """Close the mapping; False while views of it are still exported (retry later)."""
        try:
            self.view.release()
            self.mm.close()
        except BufferError:
            return False
        return True

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        _remove_quietly(self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position})"


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
