"""Expired ConsumeQueues deleted while a writer thread starts them again: every message the
store acknowledged stays readable at the queue offset it was given, files of the new queues
are never touched by the deleted ones' cleanup, and the store verifies afterwards."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.store import MessageStore
from bolide.testing.crash import check_queues
from conftest import assert_consistent, expire_all_but_the_last_segment, small_config

QUEUES = [(f"Cold{t}", q) for t in range(7) for q in range(3)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_queues_deleted_while_a_writer_starts_them_again(tmp_path: Path, seed: int) -> None:
    cfg = small_config(tmp_path / "store", clean_resource_interval_ms=3_600_000,
                       delete_when="04", delete_commit_log_files_interval_ms=0,
                       delete_consume_queue_files_interval_ms=0)
    rng = random.Random(seed)
    acked: dict[tuple[str, int], list[tuple[int, bytes]]] = {key: [] for key in QUEUES}
    with MessageStore(cfg) as store:
        for i in range(3000):  # spread over many segments, then expired but the last one
            topic, qid = QUEUES[rng.randrange(len(QUEUES))] if i < 2900 else ("Live", 0)
            assert store.put_message(Message(topic, b"old" + b"." * 300), qid).ok
        expire_all_but_the_last_segment(store)
        expired = {(cq.topic, cq.queue_id) for cq in store.consume_queues()
                   if 0 <= cq.max_physic_offset <= store.min_phy_offset}
        assert len(expired) >= 10

        start, stop = threading.Barrier(2), threading.Event()

        def writer() -> None:
            start.wait()
            n = 0
            while not stop.is_set() or n < 500:
                key = QUEUES[rng.randrange(len(QUEUES))]
                body = b"new-%d" % n
                r = store.put_message(Message(key[0], body), key[1])
                assert r.ok, r
                acked[key].append((r.queue_offset, body))
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        start.wait()
        dropped: list[tuple[str, int]] = []
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            dropped += store.clean_expired_queues()
        stop.set()
        thread.join(30)
        assert not thread.is_alive()
        assert store.wait_dispatched(10)
        assert dropped and set(dropped) <= expired
        grace = time.monotonic() + 30  # the deleted files' descriptors close after a grace
        while store.retention_stats().unmaps_pending and time.monotonic() < grace:
            time.sleep(0.05)
        assert store.retention_stats().unmaps_pending == 0

        for key, messages in acked.items():
            if not messages:
                continue
            first = max(i for i, (offset, _) in enumerate(messages)
                        if offset == 0) if key in dropped else 0  # the last start at 0
            for offset, body in messages[first:]:
                got = store.get_message("g", key[0], key[1], offset, max_count=1)
                assert got.messages and got.messages[0].body == body, (key, offset)
        assert check_queues(store) == []
    assert_consistent(cfg)
