"""A controller peer's durable Raft state in ``<controllerStorePath>/<selfId>/raft/``:

- ``term.json``: the current term and the vote of that term (``{"term": 3, "votedFor": "n1"}``),
  replaced atomically;
- ``log``: the entries after the snapshot, each record ``[u32 length][u32 crc32][u64 index]
  [u64 term][data]`` (big-endian; length and CRC cover index, term and data), fsynced before a
  vote or an append is answered; a torn or corrupt tail is cut off at the last whole record
  and reported;
- ``snapshot``: one such record holding the state machine at its index, replaced atomically.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from bolide.common.config_persist import sync_dir, write_synced
from bolide.controller.framed import HEAD, frame, read_frames
from bolide.controller.raft.core import Persisted
from bolide.controller.raft.messages import LogEntry
from bolide.errors import BolideError

log = logging.getLogger(__name__)

ENTRY_HEAD = struct.Struct(">QQ")
MAX_RECORD = 64 << 20
RAFT_DIR = "raft"  # under <controllerStorePath>/<selfId>


def encode_record(index: int, entry: LogEntry) -> bytes:
    return frame(ENTRY_HEAD.pack(index, entry.term) + entry.data)


def read_records(data: bytes) -> tuple[list[tuple[int, LogEntry]], int, str]:
    """The records of ``data``, the length of its good prefix and why it stops early."""
    last: list[int] = []  # the index of the record before

    def entry(payload: bytes) -> tuple[int, LogEntry]:
        if len(payload) < ENTRY_HEAD.size:
            raise ValueError("a record cut short")
        index, term = ENTRY_HEAD.unpack_from(payload)
        if last and index != last[0] + 1:
            raise ValueError(f"index {index} after {last[0]}")
        last[:] = [index]
        return index, LogEntry(term, payload[ENTRY_HEAD.size:])

    return read_frames(data, entry, max_record=MAX_RECORD)


@dataclass(frozen=True, slots=True)
class Loaded:
    """What :meth:`RaftStorage.open` read, and the bytes of a bad log tail it cut off."""

    persisted: Persisted
    dropped_bytes: int = 0
    reason: str = ""


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write_synced(tmp, data)
    os.replace(tmp, path)
    sync_dir(path.parent)


def state_files(directory: Path) -> list[Path]:
    """The files of ``directory`` that hold Raft state: a term, a snapshot, a log with entries
    (the empty log a peer creates at its start holds none)."""
    found = [p for p in (directory / "term.json", directory / "snapshot") if p.exists()]
    log_path = directory / "log"
    if log_path.exists() and log_path.stat().st_size:
        found.append(log_path)
    return found


class RaftStorage:
    """The three files; :meth:`open` first, then the writes in the order a Ready asks."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.term_path = directory / "term.json"
        self.log_path = directory / "log"
        self.snapshot_path = directory / "snapshot"
        self._fd: int | None = None
        self._offsets: list[int] = []  # file offset of each entry's record, from first_index
        self._first_index = 1
        self._size = 0

    def open(self) -> Loaded:
        """Read the state (cutting off a bad log tail) and open the log for appends."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            hard = json.loads(self.term_path.read_text()) if self.term_path.exists() else {}
            snap_bytes = self.snapshot_path.read_bytes() if self.snapshot_path.exists() else b""
            data = self.log_path.read_bytes() if self.log_path.exists() else b""
        except (OSError, ValueError) as exc:
            raise BolideError(f"cannot read the controller's Raft state in {self.directory}: {exc}; "
                              "make controllerStorePath a writable directory") from exc
        snap_index, snap_term, snap_data = 0, 0, b""
        if snap_bytes:
            snaps, good, reason = read_records(snap_bytes)
            if len(snaps) != 1 or good != len(snap_bytes):
                raise BolideError(f"the controller's Raft snapshot {self.snapshot_path} is damaged "
                                  f"({reason or 'not one record'}); remove this peer's raft directory "
                                  "to have it copied from the leader again")
            snap_index, entry = snaps[0]
            snap_term, snap_data = entry.term, entry.data
        records, good, reason = read_records(data)
        dropped = len(data) - good
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT, 0o644)
        if dropped:
            log.warning("controller Raft log %s: cut off %d bytes after %d entries at offset %d: %s",
                        self.log_path, dropped, len(records), good, reason)
            os.ftruncate(self._fd, good)
            os.fsync(self._fd)
        sync_dir(self.directory)
        entries = [(i, e) for i, e in records if i > snap_index]
        if entries and entries[0][0] != snap_index + 1:
            raise BolideError(f"the controller's Raft log {self.log_path} starts at index "
                              f"{entries[0][0]} but its snapshot ends at {snap_index}; remove this "
                              "peer's raft directory to have it copied from the leader again")
        self._first_index = snap_index + 1
        if len(entries) != len(records):  # stopped between a snapshot and the log's rewrite
            self._rewrite([e for _, e in entries])
        else:
            self._offsets, pos = [], 0
            for _, entry in records:
                self._offsets.append(pos)
                pos += HEAD.size + ENTRY_HEAD.size + len(entry.data)
            self._size = good
        persisted = Persisted(term=int(hard.get("term", 0)), voted_for=hard.get("votedFor"),
                              snapshot_index=snap_index, snapshot_term=snap_term, snapshot_data=snap_data,
                              entries=tuple(e for _, e in entries))
        return Loaded(persisted, dropped, reason)

    def save_hard_state(self, term: int, voted_for: str | None) -> None:
        _replace(self.term_path, json.dumps({"term": term, "votedFor": voted_for}).encode())

    def truncate_from(self, index: int) -> None:
        """Drop the entries from ``index`` on (nothing when the log ends before it)."""
        slot = index - self._first_index
        if slot >= len(self._offsets) or self._fd is None:
            return
        slot = max(slot, 0)
        self._size = self._offsets[slot]
        del self._offsets[slot:]
        os.ftruncate(self._fd, self._size)

    def append(self, entries: list[tuple[int, LogEntry]]) -> None:
        """Write ``entries`` (consecutive, following the log) and fsync."""
        if self._fd is None:
            raise BolideError("the controller's Raft log is not open")
        if not self._offsets:
            self._first_index = entries[0][0]
        elif entries[0][0] != self._first_index + len(self._offsets):
            raise BolideError(f"Raft entry {entries[0][0]} does not follow the log's last "
                              f"({self._first_index + len(self._offsets) - 1})")
        chunks: list[bytes] = []
        offsets: list[int] = []
        pos = self._size
        for index, entry in entries:
            record = encode_record(index, entry)
            offsets.append(pos)
            pos += len(record)
            chunks.append(record)
        data = b"".join(chunks)
        try:
            written = os.pwrite(self._fd, data, self._size)
            if written != len(data):
                raise OSError(f"short write to {self.log_path}: {written} of {len(data)} bytes")
            os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):  # no partial record for later appends to follow
                os.ftruncate(self._fd, self._size)
            raise
        self._offsets.extend(offsets)
        self._size = pos

    def sync(self) -> None:
        """fsync the log (after a truncation without appends)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def save_snapshot(self, index: int, term: int, data: bytes, entries: list[LogEntry]) -> None:
        """Store the snapshot at ``index``, then the log of the ``entries`` after it."""
        _replace(self.snapshot_path, encode_record(index, LogEntry(term, data)))
        self._first_index = index + 1
        self._rewrite(entries)

    def _rewrite(self, entries: list[LogEntry]) -> None:
        """Replace the log with ``entries`` from ``_first_index`` on."""
        self.close()
        chunks = [encode_record(self._first_index + k, e) for k, e in enumerate(entries)]
        _replace(self.log_path, b"".join(chunks))
        self._fd = os.open(self.log_path, os.O_WRONLY)
        self._offsets, pos = [], 0
        for chunk in chunks:
            self._offsets.append(pos)
            pos += len(chunk)
        self._size = pos

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
