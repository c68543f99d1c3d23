"""RocketMQ 5's ``config/timercheck``: how far its timer wheel got (read-only here).

A page-sized file of big-endian longs: ``lastReadTimeMs`` (timer messages due before it were
delivered), ``lastTimerLogFlushPos``, ``lastTimerQueueOffset`` (the messages of the timer topic's
queue before it are in the wheel), ``masterTimerQueueOffset``, then the data version
(``stateVersion``, ``timestamp``, ``counter``; 5.1 and later).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "timercheck"
_HEAD = struct.Struct(">qqqq")


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    last_read_time_ms: int
    last_timer_log_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int

    @classmethod
    def read(cls, path: str | Path) -> TimerCheckpoint | None:
        """The checkpoint in ``path``; None when the file is missing or too short."""
        try:
            with open(path, "rb") as fh:
                data = fh.read(_HEAD.size)
        except FileNotFoundError:
            return None
        if len(data) < _HEAD.size:
            return None
        return cls(*_HEAD.unpack(data))
