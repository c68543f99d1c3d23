"""``bolide store repair``: make a damaged store consistent again, from its CommitLog.

:func:`plan_repair` runs the verifier and lists the actions; :func:`apply_repair` carries
them out: extend a last CommitLog segment cut short, restore a config file from its
``.bak``, remove the ConsumeQueues (when damaged) and the index, then open the store with an
``abort`` file and a zeroed checkpoint, so that recovery re-checks every record's CRC from
the first segment, cuts the CommitLog at the first bad record (zeroing the rest, deleting
later segments) and rebuilds the missing ConsumeQueue entries and the index, exactly as
after a crash. Compaction files are repaired first (:mod:`bolide.store.repair_compaction`);
the recovery leaves them alone. Refuses while a running process holds the store's lock.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field

from bolide.errors import BolideError, StoreError, StoreLockedError
from bolide.store.checkpoint import CHECKPOINT_SIZE, is_locked_by_other_process
from bolide.store.config import StoreConfig
from bolide.store.config_files import JsonConfigFile
from bolide.store.index_reader import index_paths
from bolide.store.repair_compaction import CompactionRepairRefused, apply_compaction, plan_compaction
from bolide.store.results import RecoveryReport
from bolide.store.verify import VerifyReport, verify_store
from bolide.store.verify_config import MANAGERS


class RepairRefused(StoreError):
    """Repair cannot go on safely; the message says what to do first."""


@dataclass(slots=True)
class Action:
    kind: str  # extend-segment, restore-config, truncate, rebuild-queues, rebuild-index, recover
    # and (bolide.store.repair_compaction) restore-positions, remove-positions,
    # truncate-compaction, rebuild-compaction
    target: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"action": self.kind, "target": self.target, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.kind} {self.target}: {self.detail}"


@dataclass
class RepairPlan:
    report: VerifyReport
    actions: list[Action] = field(default_factory=list)
    recover: bool = False  # open the store with abnormal recovery from the first segment
    recovery: RecoveryReport | None = None  # what the recovery did (after apply)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"verify": self.report.to_json(),
                                  "actions": [a.to_json() for a in self.actions]}
        if self.recovery is not None:
            r = self.recovery
            out["recovery"] = {
                "summary": r.summary(), "records_checked": r.records_checked,
                "commit_log_end": r.commit_log_end,
                "queue_entries_rebuilt": r.queue_entries_rebuilt,
                "queue_entries_removed": r.queue_entries_removed,
                "truncations": [{"path": t.path, "start": t.start, "end": t.end,
                                 "reason": t.reason} for t in r.truncations]}
        return out


def check_unlocked(config: StoreConfig) -> None:
    if is_locked_by_other_process(config.root):
        raise RepairRefused(
            f"the store at {config.root} is locked by a running process (a broker?): stop it "
            "first; repair never changes a store in use (inspect, dump, verify and query work "
            "on it as it runs)")


def plan_repair(config: StoreConfig, rebuild_queues: bool = False,
                rebuild_index: bool = False, rebuild_compaction: Sequence[str] = ()) -> RepairPlan:
    """What :func:`apply_repair` would do (nothing is changed). ``rebuild_compaction`` names
    compacted queues (``TOPIC`` or ``TOPIC:QUEUE``) whose compaction files are to be removed."""
    check_unlocked(config)
    report = verify_store(config.root, config)
    plan = RepairPlan(report)
    if report.compaction is not None:
        try:
            plan_compaction(config, report.compaction, rebuild_compaction, plan.actions)
        except CompactionRepairRefused as exc:
            raise RepairRefused(str(exc)) from None
    size = config.mapped_file_size_commit_log
    segments = sorted(p for p in config.commit_log_dir.glob("*") if p.name.isdigit()) if (
        config.commit_log_dir.is_dir()) else []
    for i, path in enumerate(segments):
        length = path.stat().st_size
        if length == size:
            continue
        if i == len(segments) - 1 and length < size:
            plan.actions.append(Action("extend-segment", str(path),
                                       f"{length} -> {size} bytes (zeros after the cut)"))
        else:
            raise RepairRefused(
                f"CommitLog segment {path} is {length} bytes, not {size}: pass the broker.conf "
                "the store was written with (-c), or move the file away if it does not belong")
    for cls in MANAGERS:
        _plan_config(config, cls, report, plan)
    log_problems = [p for p in report.problems if p.where == "commitlog"]
    if log_problems:
        first = min(p.offset for p in log_problems)
        later = [p.name for p in segments if int(p.name) > first]
        plan.actions.append(Action(
            "truncate", "commitlog", f"cut at offset {first} ({log_problems[0].message}): "
            f"zero the rest of its segment" + (f", delete {len(later)} later segment(s)"
                                              if later else "")))
    queue_problems = [p for p in report.problems if p.where.startswith("consumequeue/")]
    # entries past the CommitLog end are cut by recovery itself; anything else needs a rebuild
    past_end = [p for p in queue_problems if "past the CommitLog end" in p.message]
    queue_damage = len(past_end) < len(queue_problems)
    if queue_damage or rebuild_queues:
        plan.actions.append(Action("rebuild-queues", str(config.consume_queue_dir),
                                   "remove every ConsumeQueue; recovery rebuilds them"))
    index_damage = any(p.where.startswith("index/") for p in report.problems)
    plan.recover = bool(log_problems or past_end or queue_damage or index_damage or rebuild_queues
                        or rebuild_index or any(a.kind == "extend-segment" for a in plan.actions))
    if plan.recover and config.message_index_enable:
        plan.actions.append(Action("rebuild-index", str(config.index_dir),
                                   f"remove {len(index_paths(config))} index file(s); recovery "
                                   "re-indexes every record"))
    if plan.recover:
        plan.actions.append(Action("recover", str(config.root),
                                   "abnormal recovery from the first segment: CRC of every "
                                   "record, cut at the first bad one, rebuild what is missing"))
    return plan


def _plan_config(config: StoreConfig, cls: type[JsonConfigFile], report: VerifyReport,
                 plan: RepairPlan) -> None:
    where = f"config/{cls.FILE_NAME}"
    if not any(p.where == where for p in report.problems):
        return
    bak = config.root / "config" / (cls.FILE_NAME + ".bak")
    probe = cls(bak)
    try:
        probe.decode(bak.read_bytes())
    except (OSError, ValueError, BolideError) as exc:
        raise RepairRefused(f"{where} does not decode and neither does its .bak ({exc}): fix "
                            "or remove it by hand (the broker then starts with an empty table)"
                            ) from None
    plan.actions.append(Action("restore-config", where, f"copy {bak.name} over it"))


def apply_repair(config: StoreConfig, plan: RepairPlan) -> RepairPlan:
    """Carry out ``plan`` (from :func:`plan_repair` on the same config)."""
    from bolide.store.store import MessageStore

    check_unlocked(config)
    root = config.root
    if plan.report.compaction is not None:
        apply_compaction(config, plan.actions, plan.report.compaction)
    for action in plan.actions:
        if action.kind == "extend-segment":
            os.truncate(action.target, config.mapped_file_size_commit_log)
        elif action.kind == "restore-config":
            target = root / action.target
            shutil.copyfile(target.with_name(target.name + ".bak"), target)
        elif action.kind == "rebuild-queues":
            shutil.rmtree(config.consume_queue_dir, ignore_errors=True)
        elif action.kind == "rebuild-index":
            shutil.rmtree(config.index_dir, ignore_errors=True)
    if plan.recover:
        (root / "abort").touch()
        with open(root / "checkpoint", "wb") as f:  # all zero: recover from the first segment
            f.write(bytes(CHECKPOINT_SIZE))
            os.fsync(f.fileno())
        safe = config.replace(file_reserved_time_hours=1 << 30, clean_file_forcibly_enable=False,
                              enable_compaction=False)  # compaction files: repaired above
        store = MessageStore(safe)
        try:
            store.open()
        except StoreLockedError as exc:
            raise RepairRefused(str(exc)) from None
        plan.recovery = store.recovery_report
        store.close()
    return plan
