"""The compaction-file part of ``bolide store inspect|verify|repair``: compacted queues' files read
offline (mapped read-only, no lock), as :mod:`bolide.store.compaction_files` lays them out.

:func:`scan_compaction` walks every queue of ``compaction/compactionLog`` and ``compactionCq``:
each file pair's units in order, each unit's record (framing, CRC, size, queue offset,
PHYSICALOFFSET, topic and queue), the queue offsets increasing, the files paired and of the
configured sizes, and ``position-checkpoint`` decoding. A bad record or unit ends its file pair
there, as the store's load does (:meth:`PairScan.cut` says where: what ``repair`` truncates);
damage a cut cannot mend (a file without its pair, a wrong size, offsets going back across
files, an unreadable swap record) needs the queue's compaction files rebuilt.
"""

from __future__ import annotations

import json
import mmap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bolide.common.config_persist import backup_path
from bolide.errors import BolideError
from bolide.store.compaction import COMPACTION_DIR, POSITION_FILE, decode_positions
from bolide.store.compaction_files import UNIT, UNIT_SIZE, file_sizes, unwritten
from bolide.store.compaction_log import COMPACTING, SWAP_FILE
from bolide.store.config import StoreConfig
from bolide.store.offline import nonzero_after
from bolide.store.record import RecordError, parse_record

if TYPE_CHECKING:
    from bolide.store.verify import VerifyReport


@dataclass(slots=True)
class Issue:
    where: str  # path relative to the store root
    offset: int  # the record's compaction-log offset, a byte of a queue file, or -1
    message: str


@dataclass(slots=True)
class PairScan:
    """One file pair: ``units`` sound records (queue offsets ``first``..``last``) of ``bytes``
    bytes; ``cut`` the first bad unit (-1: none) at log offset ``cut_phys`` (-1: an invalid
    unit followed by bytes)."""

    name: str
    units: int = 0
    first: int = -1
    last: int = -1
    bytes: int = 0
    ended: bool = False
    cut: int = -1
    cut_phys: int = -1
    reason: str = ""  # why the unit at ``cut`` is bad
    log_end: int = 0  # end of the last sound record in the log file
    backwards: bool = False  # its first unit's offset goes back: a cut cannot mend that

    @property
    def base(self) -> int:
        return int(self.name)


@dataclass
class QueueScan:
    topic: str
    queue_id: int
    pairs: list[PairScan] = field(default_factory=list)
    problems: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    needs_rebuild: bool = False  # a problem a cut cannot mend

    @property
    def key(self) -> str:
        return f"{self.topic}_{self.queue_id}"

    @property
    def records(self) -> int:
        return sum(p.units for p in self.pairs)

    @property
    def first(self) -> int:
        return next((p.first for p in self.pairs if p.units), -1)

    @property
    def last(self) -> int:
        return next((p.last for p in reversed(self.pairs) if p.units), -1)


@dataclass
class CompactionScan:
    queues: list[QueueScan] = field(default_factory=list)
    positions: dict[str, int] | None = None  # None: no readable position-checkpoint
    problems: list[Issue] = field(default_factory=list)  # of position-checkpoint
    warnings: list[Issue] = field(default_factory=list)


def queue_dirs(config: StoreConfig) -> list[tuple[str, int]]:
    """(topic, queue id) of every queue directory under compactionLog or compactionCq."""
    found: set[tuple[str, int]] = set()
    for tree in ("compactionLog", "compactionCq"):
        base = config.root / COMPACTION_DIR / tree
        if not base.is_dir():
            continue
        for topic_dir in base.iterdir():
            if topic_dir.is_dir():
                found.update((topic_dir.name, int(q.name)) for q in topic_dir.iterdir()
                             if q.is_dir() and q.name.lstrip("-").isdigit())
    return sorted(found)


def scan_compaction(config: StoreConfig, check_crc: bool = True) -> CompactionScan:
    scan = CompactionScan()
    _scan_positions(config, scan)
    for topic, qid in queue_dirs(config):
        scan.queues.append(scan_queue(config, topic, qid, check_crc))
    return scan


def _scan_positions(config: StoreConfig, scan: CompactionScan) -> None:
    path = config.root / COMPACTION_DIR / POSITION_FILE
    where = f"{COMPACTION_DIR}/{POSITION_FILE}"
    bak = backup_path(path)
    if not path.exists():
        if bak.exists():
            scan.warnings.append(Issue(where, -1, f"missing, but {bak.name} is there: the broker "
                                       f"loads it; copy it to {path.name}"))
        return
    try:
        scan.positions = decode_positions(path.read_bytes())
    except (BolideError, ValueError, OSError) as exc:
        fix = (f"`bolide store repair` copies {bak.name} over it" if position_file_decodes(bak) else
               "`bolide store repair` removes it (every queue is then compacted from its start)")
        scan.problems.append(Issue(where, -1, f"does not decode ({exc}): {fix}"))


def position_file_decodes(path: Path) -> bool:
    try:
        decode_positions(path.read_bytes())
    except (BolideError, ValueError, OSError):
        return False
    return True


def scan_queue(config: StoreConfig, topic: str, queue_id: int, check_crc: bool = True) -> QueueScan:
    """Read one compacted queue's files (see the module docstring)."""
    q = QueueScan(topic, queue_id)
    rel_log = f"{COMPACTION_DIR}/compactionLog/{topic}/{queue_id}"
    rel_cq = f"{COMPACTION_DIR}/compactionCq/{topic}/{queue_id}"
    log_dir, cq_dir = config.root / rel_log, config.root / rel_cq
    rebuild = f"`bolide store repair --rebuild-compaction {topic}:{queue_id}` rebuilds the queue's files"
    if _check_swap(log_dir / COMPACTING, rel_log, q, rebuild):
        return q
    log_size, cq_size = file_sizes(config)
    logs, cqs = _names(log_dir), _names(cq_dir)
    newest = max(logs | cqs, default="")
    for name in sorted(logs ^ cqs):
        present, absent = (rel_log, rel_cq) if name in logs else (rel_cq, rel_log)
        if name == newest and all(unwritten(d / name) for d in (log_dir, cq_dir)):
            q.warnings.append(Issue(f"{present}/{name}", -1, "a file pair whose creation was cut "
                                    "short, never written: the store removes it at open"))
        else:
            q.problems.append(Issue(f"{present}/{name}", -1, f"no matching file in {absent}: "
                                    f"restore it, or {rebuild}"))
            q.needs_rebuild = True
    previous = -1
    for name in sorted(logs & cqs):
        try:
            wrong = [(rel, size, (config.root / rel / name).stat().st_size)
                     for rel, size in ((rel_log, log_size), (rel_cq, cq_size))
                     if (config.root / rel / name).stat().st_size != size]
            if wrong and name == newest and all(unwritten(d / name) for d in (log_dir, cq_dir)):
                q.warnings.append(Issue(f"{wrong[0][0]}/{name}", -1, "a file pair whose creation was "
                                        "cut short, never written: the store removes it at open"))
                continue
            if wrong:
                for rel, size, length in wrong:
                    q.problems.append(Issue(
                        f"{rel}/{name}", -1, f"{length} bytes, expected {size}: pass the broker.conf it "
                        "was written with (-c, compactionMappedFileSize/compactionCqMappedFileSize), "
                        f"or {rebuild}"))
                q.needs_rebuild = True
                continue
            pair = PairScan(name)
            with _mapped(log_dir / name) as log, _mapped(cq_dir / name) as cq:
                _scan_pair(pair, log, cq, topic, queue_id, check_crc, previous)
            if pair.cut < 0 and not pair.ended and nonzero_after(cq_dir / name, pair.units * UNIT_SIZE):
                pair.cut, pair.cut_phys = pair.units, -1
                q.problems.append(Issue(f"{rel_cq}/{name}", pair.units * UNIT_SIZE,
                                        f"unit {pair.units} is not valid but bytes follow it (units the "
                                        "store ignores): `bolide store repair` cuts the queue file there"))
            elif pair.cut == 0 and pair.reason.startswith("queue offset"):  # back across files
                q.problems.append(Issue(f"{rel_cq}/{name}", 0, f"{pair.reason}: {rebuild}"))
                q.needs_rebuild = pair.backwards = True
            elif pair.cut >= 0:
                q.problems.append(Issue(f"{rel_log}/{name}", pair.cut_phys, f"unit {pair.cut}: "
                                        f"{pair.reason}: `bolide store repair` cuts the queue there "
                                        "(the store's load ignores it and what follows in the file)"))
            if pair.units:
                previous = pair.last
            q.pairs.append(pair)
        except FileNotFoundError:  # a running broker swapped files as they were read
            q.warnings.append(Issue(f"{rel_log}/{name}", -1, "removed while it was read (a compaction "
                                    "of a running broker?): run again for a full check"))
    return q


def _scan_pair(pair: PairScan, log: memoryview, cq: memoryview, topic: str, queue_id: int,
               check_crc: bool, previous: int) -> None:
    base = pair.base
    for i in range(len(cq) // UNIT_SIZE):
        phys, size, _tags, _ts, qoff, batch, _c, _r = UNIT.unpack_from(cq, i * UNIT_SIZE)
        if phys < 0 or size <= 0 or qoff < 0 or batch <= 0:
            pair.ended = phys == -1 and batch == 0 and size == 0
            return
        pos = phys - base
        last = pair.last if pair.units else previous
        if qoff <= last:
            reason = f"queue offset {qoff} does not follow {last}"
        elif pos < 0 or pos + size > len(log):
            reason = f"the unit's record ({phys}, {size} bytes) lies outside the log file"
        else:
            info = parse_record(log[pos : pos + size], 0, check_crc)
            if isinstance(info, RecordError):
                reason = f"bad record ({info.reason})"
            elif info.size != size:
                reason = f"the record is {info.size} bytes, its unit says {size}"
            elif info.queue_offset != qoff:
                reason = f"the record has queue offset {info.queue_offset}, its unit {qoff}"
            elif info.commit_log_offset != phys:
                reason = f"the record's PHYSICALOFFSET is {info.commit_log_offset}, not {phys}"
            elif info.topic != topic or info.queue_id != queue_id:
                reason = f"the record is of {info.topic}-{info.queue_id}"
            else:
                reason = ""
        if reason:
            pair.cut, pair.cut_phys, pair.reason = i, phys, reason
            return
        if pair.first < 0:
            pair.first = qoff
        pair.last = qoff
        pair.units += 1
        pair.bytes += size
        pair.log_end = max(pair.log_end, pos + size)


def _check_swap(compacting: Path, rel_log: str, q: QueueScan, rebuild: str) -> bool:
    """True when an interrupted compaction's swap is pending (the files are then checked only
    after the broker finishes it at open)."""
    record = compacting / SWAP_FILE
    if not record.is_file():
        if compacting.is_dir():
            q.warnings.append(Issue(f"{rel_log}/{COMPACTING}", -1, "files of a compaction that did "
                                    "not finish: the store removes them at open"))
        return False
    try:
        swap = json.loads(record.read_bytes())
        [*swap["old"]], [*swap["new"]], int(swap["position"])
    except (ValueError, KeyError, TypeError, OSError) as exc:
        q.problems.append(Issue(f"{rel_log}/{COMPACTING}/{SWAP_FILE}", -1, f"does not decode "
                                f"({exc}): the store cannot finish the compaction it records; {rebuild}"))
        q.needs_rebuild = True
        return True
    q.warnings.append(Issue(f"{rel_log}/{COMPACTING}/{SWAP_FILE}", -1, "a compaction interrupted "
                            "during its file swap: the store finishes it at open (files not checked)"))
    return True


def _names(directory: Path) -> set[str]:
    if not directory.is_dir():
        return set()
    return {p.name for p in directory.iterdir() if p.is_file() and p.name.isdigit()}


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """A read-only mapping of ``path`` (non-empty) as a memoryview, released on exit."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        view = memoryview(m)
        try:
            yield view
        finally:
            view.release()


def queue_json(q: QueueScan, positions: dict[str, int] | None) -> dict[str, Any]:
    """What ``bolide store inspect`` shows of one compacted queue."""
    return {"topic": q.topic, "queue_id": q.queue_id, "files": len(q.pairs),
            "first_offset": q.first, "last_offset": q.last, "records": q.records,
            "bytes": sum(p.bytes for p in q.pairs),
            "position": (positions or {}).get(q.key),
            "problems": [f"{i.where}: {i.message}" for i in q.problems]}


def check_compaction(config: StoreConfig, report: VerifyReport) -> None:
    """Add the compaction files' problems and warnings to ``report`` (and the scan, for repair)."""
    from bolide.store.verify import Problem

    scan = scan_compaction(config)
    report.compaction = scan
    report.compaction_queues = len(scan.queues)
    report.compaction_records = sum(q.records for q in scan.queues)
    for issues, into in ((scan.problems, report.problems), (scan.warnings, report.warnings)):
        into.extend(Problem(i.where, i.offset, i.message) for i in issues)
    for q in scan.queues:
        for issues, into in ((q.problems, report.problems), (q.warnings, report.warnings)):
            into.extend(Problem(i.where, i.offset, i.message) for i in issues)


def compaction_info(config: StoreConfig) -> dict[str, Any]:
    """What ``bolide store inspect`` shows of the compaction files (CRCs not checked)."""
    scan = scan_compaction(config, check_crc=False)
    return {"queues": [queue_json(q, scan.positions) for q in scan.queues],
            "positions": scan.positions,
            "problems": [f"{i.where}: {i.message}" for i in scan.problems]}
