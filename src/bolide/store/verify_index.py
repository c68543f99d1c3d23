"""The index-file part of ``bolide store verify``: header sanity and hash chains.

Problems (damage): a count past the file's capacity, a slot pointing past the entries, a
chain link that points forward or leaves its hash slot. Warnings (harmless, RocketMQ reads
past them): entries that point past the CommitLog end or at no record, as after a crash
cut the CommitLog; ``bolide store repair --rebuild-index`` rebuilds them.
"""

from __future__ import annotations

import errno
import mmap
import os
import pickle
import struct
import subprocess
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bolide.store.config import StoreConfig
from bolide.store.fastscan import compiled_module
from bolide.store.index_file import ENTRY_SIZE, HEADER_SIZE
from bolide.store.index_reader import IndexGeometryError, IndexReader, index_paths, open_index
from bolide.store.offline import Segments
from bolide.store.record import MAGIC_V1, MAGIC_V2

if TYPE_CHECKING:
    from bolide.store.verify import VerifyReport

_ENTRY = struct.Struct(">iqii")
_HEAD = struct.Struct(">4xi20xq")  # MAGICCODE at 4, PHYSICALOFFSET at 28
_MAX_PER_FILE = 10
_CHUNK = 1 << 16
_ENTRY_CHUNK = 1 << 16
_ZERO = bytes(_CHUNK)  # problems listed per file; the rest are counted
_compiled = compiled_module()  # the compiled entry loop, or None
BACKGROUND_MIN_ENTRIES = 500_000  # below this the child process costs more than it saves


@dataclass
class IndexCheck:
    """What the index check found, kept apart from the report so a child process can return it."""

    files: int = 0
    entries: int = 0
    problems: list[tuple[str, int, str]] = field(default_factory=list)  # (where, position, message)
    stale: dict[str, int] = field(default_factory=dict)  # file -> entries pointing at no record
    late: dict[str, list[int]] = field(default_factory=dict)  # file -> record offsets past ``late_from``


def check_index_files(config: StoreConfig, log: Segments, report: VerifyReport) -> None:
    """Check every index file against the CommitLog the report has scanned (in this process)."""
    found = _check_all(config, log, report.commit_log_min, report.commit_log_end, None)
    add_to_report(found, report.commit_log_end, report)


def add_to_report(found: IndexCheck, commit_log_end: int, report: VerifyReport) -> None:
    """Put ``found`` into ``report``; entries of ``found.late`` that a record at or past
    ``commit_log_end`` would need count as stale."""
    from bolide.store.verify import Problem

    report.index_files += found.files
    report.index_entries += found.entries
    report.problems.extend(Problem(*problem) for problem in found.problems)
    for where in sorted(found.stale.keys() | found.late.keys()):
        stale = found.stale.get(where, 0) + sum(
            1 for phy in found.late.get(where, ()) if phy + 91 > commit_log_end)
        if stale:
            report.warnings.append(Problem(
                where, -1, f"{stale} entries point at no record (left over after the "
                "CommitLog was cut?): `bolide store repair --rebuild-index` rebuilds the index"))


def _check_all(config: StoreConfig, log: Segments, cl_min: int, cl_end: int,
               late_from: int | None) -> IndexCheck:
    found = IndexCheck()
    for path in index_paths(config):
        where = f"index/{path.name}"
        found.files += 1
        try:
            reader = open_index(config, path)
        except (IndexGeometryError, OSError, ValueError) as exc:
            found.problems.append((where, -1, str(exc)))
            continue
        with reader:
            problems, stale, late = _check_file(reader, log, cl_min, cl_end, late_from)
        found.entries += max(0, reader.count - 1)
        for position, message in problems[:_MAX_PER_FILE]:
            found.problems.append((where, position, message))
        if len(problems) > _MAX_PER_FILE:
            found.problems.append((where, -1, f"{len(problems) - _MAX_PER_FILE} more "
                                   "problems: `bolide store repair --rebuild-index`"))
        if stale:
            found.stale[where] = stale
        if late:
            found.late[where] = late
    return found


class BackgroundIndexCheck:
    """The index check in a child interpreter, beside the CommitLog scan (a second core).

    Started before the scan knows where the CommitLog ends: the child takes the start of the
    last segment holding data as a lower bound of the end, and returns the offsets of the
    records it found past that bound; :meth:`finish` judges them against the real end, or
    checks again here when the scan ended earlier (damage) or the child failed. Only worth it
    for large indexes on several cores: :meth:`start` returns None otherwise.
    """

    def __init__(self, child: subprocess.Popen[bytes], late_from: int) -> None:
        self._child, self.late_from = child, late_from

    @classmethod
    def start(cls, config: StoreConfig, log: Segments) -> BackgroundIndexCheck | None:
        if (not log.maps or len(os.sched_getaffinity(0)) < 2
                or _entry_count(config) < BACKGROUND_MIN_ENTRIES):
            return None
        used = [start for start, m in log.maps if m[:8] != bytes(8)]
        if not used:
            return None
        late_from = used[-1] - 91  # records before it end at or before the last segment's start
        last_start, last_map = log.maps[-1]
        job = pickle.dumps((config, log.maps[0][0], last_start + len(last_map), late_from))
        try:
            child = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return None
        assert child.stdin is not None
        try:
            with child.stdin:
                child.stdin.write(job)
        except OSError:  # the child is gone already (BrokenPipeError): check here instead
            child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()
            return None
        return cls(child, late_from)

    def finish(self, config: StoreConfig, log: Segments, report: VerifyReport) -> None:
        child = self._child
        assert child.stdout is not None
        with child.stdout:
            out = child.stdout.read()
        found = pickle.loads(out) if child.wait() == 0 and out else None
        if found is None or report.commit_log_end < self.late_from + 91:
            check_index_files(config, log, report)  # the child failed, or the scan stopped early
        else:
            add_to_report(found, report.commit_log_end, report)

    def cancel(self) -> None:
        if self._child.poll() is None:
            self._child.kill()
        self._child.wait()
        if self._child.stdout is not None:
            self._child.stdout.close()


def _child_main() -> None:
    """``python -m bolide.store.verify_index``: a pickled job on stdin, the IndexCheck out."""
    from bolide.store.offline import open_commit_log

    config, cl_min, cl_end, late_from = pickle.loads(sys.stdin.buffer.read())
    log = open_commit_log(config)
    try:
        found = _check_all(config, log, cl_min, cl_end, late_from)
    finally:
        log.close()
    sys.stdout.buffer.write(pickle.dumps(found))


def _entry_count(config: StoreConfig) -> int:
    """Entries in the index files, from their headers (indexCount at byte 36)."""
    total = 0
    for path in index_paths(config):
        try:
            with open(path, "rb") as f:
                head = f.read(40)
        except OSError:
            continue
        if len(head) == 40:
            total += max(0, struct.unpack_from(">i", head, 36)[0])
    return total


def _used_slots(reader: IndexReader) -> Iterator[tuple[int, int]]:
    """(slot, value) of every non-zero slot. The slot table is mostly holes in a sparse file:
    only the extents holding data are read, and only chunks that are not all zeros decoded."""
    end = reader.entries_at
    fd = os.open(reader.path, os.O_RDONLY)
    try:
        pos = HEADER_SIZE
        while pos < end:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    return
                raise
            if pos >= end:
                return
            stop = min(os.lseek(fd, pos, os.SEEK_HOLE), end)
            pos -= (pos - HEADER_SIZE) % 4
            while pos < stop:
                chunk = os.pread(fd, min(_CHUNK, stop - pos + (-(stop - pos)) % 4), pos)
                if len(chunk) < 4:
                    return
                chunk = chunk[: len(chunk) - len(chunk) % 4]
                if chunk != _ZERO[: len(chunk)]:
                    values = array("i")
                    values.frombytes(chunk)
                    if sys.byteorder == "little":
                        values.byteswap()
                    first = (pos - HEADER_SIZE) // 4
                    yield from ((first + i, v) for i, v in enumerate(values) if v)
                pos += len(chunk)
    finally:
        os.close(fd)


def _entries(mm: mmap.mmap, entries_at: int, count: int) -> Iterator[tuple[int, int, int, int]]:
    """Entries 1 .. count-1, read a chunk at a time (a full file holds 400 MB of them)."""
    step = _ENTRY_CHUNK * ENTRY_SIZE
    pos, end = entries_at + ENTRY_SIZE, entries_at + count * ENTRY_SIZE
    while pos < end:
        yield from _ENTRY.iter_unpack(mm[pos : min(end, pos + step)])
        pos += step


def _entry_problem(n: int, key_hash: int, diff: int, prev: int) -> str:
    if key_hash < 0 or diff < 0:
        return f"entry {n}: negative key hash or time ({key_hash}, {diff})"
    if prev < 0 or prev >= n:
        return f"entry {n}: chain link {prev} does not point at an older entry"
    return f"entry {n}: chain link {prev} is in another hash slot"


def _check_file(reader: IndexReader, log: Segments, cl_min: int, cl_end: int, late_from: int | None
                ) -> tuple[list[tuple[int, str]], int, list[int]]:
    """(problems as (byte position in the file, message), stale entry count, offsets of the
    records found at or past ``late_from``, which the caller judges against the real end)."""
    h = reader.header
    problems: list[tuple[int, str]] = []
    count = h.index_count
    if count < 0 or count > reader.index_num:
        problems.append((36, f"indexCount {count} is outside 0..maxIndexNum {reader.index_num}"))
        return problems, 0, []
    count = max(count, 1)
    slots_n = reader.hash_slot_num
    mm = reader.mm
    late_at = cl_end if late_from is None else late_from
    entries_at = reader.entries_at
    if _compiled is not None and len(mm) >= entries_at + count * ENTRY_SIZE:
        with memoryview(mm) as view:
            found, stale, late, slot_bytes = _compiled.check_index_entries(
                view[entries_at : entries_at + count * ENTRY_SIZE], count, slots_n, log.maps,
                cl_min, cl_end, late_at)
        problems = [(entries_at + n * ENTRY_SIZE, _entry_problem(n, key_hash, diff, prev))
                    for n, key_hash, diff, prev in found]
        slot_of = array("i")
        slot_of.frombytes(slot_bytes)
    else:
        slot_of, stale, late = _check_entries(mm, entries_at, count, slots_n, log, cl_min, cl_end,
                                              late_at, problems)
    for slot, n in _used_slots(reader):
        if n < 0 or n > count:
            problems.append((HEADER_SIZE + slot * 4, f"slot {slot} points at entry {n}, past "
                             f"indexCount {count}"))
        elif n < count and slot_of[n] != slot:
            problems.append((HEADER_SIZE + slot * 4,
                             f"slot {slot} points at entry {n}, which hashes elsewhere"))
    return problems, stale, late


def _check_entries(mm: mmap.mmap, entries_at: int, count: int, slots_n: int, log: Segments,
                   cl_min: int, cl_end: int, late_at: int, problems: list[tuple[int, str]]
                   ) -> tuple[array[int], int, list[int]]:
    """The entries' chain links and records (the pure-Python twin of the compiled
    ``check_index_entries``): (slot of each entry, stale count, late record offsets)."""
    slot_of = array("i", bytes(4 * count))
    stale = 0
    late: list[int] = []
    head = _HEAD.unpack_from
    seg_lo = seg_hi = 0  # the segment of the last record looked at: [seg_lo, seg_hi - 36)
    m = None
    last_phy = -1
    for n, (key_hash, phy, diff, prev) in enumerate(_entries(mm, entries_at, count), 1):
        slot = key_hash % slots_n
        slot_of[n] = slot
        if prev >= n or prev < 0 or key_hash < 0 or diff < 0 or (prev and slot_of[prev] != slot):
            problems.append((entries_at + n * ENTRY_SIZE, _entry_problem(n, key_hash, diff, prev)))
        if phy == last_phy or phy < cl_min:
            continue  # another key of the same record, or a record gone with retention
        last_phy = phy
        if phy + 91 > cl_end:  # no record fits there
            stale += 1
            continue
        if not seg_lo <= phy < seg_hi:
            found = log.find(phy)
            if found is None:
                stale += 1
                continue
            seg_lo, m = found
            seg_hi = seg_lo + len(m) - 36
            if not seg_lo <= phy < seg_hi:
                stale += 1
                continue
        magic, record_phy = head(m, phy - seg_lo)
        if record_phy != phy or (magic != MAGIC_V1 and magic != MAGIC_V2):
            stale += 1
        elif phy >= late_at:
            late.append(phy)
    return slot_of, stale, late


if __name__ == "__main__":  # run as a module: use the importable one, so results unpickle
    from bolide.store.verify_index import _child_main as main

    main()
