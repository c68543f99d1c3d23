"""SIGKILL a store process that deleted a topic and goes on sending to it under SYNC_FLUSH:
the reopened store (abnormal recovery, and a repair that rebuilds every queue from the
CommitLog) holds every acknowledged new message and none of the deleted queues' records,
which are still in the CommitLog."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from bolide.store import MessageStore, StoreConfig
from bolide.store.repair import apply_repair, plan_repair
from bolide.testing.crash import kill_after_acks
from conftest import SMALL_COMMIT_LOG, SMALL_CONSUME_QUEUE, assert_consistent

CHILD = """
import sys
from bolide.common import Message
from bolide.store import MessageStore, StoreConfig

root, cl_size, cq_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = MessageStore(StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=cl_size,
                                 mapped_file_size_consume_queue=cq_size,
                                 flush_disk_type="SYNC_FLUSH")).open()
for i in range(400):
    assert store.put_message(Message("Doomed", b"old-%d|" % i + bytes(200)), i % 2).ok
    assert store.put_message(Message("Keep", b"keep-%d|" % i), 0).ok
store.delete_queues("Doomed".__eq__)
print("deleted", flush=True)
i = 0
while True:
    assert store.put_message(Message("Doomed", b"new-%d|" % i + bytes(200)), i % 2).ok
    print(i, flush=True)
    i += 1
"""


def config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SMALL_COMMIT_LOG,
                       mapped_file_size_consume_queue=SMALL_CONSUME_QUEUE)


def labels(store: MessageStore, queue_id: int) -> list[str]:
    out: list[str] = []
    offset = 0
    while offset < store.get_max_offset_in_queue("Doomed", queue_id):
        got = store.get_message("g", "Doomed", queue_id, offset, max_count=32)
        assert got.messages, got.status
        out += [m.body.split(b"|")[0].decode() for m in got.messages]
        offset = got.next_begin_offset
    return out


def check(store: MessageStore, acked: int, ctx: str) -> None:
    """Queue q holds new-q, new-(q+2), ... from offset 0: at least the acknowledged ones."""
    for qid in (0, 1):
        got = labels(store, qid)
        want = [f"new-{i}" for i in range(qid, acked, 2)]
        assert got[: len(want)] == want, f"{ctx}: queue {qid} holds {got[:8]}..."
        assert all(label.startswith("new-") for label in got), f"{ctx}: {got}"
    assert store.get_max_offset_in_queue("Keep", 0) == 400, ctx


def test_sigkill_after_deleting_a_topic_brings_none_of_it_back(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    for round_no in range(3):
        root = tmp_path / f"store{round_no}"
        target = rng.choice([0, rng.randrange(1, 20), rng.randrange(20, 300)])
        ctx = f"round {round_no}, seed {seed}, killed after {target} new acks"
        acked = kill_after_acks([sys.executable, "-c", CHILD, str(root), str(SMALL_COMMIT_LOG),
                                 str(SMALL_CONSUME_QUEUE)], target, ctx, first_line="deleted")
        cfg = config(root)
        with MessageStore(cfg) as store:
            assert store.recovery_report.abnormal, ctx
            check(store, acked, ctx)
        assert_consistent(cfg)
        apply_repair(cfg, plan_repair(cfg, rebuild_queues=True))
        with MessageStore(cfg) as store:
            check(store, acked, f"{ctx}, after rebuilding every queue")
