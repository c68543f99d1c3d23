"""MessageStore.append_raw: a SLAVE store fed a master's CommitLog byte ranges (HA frames)
ends byte-identical per segment, with its own ConsumeQueues and index built by dispatch."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bolide.common.message import Message
from bolide.errors import StoreError
from bolide.store import BrokerRole, GetStatus, MessageStore, PutStatus, StoreConfig
from bolide.store.mapped_file import file_name
from bolide.store.replica import ReplicaGapError
from conftest import SMALL_COMMIT_LOG, assert_consistent, small_config

SEG = SMALL_COMMIT_LOG


def fill(master: MessageStore, count: int, seed: int = 1) -> list[tuple[str, int, bytes]]:
    """Put ``count`` messages of varied sizes over two topics; returns (topic, queue, body)."""
    rnd = random.Random(seed)
    sent = []
    for i in range(count):
        topic = "TopicA" if i % 3 else "TopicB"
        qid = i % 2
        body = f"m{i}:".encode() + bytes(rnd.randrange(0, 3000))
        r = master.put_message(Message(topic, body, tags=f"t{i % 4}", keys=f"k{i}"), qid)
        assert r.ok, r.remark
        sent.append((topic, qid, body))
    return sent


def replicate(master: MessageStore, slave: MessageStore, start: int, rnd: random.Random,
              end: int | None = None) -> None:
    """Copy the master's CommitLog from ``start`` in random chunks cut like HA frames
    (at most 32 KiB, never past a segment's written end)."""
    stop = master.max_phy_offset if end is None else end
    pos = start
    while pos < stop:
        found = master.commit_log.readable_from(pos, stop)
        assert found is not None
        view, rel = found
        n = min(len(view) - rel, rnd.randrange(1, 32 * 1024))
        assert slave.append_raw(pos, view[rel : rel + n]) <= pos + n
        pos += n
        assert slave.raw_received == pos


def segments(config: StoreConfig) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in config.commit_log_dir.iterdir()}


def slave_config(root: Path, **overrides: object) -> StoreConfig:
    return small_config(root, broker_role=BrokerRole.SLAVE, **overrides)


def test_slave_fed_from_zero_is_byte_identical(tmp_path: Path) -> None:
    mcfg, scfg = small_config(tmp_path / "m"), slave_config(tmp_path / "s")
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        sent = fill(master, 300)
        assert master.max_phy_offset > 3 * SEG  # several segments, BLANK tails included
        replicate(master, slave, 0, random.Random(7))
        assert slave.max_phy_offset == master.max_phy_offset
        assert slave.wait_dispatched(10) and master.wait_dispatched(10)
        for topic, qid in {(t, q) for t, q, _ in sent}:
            assert slave.get_max_offset_in_queue(topic, qid) == master.get_max_offset_in_queue(
                topic, qid)
            got = slave.get_message("g", topic, qid, 0, 1)
            want = master.get_message("g", topic, qid, 0, 1)
            assert got.status is GetStatus.FOUND
            assert bytes(got.buffers[0]) == bytes(want.buffers[0])
        hits = slave.query_message("TopicB", "k3")
        assert [m.body for m in hits] == [sent[3][2]]
    m_files, s_files = segments(mcfg), segments(scfg)
    assert set(s_files) <= set(m_files)
    assert file_name(0) in s_files and file_name(3 * SEG) in s_files
    for name, data in s_files.items():
        assert data == m_files[name], f"segment {name} differs"
    assert_consistent(mcfg)
    assert_consistent(scfg)


def test_empty_slave_starts_at_the_masters_last_segment(tmp_path: Path) -> None:
    mcfg, scfg = small_config(tmp_path / "m"), slave_config(tmp_path / "s")
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        fill(master, 200)
        start = master.max_phy_offset - master.max_phy_offset % SEG
        assert start > 0
        with pytest.raises(ReplicaGapError, match="segment boundary"):
            slave.append_raw(start + 8, b"x" * 8)
        replicate(master, slave, start, random.Random(3))
        more = fill(master, 50, seed=2)  # the master goes on; the slave follows
        replicate(master, slave, slave.max_phy_offset, random.Random(4))
        assert slave.wait_dispatched(10) and master.wait_dispatched(10)
        topic, qid, _ = more[-1]
        last = master.get_max_offset_in_queue(topic, qid) - 1
        assert slave.get_max_offset_in_queue(topic, qid) == last + 1
        got = slave.get_message("g", topic, qid, last, 1)
        assert got.status is GetStatus.FOUND
        assert bytes(got.buffers[0]) == bytes(master.get_message("g", topic, qid, last, 1).buffers[0])
        assert slave.min_phy_offset == start
    m_files, s_files = segments(mcfg), segments(scfg)
    assert file_name(0) not in s_files
    for name, data in s_files.items():
        assert data == m_files[name], f"segment {name} differs"
    assert_consistent(scfg)


def test_a_new_stream_from_the_whole_records_drops_the_held_part(tmp_path: Path) -> None:
    mcfg, scfg = small_config(tmp_path / "m"), slave_config(tmp_path / "s")
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        fill(master, 30)
        replicate(master, slave, 0, random.Random(8), end=5000)
        whole = slave.max_phy_offset
        assert whole < slave.raw_received == 5000
        replicate(master, slave, whole, random.Random(9))  # a reconnect resends from there
        assert slave.max_phy_offset == master.max_phy_offset
    assert_consistent(scfg)


def test_bytes_that_are_not_a_record_are_refused(tmp_path: Path) -> None:
    with MessageStore(slave_config(tmp_path / "s")) as slave:
        with pytest.raises(ReplicaGapError, match="not a record"):
            slave.append_raw(0, b"\x00\x00\x00\x10garbage!")
        assert slave.max_phy_offset == 0 and slave.raw_received == 0


def test_gap_is_refused_and_nothing_written(tmp_path: Path) -> None:
    mcfg, scfg = small_config(tmp_path / "m"), slave_config(tmp_path / "s")
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        fill(master, 20)
        replicate(master, slave, 0, random.Random(1), end=1000)
        assert slave.raw_received == 1000
        with pytest.raises(ReplicaGapError, match="received up to 1000"):
            slave.append_raw(1500, b"\0" * 10)
        with pytest.raises(ReplicaGapError):
            slave.append_raw(900, b"\0" * 10)
        assert slave.raw_received == 1000 and slave.max_phy_offset < 1000
        replicate(master, slave, 1000, random.Random(2))
        assert slave.max_phy_offset == master.max_phy_offset
        assert slave.wait_dispatched(10) and master.wait_dispatched(10)
        assert slave.get_max_offset_in_queue("TopicA", 1) == master.get_max_offset_in_queue(
            "TopicA", 1)
    assert_consistent(scfg)


def test_partial_record_is_not_dispatched_until_complete(tmp_path: Path) -> None:
    mcfg, scfg = small_config(tmp_path / "m"), slave_config(tmp_path / "s")
    with MessageStore(mcfg) as master, MessageStore(scfg) as slave:
        r1 = master.put_message(Message("TopicA", b"a" * 500), 0)
        r2 = master.put_message(Message("TopicA", b"b" * 500), 0)
        view = master.commit_log.read(0, r2.end_offset)
        assert view is not None
        # the second record cut short: only the first is written, the rest waits in memory
        assert slave.append_raw(0, view[: r2.wrote_offset + 100]) == r2.wrote_offset
        assert slave.raw_received == r2.wrote_offset + 100
        assert slave.wait_dispatched(10)
        assert slave.get_max_offset_in_queue("TopicA", 0) == 1
        seg = (scfg.commit_log_dir / file_name(0)).read_bytes()
        assert not any(seg[r2.wrote_offset :])  # no torn record in the file
        slave.append_raw(r2.wrote_offset + 100, view[r2.wrote_offset + 100 :])
        assert slave.wait_dispatched(10)
        assert slave.get_max_offset_in_queue("TopicA", 0) == 2
        assert r1.ok
    assert_consistent(scfg)


def test_slave_restart_with_a_torn_tail_resumes_at_the_last_whole_record(tmp_path: Path) -> None:
    mcfg, scfg = small_config(tmp_path / "m"), slave_config(tmp_path / "s")
    with MessageStore(mcfg) as master:
        fill(master, 100)
        cut = master.max_phy_offset - 50  # inside the last record
        with MessageStore(scfg) as slave:
            replicate(master, slave, 0, random.Random(5), end=cut)
        with MessageStore(scfg) as slave:
            resume = slave.max_phy_offset
            assert resume < cut  # the torn record never reached the file
            replicate(master, slave, resume, random.Random(6))
            assert slave.wait_dispatched(10)
            assert slave.max_phy_offset == master.max_phy_offset
    m_files, s_files = segments(mcfg), segments(scfg)
    for name, data in s_files.items():
        assert data == m_files[name], f"segment {name} differs"
    assert_consistent(scfg)


def test_roles_guard_writes(tmp_path: Path) -> None:
    with MessageStore(slave_config(tmp_path / "s")) as slave:
        r = slave.put_message(Message("TopicA", b"x"))
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "SLAVE" in r.remark and "master" in r.remark
        assert slave.put_messages([Message("TopicA", b"x")]).status is PutStatus.SERVICE_NOT_AVAILABLE
    with MessageStore(small_config(tmp_path / "m")) as master, pytest.raises(StoreError,
                                                                           match="SLAVE"):
        master.append_raw(0, b"x")
    closed = MessageStore(slave_config(tmp_path / "s"))
    with pytest.raises(StoreError, match="not open"):
        closed.append_raw(0, b"x")


def test_broker_role_is_read_from_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 's'}\nbrokerRole=SLAVE\n")
    assert StoreConfig.from_properties(conf).broker_role is BrokerRole.SLAVE
    conf.write_text("brokerRole=SYNC_MASTER\n")
    assert StoreConfig.from_properties(conf).broker_role is BrokerRole.SYNC_MASTER
