"""The epoch file ``{storePathRootDir}/epochFileCheckpoint`` of RocketMQ 5's controller mode
(EpochFileCache over common.utils.CheckpointFile), byte-compatible both ways.

Text, ``\\n`` line ends::

    <number of entries>
    <crc32 of the entry lines>
    <epoch>-<startOffset>
    ...

The crc is ``zlib.crc32(entry lines) & 0x7FFFFFFF`` over the entry lines with their line
ends, in decimal (0: not checked). Each write first copies the previous content to
``epochFileCheckpoint.bak``, which a reader falls back to when the file is missing, empty or
fails its checks. An entry's end offset is not stored: it is the next entry's start (the
last entry's is open, ``MAX_OFFSET``).

Epochs come from the controller: a replica that becomes master appends ``(epoch, its
CommitLog max offset)``; a slave appends the master's epochs as their data arrives. Two
replicas' CommitLogs agree up to :func:`find_consistent_point` of their epoch lists.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path

from bolide.common.config_persist import sync_dir
from bolide.errors import StoreError

MAX_OFFSET = (1 << 63) - 1
FILE_NAME = "epochFileCheckpoint"


class EpochFileError(StoreError):
    """An epoch file (and its .bak) that cannot be read."""


@dataclass(slots=True)
class EpochEntry:
    """Epoch ``epoch`` wrote the CommitLog from ``start_offset`` up to ``end_offset``."""

    epoch: int
    start_offset: int
    end_offset: int = MAX_OFFSET


def encode(entries: list[EpochEntry]) -> bytes:
    """The file's bytes for ``entries`` (CheckpointFile.write)."""
    lines = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries).encode()
    crc = zlib.crc32(lines) & 0x7FFFFFFF
    return f"{len(entries)}\n{crc}\n".encode() + lines


def decode(data: bytes) -> list[EpochEntry]:
    """Entries of a file's bytes (CheckpointFile.read), end offsets linked; EpochFileError
    when the count or the crc does not match or a number is not one."""
    text = data.decode("utf-8", "replace")
    lines = text.splitlines()
    if len(lines) < 2:
        raise EpochFileError(f"an epoch file needs a count and a crc line, got {text[:40]!r}")
    try:
        count = int(lines[0])
        crc = int(lines[1])
    except ValueError:
        raise EpochFileError(f"bad epoch file header {lines[:2]!r}") from None
    entries: list[EpochEntry] = []
    body = ""
    for line in lines[2:]:
        body += line + "\n"
        parts = line.split("-")
        if len(parts) == 2:
            try:
                entries.append(EpochEntry(int(parts[0]), int(parts[1])))
            except ValueError:
                raise EpochFileError(f"bad epoch entry line {line!r}") from None
    if len(entries) != count:
        raise EpochFileError(f"epoch file says {count} entries, holds {len(entries)}")
    truth = zlib.crc32(body.encode()) & 0x7FFFFFFF
    if crc != 0 and crc != truth:
        raise EpochFileError(f"epoch file crc {crc} does not match its entries ({truth})")
    return link(entries)


def link(entries: list[EpochEntry]) -> list[EpochEntry]:
    """Sort by epoch (one entry per epoch, the later kept) and set each end offset to the
    next entry's start; the last one's is open."""
    by_epoch = {e.epoch: e for e in entries}
    ordered = [by_epoch[k] for k in sorted(by_epoch)]
    for prev, nxt in pairwise(ordered):
        prev.end_offset = nxt.start_offset
    if ordered:
        ordered[-1].end_offset = MAX_OFFSET
    return ordered


def find_consistent_point(local: list[EpochEntry], other: list[EpochEntry]) -> int:
    """Where two replicas' CommitLogs stop agreeing (EpochFileCache.findConsistentPoint):
    the newest epoch both have with the same start offset, up to the smaller of its two end
    offsets (set each list's last end offset to that replica's max offset first). -1 when
    they share no epoch."""
    theirs = {e.epoch: e for e in other}
    for mine in sorted(local, key=lambda e: e.epoch, reverse=True):
        match = theirs.get(mine.epoch)
        if match is not None and match.start_offset == mine.start_offset:
            return min(mine.end_offset, match.end_offset)
    return -1


class EpochFile:
    """The epoch entries of one store, kept in memory and rewritten on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bak = path.with_name(path.name + ".bak")
        self._entries: list[EpochEntry] = []

    @classmethod
    def in_store(cls, root: Path) -> EpochFile:
        """The store's epoch file, loaded."""
        epochs = cls(root / FILE_NAME)
        epochs.load()
        return epochs

    def load(self) -> None:
        """Read the file (or its .bak when the file is missing, empty or damaged)."""
        try:
            entries = self._read(self.path)
            if not entries:
                entries = self._read(self.bak)
        except EpochFileError as exc:
            try:
                entries = self._read(self.bak)
            except EpochFileError:
                raise EpochFileError(
                    f"{self.path} and its .bak cannot be read ({exc}); move them away to "
                    "start this replica without epochs (it then copies its master's "
                    "CommitLog as a new replica)") from None
        self._entries = link(entries)

    @staticmethod
    def _read(path: Path) -> list[EpochEntry]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        return decode(data) if data else []

    def _flush(self) -> None:
        """Rewrite the file (the previous content to .bak first, as CheckpointFile does).
        With no entries both files go: RocketMQ reads a missing file as none."""
        if not self._entries:
            for p in (self.path, self.bak):
                p.unlink(missing_ok=True)
            sync_dir(self.path.parent)
            return
        try:
            prev = self.path.read_bytes()
        except FileNotFoundError:
            prev = b""
        if prev:
            _write_atomically(self.bak, prev)
        _write_atomically(self.path, encode(self._entries))
        sync_dir(self.path.parent)

    # -- reading ------------------------------------------------------------------------
    def entries(self) -> list[EpochEntry]:
        """Copies of the entries, oldest epoch first."""
        return [replace(e) for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    def first_entry(self) -> EpochEntry | None:
        return replace(self._entries[0]) if self._entries else None

    def last_entry(self) -> EpochEntry | None:
        return replace(self._entries[-1]) if self._entries else None

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else -1

    def get(self, epoch: int) -> EpochEntry | None:
        for e in self._entries:
            if e.epoch == epoch:
                return replace(e)
        return None

    def find_by_offset(self, offset: int) -> EpochEntry | None:
        """The entry whose [start, end) holds ``offset``."""
        for e in self._entries:
            if e.start_offset <= offset < e.end_offset:
                return replace(e)
        return None

    def next_entry(self, epoch: int) -> EpochEntry | None:
        """The first entry of an epoch after ``epoch``."""
        for e in self._entries:
            if e.epoch > epoch:
                return replace(e)
        return None

    # -- changing -----------------------------------------------------------------------
    def append(self, epoch: int, start_offset: int) -> bool:
        """Add a newer epoch starting at ``start_offset``; False (nothing changes) unless
        both are above the last entry's (EpochFileCache.appendEntry)."""
        if self._entries:
            last = self._entries[-1]
            if last.epoch >= epoch or last.start_offset >= start_offset:
                return False
            last.end_offset = start_offset
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush()
        return True

    def set_last_end_offset(self, end_offset: int) -> None:
        """Close the last epoch at ``end_offset`` (in memory: a replica's max offset)."""
        if self._entries and self._entries[-1].start_offset <= end_offset:
            self._entries[-1].end_offset = end_offset

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        """Remove the entries of epochs ``>= epoch``."""
        self._truncate_suffix([e for e in self._entries if e.epoch < epoch])

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Remove the entries starting at or after ``offset`` (the CommitLog was cut there)."""
        self._truncate_suffix([e for e in self._entries if e.start_offset < offset])

    def _truncate_suffix(self, keep: list[EpochEntry]) -> None:
        if len(keep) == len(self._entries):
            return
        self._entries = keep
        if keep:
            keep[-1].end_offset = MAX_OFFSET
        self._flush()

    def truncate_prefix_by_offset(self, offset: int) -> None:
        """Remove the entries that end at or before ``offset`` (older CommitLog files were
        deleted)."""
        keep = [e for e in self._entries if e.end_offset > offset]
        if len(keep) != len(self._entries):
            self._entries = keep
            self._flush()

    def reset(self, entries: list[EpochEntry]) -> None:
        """Replace every entry (and write the file)."""
        self._entries = link([replace(e) for e in entries])
        self._flush()


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
