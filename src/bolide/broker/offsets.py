"""Committed consumer offsets per (group, topic, queue), in memory. ``persist``/``load`` are the
seam where ``consumerOffset.json`` will be written and read."""

from __future__ import annotations


class ConsumerOffsetManager:
    """Offsets keyed like Java's table: ``"topic@group"`` → {queueId: offset}."""

    def __init__(self) -> None:
        self.table: dict[str, dict[int, int]] = {}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table.setdefault(f"{topic}@{group}", {})[queue_id] = offset

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when the group never committed one for the queue."""
        return self.table.get(f"{topic}@{group}", {}).get(queue_id)

    def persist(self) -> None:
        """Write the offsets to durable storage (nothing yet: offsets live in memory)."""

    def load(self) -> None:
        """Read persisted offsets (nothing yet)."""
