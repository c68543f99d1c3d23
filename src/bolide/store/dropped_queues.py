"""Queues deleted while some of their records are still in the CommitLog.

Deleting a topic (or mqadmin cleanUnusedTopic) deletes its ConsumeQueues at once, as RocketMQ
does, and a message sent to the topic later starts its queue again at offset 0. The deleted
queue's records stay in the CommitLog until retention removes them, and recovery, ``bolide
store verify`` / ``repair`` and the Spark jobs rebuild ConsumeQueues from the CommitLog: each
would bring the deleted queue back. ``config/droppedQueues.json`` records, per deleted
(topic, queue id), the CommitLog offset before which that queue's records belong to the
deleted queue; all of them skip those records. An entry is forgotten once the CommitLog starts
at or after its offset. The file is Bolide's own: RocketMQ ignores it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bolide.errors import ConfigError
from bolide.store.config_files import JsonConfigFile

QueueKey = tuple[str, int]


class DroppedQueues(JsonConfigFile):
    """``droppedQueues.json``: ``{"droppedQueues":[{"beforeOffset":N,"queueId":Q,"topic":T}]}``.

    :attr:`horizons` maps (topic, queue id) to that offset. It is replaced, never changed in
    place, so a thread may read it without the lock.
    """

    FILE_NAME = "droppedQueues.json"
    WHAT = "the dropped queues"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.horizons: dict[QueueKey, int] = {}

    def dropped(self, topic: str, queue_id: int, commit_log_offset: int) -> bool:
        """True when the record at ``commit_log_offset`` belongs to a deleted queue."""
        horizons = self.horizons
        return bool(horizons) and commit_log_offset < horizons.get((topic, queue_id), -1)

    def add(self, keys: Iterable[QueueKey], before: int) -> None:
        """Mark the records of ``keys`` before CommitLog offset ``before`` as deleted."""
        with self._lock:
            horizons = dict(self.horizons)
            for key in keys:
                horizons[key] = max(before, horizons.get(key, 0))
            self.horizons = horizons

    def prune(self, commit_log_min: int) -> bool:
        """Forget the entries whose records are all gone from the CommitLog; True if any."""
        with self._lock:
            kept = {k: v for k, v in self.horizons.items() if v > commit_log_min}
            changed = len(kept) != len(self.horizons)
            self.horizons = kept
            return changed

    def to_json_obj(self) -> dict[str, Any]:
        with self._lock:
            return {"droppedQueues": [
                {"beforeOffset": before, "queueId": qid, "topic": topic}
                for (topic, qid), before in sorted(self.horizons.items())]}

    def _apply(self, obj: dict[str, Any] | None) -> None:
        items = (obj or {}).get("droppedQueues") or []
        if not isinstance(items, list):
            raise ConfigError("droppedQueues is not a JSON array")
        horizons: dict[QueueKey, int] = {}
        for item in items:
            try:
                key = (str(item["topic"]), int(item["queueId"]))
                horizons[key] = max(int(item["beforeOffset"]), horizons.get(key, 0))
            except (KeyError, TypeError, ValueError):
                raise ConfigError(f"droppedQueues entry {item!r} lacks topic, queueId or "
                                  "beforeOffset") from None
        self.horizons = horizons


def load_dropped_queues(store_root: str | Path) -> DroppedQueues:
    """The store's dropped queues (empty when it has none); raises ConfigError when the file
    and its ``.bak`` are both damaged."""
    dropped = DroppedQueues.in_store(store_root)
    dropped.load()
    return dropped
