"""Builds the IndexFiles from the CommitLog on its own position, behind ConsumeQueue
dispatch (RocketMQ builds them in the same reput pass): indexing costs several times what a
ConsumeQueue entry does, and consumers must not wait for it."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from bolide.store.commitlog import CommitLog
from bolide.store.dispatch import IndexFed, parse_segment, resume_point
from bolide.store.index_file import COMPILED
from bolide.store.index_service import IndexService


class IndexBuilder:
    """Indexes the records between its position and ``limit()`` (where dispatch is)."""

    def __init__(self, index: IndexService, commit_log: CommitLog, limit: Callable[[], int],
                 feed: deque[IndexFed] | None = None) -> None:
        self.index = index
        self.feed = feed
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
        """Index what dispatch has passed (up to about ``max_bytes``); returns bytes consumed.
        Records dispatch handed on (:attr:`feed`) are taken as they are; the others are read
        from the CommitLog, by the compiled loop when there is one (a record it does not
        take is parsed in Python, then the loop goes on)."""
        commit_log = self.commit_log
        build = self.index.build
        feed = self.feed
        limit = self.limit()
        start = self.reput_from
        while self.reput_from < limit and self.reput_from - start < max_bytes:
            if feed and self._take_fed(feed, limit):
                continue
            self.reput_from, stop = resume_point(commit_log, self.reput_from, feed, limit)
            if COMPILED and self._build_compiled(stop):
                continue
            after = parse_segment(commit_log, self.reput_from, stop, build, log_errors=False,
                                  max_records=1 if COMPILED else -1)
            if after is None:
                break
            self.reput_from = after
        return self.reput_from - start

    def _build_compiled(self, stop: int) -> bool:
        """Index records from :attr:`reput_from` up to ``stop`` in bulk; False when the
        first is not one the compiled loop takes (or nothing is readable)."""
        found = self.commit_log.readable_from(self.reput_from, stop)
        if found is None:
            return False
        view, pos = found
        after = self.index.build_records(view, pos, len(view))
        if after == pos:
            return False
        self.reput_from += after - pos
        return True

    def _take_fed(self, feed: deque[IndexFed], limit: int) -> bool:
        took = False
        build = self.index.build_fields
        while feed:
            phys, size, topic, sys_flag, store_ts, props = feed[0]
            if phys < self.reput_from:  # parsed already
                feed.popleft()
                continue
            if phys != self.reput_from or phys + size > limit:
                break
            feed.popleft()
            build(phys, topic, sys_flag, store_ts, props)
            self.reput_from = phys + size
            took = True
        return took
