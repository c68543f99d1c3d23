"""MessageStore lifecycle: open/close, the directory lock, the abort file, restart and
configuration loading."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from bolide.common import properties as P
from bolide.common.message import Message
from bolide.common.msgid import decode_offset_msg_id
from bolide.errors import StoreError, StoreFormatError, StoreLockedError
from bolide.store import BrokerRole, FlushDiskType, GetStatus, MessageStore, PutStatus, StoreConfig
from bolide.store.mapped_file import file_name
from conftest import SMALL_COMMIT_LOG, assert_consistent

Open = Callable[..., MessageStore]


def test_context_manager_opens_and_closes(store_config: StoreConfig) -> None:
    root = store_config.root
    with MessageStore(store_config) as store:
        assert store.running
        assert (root / "abort").exists()
        assert (root / "lock").read_bytes()[:4] == b"lock"
        assert store.put_message(Message("TopicTest", b"x")).ok
    assert not store.running
    assert not (root / "abort").exists()
    assert store.put_message(Message("TopicTest", b"y")).status is PutStatus.SERVICE_NOT_AVAILABLE

    with pytest.raises(RuntimeError, match="boom"), MessageStore(store_config) as again:
        assert again.put_message(Message("TopicTest", b"z")).ok
        raise RuntimeError("boom")
    assert not again.running
    assert not (root / "abort").exists()
    assert_consistent(store_config)


def test_constructor_overrides(tmp_path: Path) -> None:
    store = MessageStore(store_path_root_dir=str(tmp_path / "s"),
                         mapped_file_size_commit_log=SMALL_COMMIT_LOG)
    assert store.config.mapped_file_size_commit_log == SMALL_COMMIT_LOG
    with store:
        assert store.put_message(Message("TopicTest", b"x")).ok
    assert (tmp_path / "s" / "commitlog" / file_name(0)).stat().st_size == SMALL_COMMIT_LOG
    assert_consistent(store.config)


def test_second_store_on_same_directory_is_refused(open_store: Open) -> None:
    store = open_store()
    assert store.put_message(Message("TopicTest", b"x")).ok
    other = MessageStore(store.config)
    with pytest.raises(StoreLockedError) as info:
        other.open()
    text = str(info.value)
    assert str(store.config.root) in text
    assert "already open" in text and "close it first" in text
    assert not other.running
    assert other.put_message(Message("TopicTest", b"y")).status is PutStatus.SERVICE_NOT_AVAILABLE
    # the first store is not disturbed
    assert store.put_message(Message("TopicTest", b"z")).ok
    assert (store.config.root / "abort").exists()


def test_store_locked_by_another_process(store_config: StoreConfig) -> None:
    child_code = textwrap.dedent(
        """
        import sys
        from bolide.common.message import Message
        from bolide.store import MessageStore, StoreConfig
        cfg = StoreConfig(store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=65536,
                          mapped_file_size_consume_queue=2000)
        with MessageStore(cfg) as store:
            store.put_message(Message("T", b"c"))
            print("ready", flush=True)
            sys.stdin.readline()
        """
    )
    child = subprocess.Popen([sys.executable, "-c", child_code, str(store_config.root)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "ready\n"
        with pytest.raises(StoreLockedError, match="locked by another running process"):
            MessageStore(store_config).open()
        child.stdin.write("\n")
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with MessageStore(store_config) as store:  # free again once the other process closed it
        assert not store.recovery_report.abnormal
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("T", 0) == 1
    assert_consistent(store_config)


def test_clean_close_then_normal_recovery(open_store: Open) -> None:
    store = open_store()
    for i in range(20):
        assert store.put_message(Message("TopicTest", f"m{i}".encode() * 500), queue_id=i % 2).ok
    end = store.max_phy_offset
    assert (store.config.root / "abort").exists()
    store.close()
    assert not (store.config.root / "abort").exists()
    store.close()  # closing twice is harmless

    store = open_store()
    report = store.recovery_report
    assert not report.abnormal
    assert report.clean
    assert report.truncations == [] and report.queue_entries_removed == 0
    assert report.queue_entries_rebuilt == 0
    assert report.commit_log_end == end
    assert report.summary().startswith("normal recovery")
    assert store.max_phy_offset == end
    assert (store.config.root / "abort").exists()


def test_queue_offsets_continue_after_reopen(open_store: Open) -> None:
    store = open_store()
    for i in range(5):
        store.put_message(Message("TopicTest", f"a{i}".encode()), queue_id=0)
    for i in range(3):
        store.put_message(Message("TopicTest", f"b{i}".encode()), queue_id=1)
    for _ in range(2):
        store.put_message(Message("TopicTest", b"d", properties={P.DELAY_TIME_LEVEL: "1"}))
    store.close()

    for round_ in range(2):
        store = open_store()
        assert store.get_max_offset_in_queue("TopicTest", 0) == 5 + round_
        a = store.put_message(Message("TopicTest", f"a{5 + round_}".encode()), queue_id=0)
        b = store.put_message(Message("TopicTest", f"b{3 + round_}".encode()), queue_id=1)
        d = store.put_message(Message("TopicTest", b"d", properties={P.DELAY_TIME_LEVEL: "1"}))
        assert (a.queue_offset, b.queue_offset, d.queue_offset) == (5 + round_, 3 + round_, 2 + round_)
        store.close()

    store = open_store()
    got = store.get_message("g", "TopicTest", 0, 0)
    assert got.status is GetStatus.FOUND
    assert got.queue_offsets == list(range(7))
    assert [m.queue_offset for m in got.messages] == list(range(7))
    assert [m.body for m in got.messages] == [f"a{i}".encode() for i in range(7)]
    got = store.get_message("g", "TopicTest", 1, 0)
    assert [m.body for m in got.messages] == [f"b{i}".encode() for i in range(5)]
    assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 4


def test_put_refused_when_not_open(store_config: StoreConfig) -> None:
    store = MessageStore(store_config)
    r = store.put_message(Message("TopicTest", b"x"))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "open()" in r.remark
    store.open()
    assert store.put_message(Message("TopicTest", b"x")).ok
    store.close()
    for r in (store.put_message(Message("TopicTest", b"y")),
              store.put_messages([Message("TopicTest", b"y")])):
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert not r.ok
        assert "open()" in r.remark
    assert_consistent(store_config)


def test_slave_refuses_puts(open_store: Open) -> None:
    store = open_store(broker_role=BrokerRole.SLAVE)
    r = store.put_message(Message("TopicTest", b"x"))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "master" in r.remark
    assert store.max_phy_offset == 0


def test_open_from_rocketmq_properties_file(tmp_path: Path) -> None:
    root = tmp_path / "store"
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# broker.conf as RocketMQ reads it\n"
        "brokerClusterName = DefaultCluster\n"
        "brokerName=broker-a\n"
        "brokerId=0\n"
        f"storePathRootDir={root}\n"
        "mappedFileSizeCommitLog=65536\n"
        "mapedFileSizeConsumeQueue=2000\n"
        "flushDiskType=SYNC_FLUSH\n"
        "brokerIP1=10.1.2.3\n"
        "listenPort=10921\n"
        "maxMessageSize=1000\n"
        "messageDelayLevel=1s 2s 3s\n",
        encoding="utf-8",
    )
    cfg = StoreConfig.from_properties(conf)
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    with MessageStore(cfg) as store:
        r = store.put_message(Message("TopicTest", b"x"))
        assert r.ok
        assert decode_offset_msg_id(r.offset_msg_id or "") == ("10.1.2.3:10921", 0)
        assert store.commit_log.flushed_offset >= r.end_offset  # SYNC_FLUSH
        big = store.put_message(Message("TopicTest", b"b" * 1001))
        assert big.status is PutStatus.MESSAGE_ILLEGAL and "maxMessageSize=1000" in big.remark
        d = store.put_message(Message("TopicTest", b"d", properties={P.DELAY_TIME_LEVEL: "9"}))
        assert d.ok
        delayed = store.look_message_by_offset(d.wrote_offset)
        assert delayed is not None and delayed.properties[P.DELAY_TIME_LEVEL] == "3"
        assert store.wait_dispatched()
        cq_dir = root / "consumequeue" / "TopicTest" / "0"
    assert (root / "commitlog" / file_name(0)).stat().st_size == 65536
    assert (cq_dir / file_name(0)).stat().st_size == 2000
    assert_consistent(cfg)


def test_commit_log_segment_of_wrong_size_fails_to_open(store_config: StoreConfig) -> None:
    cl_dir = store_config.commit_log_dir
    cl_dir.mkdir(parents=True)
    bad = cl_dir / file_name(0)
    bad.write_bytes(b"\0" * 1000)
    with pytest.raises(StoreFormatError) as info:
        MessageStore(store_config).open()
    text = str(info.value)
    assert str(bad) in text and "1000 bytes" in text
    assert "mappedFileSizeCommitLog" in text and "move the file away" in text
    assert not (store_config.root / "abort").exists()

    bad.unlink()  # the fix the message names; the failed open left the directory unlocked
    with MessageStore(store_config) as store:
        assert store.put_message(Message("TopicTest", b"x")).ok
    assert_consistent(store_config)


def test_reopen_with_other_segment_size_names_the_setting(store_config: StoreConfig) -> None:
    with MessageStore(store_config) as store:
        for _ in range(3):
            assert store.put_message(Message("TopicTest", b"x" * 1000)).ok
    bigger = store_config.replace(mapped_file_size_commit_log=2 * SMALL_COMMIT_LOG)
    with pytest.raises(StoreFormatError, match=f"{SMALL_COMMIT_LOG} bytes.*mappedFileSizeCommitLog"):
        MessageStore(bigger).open()
    other_cq = store_config.replace(mapped_file_size_consume_queue=4000)
    with pytest.raises(StoreFormatError, match="mappedFileSizeConsumeQueue"):
        MessageStore(other_cq).open()
    with MessageStore(store_config) as store:  # the data is untouched
        assert store.recovery_report.clean
        got = store.get_message("g", "TopicTest", 0, 0)
        assert got.message_count == 3
    assert_consistent(store_config)


def test_reads_refused_clearly_when_not_open(store_config: StoreConfig) -> None:
    store = MessageStore(store_config)
    reads: list[Callable[[], object]] = [
        lambda: store.get_message("g", "TopicTest", 0, 0),
        lambda: store.look_message_by_offset(0),
        lambda: store.get_offset_in_queue_by_time("TopicTest", 0, 0),
        lambda: store.get_earliest_message_time("TopicTest", 0),
    ]
    for read in reads:
        with pytest.raises(StoreError, match="not open; call open"):
            read()
    with store:
        assert store.put_message(Message("TopicTest", b"x")).ok
        assert store.wait_dispatched()
        held = store.get_message("g", "TopicTest", 0, 0)
        assert held.status is GetStatus.FOUND
        for read in reads:
            read()
    for read in reads:  # not an error from inside the closed mappings
        with pytest.raises(StoreError, match="not open; call open"):
            read()
    assert held.messages[0].body == b"x"  # a result taken while open stays usable
    assert_consistent(store_config)


def test_same_instance_can_be_reopened(store_config: StoreConfig) -> None:
    store = MessageStore(store_config)
    assert store.open() is store
    assert store.open() is store  # opening an open store is a no-op
    for i in range(5):
        assert store.put_message(Message("TopicTest", f"m{i}".encode())).ok
    store.close()
    store.open()
    try:
        assert not store.recovery_report.abnormal and store.recovery_report.clean
        assert store.put_message(Message("TopicTest", b"m5")).queue_offset == 5
        assert store.wait_dispatched()
        got = store.get_message("g", "TopicTest", 0, 0)
        assert [m.body for m in got.messages] == [f"m{i}".encode() for i in range(6)]
    finally:
        store.close()
    assert_consistent(store_config)
