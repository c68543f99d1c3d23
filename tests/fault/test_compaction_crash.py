"""SIGKILL a store process that sends keyed messages to a compacted topic under SYNC_FLUSH
while its compaction thread copies and compacts without pause: the reopened store serves, for
every acknowledged message, that message or a newer one with its key, each at its original
offset, with nothing torn; compacting again after the crash keeps that true."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from bolide.store import GetStatus, MessageStore, StoreConfig
from bolide.testing.crash import kill_after_acks
from conftest import SMALL_COMMIT_LOG, SMALL_CONSUME_QUEUE, assert_consistent

TOPIC = "Compacted"
KEYS = 7
CHILD = """
import sys
from bolide.common import Message
from bolide.store import MessageStore, StoreConfig

root, cl_size, cq_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=cl_size,
                                 mapped_file_size_consume_queue=cq_size, flush_disk_type="SYNC_FLUSH",
                                 compaction_cq_mapped_file_size=46 * 10,
                                 compaction_mapped_file_size=64 * 1024,
                                 compaction_schedule_interval_ms=5)).open()
store.set_topic_compaction("Compacted", True)
i = 0
while True:
    assert store.put_message(Message("Compacted", b"v%d|" % i + bytes(100), keys="k%d" % (i % 7)), 0).ok
    print(i, flush=True)
    i += 1
    if i % 40 == 0:
        store.compact_now()
"""


def config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SMALL_COMMIT_LOG,
                       mapped_file_size_consume_queue=SMALL_CONSUME_QUEUE,
                       compaction_cq_mapped_file_size=46 * 10, compaction_mapped_file_size=64 * 1024,
                       compaction_schedule_interval_ms=3_600_000)


def served(store: MessageStore) -> list[int]:
    """The message numbers the queue serves from offset 0, checked against their offsets."""
    assert store.wait_dispatched()
    out: list[int] = []
    offset = 0
    while True:
        got = store.get_message("g", TOPIC, 0, offset, 32)
        for qoff, msg in zip(got.queue_offsets, got.messages, strict=True):
            number = int(msg.body.split(b"|")[0][1:])
            assert number == qoff == msg.queue_offset, (number, qoff, msg.queue_offset)
            assert msg.properties.get("KEYS") == f"k{number % KEYS}"
            out.append(number)
        if got.next_begin_offset <= offset or (got.status is not GetStatus.FOUND
                                               and got.next_begin_offset >= got.max_offset):
            return out
        offset = got.next_begin_offset


def check(numbers: list[int], acked: int, ctx: str) -> None:
    assert numbers == sorted(set(numbers)), f"{ctx}: offsets out of order or repeated"
    kept = set(numbers)
    newest = {}
    for n in numbers:
        newest[n % KEYS] = n
    for i in range(acked):
        if i not in kept:  # compacted away: only for a newer message with the same key
            assert newest.get(i % KEYS, -1) > i, f"{ctx}: acknowledged message {i} is lost"


def test_sigkill_while_compacting_loses_no_acknowledged_value(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    for round_no in range(3):
        root = tmp_path / f"store{round_no}"
        target = rng.choice([rng.randrange(1, 60), rng.randrange(60, 400), rng.randrange(400, 900)])
        ctx = f"round {round_no}, seed {seed}, killed after {target} acks"
        acked = kill_after_acks([sys.executable, "-c", CHILD, str(root), str(SMALL_COMMIT_LOG),
                                 str(SMALL_CONSUME_QUEUE)], target, ctx)
        cfg = config(root)
        with MessageStore(cfg) as store:
            assert store.recovery_report.abnormal, ctx
            store.set_topic_compaction(TOPIC, True)
            check(served(store), acked, ctx)
            store.compact_now()
            check(served(store), acked, f"{ctx}, compacted again")
        assert_consistent(cfg)
