"""Deleting the ConsumeQueues whose messages are all gone from the CommitLog (RocketMQ's
cleanExpiredConsumerQueue) on a live store: their files go, such a queue starts again at
offset 0, the other queues are untouched, and a reopened store agrees."""

from __future__ import annotations

import time
from pathlib import Path

from bolide.common import Message
from bolide.store import GetStatus, MessageStore, StoreConfig
from bolide.testing.crash import check_queues
from conftest import assert_consistent, expire_all_but_the_last_segment, small_config


def fill(store: MessageStore, topic: str, queue_id: int, count: int) -> None:
    for i in range(count):
        assert store.put_message(Message(topic, f"{topic}-{i}|".encode().ljust(300, b".")),
                                 queue_id).ok


def config(root: Path) -> StoreConfig:
    return small_config(root, clean_resource_interval_ms=3_600_000,  # runs come from the test
                        delete_commit_log_files_interval_ms=0,
                        delete_consume_queue_files_interval_ms=0, delete_when="04")


def test_queues_whose_messages_are_all_gone_are_deleted(tmp_path: Path) -> None:
    cfg = config(tmp_path / "store")
    with MessageStore(cfg) as store:
        fill(store, "Old", 0, 250)  # three ConsumeQueue files; retention keeps the last
        fill(store, "Old", 1, 5)
        fill(store, "Other", 0, 5)
        fill(store, "Live", 0, 900)
        fill(store, "Old", 1, 1)  # Old/1 has a message in the newest segment
        expire_all_but_the_last_segment(store)
        directory = cfg.consume_queue_dir / "Old" / "0"
        assert directory.is_dir()

        assert store.clean_expired_queues(lambda topic: topic != "Other") == [("Old", 0)]
        assert not directory.exists() and (cfg.consume_queue_dir / "Old" / "1").is_dir()
        assert store.topics() == {"Live": [0], "Old": [1], "Other": [0]}
        assert store.get_message("g", "Old", 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
        assert store.clean_expired_queues() == [("Other", 0)]
        assert store.clean_expired_queues() == []

        # the queue starts again at 0, in files named as the deleted ones were: closing the
        # deleted files after the grace must leave the new ones alone
        fill(store, "Old", 0, 250)
        assert store.wait_dispatched(10)
        deadline = time.monotonic() + 30  # the clean thread closes their mappings after a grace
        while store.retention_stats().unmaps_pending and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.retention_stats().unmaps_pending == 0
        assert len(list(directory.iterdir())) >= 3
        got = store.get_message("g", "Old", 0, 0, max_count=1)
        assert got.messages[0].body.startswith(b"Old-0|") and got.messages[0].queue_offset == 0
        assert store.get_max_offset_in_queue("Old", 0) == 250
        assert store.get_max_offset_in_queue("Old", 1) == 6
        assert check_queues(store) == []
    assert_consistent(cfg)
    with MessageStore(cfg) as store:  # a reopened store agrees: nothing to rebuild them from
        assert store.topics() == {"Live": [0], "Old": [0, 1]}
        assert store.get_max_offset_in_queue("Old", 0) == 250
    assert_consistent(cfg)


def test_a_queue_with_a_message_not_dispatched_yet_is_kept(tmp_path: Path) -> None:
    """Fault injected: the put path has handed out a queue offset that dispatch has not
    written yet; deleting the queue then would lose that entry, so it stays."""
    with MessageStore(config(tmp_path / "store")) as store:
        fill(store, "Busy", 0, 3)
        fill(store, "Live", 0, 900)
        expire_all_but_the_last_segment(store)
        offsets = store.commit_log.queue_offsets
        offsets[("Busy", 0)] += 1  # as if one more put were on its way to dispatch
        assert store.clean_expired_queues() == []
        offsets[("Busy", 0)] -= 1
        assert store.clean_expired_queues() == [("Busy", 0)]
