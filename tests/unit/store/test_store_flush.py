"""Durability: SYNC_FLUSH group commit, its timeout, dispatch held back to the flushed offset,
and explicit flushes under ASYNC_FLUSH."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import pytest

from bolide.common.message import Message
from bolide.store import FlushDiskType, GetStatus, MessageStore, PutMessageResult, PutStatus
from bolide.store import mapped_file as mapped_file_module
from conftest import SMALL_COMMIT_LOG

Open = Callable[..., MessageStore]
SYNC = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}


@pytest.fixture
def disk_gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Fault injection: while the returned event is clear, ``fdatasync`` and the segments' range
    sync block (a stalled disk)."""
    gate = threading.Event()
    gate.set()
    real = os.fdatasync

    real_range = mapped_file_module.sync_range

    def gated_fdatasync(fd: int) -> None:
        gate.wait(timeout=30)
        real(fd)

    def gated_sync_range(view: memoryview, start: int, length: int) -> None:
        gate.wait(timeout=30)
        real_range(view, start, length)

    monkeypatch.setattr(mapped_file_module.os, "fdatasync", gated_fdatasync)
    if real_range is not None:  # segment flushes sync their written range
        monkeypatch.setattr(mapped_file_module, "sync_range", gated_sync_range)
    yield gate
    gate.set()  # never leave a flusher blocked, whatever the test did


def read_all(store: MessageStore, topic: str, queue_id: int) -> list[int]:
    """Commit log offsets of every message in a queue, read with next_begin_offset."""
    offsets: list[int] = []
    offset = 0
    while True:
        r = store.get_message("g", topic, queue_id, offset)
        if r.status is not GetStatus.FOUND:
            assert r.status is GetStatus.OFFSET_OVERFLOW_ONE, r.status
            return offsets
        offsets += [m.commit_log_offset for m in r.messages]
        offset = r.next_begin_offset


# -- SYNC_FLUSH ------------------------------------------------------------------------------
def test_sync_put_returns_once_flushed(open_store: Open) -> None:
    store = open_store(**SYNC)
    for i in range(40):
        r = store.put_message(Message("TopicTest", bytes(3000 + i)))  # crosses segments
        assert r.status is PutStatus.PUT_OK, r.remark
        assert store.commit_log.flushed_offset >= r.end_offset
    batch = store.put_messages([Message("TopicTest", b"b" * 100) for _ in range(10)])
    assert batch.ok
    assert store.commit_log.flushed_offset >= batch.end_offset
    assert store.max_phy_offset > 2 * SMALL_COMMIT_LOG


def test_sync_concurrent_puts(open_store: Open) -> None:
    store = open_store(**SYNC)
    threads_n, per_thread = 16, 25
    results: list[list[PutMessageResult]] = [[] for _ in range(threads_n)]
    not_flushed: list[PutMessageResult] = []
    errors: list[BaseException] = []
    start = threading.Barrier(threads_n)

    def producer(t: int) -> None:
        try:
            start.wait(timeout=10)
            for i in range(per_thread):
                r = store.put_message(Message("TopicTest", f"{t}-{i}".encode() * 20), queue_id=t % 4)
                if store.commit_log.flushed_offset < r.end_offset:
                    not_flushed.append(r)
                results[t].append(r)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors
    assert not not_flushed
    flat = [r for rs in results for r in rs]
    assert len(flat) == threads_n * per_thread
    assert all(r.status is PutStatus.PUT_OK for r in flat), {r.status for r in flat}
    assert len({r.wrote_offset for r in flat}) == len(flat)
    assert len({r.msg_id for r in flat}) == len(flat)
    for q in range(4):
        qoffs = sorted(r.queue_offset for t, rs in enumerate(results) if t % 4 == q for r in rs)
        assert qoffs == list(range(len(qoffs)))  # unique and gapless per queue
    # every message is readable, in CommitLog order within each queue
    assert store.wait_dispatched()
    for q in range(4):
        offsets = read_all(store, "TopicTest", q)
        expected = sorted(r.wrote_offset for t, rs in enumerate(results) if t % 4 == q for r in rs)
        assert offsets == expected


def test_sync_dispatch_never_passes_flushed_offset_under_load(open_store: Open) -> None:
    store = open_store(**SYNC)
    violations: list[str] = []
    checks = [0]
    done = threading.Event()

    def check_last_entries(queues: set[tuple[str, int]] | None = None) -> None:
        for topic, qid in queues or [("TopicTest", q) for q in range(3)]:
            cq = store.find_consume_queue(topic, qid)
            last = cq.max_offset - 1
            if last < 0:
                continue
            entry = cq.entry(last)
            if entry is None:
                continue
            flushed = store.commit_log.flushed_offset  # read after the entry: it only grows
            checks[0] += 1
            if entry[0] + entry[1] > flushed:
                violations.append(f"{topic}/{qid}#{last} ends at {entry[0] + entry[1]} > {flushed}")

    store.add_dispatch_listener(check_last_entries)  # on the dispatch thread, as entries appear

    def watcher() -> None:  # and from a second thread, concurrently
        while not done.is_set():
            check_last_entries()

    def producer(t: int) -> None:
        for i in range(150):
            store.put_message(Message("TopicTest", bytes(500 + t * 10 + i)), queue_id=t % 3,
                              wait_store=i % 2 == 0)

    watch = threading.Thread(target=watcher)
    watch.start()
    producers = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    for th in producers:
        th.start()
    for th in producers:
        th.join(timeout=60)
    store.flush()
    assert store.wait_dispatched()
    done.set()
    watch.join(timeout=10)
    assert not violations, violations[:5]
    assert checks[0] > 10
    assert sum(store.get_max_offset_in_queue("TopicTest", q) for q in range(3)) == 600


def test_sync_message_invisible_until_flushed(disk_gate: threading.Event, open_store: Open) -> None:
    store = open_store(**SYNC)
    first = store.put_message(Message("TopicTest", b"durable"))
    assert first.ok
    disk_gate.clear()
    try:
        second = store.put_message(Message("TopicTest", b"pending"), wait_store=False)
        assert second.status is PutStatus.PUT_OK  # not waiting for the disk
        assert store.commit_log.flushed_offset == first.end_offset < second.end_offset
        assert store.wait_dispatched()  # caught up with what is durable...
        assert store.get_max_offset_in_queue("TopicTest", 0) == 1  # ...which excludes `second`
        assert store.get_message("g", "TopicTest", 0, 1).status is GetStatus.OFFSET_OVERFLOW_ONE
    finally:
        disk_gate.set()
    store.flush()
    assert store.commit_log.flushed_offset >= second.end_offset
    assert store.wait_dispatched()
    got = store.get_message("g", "TopicTest", 0, 0)
    assert [m.body for m in got.messages] == [b"durable", b"pending"]


def test_sync_flush_disk_timeout(disk_gate: threading.Event, open_store: Open) -> None:
    # long enough for a put's own flush on a loaded machine once the disk is back
    store = open_store(sync_flush_timeout_ms=1000, **SYNC)
    assert store.put_message(Message("TopicTest", b"before")).ok
    disk_gate.clear()
    try:
        r = store.put_message(Message("TopicTest", b"slow disk"))
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert not r.ok
        assert "syncFlushTimeout=1000" in r.remark and "may not be durable" in r.remark
        assert r.wrote_offset >= 0 and r.msg_id  # written, just not confirmed durable
        assert store.commit_log.flushed_offset < r.end_offset
        batch = store.put_messages([Message("TopicTest", b"b1"), Message("TopicTest", b"b2")])
        assert batch.status is PutStatus.FLUSH_DISK_TIMEOUT
    finally:
        disk_gate.set()
    # what waited for the disk is written out (waited for without the put's short timeout)
    store.durable(store.commit_log.max_offset).result(30)
    after = store.put_message(Message("TopicTest", b"after"))  # the store recovers
    assert after.status is PutStatus.PUT_OK
    assert store.commit_log.flushed_offset >= after.end_offset
    assert store.wait_dispatched()
    got = store.get_message("g", "TopicTest", 0, 0)
    assert [m.body for m in got.messages] == [b"before", b"slow disk", b"b1", b"b2", b"after"]


# -- ASYNC_FLUSH -----------------------------------------------------------------------------
def test_async_flush_makes_data_durable(open_store: Open) -> None:
    # background flushing is held off so only store.flush() can move the flushed offset
    store = open_store(flush_commit_log_least_pages=1_000_000,
                       flush_commit_log_thorough_interval_ms=3_600_000)
    assert not store.config.sync_flush
    results = [store.put_message(Message("TopicTest", bytes(2000))) for _ in range(70)]
    assert all(r.ok for r in results)
    assert store.max_phy_offset > 2 * SMALL_COMMIT_LOG
    last_segment = store.commit_log.files.files[-1]
    assert last_segment.flushed_position < last_segment.wrote_position  # still only in memory
    store.flush()
    assert store.commit_log.flushed_offset == store.max_phy_offset
    assert all(mf.flushed_position == mf.wrote_position for mf in store.commit_log.files.files)

    r = store.put_message(Message("TopicTest", b"one more"))
    assert store.commit_log.flushed_offset < r.end_offset  # ASYNC: put does not wait
    store.flush()
    assert store.commit_log.flushed_offset == store.max_phy_offset == r.end_offset
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("TopicTest", 0) == 71
