"""Disk watermarks for real: a 4 MiB tmpfs fills past diskSpaceWarningLevelRatio (90 %), puts
are refused with a remark that says the usage, the threshold and what to do, cleaning frees
space, and puts resume by themselves once usage falls, with no restart.

Each test runs on a real tmpfs (if this process may mount one) and on injected usage: the
store measures usage through ``retention.read_disk_usage``, replaced by what a 4 MiB disk
would report for the files under the store (deleted files still mapped included).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.store import (
    GetMessageResult,
    GetStatus,
    MessageStore,
    PutMessageResult,
    PutStatus,
    StoreConfig,
)
from bolide.store import retention as R
from bolide.testing.crash import check_queues, eat_space, mounted_tmpfs
from conftest import assert_consistent, small_config

TOPIC = "RetentionDisk"
CAPACITY = 4 * 1024 * 1024
BODY = 4000  # about 16 records per 64 KiB segment


class _SmallDisk:
    """A 4 MiB disk under ``mount``: a real tmpfs, or usage injected into the store."""

    def __init__(self, mount: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.mount = mount
        self.root = mount / "store"
        self.how = how
        self.filler = 0
        self._scratch = mount / "scratch"
        if how == "injected":
            monkeypatch.setattr(R, "read_disk_usage", self.usage)

    def _used(self) -> int:
        used = self.filler
        for dirpath, _, names in os.walk(self.mount):
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    used += os.stat(os.path.join(dirpath, name)).st_blocks * 512
        deleted: dict[str, int] = {}  # unlinked files whose pages a mapping still holds
        with open("/proc/self/maps") as f:
            for line in f:
                if line.rstrip().endswith(" (deleted)") and str(self.mount) in line:
                    span, *_, path, _ = line.split()
                    lo, hi = (int(x, 16) for x in span.split("-"))
                    deleted[path] = max(deleted.get(path, 0), hi - lo)
        return used + sum(deleted.values())

    def usage(self, path: Path) -> int:
        """The injected ``read_disk_usage``."""
        free = max(0, CAPACITY - self._used())
        return R.usage_percent(CAPACITY, free, free)

    def fill_to(self, percent: int) -> None:
        """Take space (a scratch file) until the disk is ``percent`` % used."""
        leave = CAPACITY * (100 - percent) // 100
        if self.how == "tmpfs":
            eat_space(self._scratch, leave)
        else:
            self.filler = max(0, CAPACITY - leave - self._used())

    def free(self) -> None:
        """Someone deletes the scratch file."""
        if self.how == "tmpfs":
            self._scratch.unlink()
        else:
            self.filler = 0


@pytest.fixture(params=["tmpfs", "injected"])
def disk(request: pytest.FixtureRequest, tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[_SmallDisk]:
    mount = tmp_path / "small"
    with contextlib.ExitStack() as stack:
        how = "injected"
        if request.param == "tmpfs":
            try:
                stack.enter_context(mounted_tmpfs(mount, "4m"))
                how = "tmpfs"
                print("a real 4 MiB tmpfs")
            except PermissionError as exc:
                print(f"cannot mount a tmpfs ({exc}); injecting the usage instead")
        if how == "injected":
            mount.mkdir(exist_ok=True)
            print("disk usage injected into the store's clean service")
        yield _SmallDisk(mount, how, monkeypatch)


def _config(root: Path) -> StoreConfig:
    return small_config(
        root,
        clean_resource_interval_ms=50,
        delete_commit_log_files_interval_ms=0,
        delete_consume_queue_files_interval_ms=0,
        flush_interval_consume_queue_ms=20,
        max_hash_slot_num=64,
        max_index_num=101,
    )


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def _put(store: MessageStore, i: int) -> PutMessageResult:
    body = f"{i}|".encode().ljust(BODY, b"r")
    return store.put_message(Message(TOPIC, body, tags="T", keys=[f"k{i}"]), 0)


def _wait_runs(store: MessageStore, count: int) -> None:
    runs = store.retention_stats().runs
    _wait_for(lambda: store.retention_stats().runs >= runs + count, f"{count} clean runs")


def _assert_refused(r: PutMessageResult, config: StoreConfig) -> None:
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE, r
    head, _, tail = r.remark.partition(" of ")
    assert head.startswith("disk usage ") and head.endswith("%"), r.remark
    assert int(head[len("disk usage "):-1]) > 90, r.remark
    assert tail.startswith(f"{config.commit_log_dir} is past diskSpaceWarningLevelRatio 90%: "
                           "delete old files, lower fileReservedTime"), r.remark
    assert "writes resume by themselves once usage is back to 90% or less" in r.remark


def test_a_full_disk_refuses_writes_until_usage_falls(disk: _SmallDisk) -> None:
    config = _config(disk.root)
    with MessageStore(config) as store:
        for i in range(100):
            assert _put(store, i).ok
        disk.fill_to(97)
        _wait_for(lambda: store.retention_stats().disk_full, "the store sees the full disk")
        for r in (_put(store, 100),
                  store.put_messages([Message(TOPIC, b"a"), Message(TOPIC, b"b")]),
                  store.put_encoded(TOPIC, b"x", b"")):
            _assert_refused(r, config)
        _wait_runs(store, 3)  # cleaning cannot help: the space is not the store's
        _assert_refused(_put(store, 100), config)
        stats = store.retention_stats()
        print(f"[{disk.how}] refused at {stats.disk_usage_percent}%: {stats.disk_full_remark}")

        disk.free()
        _wait_for(lambda: not store.retention_stats().disk_full, "writes resume")
        for i in range(100, 300):
            r = _put(store, i)
            assert r.ok, r
        assert store.wait_dispatched(10)
        assert check_queues(store) == []
        low = store.get_min_offset_in_queue(TOPIC, 0)
    assert_consistent(config)
    with MessageStore(config) as store:
        assert store.get_min_offset_in_queue(TOPIC, 0) == low
        assert store.get_max_offset_in_queue(TOPIC, 0) == 300
        assert check_queues(store) == []
    assert_consistent(config)


def test_cleaning_frees_space_and_writes_resume_on_their_own(disk: _SmallDisk) -> None:
    config = _config(disk.root)
    held: list[GetMessageResult] = []  # pull responses not sent yet: they pin the segments
    with MessageStore(config) as store:
        i, refused = 0, None
        while refused is None:
            for _ in range(40):  # a chunk (the clean thread runs on its own meanwhile)
                r = _put(store, i)
                if r.status is PutStatus.SERVICE_NOT_AVAILABLE:
                    refused = r
                    break
                assert r.ok, r
                i += 1
            assert store.wait_dispatched(10)
            offset = held[-1].next_begin_offset if held else 0
            while offset < i:
                got = store.get_message("g", TOPIC, 0, offset, 32)
                if got.status is GetStatus.OFFSET_TOO_SMALL:  # cleaned before this read came
                    assert got.next_begin_offset > offset, got
                    offset = got.next_begin_offset
                    continue
                assert got.status is GetStatus.FOUND, got.status
                held.append(got)
                offset = got.next_begin_offset
            _wait_runs(store, 1)
            assert i < 5000, "the disk never filled up"
        _assert_refused(refused, config)
        stats = store.retention_stats()
        print(f"[{disk.how}] refused after {i} puts at {stats.disk_usage_percent}%; "
              f"{stats.commit_log_files_deleted} segments deleted but still mapped")
        assert stats.commit_log_files_deleted > 0, "forced cleaning past 85% deletes segments"
        assert stats.unmaps_pending > 0
        _wait_runs(store, 2)
        assert store.retention_stats().disk_full  # the held views keep the space in use

        for got in held:
            got.release()
        held.clear()
        _wait_for(lambda: not store.retention_stats().disk_full, "writes resume by themselves")
        assert store.retention_stats().disk_usage_percent <= 90
        _wait_for(lambda: store.retention_stats().unmaps_pending == 0,
                  "every deleted segment is unmapped")
        for j in range(i, i + 30):
            r = _put(store, j)
            assert r.ok, r
        assert store.wait_dispatched(10)

        _wait_for(lambda: store.retention_stats().consume_queue_files_deleted > 0,
                  "ConsumeQueue files below the new CommitLog min are deleted")
        low = store.get_min_offset_in_queue(TOPIC, 0)
        assert low > 0
        first_cq = min(p.name for p in (config.consume_queue_dir / TOPIC / "0").iterdir())
        assert int(first_cq) == low * 20 // 2000 * 2000  # the files before the min are gone
        got = store.get_message("g", TOPIC, 0, 0)
        assert got.status is GetStatus.OFFSET_TOO_SMALL and got.next_begin_offset == low
        got = store.get_message("g", TOPIC, 0, low, 1)
        assert got.status is GetStatus.FOUND
        assert got.messages[0].body.startswith(f"{low}|".encode())
        got.release()
        assert check_queues(store) == []
    assert_consistent(config)
    with MessageStore(config) as store:
        assert store.get_min_offset_in_queue(TOPIC, 0) >= low
        assert check_queues(store) == []
    assert_consistent(config)
