"""``bolide store inspect``: what a store directory holds, read-only, as a JSON-ready dict.

Segments and the CommitLog's min/max offsets, each topic's queues (min/max offsets, counts),
index files, checkpoint times, the abort flag and lock, consumer groups with their lag, and the
compacted queues' files with ``position-checkpoint``'s offsets.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

from bolide.store.checkpoint import is_locked_by_other_process
from bolide.store.config import StoreConfig
from bolide.store.config_files import ConsumerOffsetManager
from bolide.store.index_reader import IndexGeometryError, index_paths, open_index
from bolide.store.offline import (
    open_commit_log,
    open_queue,
    queue_dirs,
    queue_range,
    scan_end,
)
from bolide.store.verify_compaction import compaction_info
from bolide.store.verify_config import MANAGERS, load_config_file

_CHECKPOINT = struct.Struct(">qqqqq")
_CHECKPOINT_NAMES = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
                     "master_flushed_offset", "confirm_phy_offset")

def format_ms(ms: int) -> str:
    """Local time of a millisecond timestamp, ``-`` for 0."""
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def read_checkpoint(root: Path) -> dict[str, int] | None:
    """The checkpoint's fields, read without opening it for writing; None when absent."""
    path = root / "checkpoint"
    if not path.is_file():
        return None
    data = path.read_bytes()[: _CHECKPOINT.size]
    if len(data) < _CHECKPOINT.size:
        data += bytes(_CHECKPOINT.size - len(data))
    return dict(zip(_CHECKPOINT_NAMES, _CHECKPOINT.unpack(data), strict=True))


def inspect_store(config: StoreConfig) -> dict[str, Any]:
    root = config.root
    out: dict[str, Any] = {
        "root": str(root.resolve()),
        "lock_held": is_locked_by_other_process(root),
        "abort": (root / "abort").exists(),
    }
    with open_commit_log(config) as log:
        end, reason = scan_end(log)
        out["commit_log"] = {
            "dir": str(config.commit_log_dir),
            "segment_size": config.mapped_file_size_commit_log,
            "segments": [{"name": p.name, "start": s, "bytes": log.size}
                         for p, (s, _) in zip(log.paths, log.maps, strict=True)],
            "problems": [f"{i.path}: {i.message}" for i in log.issues],
            "min_offset": log.start,
            "max_offset": end,
            "end_reason": reason,
        }
        cl_min = log.start
    out["checkpoint"] = read_checkpoint(root)
    topics: dict[str, dict[str, Any]] = {}
    for (topic, qid), _path in queue_dirs(config).items():
        with open_queue(config, topic, qid) as segs:
            low, high = queue_range(segs, cl_min)
            topics.setdefault(topic, {})[str(qid)] = {
                "min_offset": low, "max_offset": high, "count": high - low,
                "files": len(segs.maps)}
    out["topics"] = topics
    out["index_files"] = _index_files(config)
    out["compaction"] = compaction_info(config)
    out["consumer_groups"] = _groups(config, topics)
    out["config_files"] = {
        cls.FILE_NAME: ("missing" if not (root / "config" / cls.FILE_NAME).exists()
                        else (load_config_file(config, cls)[1] or "ok"))
        for cls in MANAGERS}
    return out


def _index_files(config: StoreConfig) -> list[dict[str, Any]]:
    files = []
    for path in index_paths(config):
        try:
            with open_index(config, path) as reader:
                h = reader.header
                files.append({"name": path.name, "begin_timestamp": h.begin_timestamp,
                              "end_timestamp": h.end_timestamp,
                              "begin_phy_offset": h.begin_phy_offset,
                              "end_phy_offset": h.end_phy_offset,
                              "hash_slot_count": h.hash_slot_count,
                              "entries": max(0, h.index_count - 1),
                              "max_entries": reader.index_num})
        except (IndexGeometryError, OSError, ValueError) as exc:
            files.append({"name": path.name, "error": str(exc)})
    return files


def _groups(config: StoreConfig, topics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    manager, _error = load_config_file(config, ConsumerOffsetManager)
    groups: dict[str, Any] = {}
    if not isinstance(manager, ConsumerOffsetManager):
        return groups
    for key, table in sorted(manager.snapshot().items()):
        topic, _, group = key.partition("@")
        queues = topics.get(topic, {})
        rows = {}
        for qid, offset in sorted(table.items()):
            q = queues.get(str(qid))
            high = q["max_offset"] if q else None
            rows[str(qid)] = {"offset": offset, "max_offset": high,
                              "lag": max(0, high - offset) if high is not None else None}
        groups.setdefault(group, {})[topic] = rows
    return groups
