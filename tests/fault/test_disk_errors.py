"""Disk full and failing fsync: the store must refuse writes with a status that says what to
do, keep serving every acknowledged message, never crash, and stay consistent on disk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.common import properties as P
from bolide.store import FlushDiskType, MessageStore, PutStatus, StoreConfig, mapped_file
from bolide.store.record import record_size
from bolide.testing.crash import (
    Ack,
    body_digest,
    check_acknowledged,
    check_queues,
    eat_space,
    mounted_tmpfs,
)
from conftest import assert_consistent, small_config

TOPIC = "DiskTopic"
QUEUES = 3


class _Disk:
    """Where the store lives and how space is taken and given back."""

    def __init__(self, root: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.how = how
        self.full = False
        self._monkeypatch = monkeypatch
        self._scratch = root.parent / "scratch"

    def fill(self, leave_bytes: int) -> None:
        """Leave only ``leave_bytes`` free: really (tmpfs), or as a budget of new space that
        ``os.posix_fallocate`` grants and ``os.statvfs`` reports (injected)."""
        if self.how == "tmpfs":
            eat_space(self._scratch, leave_bytes)
            return
        real = os.posix_fallocate
        budget = [leave_bytes]

        def fallocate(fd: int, offset: int, length: int) -> None:
            if self.full and os.fstat(fd).st_size < offset + length:  # needs new space
                if length > budget[0]:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                budget[0] -= length
            real(fd, offset, length)

        real_statvfs = os.statvfs

        def statvfs(path: str | Path) -> os.statvfs_result:
            st = real_statvfs(path)
            if not self.full:
                return st
            fields = list(st)
            fields[4] = budget[0] // st.f_frsize  # f_bavail
            return os.statvfs_result(fields)

        self.full = True
        self._monkeypatch.setattr(os, "posix_fallocate", fallocate)
        self._monkeypatch.setattr(os, "statvfs", statvfs)

    def free(self) -> None:
        if self.how == "tmpfs":
            self._scratch.unlink()
        else:
            self.full = False


@pytest.fixture(params=["tmpfs", "injected"])
def disk(request: pytest.FixtureRequest, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[_Disk]:
    """Two kinds of full disk, each test runs on both: a real 2 MiB tmpfs (if this process may
    not mount one, the output says so and the injected kind runs instead), and ENOSPC
    injected into ``os.posix_fallocate``, the call that reserves the space of every
    CommitLog segment and ConsumeQueue file."""
    mount_point = tmp_path / "small"
    with contextlib.ExitStack() as stack:
        how = "injected"
        if request.param == "tmpfs":
            try:
                stack.enter_context(mounted_tmpfs(mount_point, "2m"))
                how = "tmpfs"
                print("disk full via a 2 MiB tmpfs")
            except PermissionError as exc:
                print(f"cannot mount a tmpfs ({exc}); falling back to injected ENOSPC")
        if how == "injected":
            print("disk full via ENOSPC injected into os.posix_fallocate")
            mount_point.mkdir(exist_ok=True)
        yield _Disk(mount_point / "store", how, monkeypatch)


def _put(store: MessageStore, rng: random.Random, i: int) -> tuple[PutStatus, list[Ack], str]:
    """Put message ``i`` (every seventh a batch of three) to queue ``i % QUEUES``."""
    body = f"d{i}|".encode() + rng.randbytes(rng.randint(10, 400))
    qid = i % QUEUES
    if i % 7 == 3:
        msgs = [Message(TOPIC, body + bytes([k]), tags="T") for k in range(3)]
        r = store.put_messages(msgs, qid)
        if not r.ok:
            return r.status, [], r.remark
        acks, phys = [], r.wrote_offset
        for k, (m, uniq) in enumerate(zip(msgs, r.msg_ids, strict=True)):
            acks.append(Ack("Q", uniq, TOPIC, qid, r.queue_offset + k, phys, len(m.body),
                            body_digest(m.body)))
            props = P.encode_properties({**m.properties, P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq})
            phys += record_size(len(m.body), len(TOPIC), len(props))
        return r.status, acks, ""
    r = store.put_message(Message(TOPIC, body, tags="T", keys=[f"k{i}"]), qid)
    if not r.ok:
        return r.status, [], r.remark
    return r.status, [Ack("Q", r.msg_id or "", TOPIC, qid, r.queue_offset, r.wrote_offset,
                          len(body), body_digest(body))], ""


# Free space left when the filling starts: from a few CommitLog segments down to less than
# one ConsumeQueue page, so the disk runs out at different points of the write path.
@pytest.mark.parametrize("leave", [300_000, 139_264, 135_168, 131_072, 70_000, 8_192, 0])
def test_disk_full_refuses_puts_keeps_reads_and_recovers(disk: _Disk, leave: int) -> None:
    config = small_config(disk.root, clean_resource_interval_ms=3_600_000)  # no watermark runs
    rng = random.Random(leave)
    acks: list[Ack] = []
    store = MessageStore(config).open()
    try:
        for i in range(40):  # some data before the disk fills
            status, stored, remark = _put(store, rng, i)
            assert status is PutStatus.PUT_OK, remark
            acks += stored
        # the clean thread's first run (at open) checks the disk too: a late one, on a busy
        # machine, would see the disk filled below and refuse puts for the watermark instead
        deadline = time.monotonic() + 30
        while store.retention_stats().runs < 1:
            assert time.monotonic() < deadline, "the clean thread never ran"
            time.sleep(0.01)
        disk.fill(leave)
        # Fill up: every put is stored or refused with CREATE_MAPEDFILE_FAILED, never anything
        # else, until the same put is refused three times in a row. (A refusal may come before
        # the disk is quite full, or be followed by successes: space a failed preallocation
        # gives back, or a queue whose ConsumeQueue file still has room.)
        i, refused, remarks = 40, 0, set()
        while refused < 3:
            status, stored, remark = _put(store, rng, i)
            assert status in (PutStatus.PUT_OK, PutStatus.CREATE_MAPEDFILE_FAILED), (status, remark)
            if not stored:
                refused += 1
                remarks.add(remark)
            else:
                acks += stored
                i += 1
                refused = 0
            assert i < 20_000, "the disk never filled up"
        for remark in remarks:
            assert "free disk space" in remark, remark
        print(f"[{disk.how}] disk full after {len(acks)} acknowledged puts: {sorted(remarks)}")

        assert store.wait_dispatched(10)
        assert check_acknowledged(store, acks) == []
        assert check_queues(store) == []

        disk.free()
        for j in range(i + 1, i + 200):  # enough to need new segments and queue files
            status, stored, remark = _put(store, rng, j)
            assert status is PutStatus.PUT_OK, remark
            acks += stored
        assert store.wait_dispatched(10)
        assert check_acknowledged(store, acks) == []
    finally:
        store.close()
    assert not (config.root / "abort").exists()
    assert_consistent(config)
    with MessageStore(config) as store:
        assert store.recovery_report.clean
        assert check_acknowledged(store, acks) == []
    assert_consistent(config)


class _FailingSync:
    """``os.fdatasync`` (and the compiled range sync of segment flushes) failing with EIO once
    armed (a disk that lost its writes)."""

    def __init__(self) -> None:
        self.real = os.fdatasync
        self.real_range = mapped_file.sync_range
        self.armed = False
        self.calls = 0

    def __call__(self, fd: int) -> None:
        if self.armed:
            self.calls += 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.real(fd)

    def sync_range(self, view: memoryview, start: int, length: int) -> None:
        if self.armed:
            self.calls += 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.real_range(view, start, length)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(os, "fdatasync", self)
        if self.real_range is not None:
            monkeypatch.setattr(mapped_file, "sync_range", self.sync_range)


def _sync_config(root: Path) -> StoreConfig:
    return small_config(root, flush_disk_type=FlushDiskType.SYNC_FLUSH)


def test_fsync_error_fails_the_waiting_put_and_makes_the_store_read_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _sync_config(tmp_path / "store")
    failing = _FailingSync()
    failing.install(monkeypatch)
    rng = random.Random(5)
    acks: list[Ack] = []
    store = MessageStore(config).open()
    try:
        for i in range(50):
            status, stored, remark = _put(store, rng, i)
            assert status is PutStatus.PUT_OK, remark
            acks += stored
        assert store.wait_dispatched(10)

        failing.armed = True
        r = store.put_message(Message(TOPIC, b"never durable"), 0)
        assert r.status is not PutStatus.PUT_OK
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE, r
        assert "flushing the CommitLog failed: Input/output error" in r.remark, r.remark
        assert "read-only" in r.remark, r.remark
        assert failing.calls >= 1

        for later in (store.put_message(Message(TOPIC, b"later"), 1),
                      store.put_messages([Message(TOPIC, b"a"), Message(TOPIC, b"b")], 2)):
            assert later.status is PutStatus.SERVICE_NOT_AVAILABLE
            assert "read-only" in later.remark and "restart" in later.remark, later.remark
        # reads keep working
        assert check_acknowledged(store, acks) == []
        assert check_queues(store) == []
    finally:
        store.close()  # must not raise although every fdatasync fails
    assert (config.root / "abort").exists(), "a read-only store must not claim a clean shutdown"

    failing.armed = False  # the disk is fixed; restart recovers
    with MessageStore(config) as store:
        assert store.recovery_report.abnormal
        assert check_acknowledged(store, acks) == []
        assert check_queues(store) == []
        r = store.put_message(Message(TOPIC, b"after restart"), 0)
        assert r.ok, r
    assert_consistent(config)


def test_fsync_error_under_async_flush_makes_the_store_read_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = small_config(tmp_path / "store", flush_interval_commit_log_ms=10)
    failing = _FailingSync()
    failing.install(monkeypatch)
    rng = random.Random(6)
    acks: list[Ack] = []
    store = MessageStore(config).open()
    try:
        for i in range(20):
            status, stored, remark = _put(store, rng, i)
            assert status is PutStatus.PUT_OK, remark
            acks += stored
        failing.armed = True
        with pytest.raises(OSError, match="read-only"):
            store.flush()
        r = store.put_message(Message(TOPIC, b"later"), 0)
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and "read-only" in r.remark
        assert store.wait_dispatched(10)
        assert check_acknowledged(store, acks) == []
    finally:
        store.close()
    failing.armed = False
    with MessageStore(config) as store:
        assert check_acknowledged(store, acks) == []
    assert_consistent(config)
