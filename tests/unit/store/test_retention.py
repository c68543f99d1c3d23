"""Retention: the pure decisions, then CommitLog, ConsumeQueue and index deletion on a live
store (file ages set with os.utime, the clock injected through ``run_retention(now_ms)``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.errors import ConfigError
from bolide.store import GetStatus, MessageStore, PutMessageResult, PutStatus, StoreConfig
from bolide.store import retention as R
from bolide.store.retention import (
    HOUR_MS,
    Watermarks,
    decide,
    disk_full_remark,
    files_to_delete,
    first_offset_at_or_after,
    parse_delete_when,
    usage_percent,
)
from bolide.testing.crash import check_queues
from conftest import SMALL_CONSUME_QUEUE, assert_consistent, small_config

TOPIC = "RetentionTopic"


# -- pure decisions ---------------------------------------------------------------------
def test_parse_delete_when_reads_one_or_several_hours() -> None:
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("04;16") == {4, 16}
    assert parse_delete_when(" 4 ; 16; ") == {4, 16}
    assert parse_delete_when("00;23") == {0, 23}


@pytest.mark.parametrize("bad", ["24", "4am", "", ";", "04,16", "-1"])
def test_parse_delete_when_rejects_what_is_not_an_hour(bad: str) -> None:
    with pytest.raises(ConfigError, match="deleteWhen"):
        parse_delete_when(bad)


def test_a_bad_delete_when_fails_open_and_leaves_the_store_closed(tmp_path: Path) -> None:
    config = small_config(tmp_path / "store", delete_when="4am")
    with pytest.raises(ConfigError, match="use hours 00 to 23"):
        MessageStore(config).open()
    with MessageStore(config.replace(delete_when="04")) as store:  # the lock was released
        assert store.put_message(Message(TOPIC, b"x")).ok
    assert_consistent(config)


def test_usage_percent_is_used_over_used_plus_available_rounded_up() -> None:
    assert usage_percent(100, 50, 50) == 50
    assert usage_percent(1000, 333, 333) == 67  # 66.7 rounds up
    assert usage_percent(100, 20, 10) == 89  # 80 / 90: root's reserved blocks do not count
    assert usage_percent(100, 100, 100) == 0
    assert usage_percent(0, 0, 0) == -1


def test_watermarks_come_from_the_config_clamped_like_rocketmq() -> None:
    assert Watermarks.from_config(StoreConfig()) == Watermarks(75, 85, 90)
    high = StoreConfig(disk_max_used_space_ratio=99, disk_space_clean_forcibly_ratio=99,
                       disk_space_warning_level_ratio=99)
    assert Watermarks.from_config(high) == Watermarks(95, 85, 90)
    low = StoreConfig(disk_max_used_space_ratio=1, disk_space_clean_forcibly_ratio=1,
                      disk_space_warning_level_ratio=1)
    assert Watermarks.from_config(low) == Watermarks(10, 30, 35)


def test_config_reads_the_retention_keys_of_a_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("deleteWhen=04;16\nfileReservedTime=48\ncleanFileForciblyEnable=false\n"
                    "deleteCommitLogFilesInterval=5\ndiskSpaceWarningLevelRatio=88\n"
                    "diskSpaceCleanForciblyRatio=80\ndeleteFileBatchMax=3\n")
    c = StoreConfig.from_properties(conf)
    assert (c.delete_when, c.file_reserved_time_hours, c.clean_file_forcibly_enable) == (
        "04;16", 48, False)
    assert (c.delete_commit_log_files_interval_ms, c.delete_file_batch_max) == (5, 3)
    assert Watermarks.from_config(c) == Watermarks(75, 80, 88)


@pytest.mark.parametrize(("hour", "usage", "forcibly", "expected"), [
    (3, 50, True, (False, False, False)),
    (4, 50, True, (True, False, False)),  # the deleteWhen hour: expired files only
    (3, 76, True, (True, False, False)),  # past diskMaxUsedSpaceRatio: whatever the hour
    (3, 85, True, (True, False, False)),
    (3, 86, True, (True, True, False)),  # past diskSpaceCleanForciblyRatio: whatever the age
    (3, 90, True, (True, True, False)),
    (3, 91, True, (True, True, True)),  # past diskSpaceWarningLevelRatio: writes refused
    (3, 91, False, (True, False, True)),  # cleanFileForciblyEnable=false
    (3, -1, True, (True, False, False)),  # usage unknown: clean what expired
])
def test_decide(hour: int, usage: int, forcibly: bool, expected: tuple[bool, bool, bool]) -> None:
    d = decide(hour, usage, {4, 16}, Watermarks(), forcibly)
    assert (d.delete, d.force, d.disk_full) == expected
    assert bool(d.reason) == d.delete


def test_files_to_delete_by_age_never_the_last_nor_past_a_kept_one() -> None:
    now, keep = 1_000 * HOUR_MS, 72 * HOUR_MS
    old, new = now - keep - 1, now - keep + 1
    assert files_to_delete([old, old, old], 3, now, keep, False, 10) == 2  # never the last
    assert files_to_delete([old, new, old, old], 4, now, keep, False, 10) == 1  # no holes
    assert files_to_delete([now - keep, old], 2, now, keep, False, 10) == 1  # exactly expired
    assert files_to_delete([new, new, new], 3, now, keep, False, 10) == 0
    assert files_to_delete([new, new, new], 3, now, keep, True, 10) == 2  # forcibly
    assert files_to_delete([old] * 20, 20, now, keep, False, 10) == 10  # at most the batch
    assert files_to_delete([old] * 5, 2, now, keep, True, 10) == 2  # not flushed/dispatched
    assert files_to_delete([old], 1, now, keep, True, 10) == 0
    assert files_to_delete([], 0, now, keep, True, 10) == 0


def test_first_offset_at_or_after() -> None:
    times = [-1, 10, 10, 20, 30, 30, 40]
    at: Callable[[int], int] = times.__getitem__
    assert first_offset_at_or_after(0, 7, 0, at) == 1  # unreadable counts as older
    assert first_offset_at_or_after(0, 7, 10, at) == 1
    assert first_offset_at_or_after(0, 7, 11, at) == 3
    assert first_offset_at_or_after(0, 7, 30, at) == 4
    assert first_offset_at_or_after(2, 7, 5, at) == 2  # never below lo
    assert first_offset_at_or_after(0, 7, 41, at) == 7  # all older: the end
    assert first_offset_at_or_after(3, 3, 41, at) == 3


def test_the_disk_full_remark_says_usage_threshold_and_what_to_do() -> None:
    text = disk_full_remark(91, Path("/data/store"), Watermarks())
    assert text.startswith("disk usage 91% of /data/store is past diskSpaceWarningLevelRatio 90%")
    assert "delete old files" in text and "fileReservedTime" in text
    assert "resume by themselves once usage is back to 90% or less" in text


# -- on a live store --------------------------------------------------------------------
def _config(root: Path, **overrides: object) -> StoreConfig:
    values: dict[str, object] = {
        "clean_resource_interval_ms": 3_600_000,  # runs come from the test, not the thread
        "delete_commit_log_files_interval_ms": 0,
        "delete_consume_queue_files_interval_ms": 0,
        "max_hash_slot_num": 64,
        "max_index_num": 101,  # 100 keys (50 messages with a UNIQ_KEY and a key) per file
    }
    values.update(overrides)
    return small_config(root, **values)


def _fill(store: MessageStore, count: int, queues: int = 1, topic: str = TOPIC,
          size: int = 300) -> list[PutMessageResult]:
    results = []
    for i in range(count):
        body = f"{topic}-{i}|".encode().ljust(size, b".")
        r = store.put_message(Message(topic, body, tags="T", keys=[f"key{i}"]), i % queues)
        assert r.ok, r
        results.append(r)
    return results


def _settle(store: MessageStore) -> None:
    """Everything durable and dispatched, every full ConsumeQueue file flushed."""
    store.flush()
    assert store.wait_dispatched(10)
    for cq in store.consume_queues():
        cq.flush()


def _segments(store: MessageStore) -> list[Path]:
    """The CommitLog segments in use (not the next one, preallocated)."""
    return [mf.path for mf in store.commit_log.files.files]


def _gone(paths: list[Path]) -> bool:
    return not any(p.exists() for p in paths)


def _age(paths: list[Path], now_ms: int, hours: float) -> None:
    ts = (now_ms - hours * HOUR_MS) / 1000
    for p in paths:
        os.utime(p, (ts, ts))


def _at_hour(hour: int) -> int:
    """Epoch ms of today at ``hour``:30 local time."""
    t = time.localtime()
    return int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1)) * 1000)


def test_expired_commit_log_files_go_at_the_delete_hours_only(tmp_path: Path) -> None:
    config = _config(tmp_path / "store", delete_when="04;16")
    with MessageStore(config) as store:
        _fill(store, 900, queues=2)
        _settle(store)
        segments = _segments(store)
        assert len(segments) >= 5
        now = _at_hour(3)
        _age(segments, now, 1)
        _age(segments[:3], now, 73)  # fileReservedTime is 72 h
        stats = store.run_retention(now)
        assert stats.commit_log_files_deleted == 0, "03:30 is not a deleteWhen hour"
        stats = store.run_retention(now + 13 * HOUR_MS)  # 16:30, the second hour listed
        assert stats.commit_log_files_deleted == 3
        assert "deleteWhen hour 16" in stats.last_reason
        assert _segments(store) == segments[3:] and _gone(segments[:3])
        assert store.min_phy_offset == int(segments[3].name)
        stats = store.run_retention(now + HOUR_MS)  # 04:30: the rest is not old enough
        assert stats.commit_log_files_deleted == 3
        assert check_queues(store) == []
    assert_consistent(config)


def test_delete_expired_files_now_deletes_them_whatever_the_hour(tmp_path: Path) -> None:
    """RocketMQ's DELETE_EXPIRED_COMMITLOG: the clean thread runs at once and deletes expired
    files outside the deleteWhen hours; files younger than fileReservedTime stay."""
    away = (time.localtime().tm_hour + 2) % 24  # not now, nor within the test
    config = _config(tmp_path / "store", delete_when=f"{away:02d}")
    with MessageStore(config) as store:
        _fill(store, 900, queues=2)
        _settle(store)
        segments = _segments(store)
        now = int(time.time() * 1000)
        _age(segments[:2], now, 73)  # fileReservedTime is 72 h
        assert store.run_retention().commit_log_files_deleted == 0  # not a deleteWhen hour
        store.delete_expired_files_now()
        deadline = time.monotonic() + 20
        while store.retention_stats().commit_log_files_deleted < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # the clean thread's run: wait for its result
        stats = store.retention_stats()
        assert stats.commit_log_files_deleted == 2 and stats.last_reason == "deleteExpiredCommitLog asked"
        assert _segments(store) == segments[2:]
    assert_consistent(config)


def test_the_last_commit_log_file_is_never_deleted(tmp_path: Path) -> None:
    config = _config(tmp_path / "store")
    with MessageStore(config) as store:
        _fill(store, 400)
        _settle(store)
        segments = _segments(store)
        assert len(segments) >= 3
        now = _at_hour(4)
        _age(segments, now, 100)
        store.run_retention(now)
        store.run_retention(now)
        last = store.commit_log.files.files[-1]
        assert _segments(store) == [last.path] == segments[-1:] and _gone(segments[:-1])
        assert store.min_phy_offset == last.file_from_offset
        r = store.put_message(Message(TOPIC, b"still writable"))
        assert r.ok and r.wrote_offset >= last.file_from_offset
        assert check_queues(store) == []
    assert_consistent(config)


def test_at_most_delete_file_batch_max_files_per_run(tmp_path: Path) -> None:
    config = _config(tmp_path / "store", delete_file_batch_max=2)
    with MessageStore(config) as store:
        _fill(store, 1000)
        _settle(store)
        segments = _segments(store)
        assert len(segments) >= 6
        now = _at_hour(4)
        _age(segments, now, 100)
        assert store.run_retention(now).commit_log_files_deleted == 2
        assert _segments(store) == segments[2:] and _gone(segments[:2])
        assert store.run_retention(now).commit_log_files_deleted == 4
        assert _segments(store) == segments[4:] and _gone(segments[:4])
    assert_consistent(config)


def test_queue_and_index_files_below_the_new_min_go_and_pulls_start_at_the_new_min(
        tmp_path: Path) -> None:
    config = _config(tmp_path / "store")
    with MessageStore(config) as store:
        puts = _fill(store, 1000)
        _settle(store)
        segments = _segments(store)
        cq = store.find_consume_queue(TOPIC, 0)
        cq_dir = config.consume_queue_dir / TOPIC / "0"
        cq_files = sorted(cq_dir.iterdir())
        index_files = sorted(config.index_dir.iterdir())
        assert len(cq_files) >= 10 and len(index_files) >= 15
        now = _at_hour(4)
        _age(segments, now, 100)
        _age(segments[-2:], now, 1)
        stats = store.run_retention(now)

        cl_min = store.min_phy_offset
        assert cl_min == int(segments[-2].name)
        assert stats.commit_log_files_deleted == len(segments) - 2
        new_min = next(r.queue_offset for r in puts if r.wrote_offset >= cl_min)
        assert cq.min_offset == new_min == store.get_min_offset_in_queue(TOPIC, 0)
        # each ConsumeQueue file left has an entry at or past the new min
        per_file = SMALL_CONSUME_QUEUE // 20
        left = sorted(cq_dir.iterdir())
        assert left == cq_files[new_min // per_file :]
        assert stats.consume_queue_files_deleted == new_min // per_file
        # index files whose entries all point below the min are gone, the others stay
        kept_index = sorted(config.index_dir.iterdir())
        assert len(kept_index) < len(index_files) and kept_index == index_files[-len(kept_index):]
        assert stats.index_files_deleted == len(index_files) - len(kept_index)
        assert all(f.end_phy_offset >= cl_min for f in store.index.files)  # type: ignore[union-attr]
        assert store.query_message(TOPIC, "key0") == []
        assert [m.queue_offset for m in store.query_message(TOPIC, "key999")] == [999]

        got = store.get_message("g", TOPIC, 0, 0)
        assert got.status is GetStatus.OFFSET_TOO_SMALL
        assert got.next_begin_offset == new_min == got.min_offset
        got = store.get_message("g", TOPIC, 0, new_min - 1)
        assert got.status is GetStatus.OFFSET_TOO_SMALL
        got = store.get_message("g", TOPIC, 0, new_min, 1)
        assert got.status is GetStatus.FOUND
        assert got.messages[0].body.startswith(f"{TOPIC}-{new_min}|".encode())
        got.release()
        assert check_queues(store) == []
        assert store.put_message(Message(TOPIC, b"after")).ok
    assert_consistent(config)
    with MessageStore(config) as store:  # the min offsets come back the same at startup
        assert store.get_min_offset_in_queue(TOPIC, 0) == new_min
        assert store.min_phy_offset == cl_min
        assert check_queues(store) == []
    assert_consistent(config)


def test_a_topic_retention_floor_moves_the_min_offset_but_keeps_the_commit_log(
        tmp_path: Path) -> None:
    config = _config(tmp_path / "store")
    other = "OtherTopic"
    with MessageStore(config) as store:
        first = _fill(store, 120, queues=2)
        _fill(store, 30, topic=other)
        t1 = first[-1].store_timestamp
        while int(time.time() * 1000) <= t1:  # the next batch is stored strictly later
            pass
        second = _fill(store, 60, queues=2)
        assert second[0].store_timestamp > t1
        _settle(store)
        segments = _segments(store)

        store.set_topic_retention(TOPIC, 1)
        assert store.topic_retention() == {TOPIC: 1}
        # the floor was applied at once against the real clock: nothing is an hour old yet
        assert store.get_min_offset_in_queue(TOPIC, 0) == 0
        stats = store.run_retention(t1 + HOUR_MS + 1)  # batch one is now over an hour old
        assert stats.topic_floors == {TOPIC: 1}
        for qid in (0, 1):
            assert store.get_min_offset_in_queue(TOPIC, qid) == 60
            got = store.get_message("g", TOPIC, qid, 0)
            assert got.status is GetStatus.OFFSET_TOO_SMALL and got.next_begin_offset == 60
            got = store.get_message("g", TOPIC, qid, 60, 1)
            assert got.status is GetStatus.FOUND
            assert got.messages[0].store_timestamp > t1
            got.release()
        assert store.get_min_offset_in_queue(other, 0) == 0  # other topics: global rules only
        assert _segments(store) == segments and store.min_phy_offset == 0
        assert stats.commit_log_files_deleted == 0

        store.run_retention(second[-1].store_timestamp + 2 * HOUR_MS)  # all of it expired
        assert store.get_min_offset_in_queue(TOPIC, 0) == store.get_max_offset_in_queue(TOPIC, 0)
        got = store.get_message("g", TOPIC, 0, 0)
        assert got.status is GetStatus.OFFSET_TOO_SMALL
        r = store.put_message(Message(TOPIC, b"new"), 0)  # a new message is served again
        assert store.wait_dispatched(10)
        got = store.get_message("g", TOPIC, 0, r.queue_offset)
        assert got.status is GetStatus.FOUND
        got.release()

        store.set_topic_retention(TOPIC, None)
        assert store.topic_retention() == {}
        with pytest.raises(ValueError, match="positive number of hours"):
            store.set_topic_retention(TOPIC, -1)
        assert check_queues(store) == []
    assert_consistent(config)


def _mapped_deleted(path: Path) -> bool:
    with open("/proc/self/maps") as f:
        return f"{path} (deleted)" in f.read()


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def test_a_deleted_segment_stays_mapped_while_a_pull_holds_views_of_it(tmp_path: Path) -> None:
    config = _config(tmp_path / "store")
    with MessageStore(config) as store:
        _fill(store, 400)
        _settle(store)
        held = store.get_message("g", TOPIC, 0, 0, 4)
        assert held.status is GetStatus.FOUND
        first = _segments(store)[0]
        _age(_segments(store), _at_hour(4), 100)
        stats = store.run_retention(_at_hour(4))
        assert stats.commit_log_files_deleted >= 2
        assert not first.exists() and _mapped_deleted(first)
        msgs = held.messages  # still readable: decoded from the deleted file's mapping
        assert [m.queue_offset for m in msgs] == [0, 1, 2, 3]
        assert msgs[0].body == f"{TOPIC}-0|".encode().ljust(300, b".")
        assert store.retention_stats().unmaps_pending >= 1
        held.release()
        _wait_for(lambda: store.retention_stats().unmaps_pending == 0,
                  "the clean thread unmaps the deleted segments")
        assert not _mapped_deleted(first)
    assert_consistent(config)


def test_disk_watermarks_with_injected_usage(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    usage = [50]
    monkeypatch.setattr(R, "read_disk_usage", lambda path: usage[0])
    config = _config(tmp_path / "store")
    with MessageStore(config) as store:
        _fill(store, 400)
        _settle(store)
        segments = _segments(store)
        now = _at_hour(3)  # not a deleteWhen hour
        _age(segments, now, 1)  # nothing expired
        _age(segments[:1], now, 80)

        usage[0] = 80  # past diskMaxUsedSpaceRatio: expired files go whatever the hour
        stats = store.run_retention(now)
        assert stats.commit_log_files_deleted == 1 and not stats.disk_full
        assert "diskMaxUsedSpaceRatio 75%" in stats.last_reason

        usage[0] = 91  # past the warning level: refuse writes, clean whatever the age
        stats = store.run_retention(now)
        assert stats.disk_full and stats.disk_usage_percent == 91
        assert len(_segments(store)) == 1
        refused = [store.put_message(Message(TOPIC, b"x")),
                   store.put_messages([Message(TOPIC, b"a"), Message(TOPIC, b"b")]),
                   store.put_encoded(TOPIC, b"x", b"")]
        for r in refused:
            assert r.status is PutStatus.SERVICE_NOT_AVAILABLE, r
            assert r.remark.startswith(f"disk usage 91% of {config.commit_log_dir} is past "
                                       "diskSpaceWarningLevelRatio 90%"), r.remark
            assert "fileReservedTime" in r.remark and "resume" in r.remark

        usage[0] = 90  # back at the level: writes resume with no restart
        stats = store.run_retention(now)
        assert not stats.disk_full
        assert store.put_message(Message(TOPIC, b"again")).ok
        assert store.wait_dispatched(10)
        assert check_queues(store) == []
    assert_consistent(config)


def test_a_full_disk_refuses_the_first_put_after_open(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "read_disk_usage", lambda path: 97)
    config = _config(tmp_path / "store")
    with MessageStore(config) as store:
        r = store.put_message(Message(TOPIC, b"x"))
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "disk usage 97%" in r.remark
        assert store.retention_stats().disk_full
    assert_consistent(config)



def test_reconfigure_changes_retention_of_the_running_store(tmp_path: Path) -> None:
    """fileReservedTime and deleteWhen changed while the store runs decide the next clean run;
    a key the store reads only at open, or a deleteWhen that does not parse, changes nothing."""
    config = _config(tmp_path / "store", delete_when="04")
    with MessageStore(config) as store:
        _fill(store, 600)
        _settle(store)
        segments = _segments(store)
        now = _at_hour(16)
        _age(segments, now, 1)
        _age(segments[:2], now, 30)
        assert store.run_retention(now).commit_log_files_deleted == 0  # 72 h kept, 16:30
        with pytest.raises(ConfigError, match="deleteWhen"):
            store.reconfigure(delete_when="16;x", file_reserved_time_hours=24)
        with pytest.raises(ConfigError, match="max_message_size"):
            store.reconfigure(max_message_size=1024, file_reserved_time_hours=24)
        assert store.config.file_reserved_time_hours == 72 and store.config.delete_when == "04"
        assert store.run_retention(now).commit_log_files_deleted == 0
        changed = store.reconfigure(delete_when="16", file_reserved_time_hours=24)
        assert store.config is changed and changed.file_reserved_time_hours == 24
        assert store.run_retention(now).commit_log_files_deleted == 2
        assert _segments(store) == segments[2:]
    assert_consistent(config)
