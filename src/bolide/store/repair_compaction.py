"""The compaction-file part of ``bolide store repair``: plan and carry out, from what
:mod:`bolide.store.verify_compaction` found.

- ``restore-positions`` / ``remove-positions``: a ``position-checkpoint`` that does not decode is
  replaced by its ``.bak`` when that decodes, else removed with it (every queue is then compacted
  from its start again, which loses nothing);
- ``truncate-compaction``: a file pair is cut before its first bad unit, as the store's load does
  (the queue file's units from there and the log file after the last sound record are zeroed),
  and the queue's position lowered to the last offset kept before the cut;
- ``rebuild-compaction`` (only when asked, ``--rebuild-compaction TOPIC[:QUEUE]``): the queue's
  ``compactionLog`` and ``compactionCq`` directories and its position are removed; the broker
  copies the queue in again from its ConsumeQueue at the next compaction (messages the CommitLog
  no longer holds are lost: only the compaction files had them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bolide.common.config_persist import backup_path
from bolide.errors import StoreError
from bolide.store.compaction import COMPACTION_DIR, POSITION_FILE, PositionFile
from bolide.store.compaction_files import UNIT_SIZE
from bolide.store.config import StoreConfig
from bolide.store.verify_compaction import CompactionScan, PairScan, QueueScan, position_file_decodes

if TYPE_CHECKING:
    from bolide.store.repair import Action

_ZERO = bytes(1 << 20)


class CompactionRepairRefused(StoreError):
    """A ``--rebuild-compaction`` argument names no compacted queue."""


def selected(scan: CompactionScan, rebuild: Sequence[str]) -> list[QueueScan]:
    """The queues ``rebuild`` names (``TOPIC`` for all its queues, or ``TOPIC:QUEUE``)."""
    chosen: list[QueueScan] = []
    for arg in rebuild:
        topic, _, qid = arg.partition(":")
        found = [q for q in scan.queues if q.topic == topic and (not qid or str(q.queue_id) == qid)]
        if not found:
            raise CompactionRepairRefused(
                f"--rebuild-compaction {arg}: no compaction files for it; `bolide store inspect` "
                "lists the compacted queues (TOPIC or TOPIC:QUEUE)")
        chosen.extend(q for q in found if q not in chosen)
    return chosen


def plan_compaction(config: StoreConfig, scan: CompactionScan, rebuild: Sequence[str],
                    actions: list[Action]) -> None:
    from bolide.store.repair import Action

    rel_positions = f"{COMPACTION_DIR}/{POSITION_FILE}"
    if scan.problems:
        bak = backup_path(config.root / rel_positions)
        if position_file_decodes(bak):
            actions.append(Action("restore-positions", rel_positions, f"copy {bak.name} over it"))
        else:
            actions.append(Action("remove-positions", rel_positions, "remove it (and its .bak): "
                                  "every queue is compacted from its start again"))
    chosen = selected(scan, rebuild)
    for q in chosen:
        actions.append(Action(
            "rebuild-compaction", f"{COMPACTION_DIR}/{q.topic}/{q.queue_id}",
            f"remove compactionLog/{q.topic}/{q.queue_id} and compactionCq/{q.topic}/{q.queue_id} "
            f"({len(q.pairs)} file pair(s), {q.records} records) and its position: the broker "
            "copies the queue in again from its ConsumeQueue"))
    for q in scan.queues:
        if q in chosen:
            continue
        for pair in q.pairs:
            if pair.cut < 0 or pair.backwards:
                continue
            at = (f"log offset {pair.cut_phys} ({pair.reason})" if pair.cut_phys >= 0
                  else "an invalid unit")
            actions.append(Action(
                "truncate-compaction",
                f"{COMPACTION_DIR}/compactionCq/{q.topic}/{q.queue_id}/{pair.name}",
                f"cut before unit {pair.cut}, {at}: zero its units from there and its log file "
                f"from {pair.base + pair.log_end}; position at most {_last_kept(q, pair)}"))


def _last_kept(q: QueueScan, cut: PairScan) -> int:
    """The last queue offset left before the cut pair's bad unit (-1: none)."""
    last = -1
    for pair in q.pairs:
        if pair.units:
            last = pair.last
        if pair is cut:
            break
    return last


def apply_compaction(config: StoreConfig, actions: Sequence[Action], scan: CompactionScan) -> None:
    """Carry out the compaction actions of a plan (see the module docstring)."""
    root = config.root
    path = root / COMPACTION_DIR / POSITION_FILE
    lowered: dict[str, int | None] = {}  # position key -> new offset, None: removed
    for action in actions:
        if action.kind == "restore-positions":
            shutil.copyfile(backup_path(path), path)
        elif action.kind == "remove-positions":
            path.unlink(missing_ok=True)
            backup_path(path).unlink(missing_ok=True)
        elif action.kind == "rebuild-compaction":
            _, topic, qid = action.target.split("/")
            shutil.rmtree(root / COMPACTION_DIR / "compactionLog" / topic / qid, ignore_errors=True)
            shutil.rmtree(root / COMPACTION_DIR / "compactionCq" / topic / qid, ignore_errors=True)
            lowered[f"{topic}_{qid}"] = None
        elif action.kind == "truncate-compaction":
            _, _, topic, qid, name = action.target.split("/")
            q = next(q for q in scan.queues if q.topic == topic and str(q.queue_id) == qid)
            pair = next(p for p in q.pairs if p.name == name)
            _zero_from(root / action.target, pair.cut * UNIT_SIZE)
            _zero_from(root / COMPACTION_DIR / "compactionLog" / topic / qid / name, pair.log_end)
            key, last = q.key, _last_kept(q, pair)
            previous = lowered.get(key, last)
            lowered[key] = None if previous is None or last < 0 else min(previous, last)
    if lowered:
        positions = PositionFile(path)
        positions.load()
        changed = False
        for key, offset in lowered.items():
            if key not in positions.offsets:
                continue
            if offset is None:
                del positions.offsets[key]
                changed = True
            elif positions.offsets[key] > offset:
                positions.offsets[key] = offset
                changed = True
        if changed:
            positions.persist()


def _zero_from(path: Path, pos: int) -> None:
    """Zero ``path`` from byte ``pos`` to its end, a chunk at a time, and make it durable."""
    fd = os.open(path, os.O_WRONLY)
    try:
        end = os.fstat(fd).st_size
        while pos < end:
            pos += os.pwrite(fd, _ZERO[: min(len(_ZERO), end - pos)], pos)
        os.fsync(fd)
    finally:
        os.close(fd)
