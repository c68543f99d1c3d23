"""A directory of contiguous fixed-size segments forming one logical byte stream."""

from __future__ import annotations

import contextlib
import logging
import threading
from concurrent.futures import Future
from pathlib import Path

from bolide.errors import StoreFormatError
from bolide.store.mapped_file import PREFAULT_WINDOW, MappedFile, file_name

log = logging.getLogger(__name__)


class SegmentAllocator:
    """Creates the segment after the active one in the background (AllocateMappedFileService)
    and, with ``prefault``, brings the pages of the segments it hands out into the page cache
    ahead of the writer: the first window of a prepared segment at once, the rest following the
    writer (:meth:`MappedFile.prefault_ahead`); with ``populate`` (for ASYNC_FLUSH) they are
    also mapped for writing (see :meth:`MappedFile.prefault`)."""

    def __init__(self, prefault: bool = True, populate: bool = False) -> None:
        self._pending: dict[Path, Future[MappedFile]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.prefault = prefault
        self.populate = prefault and populate

    def take(self, path: Path, size: int, next_path: Path | None) -> MappedFile:
        """Return the file at ``path`` (prepared ahead or made now) and start on ``next_path``."""
        with self._lock:
            fut = self._pending.pop(path, None)
        mf: MappedFile | None = None
        if fut is not None:
            try:
                mf = fut.result()
            except OSError as exc:
                log.warning("preallocating %s failed (%s); retrying in the foreground", path, exc)
        if mf is None:
            mf = MappedFile.create(path, size)
        self.warm(mf)
        if next_path is not None:
            self._start(next_path, size)
        return mf

    def _start(self, path: Path, size: int) -> None:
        with self._lock:
            if self._closed or path in self._pending:
                return
            fut: Future[MappedFile] = Future()
            self._pending[path] = fut

        def run() -> None:
            try:
                mf = MappedFile.create(path, size)
            except BaseException as exc:  # reported to whoever takes the file
                fut.set_exception(exc)
                return
            fut.set_result(mf)  # usable now; its first pages come in ahead of the writer
            if self.prefault:
                mf.prefault(0, PREFAULT_WINDOW, self.populate)

        threading.Thread(target=run, name=f"allocate-{path.name}", daemon=True).start()

    def warm(self, mf: MappedFile) -> None:
        """Keep ``mf`` prefaulted ahead of its writer on a thread of its own (when ``prefault``
        is on); the thread ends once the whole file is, or it is closed."""
        if self.prefault and not self._closed:
            threading.Thread(target=mf.prefault_ahead, name=f"prefault-{mf.path.name}",
                             kwargs={"populate": self.populate}, daemon=True).start()

    def close(self) -> None:
        """Wait for pending allocations and close what nobody took (the files stay on disk)."""
        with self._lock:
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
        for fut in pending:
            with contextlib.suppress(Exception):
                fut.result().close()


class MappedFileQueue:
    """Segments of one directory, sorted by start offset; lookup by global offset."""

    def __init__(self, directory: Path, file_size: int,
                 allocator: SegmentAllocator | None = None, prefault: bool = False) -> None:
        self.directory = directory
        self.file_size = file_size
        self.allocator = allocator
        self.prefault = prefault  # files made here (no allocator): prefaulted when created
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.read_advice: int | None = None  # madvise of every segment (set_read_advice)
        # Held while the list changes: the writer appends, retention drops the head. Readers
        # never lock: they read ``files`` once and use that list.
        self._change = threading.Lock()

    # -- loading ------------------------------------------------------------------------
    def load(self) -> None:
        """Map every segment in the directory; each starts out counted as fully written."""
        if not self.directory.is_dir():
            return
        names = sorted(
            p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit()
        )
        expected = None
        try:
            for path in names:
                if path.stat().st_size == 0 and path == names[-1]:
                    log.warning("removing empty trailing segment %s", path)
                    path.unlink()
                    continue
                mf = MappedFile.open(path, self.file_size)
                if expected is not None and mf.file_from_offset != expected:
                    mf.close()
                    raise StoreFormatError(
                        f"segment {path} starts at {mf.file_from_offset} but the previous one "
                        f"ends at {expected}; segments must be contiguous: restore the missing file"
                    )
                if mf.file_from_offset % self.file_size:
                    mf.close()
                    raise StoreFormatError(
                        f"segment {path} is not aligned to the segment size {self.file_size}"
                    )
                mf.wrote_position = mf.flushed_position = self.file_size
                self.files.append(mf)
                expected = mf.file_from_offset + self.file_size
        except BaseException:
            self.close()  # unmap what was opened before the bad segment
            self.files = []
            raise

    # -- lookup -------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        return self.files[-1].end_offset if self.files else 0

    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding global ``offset``, or None."""
        files = self.files
        if not files:
            return None
        index = offset // self.file_size - files[0].file_from_offset // self.file_size
        if 0 <= index < len(files):
            return files[index]
        return None

    def new_file(self, start_offset: int) -> MappedFile:
        """Create and append the segment starting at ``start_offset`` (may raise OSError)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / file_name(start_offset)
        if self.allocator is not None:
            nxt = self.directory / file_name(start_offset + self.file_size)
            mf = self.allocator.take(path, self.file_size, nxt)
        else:
            mf = MappedFile.create(path, self.file_size)
            if self.prefault:  # the GIL is released while the kernel brings the pages in
                mf.prefault()
        if self.read_advice is not None:
            mf.advise(self.read_advice)
        with self._change:
            self.files.append(mf)
        return mf

    def set_read_advice(self, advice: int) -> None:
        """``madvise`` every segment with ``advice``, and the segments made from now on."""
        self.read_advice = advice
        for mf in self.files:  # the list is replaced, never changed in place, when segments go
            mf.advise(advice)

    # -- durability ---------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        """fdatasync written but unflushed segments; returns True if anything was flushed.

        With ``least_pages`` > 0 nothing happens unless that many 4 KiB pages are dirty
        (a full segment is always flushed).
        """
        flushed_any = False
        while True:
            mf = self.find(self.flushed_where)
            if mf is None:  # before the first segment (none flushed yet, or head deleted)
                files = self.files
                mf = files[0] if files and self.flushed_where < files[0].file_from_offset else None
                if mf is None:
                    return flushed_any
            wrote = mf.wrote_position
            if (least_pages > 0 and not mf.is_full
                    and wrote // 4096 - mf.flushed_position // 4096 < least_pages):
                return flushed_any
            before = mf.flushed_position
            mf.flush()
            flushed_any = flushed_any or mf.flushed_position > before
            self.flushed_where = mf.file_from_offset + mf.flushed_position
            if not mf.is_full or mf is self.files[-1]:
                return flushed_any

    # -- truncation and deletion --------------------------------------------------------
    def truncate_dirty(self, offset: int) -> list[tuple[str, int, int]]:
        """Cut the stream at ``offset``: zero the bytes after it, delete later segments.

        Returns ``(path, start, end)`` ranges (global offsets) that held non-zero bytes.
        """
        removed: list[tuple[str, int, int]] = []
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_from_offset + self.file_size <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                position = offset - mf.file_from_offset
                if mf.zero_from(position):
                    removed.append((str(mf.path), offset, mf.file_from_offset + self.file_size))
                mf.wrote_position = mf.flushed_position = position
                keep.append(mf)
            else:
                if any(mf.mm[:8]):  # a spare preallocated segment starts with zeros
                    removed.append((str(mf.path), mf.file_from_offset,
                                    mf.file_from_offset + self.file_size))
                mf.destroy()
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)
        return removed

    def delete_first(self) -> MappedFile | None:
        """Remove the oldest segment (never the only one)."""
        head = self.detach_head(1)
        for mf in head:
            mf.destroy()
        return head[0] if head else None

    def detach_head(self, count: int) -> list[MappedFile]:
        """Take the ``count`` oldest segments out of the queue (never the last one) and
        return them, still mapped: the caller retires them. The list is replaced, never
        changed in place, so a reader iterating the old one is not disturbed."""
        with self._change:
            count = min(count, len(self.files) - 1)
            if count <= 0:
                return []
            head, self.files = self.files[:count], self.files[count:]
            self.flushed_where = max(self.flushed_where, self.files[0].file_from_offset)
        return head

    def detach_all(self) -> list[MappedFile]:
        """Take every segment out (the queue is being deleted) and return them, still mapped:
        the caller retires them. A writer or flusher holding the old list is not disturbed."""
        with self._change:
            files, self.files = self.files, []
        return files

    def close(self) -> None:
        for mf in self.files:
            mf.close()
