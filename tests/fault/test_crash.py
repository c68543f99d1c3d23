"""SIGKILL a real store writer process at random moments, reopen the store here, and check
that every message the store acknowledged is there, intact, and that the files agree.

Each round kills the writer after a random number of acknowledgements (its threads keep
appending until the signal lands, so the kill hits a random point of a write), then reopens
the same directory: abnormal recovery (the abort file is present) must keep every
acknowledged message and cut any half-written record. The seed is printed and named in
every failure; ``BOLIDE_CRASH_SEED=<seed>`` replays the same workloads and kill points
(counted in acknowledgements; thread timing still varies).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from bolide.store import MessageStore
from bolide.store.record import RecordInfo, parse_record
from bolide.testing.crash import Ack, CrashWriterProcess, check_acknowledged, check_queues
from conftest import SMALL_COMMIT_LOG, SMALL_CONSUME_QUEUE, assert_consistent, small_config

ROUNDS = 16
MAX_ACKS_PER_ROUND = 1000


def _seed() -> int:
    env = os.environ.get("BOLIDE_CRASH_SEED")
    return int(env) if env else random.SystemRandom().randrange(1 << 32)


def _check_tail_is_clean(store: MessageStore) -> None:
    """After recovery, the active segment holds whole records up to its end, zeros after."""
    mf = store.commit_log.files.last_file()
    if mf is None:
        return
    pos = 0
    while pos < mf.wrote_position:
        info = parse_record(mf.view, pos, True)
        assert type(info) is RecordInfo, f"unreadable record at {mf.file_from_offset + pos}: {info}"
        if info.size == 0:
            break
        pos += info.size
    assert pos == mf.wrote_position or mf.is_full
    assert not any(mf.view[mf.wrote_position :]), "bytes after the recovered end are not zero"


def _crash_rounds(tmp_path: Path, flush_disk_type: str) -> None:
    seed = _seed()
    print(f"crash test {flush_disk_type}: seed {seed} (BOLIDE_CRASH_SEED={seed} replays it)")
    rng = random.Random(seed)
    root = tmp_path / "store"
    config = small_config(root)
    acked: dict[str, Ack] = {}
    for round_no in range(ROUNDS):
        target = rng.choice([0, 1, rng.randrange(2, 40), rng.randrange(40, MAX_ACKS_PER_ROUND)])
        with CrashWriterProcess(root, flush_disk_type=flush_disk_type,
                                seed=seed + round_no, threads=rng.choice([2, 3, 4]),
                                commit_log_size=SMALL_COMMIT_LOG,
                                consume_queue_size=SMALL_CONSUME_QUEUE,
                                checkpoint_every_ms=rng.choice([0, 50, 200])) as child:
            child.wait_ready()
            child.wait_acks(target)
            acks = child.kill()
            assert not child.failures, f"round {round_no} (seed {seed}): {child.failures}"
        for ack in acks:
            assert ack.msg_id not in acked, f"id {ack.msg_id} acknowledged twice"
            acked[ack.msg_id] = ack
        ctx = f"round {round_no}, seed {seed}, {len(acks)} acks this round"
        store = MessageStore(config).open()
        try:
            report = store.recovery_report
            print(f"  round {round_no}: {len(acks)} acks; from {report.commit_log_start}: {report.summary()}")
            assert report.abnormal, ctx
            for t in report.truncations:  # only the record the kill cut may be dropped
                assert t.start >= max((a.commit_log_offset for a in acks), default=0), (ctx, t)
            problems = check_acknowledged(store, list(acked.values()))
            assert not problems, f"{ctx}: {len(problems)} problems:\n" + "\n".join(problems[:20])
            problems = check_queues(store)
            assert not problems, f"{ctx}:\n" + "\n".join(problems[:20])
            _check_tail_is_clean(store)
        finally:
            store.close()
        assert_consistent(config)


@pytest.mark.slow
def test_sigkill_under_sync_flush_keeps_every_acknowledged_message(tmp_path: Path) -> None:
    _crash_rounds(tmp_path, "SYNC_FLUSH")


@pytest.mark.slow
def test_sigkill_under_async_flush_keeps_every_acknowledged_message(tmp_path: Path) -> None:
    """A process kill leaves the page cache alone: nothing the store accepted may be lost."""
    _crash_rounds(tmp_path, "ASYNC_FLUSH")
