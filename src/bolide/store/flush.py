"""Durability services: CommitLog flush (async interval or sync group commit) and the
ConsumeQueue/checkpoint flush. Both run on their own threads; ``os.fdatasync`` releases the
GIL, so appends go on while a flush is under way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from bolide.store.checkpoint import Checkpoint
from bolide.store.commitlog import CommitLog
from bolide.store.config import StoreConfig
from bolide.store.consume_queue import ConsumeQueue

log = logging.getLogger(__name__)


class FlushError(OSError):
    """A flush failed; the store is read-only from then on."""


class CommitLogFlusher(threading.Thread):
    """FlushRealTimeService (ASYNC_FLUSH) and GroupCommitService (SYNC_FLUSH) in one thread."""

    def __init__(self, config: StoreConfig, commit_log: CommitLog, checkpoint: Checkpoint,
                 on_flushed: Callable[[int], None], on_error: Callable[[OSError], None]) -> None:
        super().__init__(name="commitlog-flush", daemon=True)
        self.config = config
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.on_flushed = on_flushed
        self.on_error = on_error
        self.sync = config.sync_flush
        self._cond = threading.Condition()
        self._requests: list[tuple[int, Future[None]]] = []
        self._stopping = False
        self._failed: OSError | None = None
        self._last_thorough = time.monotonic()

    # -- sync group commit --------------------------------------------------------------
    def request(self, offset: int) -> Future[None]:
        """A future completed once the CommitLog is durable up to ``offset``."""
        fut: Future[None] = Future()
        if self._failed is not None:
            fut.set_exception(self._failed)
            return fut
        if self.commit_log.flushed_offset >= offset:
            fut.set_result(None)
            return fut
        with self._cond:
            self._requests.append((offset, fut))
            self._cond.notify()
        return fut

    def wakeup(self) -> None:
        with self._cond:
            self._cond.notify()

    # -- loop ---------------------------------------------------------------------------
    def run(self) -> None:
        interval = self.config.flush_interval_commit_log_ms / 1000
        while not self._stopping:
            if self.sync:
                with self._cond:
                    # sleep only when everything written is durable: a wakeup sent while the
                    # last flush ran would otherwise be lost for a whole wait
                    if (not self._requests and not self._stopping
                            and self.commit_log.max_offset <= self.commit_log.flushed_offset):
                        self._cond.wait(0.01)
                    requests, self._requests = self._requests, []
                self._flush(0, requests)
            else:
                with self._cond:
                    if not self._stopping and not self._requests:
                        self._cond.wait(interval)
                    requests, self._requests = self._requests, []
                thorough = requests or (time.monotonic() - self._last_thorough) * 1000 >= (
                    self.config.flush_commit_log_thorough_interval_ms
                )
                least = 0 if thorough else self.config.flush_commit_log_least_pages
                self._flush(least, requests)
        for _ in range(10):  # shutdown: flush everything
            if not self._flush(0, []):
                break
        with self._cond:
            requests, self._requests = self._requests, []
        self._flush(0, requests)

    def _flush(self, least_pages: int, requests: list[tuple[int, Future[None]]]) -> bool:
        if self._failed is not None:
            for _, fut in requests:
                fut.set_exception(self._failed)
            return False
        store_ts = self.commit_log.last_store_timestamp
        try:
            flushed = self.commit_log.files.flush(least_pages)
        except OSError as exc:
            self._failed = FlushError(
                exc.errno, f"flushing the CommitLog failed: {exc.strerror}; the store is now "
                "read-only: check the disk, then restart to recover"
            )
            log.error("%s", self._failed)
            self.on_error(self._failed)
            for _, fut in requests:
                fut.set_exception(self._failed)
            return False
        if least_pages == 0:
            self._last_thorough = time.monotonic()
            if store_ts:
                self.checkpoint.physic_msg_timestamp = store_ts
        where = self.commit_log.flushed_offset
        pending = []
        for offset, fut in requests:
            if offset <= where:
                fut.set_result(None)
            else:
                pending.append((offset, fut))
        if pending:
            with self._cond:
                self._requests.extend(pending)
        if flushed:
            self.on_flushed(where)
        return flushed

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self.join()


class ConsumeQueueFlusher(threading.Thread):
    """FlushConsumeQueueService: flush queues with enough dirty pages; thoroughly with the
    checkpoint every ``flush_consume_queue_thorough_interval_ms``."""

    def __init__(self, config: StoreConfig, queues: Callable[[], Iterable[ConsumeQueue]],
                 checkpoint: Checkpoint, logics_timestamp: Callable[[], int],
                 on_error: Callable[[OSError], None] | None = None) -> None:
        super().__init__(name="consumequeue-flush", daemon=True)
        self.config = config
        self.queues = queues
        self.checkpoint = checkpoint
        self.logics_timestamp = logics_timestamp
        self.on_error = on_error
        self._stop_event = threading.Event()
        self._last_thorough = time.monotonic()

    def run(self) -> None:
        interval = self.config.flush_interval_consume_queue_ms / 1000
        while not self._stop_event.wait(interval):
            self._flush_or_report(thorough=False)

    def _flush_or_report(self, thorough: bool) -> None:
        """Flush; a failure makes the store read-only through ``on_error`` (never raised)."""
        try:
            self.flush_once(thorough)
        except OSError as exc:
            failed = FlushError(
                exc.errno, f"flushing the ConsumeQueues failed: {exc.strerror or exc}; the store "
                "is now read-only: check the disk, then restart to recover"
            )
            log.error("%s", failed)
            if self.on_error is not None:
                self.on_error(failed)

    def flush_once(self, thorough: bool) -> None:
        now = time.monotonic()
        if (now - self._last_thorough) * 1000 >= self.config.flush_consume_queue_thorough_interval_ms:
            thorough = True
        least = 0 if thorough else self.config.flush_consume_queue_least_pages
        logics_ts = self.logics_timestamp()
        for cq in list(self.queues()):
            cq.flush(least)
        if thorough:
            self._last_thorough = now
            if logics_ts:
                self.checkpoint.logics_msg_timestamp = logics_ts
            self.checkpoint.flush()

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self._flush_or_report(thorough=True)
