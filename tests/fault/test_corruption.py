"""Damaged files on disk: flipped bytes, torn tails, missing ConsumeQueue files, an unclean
shutdown with an empty checkpoint. Recovery must cut the CommitLog at the first bad record
(as RocketMQ does), zero what it cut, report it, rebuild missing ConsumeQueue entries, and
leave a store that the verifier accepts.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from bolide.common import Message
from bolide.store import GetStatus, MessageStore, StoreConfig
from bolide.store.mapped_file import file_name
from bolide.store.record import HEADER_V4
from bolide.store.verify import verify_store
from bolide.testing.crash import (
    Ack,
    body_digest,
    check_acknowledged,
    check_queues,
    flip_byte,
    nonzero_after,
    zero_range,
)
from conftest import SMALL_COMMIT_LOG, assert_consistent, small_config

TOPIC = "FaultTopic"
QUEUES = 2


def _fill(config: StoreConfig, count: int, seed: int = 7, min_body: int = 50,
          max_body: int = 3000) -> list[Ack]:
    """Write ``count`` messages over two queues and close the store cleanly."""
    rng = random.Random(seed)
    acks = []
    with MessageStore(config) as store:
        for i in range(count):
            body = f"m{i}|".encode() + rng.randbytes(rng.randint(min_body, max_body))
            qid = i % QUEUES
            r = store.put_message(Message(TOPIC, body, tags="T", keys=[f"k{i}"]), qid)
            assert r.ok, r
            acks.append(Ack("Q", r.msg_id or "", TOPIC, qid, r.queue_offset, r.wrote_offset,
                            len(body), body_digest(body)))
    return acks


def _segment(config: StoreConfig, offset: int) -> Path:
    return config.commit_log_dir / file_name(offset - offset % SMALL_COMMIT_LOG)


def _segments(config: StoreConfig) -> list[Path]:
    """CommitLog segments holding data (not the spare one allocated ahead of need)."""
    return sorted(p for p in config.commit_log_dir.iterdir() if nonzero_after(p, 0))


def _in_segment(acks: list[Ack], segment_start: int) -> list[Ack]:
    return [a for a in acks
            if segment_start <= a.commit_log_offset < segment_start + SMALL_COMMIT_LOG]


def _assert_cut_at(store: MessageStore, acks: list[Ack], bad: Ack) -> None:
    """Everything before ``bad`` reads back intact; ``bad`` and everything after are gone."""
    kept = [a for a in acks if a.commit_log_offset < bad.commit_log_offset]
    lost = [a for a in acks if a.commit_log_offset >= bad.commit_log_offset]
    assert check_acknowledged(store, kept) == []
    assert check_queues(store) == []
    for qid in range(QUEUES):
        in_queue = [a for a in kept if a.queue_id == qid]
        assert store.get_max_offset_in_queue(TOPIC, qid) == len(in_queue)
    for a in lost:
        got = store.get_message("g", TOPIC, a.queue_id, a.queue_offset, 1)
        assert got.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.OFFSET_OVERFLOW_BADLY)
    assert store.max_phy_offset == bad.commit_log_offset


def _assert_new_puts_work(config: StoreConfig, at: int) -> None:
    with MessageStore(config) as store:
        r = store.put_message(Message(TOPIC, b"after recovery"), 0)
        assert r.ok and r.wrote_offset == at
        store.wait_dispatched()
        got = store.get_message("g", TOPIC, 0, r.queue_offset, 1)
        assert got.status is GetStatus.FOUND and got.messages[0].body == b"after recovery"
        got.release()


def _lose_files_from(queue_dir: Path, first: Path) -> None:
    """Delete ``first`` and the files after it (an empty one made ahead of need, if any)."""
    for path in queue_dir.iterdir():
        if int(path.name) >= int(first.name):
            path.unlink()


@pytest.fixture
def config(tmp_path: Path) -> StoreConfig:
    return small_config(tmp_path / "store")


def test_flipped_body_byte_in_last_segment_truncates_from_that_record(config: StoreConfig) -> None:
    acks = _fill(config, 230)
    segments = _segments(config)
    assert len(segments) >= 4
    last_start = int(segments[-1].name)
    candidates = _in_segment(acks, last_start)
    assert len(candidates) >= 3
    bad = candidates[len(candidates) // 2]
    pos = bad.commit_log_offset - last_start + HEADER_V4.size + bad.body_len // 2
    flip_byte(segments[-1], pos)

    with MessageStore(config) as store:
        report = store.recovery_report
        assert not report.abnormal
        assert [(t.path, t.start, t.end, t.reason) for t in report.truncations] == [
            (str(segments[-1]), bad.commit_log_offset, last_start + SMALL_COMMIT_LOG,
             "body CRC mismatch")
        ]
        assert report.commit_log_end == bad.commit_log_offset
        assert report.queue_entries_removed == len(
            [a for a in acks if a.commit_log_offset >= bad.commit_log_offset])
        assert "body CRC mismatch" in report.summary()
        _assert_cut_at(store, acks, bad)
    assert nonzero_after(segments[-1], bad.commit_log_offset - last_start) == 0
    _assert_new_puts_work(config, bad.commit_log_offset)
    assert_consistent(config)


@pytest.mark.parametrize("body_size", [20, 3000], ids=["small-record", "large-record"])
def test_torn_tail_is_cut_and_zeroed(config: StoreConfig, body_size: int) -> None:
    acks = _fill(config, 150)
    with MessageStore(config) as store:  # one more record of a known size at the very end
        body = b"torn|" + bytes(range(256)) * (body_size // 256) + b"x" * (body_size % 256)
        r = store.put_message(Message(TOPIC, body, tags="T"), 1)
        assert r.ok
    torn = Ack("Q", r.msg_id or "", TOPIC, 1, r.queue_offset, r.wrote_offset, len(body),
               body_digest(body))
    acks.append(torn)
    segment = _segment(config, torn.commit_log_offset)
    start = torn.commit_log_offset - int(segment.name)
    zero_range(segment, start + r.wrote_bytes // 2, start + r.wrote_bytes)

    with MessageStore(config) as store:
        report = store.recovery_report
        assert len(report.truncations) == 1
        cut = report.truncations[0]
        assert (cut.path, cut.start, cut.end) == (
            str(segment), torn.commit_log_offset, int(segment.name) + SMALL_COMMIT_LOG)
        assert cut.reason  # CRC mismatch or a length that does not add up, by where the cut fell
        assert report.queue_entries_removed == 1
        _assert_cut_at(store, acks, torn)
    assert nonzero_after(segment, start) == 0
    assert_consistent(config)


def test_flipped_byte_in_an_earlier_segment_inside_the_recovery_window(config: StoreConfig) -> None:
    """RocketMQ parses from the third-to-last segment and cuts at the first bad record, so a
    bad record in the second-to-last segment costs everything after it, later segments
    included."""
    acks = _fill(config, 200)
    segments = _segments(config)
    victim = segments[-2]
    candidates = _in_segment(acks, int(victim.name))
    bad = candidates[len(candidates) // 3]
    flip_byte(victim, bad.commit_log_offset - int(victim.name) + HEADER_V4.size + 1)

    with MessageStore(config) as store:
        report = store.recovery_report
        cuts = [(t.path, t.start, t.end) for t in report.truncations]
        assert cuts == [
            (str(victim), bad.commit_log_offset, int(victim.name) + SMALL_COMMIT_LOG),
            (str(segments[-1]), int(segments[-1].name), int(segments[-1].name) + SMALL_COMMIT_LOG),
        ]
        assert report.truncations[0].reason == "body CRC mismatch"
        _assert_cut_at(store, acks, bad)
    assert not segments[-1].exists(), "the segment after the cut must be deleted"
    assert nonzero_after(victim, bad.commit_log_offset - int(victim.name)) == 0
    assert_consistent(config)


def test_flipped_byte_before_the_recovery_window_is_found_by_verify_and_full_recovery(
        config: StoreConfig) -> None:
    """A normal restart parses only the last three segments (RocketMQ 4.9.x), so damage in an
    older segment goes unnoticed by recovery; the verifier reports it, and an abnormal recovery
    from an empty checkpoint (abort file + zeroed checkpoint) cuts the log there."""
    acks = _fill(config, 300)
    segments = _segments(config)
    assert len(segments) >= 6
    victim = segments[1]
    bad = _in_segment(acks, int(victim.name))[2]
    flip_byte(victim, bad.commit_log_offset - int(victim.name) + HEADER_V4.size + 1)

    window = sorted(config.commit_log_dir.iterdir())[-3:]  # the spare segment counts
    with MessageStore(config) as store:
        assert store.recovery_report.clean
        assert store.recovery_report.commit_log_start == int(window[0].name)
    report = verify_store(config.root, config)
    first = report.problems[0]
    assert (first.where, first.offset, first.message) == (
        "commitlog", bad.commit_log_offset, "body CRC mismatch")

    (config.root / "abort").touch()
    (config.root / "checkpoint").write_bytes(bytes(4096))
    with MessageStore(config) as store:
        report = store.recovery_report
        assert report.abnormal and report.commit_log_start == 0
        assert report.truncations[0].start == bad.commit_log_offset
        assert report.truncations[0].reason == "body CRC mismatch"
        assert [t.path for t in report.truncations[1:]] == [str(p) for p in segments[2:]]
        _assert_cut_at(store, acks, bad)
    assert_consistent(config)


def test_deleted_last_consume_queue_file_is_rebuilt(config: StoreConfig) -> None:
    acks = _fill(config, 500, max_body=400)
    queue_dir = config.consume_queue_dir / TOPIC / "0"
    files = [p for p in sorted(queue_dir.iterdir()) if nonzero_after(p, 0)]  # not a spare one
    assert len(files) >= 2
    entries = sum(1 for a in acks if a.queue_id == 0) - int(files[-1].name) // 20
    _lose_files_from(queue_dir, files[-1])

    with MessageStore(config) as store:
        report = store.recovery_report
        assert report.queue_entries_rebuilt == entries > 0
        assert store.get_max_offset_in_queue(TOPIC, 0) == sum(1 for a in acks if a.queue_id == 0)
        assert check_acknowledged(store, acks) == []
        assert check_queues(store) == []
    assert_consistent(config)


def test_deleted_last_consume_queue_file_older_than_the_recovery_window(config: StoreConfig) -> None:
    """The missing entries point at segments normal recovery does not parse; the first record
    of the queue it does parse shows the gap, and dispatch starts over from the log start."""
    acks = _fill(config, 400, max_body=400)
    more = _fill(config, 300, seed=8, min_body=1500, max_body=2000)  # pushes queue 0's tail back
    acks += more
    queue_dir = config.consume_queue_dir / TOPIC / "0"
    files = [p for p in sorted(queue_dir.iterdir()) if nonzero_after(p, 0)]
    first_missing = int(files[-1].name) // 20
    _lose_files_from(queue_dir, files[-1])
    first_missing_at = next(a.commit_log_offset for a in acks
                            if a.queue_id == 0 and a.queue_offset == first_missing)

    with MessageStore(config) as store:
        report = store.recovery_report
        assert first_missing_at < report.commit_log_start
        assert report.queue_entries_rebuilt == sum(
            1 for a in acks if a.queue_id == 0 and a.queue_offset >= first_missing)
        assert check_acknowledged(store, acks) == []
        assert check_queues(store) == []
    assert_consistent(config)


def test_deleted_consume_queue_directory_is_rebuilt(config: StoreConfig) -> None:
    acks = _fill(config, 400)
    assert len(_segments(config)) > 3  # more than the normal recovery window
    shutil.rmtree(config.consume_queue_dir)

    with MessageStore(config) as store:
        report = store.recovery_report
        assert report.queue_entries_rebuilt == len(acks)
        assert check_acknowledged(store, acks) == []
        assert check_queues(store) == []
    assert_consistent(config)


def test_abort_file_with_empty_checkpoint_runs_full_abnormal_recovery(config: StoreConfig) -> None:
    acks = _fill(config, 300)
    (config.root / "abort").touch()
    (config.root / "checkpoint").write_bytes(bytes(4096))

    with MessageStore(config) as store:
        report = store.recovery_report
        assert report.abnormal
        assert report.commit_log_start == 0
        assert report.records_checked == len(acks)
        assert report.truncations == [] and report.queue_entries_removed == 0
        assert check_acknowledged(store, acks) == []
        assert check_queues(store) == []
        r = store.put_message(Message(TOPIC, b"next"), 0)
        assert r.ok and r.queue_offset == sum(1 for a in acks if a.queue_id == 0)
    assert not (config.root / "abort").exists()
    assert_consistent(config)

