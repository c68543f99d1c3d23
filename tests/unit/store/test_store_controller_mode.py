"""The store in controller mode: the confirm offset as dispatch ceiling (kept in the
checkpoint's confirmPhyOffset), truncate_to for a slave whose tail diverges, runtime roles."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from bolide.common.message import Message
from bolide.errors import StoreError
from bolide.store import BrokerRole, GetStatus, MessageStore, StoreConfig
from bolide.store.controller_mode import TruncateError
from conftest import assert_consistent, small_config
from unit.store.test_store_append_raw import replicate


def ctrl_config(root: Path, **overrides: object) -> StoreConfig:
    return small_config(root, enable_controller_mode=True, **overrides)


def put(store: MessageStore, n: int, prefix: str = "m", keys: bool = True) -> list[int]:
    """``n`` messages on TopicA queue 0; returns their end offsets."""
    ends = []
    for i in range(n):
        r = store.put_message(Message("TopicA", f"{prefix}{i}".encode() * 200, tags="t",
                                      keys=f"{prefix}{i}" if keys else None), 0)
        assert r.ok, r.remark
        ends.append(r.end_offset)
    return ends


def visible(store: MessageStore) -> int:
    store.wait_dispatched(5)
    return store.get_max_offset_in_queue("TopicA", 0)


def settles_at(store: MessageStore, count: int) -> bool:
    """TopicA/0 reaches ``count`` entries and stays there. With a confirm offset inside a
    record dispatch never catches up to it (that record waits), so wait_dispatched would
    only time out: poll instead."""
    deadline = time.monotonic() + 5
    while store.get_max_offset_in_queue("TopicA", 0) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)
    return store.get_max_offset_in_queue("TopicA", 0) == count


def test_without_controller_mode_nothing_changes(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path)) as store:
        ends = put(store, 5)
        assert visible(store) == 5
        assert store.confirm_offset == ends[-1]
        with pytest.raises(StoreError, match="enableControllerMode"):
            store.set_confirm_offset(0)


def test_confirm_offset_is_the_ceiling_of_dispatch(tmp_path: Path) -> None:
    cfg = ctrl_config(tmp_path)
    with MessageStore(cfg) as store:
        store.set_confirm_offset(None)  # a master alone: follows the max offset
        ends = put(store, 10)
        assert visible(store) == 10 and store.confirm_offset == ends[-1]
        store.set_confirm_offset(ends[3])
        ends += put(store, 5, "n")
        assert visible(store) == 10
        assert store.confirm_offset == ends[3]
        store.set_confirm_offset(ends[12] + 7)  # inside the next record: that one waits
        assert settles_at(store, 13)
        got = store.get_message("g", "TopicA", 0, 10, 32)
        assert got.status is GetStatus.FOUND and len(got.messages) == 3
        store.set_confirm_offset(ends[-1])
        assert visible(store) == 15
        assert store.checkpoint.confirm_phy_offset == ends[-1]


def test_read_uncommitted_ignores_the_ceiling(tmp_path: Path) -> None:
    with MessageStore(ctrl_config(tmp_path, read_uncommitted=True)) as store:
        store.set_confirm_offset(0)
        put(store, 4)
        assert visible(store) == 4 and store.confirm_offset == 0


def test_restart_keeps_unconfirmed_records_hidden(tmp_path: Path) -> None:
    cfg = ctrl_config(tmp_path)
    with MessageStore(cfg) as store:
        store.set_confirm_offset(None)
        ends = put(store, 6)
        store.set_confirm_offset(ends[2])
        put(store, 3, "n")
    raw = (tmp_path / "checkpoint").read_bytes()
    assert int.from_bytes(raw[32:40], "big") == ends[2]  # confirmPhyOffset
    (tmp_path / "abort").touch()  # recovery dispatches every record again: not these
    with MessageStore(cfg) as store:
        assert store.confirm_offset == ends[2]
        assert visible(store) == 3
        store.set_confirm_offset(store.max_phy_offset)
        assert visible(store) == 9
    assert_consistent(cfg)


def slave_pair(tmp_path: Path) -> tuple[StoreConfig, StoreConfig]:
    return ctrl_config(tmp_path / "m"), ctrl_config(tmp_path / "s", broker_role=BrokerRole.SLAVE)


def test_truncate_to_cuts_commitlog_queues_and_index(tmp_path: Path) -> None:
    mcfg, scfg = slave_pair(tmp_path)
    rnd = random.Random(3)
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        master.set_confirm_offset(None)
        ends = put(master, 120)  # crosses segments (64 KiB)
        replicate(master, slave, 0, rnd)
        assert len(slave.commit_log.files.files) > 1
        slave.append_raw(slave.max_phy_offset, b"\0\0\0")  # half a record header: held
        assert slave.raw_received == slave.max_phy_offset + 3
        slave.set_confirm_offset(master.max_phy_offset)
        assert visible(slave) == 120
        cut = ends[59]
        listened: list[object] = []
        slave.add_dispatch_listener(listened.append)
        report = slave.truncate_to(cut)
        assert report.truncations and slave.max_phy_offset == cut
        assert slave.confirm_offset == cut
        assert visible(slave) == 60
        assert slave.query_message("TopicA", "m70") == []
        assert [m.body for m in slave.query_message("TopicA", "m10")] == [b"m10" * 200]
        with pytest.raises(TruncateError, match="no record starts there"):
            slave.truncate_to(ends[10] + 3)
        # the slave goes on from the cut with other data (a new master's)
        slave.set_broker_role(BrokerRole.ASYNC_MASTER)
        slave.recover_queue_offsets()
        slave.set_confirm_offset(None)
        put(slave, 5, "x")
        assert visible(slave) == 65
        assert [m.body for m in slave.query_message("TopicA", "x3")] == [b"x3" * 200]
        assert listened  # listeners survive the reopen
        got = slave.get_message("g", "TopicA", 0, 58, 10)
        assert [m.body[:3] for m in got.messages] == [b"m58", b"m59", b"x0x", b"x1x", b"x2x",
                                                      b"x3x", b"x4x"]
    assert_consistent(scfg)


def test_truncate_to_a_segment_start_and_to_zero(tmp_path: Path) -> None:
    mcfg, scfg = slave_pair(tmp_path)
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        master.set_confirm_offset(None)
        put(master, 120)
        replicate(master, slave, 0, random.Random(1))
        seg = scfg.mapped_file_size_commit_log
        assert len(slave.commit_log.files.files) > 1
        slave.truncate_to(seg)
        assert slave.max_phy_offset == seg
        slave.truncate_to(0)
        assert slave.max_phy_offset == 0
        slave.set_confirm_offset(0)
        assert visible(slave) == 0
        replicate(master, slave, 0, random.Random(2))
        slave.set_confirm_offset(slave.max_phy_offset)
        assert visible(slave) == 120
    assert_consistent(scfg)


def test_runtime_role_change(tmp_path: Path) -> None:
    with MessageStore(ctrl_config(tmp_path)) as store:
        store.set_broker_role(BrokerRole.SLAVE)
        r = store.put_message(Message("TopicA", b"x"), 0)
        assert not r.ok and "SLAVE" in (r.remark or "")
        assert store.compaction is not None and store.compaction.hold_heads  # see heads_needed
        store.set_broker_role(BrokerRole.SYNC_MASTER)
        assert store.put_message(Message("TopicA", b"x"), 0).ok
        with pytest.raises(StoreError, match="raw appends"):
            store.append_raw(0, b"")
        assert not store.compaction.hold_heads  # a master copies compacted queues in at once


def test_slave_confirm_offset_inside_a_record(tmp_path: Path) -> None:
    """A RocketMQ slave acks its received end, which may cut a record: the record waits."""
    mcfg, scfg = slave_pair(tmp_path)
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        master.set_confirm_offset(None)
        ends = put(master, 30)
        replicate(master, slave, 0, random.Random(5))
        slave.set_confirm_offset(ends[9] + 100)
        assert settles_at(slave, 10)
        slave.set_confirm_offset(ends[20] - 1)
        assert settles_at(slave, 20)
        slave.set_confirm_offset(ends[-1])
        assert visible(slave) == 30
    assert_consistent(scfg)
