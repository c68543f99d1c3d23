"""The config-file part of ``bolide store verify``: each ``config/*.json`` must decode with the
class that owns it, and the consumer offsets must lie within their queues.

A file that does not decode is a problem (the broker falls back to ``<file>.bak``, losing the
newer text); a missing file with a ``.bak``, or an offset outside its queue, is a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from bolide.common.config_persist import backup_path
from bolide.errors import BolideError
from bolide.store.config import StoreConfig
from bolide.store.config_files import (
    ConsumerOffsetManager,
    DelayOffsetManager,
    JsonConfigFile,
)
from bolide.store.dropped_queues import DroppedQueues
from bolide.store.topic_config import SubscriptionGroupManager, TopicConfigManager

if TYPE_CHECKING:
    from bolide.store.verify import VerifyReport

Bounds = Callable[[str, int], "tuple[int, int] | None"]
MANAGERS: tuple[type[JsonConfigFile], ...] = (
    ConsumerOffsetManager, DelayOffsetManager, TopicConfigManager, SubscriptionGroupManager,
    DroppedQueues)


def load_config_file(config: StoreConfig, cls: type[JsonConfigFile]) -> tuple[JsonConfigFile | None, str]:
    """The decoded file (None when absent) and why it failed to decode ("" when it did)."""
    manager = cls.in_store(config.root)
    if not manager.path.exists():
        return None, ""
    try:
        manager.decode(manager.path.read_bytes())
    except (BolideError, ValueError, OSError) as exc:
        return None, str(exc)
    return manager, ""


def check_config_files(config: StoreConfig, bounds: Bounds, report: VerifyReport) -> None:
    """``bounds(topic, queue id)`` gives a queue's (min, max) offsets, None when it has none."""
    from bolide.store.verify import Problem

    for cls in MANAGERS:
        path = config.root / "config" / cls.FILE_NAME
        where = f"config/{cls.FILE_NAME}"
        bak = backup_path(path)
        if not path.exists():
            if bak.exists():
                report.warnings.append(Problem(where, -1, f"missing, but {bak.name} is there: "
                                               f"the broker loads it; copy it to {path.name}"))
            continue
        report.config_files += 1
        manager, error = load_config_file(config, cls)
        if manager is None:
            fix = (f"copy {bak.name} over it" if bak.exists() else "restore it from a backup or "
                   "remove it (the broker then starts with an empty table)")
            report.problems.append(Problem(where, -1, f"does not decode ({error}): {fix}"))
            continue
        if isinstance(manager, ConsumerOffsetManager):
            _check_offsets(manager, bounds, where, report)


def _check_offsets(manager: ConsumerOffsetManager, bounds: Bounds, where: str,
                   report: VerifyReport) -> None:
    from bolide.store.verify import Problem

    for key, table in manager.snapshot().items():
        topic, _, group = key.partition("@")
        for qid, offset in sorted(table.items()):
            found = bounds(topic, qid)
            if found is None:
                continue
            low, high = found
            if offset < 0 or offset > high:
                report.warnings.append(Problem(
                    where, -1, f"group {group} on {topic} queue {qid}: offset {offset} is outside "
                    f"the queue's [{low}, {high}] (the broker corrects it at the next pull)"))
