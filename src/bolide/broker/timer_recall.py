"""Recalling timer messages before they are due (RocketMQ 5's RecallMessage).

Sending a message with a delivery time answers a recall handle
(:mod:`bolide.common.recall_handle`). A recall names the message by its topic and UNIQ_KEY;
``config/timerRecalls.json`` keeps them until the schedule service meets the message as it
comes due and drops it instead of delivering it (:meth:`TimerRecalls.take`). A recall of a
message delivered already does nothing; entries due more than an hour ago are forgotten. The
file is Bolide's own (RocketMQ keeps recalls in its timer wheel).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bolide.broker.timer import timer_due
from bolide.common import properties as P
from bolide.common.recall_handle import recall_handle
from bolide.errors import ConfigError
from bolide.store.config_files import JsonConfigFile

KEEP_AFTER_DUE_MS = 3600_000

Key = tuple[str, str]  # topic, UNIQ_KEY


def timer_recall_handle(topic: str, broker_name: str, props: dict[str, str]) -> str | None:
    """The recall handle of a timer message stored with ``props`` (None without its due time
    or UNIQ_KEY): one millisecond after its due time, as RocketMQ writes it from TIMER_OUT_MS."""
    due, uniq_key = timer_due(props), props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if due is None or due < 0 or not uniq_key:
        return None
    return recall_handle(topic, broker_name, due + 1, uniq_key)


class TimerRecalls(JsonConfigFile):
    """``timerRecalls.json``: ``{"recalled":[{"dueMs":D,"topic":T,"uniqKey":U}]}``.

    :attr:`due` maps (topic, UNIQ_KEY) to the due time; it is replaced, never changed in place,
    so another thread may read it without the lock.
    """

    FILE_NAME = "timerRecalls.json"
    WHAT = "the recalled timer messages"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.due: dict[Key, int] = {}

    def add(self, topic: str, uniq_key: str, due_ms: int, now_ms: int) -> None:
        """Recall the message; forget the recalls due more than an hour before ``now_ms``."""
        with self._lock:
            kept = {k: v for k, v in self.due.items() if v > now_ms - KEEP_AFTER_DUE_MS}
            kept[(topic, uniq_key)] = due_ms
            self.due = kept

    def take(self, topic: str, uniq_key: str | None) -> bool:
        """Whether the message was recalled (the recall is then used up)."""
        if uniq_key is None or (topic, uniq_key) not in self.due:
            return False
        with self._lock:
            kept = dict(self.due)
            found = kept.pop((topic, uniq_key), None) is not None
            self.due = kept
            return found

    def to_json_obj(self) -> dict[str, Any]:
        with self._lock:
            return {
                "recalled": [
                    {"dueMs": due, "topic": topic, "uniqKey": uniq}
                    for (topic, uniq), due in sorted(self.due.items())
                ]
            }

    def _apply(self, obj: dict[str, Any] | None) -> None:
        items = (obj or {}).get("recalled") or []
        if not isinstance(items, list):
            raise ConfigError("recalled is not a JSON array")
        due: dict[Key, int] = {}
        for item in items:
            try:
                due[(str(item["topic"]), str(item["uniqKey"]))] = int(item["dueMs"])
            except (KeyError, TypeError, ValueError):
                raise ConfigError(f"recalled entry {item!r} lacks topic, uniqKey or dueMs") from None
        self.due = due
