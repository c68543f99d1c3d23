"""RocketMQ 5's ``config/timermetrics``: how many timer messages wait per topic.

``{"dataVersion":{...},"timingCount":{"<topic>":{"count":N,"timeStamp":ms}}}``, compact (RocketMQ
writes this file without pretty format). A count goes up when a timer message of the topic starts
waiting and down when it is delivered or recalled; ``timeStamp`` is the time of the last change
and every change moves the data version on (a RocketMQ slave copies the table when the version
differs from its own). Bolide never lets a count go below zero (RocketMQ's can, after its file
was lost).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bolide.common.fastjson import dumps
from bolide.store.config_files import DataVersion, JsonConfigFile, _int, _object


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TimerMetrics(JsonConfigFile):
    """The table of ``timermetrics``; thread-safe (the loop counts, a thread writes)."""

    FILE_NAME = "timermetrics"
    WHAT = "the timer metrics"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._counts: dict[str, tuple[int, int]] = {}  # topic -> (count, time stamp ms)
        self.data_version = DataVersion(state_version=0)

    def add(self, topic: str, delta: int) -> int:
        """Count ``delta`` more (or fewer) timer messages of ``topic`` waiting; the new count."""
        with self._lock:
            count, _ = self._counts.get(topic, (0, 0))
            count = max(count + delta, 0)
            self._counts[topic] = (count, _now_ms())
            self.data_version.next_version()
            return count

    def count(self, topic: str) -> int:
        with self._lock:
            return self._counts.get(topic, (0, 0))[0]

    def remove(self, topic: str) -> bool:
        """Forget ``topic`` (it was deleted); True when it had an entry."""
        with self._lock:
            return self._counts.pop(topic, None) is not None

    def snapshot(self) -> dict[str, tuple[int, int]]:
        with self._lock:
            return dict(self._counts)

    def to_json_obj(self) -> dict[str, Any]:
        with self._lock:
            return {"dataVersion": self.data_version.to_json_obj(),
                    "timingCount": {t: {"count": c, "timeStamp": ts}
                                    for t, (c, ts) in self._counts.items()}}

    def encode(self) -> bytes:
        """Compact JSON, as RocketMQ writes the file and answers GET_TIMER_METRICS."""
        with self._lock:
            return dumps(self.to_json_obj())

    def _apply(self, obj: dict[str, Any] | None) -> None:
        obj = obj or {}
        version = obj.get("dataVersion")
        data_version = DataVersion(state_version=0) if version is None else DataVersion.from_json_obj(version)
        counts = {}
        for topic, metric in _object(obj.get("timingCount"), "timingCount").items():
            if metric is None:
                continue
            entry = _object(metric, f"timingCount[{topic!r}]")
            count = _int(entry.get("count", 0), f"timingCount[{topic!r}].count")
            counts[str(topic)] = (max(count, 0), _int(entry.get("timeStamp", 0),
                                                       f"timingCount[{topic!r}].timeStamp"))
        self._counts, self.data_version = counts, data_version
