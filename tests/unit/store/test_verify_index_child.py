"""``bolide store verify`` with the index check in a child process (large indexes) reports
exactly what the in-process check reports: on a clean store, with stale or broken index
entries, after a crash cut the CommitLog's tail (entries past the end, judged once the scan
knows where it ends), and with damage in an earlier segment (the check runs again in-process)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.store import MessageStore, StoreConfig, verify_index
from bolide.store.index_file import HEADER_SIZE
from bolide.store.index_reader import index_paths
from bolide.store.verify import verify_store
from conftest import SMALL_COMMIT_LOG, small_config

SLOTS, ENTRIES = 1000, 4000


@pytest.fixture
def config(tmp_path: Path) -> StoreConfig:
    config = small_config(tmp_path / "store", max_hash_slot_num=SLOTS, max_index_num=ENTRIES)
    with MessageStore(config) as store:
        for i in range(300):
            body = f"body {i} ".encode() + b"x" * (300 + i * 17 % 700)
            assert store.put_message(Message("VerifyT", body, keys=[f"k{i}"]), i % 2).ok
        assert store.wait_dispatched()
    return config


def both(config: StoreConfig, monkeypatch: pytest.MonkeyPatch, *, again_here: bool) -> dict[str, object]:
    """The report of the in-process check, after checking the child's is the same (and that
    the index was checked again in this process only when ``again_here``)."""
    in_process = verify_store(config.root, config).to_json()
    started: list[object] = []
    here: list[object] = []
    start = verify_index.BackgroundIndexCheck.start.__func__  # type: ignore[attr-defined]
    check_here = verify_index.check_index_files

    def counted(cls: type, *args: object) -> object:
        started.append(found := start(cls, *args))
        return found

    def checked_here(*args: object) -> None:
        here.append(args)
        check_here(*args)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(verify_index, "BACKGROUND_MIN_ENTRIES", 1)
        m.setattr(verify_index, "check_index_files", checked_here)
        m.setattr(verify_index.BackgroundIndexCheck, "start", classmethod(counted))
        in_child = verify_store(config.root, config).to_json()
    assert len(started) == 1 and started[0] is not None, "the child process was not used"
    assert len(here) == again_here
    assert in_child == in_process
    return in_process


def used_segments(config: StoreConfig) -> list[Path]:
    return [p for p in sorted(config.commit_log_dir.iterdir()) if p.read_bytes()[:8] != bytes(8)]


def patch(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def entry_at(config: StoreConfig, number: int) -> tuple[Path, int]:
    return index_paths(config)[0], HEADER_SIZE + SLOTS * 4 + number * 20


def clean(config: StoreConfig) -> None:
    pass


def stale_and_broken_entries(config: StoreConfig) -> None:
    path, at = entry_at(config, 7)
    patch(path, at + 4, struct.pack(">q", 12345))  # inside some record
    path, at = entry_at(config, 50)
    patch(path, at + 16, struct.pack(">i", 280))  # a chain link pointing forward


def crash_cut_the_tail(config: StoreConfig) -> None:
    last = used_segments(config)[-1]
    data = last.read_bytes()
    end = len(data.rstrip(b"\0"))
    patch(last, end - 2500, bytes(2500))  # the last records' bytes never reached the disk


def damage_in_an_earlier_segment(config: StoreConfig) -> None:
    first = used_segments(config)[0]
    patch(first, SMALL_COMMIT_LOG // 2, b"\xff" * 64)  # the scan stops in this segment


@pytest.mark.parametrize("damage", [clean, stale_and_broken_entries, crash_cut_the_tail,
                                    damage_in_an_earlier_segment], ids=lambda f: f.__name__)
def test_the_child_reports_what_the_in_process_check_reports(
        config: StoreConfig, monkeypatch: pytest.MonkeyPatch, damage: Callable[[StoreConfig], None]) -> None:
    assert len(used_segments(config)) >= 3, "the store should span several segments"
    damage(config)
    report = both(config, monkeypatch, again_here=damage is damage_in_an_earlier_segment)
    assert report["index_entries"] == 600  # UNIQ_KEY and one key per message
    warnings = " ".join(w["message"] for w in report["warnings"])  # type: ignore[index, union-attr]
    if damage is clean:
        assert report["ok"] and not report["warnings"]
    elif damage is stale_and_broken_entries:
        assert not report["ok"] and "1 entries point at no record" in warnings
    elif damage is crash_cut_the_tail:
        assert "entries point at no record" in warnings  # the keys of the lost records
    else:
        assert not report["ok"] and "entries point at no record" in warnings
        assert report["commit_log_end"] < int(used_segments(config)[1].name)


def test_small_indexes_are_checked_in_process(config: StoreConfig) -> None:
    from bolide.store.offline import open_commit_log

    log = open_commit_log(config)
    try:
        assert verify_index.BackgroundIndexCheck.start(config, log) is None
    finally:
        log.close()


def test_a_failed_child_means_checking_here(config: StoreConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    stale_and_broken_entries(config)
    expected = verify_store(config.root, config).to_json()
    monkeypatch.setattr(verify_index, "BACKGROUND_MIN_ENTRIES", 1)
    monkeypatch.setattr(verify_index.sys, "executable", "/bin/false")  # the child exits 1
    assert verify_store(config.root, config).to_json() == expected
