"""Deleting ConsumeQueues on a live store: those whose messages are all gone from the
CommitLog (RocketMQ's cleanExpiredConsumerQueue), and a topic's queues with their messages
(deleteTopic): their files go, such a queue starts again at offset 0, the other queues are
untouched, and a reopened, repaired or replicated store agrees."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.errors import ConfigError
from bolide.store import BrokerRole, GetStatus, MessageStore, StoreConfig
from bolide.store.dropped_queues import DroppedQueues, load_dropped_queues
from bolide.store.repair import apply_repair, plan_repair
from bolide.store.verify import verify_store
from bolide.testing.crash import check_queues
from conftest import assert_consistent, expire_all_but_the_last_segment, small_config
from unit.store.test_store_append_raw import replicate


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


def put(store: MessageStore, topic: str, queue_id: int, label: str, count: int) -> None:
    for i in range(count):
        msg = Message(topic, f"{label}-{i}|".encode().ljust(300, b"."), keys=label)
        assert store.put_message(msg, queue_id).ok


def bodies(store: MessageStore, topic: str, queue_id: int) -> list[str]:
    got = store.get_message("g", topic, queue_id, store.get_min_offset_in_queue(topic, queue_id),
                            max_count=1000)
    return [m.body.split(b"|")[0].decode() for m in got.messages]


def test_a_deleted_topic_stays_deleted_through_restarts_and_repairs(tmp_path: Path) -> None:
    """Its queues go at once though their records are still in the CommitLog; the records
    are marked deleted so that recovery, verify and a repair that rebuilds every queue from
    the CommitLog leave them out."""
    cfg = config(tmp_path / "store")
    with MessageStore(cfg) as store:
        put(store, "Doomed", 0, "old", 50)
        put(store, "Keep", 0, "keep", 20)
        put(store, "Doomed", 1, "old", 5)
        assert store.wait_dispatched(10)
        assert sorted(store.delete_queues("Doomed".__eq__)) == [("Doomed", 0), ("Doomed", 1)]
        assert store.topics() == {"Keep": [0]}
        assert not (cfg.consume_queue_dir / "Doomed" / "0").exists()
        assert store.get_message("g", "Doomed", 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
        assert set(load_dropped_queues(cfg.root).horizons) == {("Doomed", 0), ("Doomed", 1)}

        put(store, "Doomed", 0, "new", 3)  # the topic made again starts at offset 0
        assert store.wait_dispatched(10)
        assert bodies(store, "Doomed", 0) == ["new-0", "new-1", "new-2"]
        assert [m.body[:5] for m in store.query_message("Doomed", "old")] == []
        assert len(store.query_message("Doomed", "new")) == 3
    report = verify_store(cfg.root, cfg)
    assert report.ok, report.problems
    assert report.deleted_queue_records == 55

    def reopened_agrees() -> None:
        with MessageStore(cfg) as store:
            assert store.topics() == {"Doomed": [0], "Keep": [0]}
            assert bodies(store, "Doomed", 0) == ["new-0", "new-1", "new-2"]
            assert store.get_max_offset_in_queue("Keep", 0) == 20
        assert_consistent(cfg)

    reopened_agrees()
    # every queue rebuilt from the first CommitLog record on (abnormal recovery)
    plan = apply_repair(cfg, plan_repair(cfg, rebuild_queues=True))
    assert plan.recovery is not None and plan.recovery.queue_entries_rebuilt == 23
    reopened_agrees()


def test_a_deleted_queue_is_forgotten_once_its_records_are_gone(tmp_path: Path) -> None:
    cfg = config(tmp_path / "store")
    with MessageStore(cfg) as store:
        put(store, "Doomed", 0, "old", 40)
        assert store.delete_queues("Doomed".__eq__) == [("Doomed", 0)]
        assert store.dropped.horizons
        put(store, "Live", 0, "live", 900)
        expire_all_but_the_last_segment(store)
        assert store.clean_expired_queues() == []
        assert store.dropped.horizons == {}
    assert load_dropped_queues(cfg.root).horizons == {}


def test_the_deleted_queues_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / DroppedQueues.FILE_NAME
    dropped = DroppedQueues(path)
    dropped.add([("T", 0), ("T", 1)], 1000)
    dropped.add([("T", 0)], 500)  # never lowered
    dropped.persist()
    assert path.read_text() == (
        '{\n\t"droppedQueues":[\n\t\t{\n\t\t\t"beforeOffset":1000,\n\t\t\t"queueId":0,\n'
        '\t\t\t"topic":"T"\n\t\t},\n\t\t{\n\t\t\t"beforeOffset":1000,\n\t\t\t"queueId":1,\n'
        '\t\t\t"topic":"T"\n\t\t}\n\t]\n}')
    again = load_dropped_queues(tmp_path)
    assert again.horizons == {("T", 0): 1000, ("T", 1): 1000}
    assert again.dropped("T", 0, 999) and not again.dropped("T", 0, 1000)
    assert not again.dropped("U", 0, 0)
    assert again.prune(1000) and again.horizons == {}
    path.write_text('{"droppedQueues":[{"topic":"T"}]}')
    path.with_name(path.name + ".bak").write_text("{")
    with pytest.raises(ConfigError, match="lacks topic, queueId or beforeOffset"):
        load_dropped_queues(tmp_path)


def test_a_slave_starts_a_queue_again_when_its_master_deleted_it(tmp_path: Path) -> None:
    """The master's deletion reaches a slave only as records numbered from 0 again after
    the old queue's: the slave deletes its copy of the queue there and indexes the new."""
    mcfg = config(tmp_path / "m")
    scfg = config(tmp_path / "s").replace(broker_role=BrokerRole.SLAVE)
    rnd = random.Random(7)
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        put(master, "Doomed", 0, "old", 30)
        put(master, "Keep", 0, "keep", 5)
        replicate(master, slave, 0, rnd)
        assert slave.wait_dispatched(10)
        assert slave.get_max_offset_in_queue("Doomed", 0) == 30
        start = master.max_phy_offset
        master.delete_queues("Doomed".__eq__)
        put(master, "Doomed", 0, "new", 4)
        put(master, "Keep", 0, "keep", 5)
        replicate(master, slave, start, rnd)
        assert slave.wait_dispatched(10)
        assert bodies(slave, "Doomed", 0) == ["new-0", "new-1", "new-2", "new-3"]
        assert slave.get_max_offset_in_queue("Keep", 0) == 10
        assert set(slave.dropped.horizons) == {("Doomed", 0)}
    assert_consistent(scfg)
    with MessageStore(scfg) as slave:
        assert bodies(slave, "Doomed", 0) == ["new-0", "new-1", "new-2", "new-3"]


def test_deleted_topics_leave_no_cached_topic_fields(tmp_path: Path) -> None:
    """Topics written and deleted over and over (a broker's topics come and go) leave nothing
    of theirs in the writer's per-topic caches; a topic made again is written as before."""
    with MessageStore(config(tmp_path / "store")) as store:
        put(store, "Keep", 0, "keep", 1)
        for i in range(50):
            put(store, f"Churn{i}", 0, "x", 2)
            assert store.wait_dispatched(10)
            assert store.delete_queues(f"Churn{i}".__eq__) == [(f"Churn{i}", 0)]
        assert set(store.commit_log.topic_fields) == {"Keep"}
        assert "Churn0" not in store._topic_errors
        put(store, "Churn0", 0, "again", 2)
        assert store.wait_dispatched(10)
        assert bodies(store, "Churn0", 0) == ["again-0", "again-1"]
