"""The messages of one queue a consumer holds: pulled and not yet consumed (Java ProcessQueue).

The offset a consumer may commit is the lowest offset still held, or one past the highest
pulled when nothing is held, so a crash never skips a message that was not consumed.
"""

from __future__ import annotations

import asyncio
import time

from bolide.common.message import MessageExt
from bolide.protocol.bodies.admin import ProcessQueueInfo

MIB = 1024 * 1024


class ProcessQueue:
    """Held messages by queue offset (ascending: pulls arrive in order), with their byte size."""

    def __init__(self) -> None:
        self.msgs: dict[int, MessageExt] = {}
        self.size_bytes = 0
        self.max_offset = -1
        self.dropped = False
        self.space = asyncio.Event()  # set whenever messages leave (flow control waits on it)
        self.last_pull_ms = self.last_consume_ms = int(time.time() * 1000)

    @property
    def count(self) -> int:
        return len(self.msgs)

    def add(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            if m.queue_offset not in self.msgs:
                self.msgs[m.queue_offset] = m
                self.size_bytes += len(m.body)
            self.max_offset = max(self.max_offset, m.queue_offset)

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget consumed ``msgs``; the offset to commit now (-1 when nothing was ever held)."""
        for m in msgs:
            if self.msgs.pop(m.queue_offset, None) is not None:
                self.size_bytes -= len(m.body)
        self.space.set()
        self.last_consume_ms = int(time.time() * 1000)
        if self.msgs:
            return next(iter(self.msgs))
        return self.max_offset + 1 if self.max_offset >= 0 else -1

    def drop(self) -> None:
        self.dropped = True
        self.space.set()

    def info(self, commit_offset: int | None, locked: bool = False,
             last_lock_ms: int = 0) -> ProcessQueueInfo:
        """This queue as GET_CONSUMER_RUNNING_INFO reports it."""
        held = self.msgs
        return ProcessQueueInfo(
            commit_offset=-1 if commit_offset is None else commit_offset,
            cached_msg_min_offset=next(iter(held)) if held else 0,
            cached_msg_max_offset=next(reversed(held)) if held else 0,
            cached_msg_count=len(held), cached_msg_size_in_mi_b=self.size_bytes // MIB,
            locked=locked, last_lock_timestamp=last_lock_ms, droped=self.dropped,
            last_pull_timestamp=self.last_pull_ms, last_consume_timestamp=self.last_consume_ms)
