"""Builds the IndexFiles from the CommitLog on its own position, behind ConsumeQueue
dispatch (RocketMQ builds them in the same reput pass): indexing costs several times what a
ConsumeQueue entry does, and consumers must not wait for it."""

from __future__ import annotations

from collections.abc import Callable

from bolide.store.commitlog import CommitLog
from bolide.store.dispatch import parse_segment
from bolide.store.index_service import IndexService


class IndexBuilder:
    """Indexes the records between its position and ``limit()`` (where dispatch is)."""

    def __init__(self, index: IndexService, commit_log: CommitLog,
                 limit: Callable[[], int]) -> None:
        self.index = index
        self.commit_log = commit_log
        self.limit = limit
        last = index.last_indexed
        # the newest indexed record is skipped by IndexService.build: start on it
        self.reput_from = max(commit_log.min_offset, min(last, commit_log.max_offset)
                              if last >= 0 else 0)

    def behind(self) -> int:
        """Bytes dispatched but not yet indexed."""
        return max(0, self.limit() - self.reput_from)

    def dispatch_available(self, max_bytes: int = 1 << 62) -> int:
        """Index what dispatch has passed (up to about ``max_bytes``); returns bytes consumed."""
        commit_log = self.commit_log
        build = self.index.build
        limit = self.limit()
        start = self.reput_from
        while self.reput_from < limit and self.reput_from - start < max_bytes:
            if self.reput_from < commit_log.min_offset:
                self.reput_from = commit_log.min_offset
            after = parse_segment(commit_log, self.reput_from, limit, build, log_errors=False)
            if after is None:
                break
            self.reput_from = after
        return self.reput_from - start
