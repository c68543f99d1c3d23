"""A store writer meant to be killed: ``python -m bolide.testing.crash_writer --root DIR ...``.

It opens a :class:`~bolide.store.MessageStore`, prints ``READY`` and then appends messages
from several threads (single puts, batches, delayed and transactional messages, varied body
sizes) until it is killed or has written ``--count`` messages per thread. After every put the
store acknowledged with PUT_OK it prints one line per message (see :func:`format_ack`), so the
process reading its stdout knows exactly what the store promised to keep. A put that fails
prints a ``FAIL`` line.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
from collections.abc import Callable

from bolide.common import Message, sysflag
from bolide.common import properties as P
from bolide.common.topic import SCHEDULE_TOPIC
from bolide.store import FlushDiskType, MessageStore, PutMessageResult, StoreConfig
from bolide.store.record import record_size
from bolide.testing.crash import format_ack

QUEUES = {"CrashA": 4, "CrashB": 2}


def _body(rng: random.Random, label: str, max_body: int) -> bytes:
    roll = rng.random()
    if roll < 0.6:
        size = rng.randint(1, 300)
    elif roll < 0.9:
        size = rng.randint(300, 4000)
    else:
        size = rng.randint(4000, max_body)
    head = label.encode() + b"|"
    return head + rng.randbytes(max(0, size - len(head)))


class Writer:
    """The writer threads and their shared output."""

    def __init__(self, store: MessageStore, seed: int, max_body: int) -> None:
        self.store = store
        self.seed = seed
        self.max_body = max_body
        self._out = threading.Lock()
        self.failed = threading.Event()

    def emit(self, line: str) -> None:
        data = (line + "\n").encode()
        with self._out:
            os.write(1, data)  # unbuffered: a line is out before the next put starts

    def run(self, tid: int, count: int) -> None:
        rng = random.Random(self.seed * 1_000 + tid)
        ops: list[tuple[float, Callable[[random.Random, str], None]]] = [
            (0.70, self._single), (0.85, self._batch), (0.90, self._delayed),
            (0.95, self._prepared), (1.00, self._committed),
        ]
        seq = 0
        try:
            while (count <= 0 or seq < count) and not self.failed.is_set():
                roll = rng.random()
                op = next(fn for bound, fn in ops if roll < bound)
                op(rng, f"t{tid}-n{seq}")
                seq += 1
        except BaseException as exc:  # reported, then the test sees FAIL and the exit code
            self.emit(f"FAIL exception {type(exc).__name__}: {exc}")
            self.failed.set()
            raise

    def _pick(self, rng: random.Random) -> tuple[str, int]:
        topic = rng.choice(sorted(QUEUES))
        return topic, rng.randrange(QUEUES[topic])

    def _message(self, rng: random.Random, topic: str, label: str,
                 max_body: int | None = None) -> Message:
        body = _body(rng, label, max_body or self.max_body)
        return Message(topic, body, tags=f"Tag{rng.randrange(3)}", keys=[label])

    def _check(self, r: PutMessageResult, what: str) -> bool:
        if r.ok:
            return True
        self.emit(f"FAIL {what} {r.status.value} {r.remark}")
        self.failed.set()
        return False

    def _single(self, rng: random.Random, label: str, sys_flag: int = 0,
                delay: int = 0) -> None:
        topic, queue_id = self._pick(rng)
        msg = self._message(rng, topic, label)
        if delay:
            msg.properties[P.DELAY_TIME_LEVEL] = str(delay)
        r = self.store.put_message(msg, queue_id, sys_flag=sys_flag)
        if not self._check(r, label):
            return
        if delay:
            topic, queue_id = SCHEDULE_TOPIC, delay - 1
        kind = "Q" if sysflag.gets_queue_entry(sys_flag) else "P"
        queue_offset = r.queue_offset if kind == "Q" else -1
        self.emit(format_ack(kind, r.msg_id or "", topic, queue_id, queue_offset,
                             r.wrote_offset, msg.body))

    def _batch(self, rng: random.Random, label: str) -> None:
        topic, queue_id = self._pick(rng)
        n = rng.randint(2, 6)  # a batch must fit in one segment
        msgs = [self._message(rng, topic, f"{label}-b{i}", self.max_body // 6) for i in range(n)]
        r = self.store.put_messages(msgs, queue_id)
        if not self._check(r, label):
            return
        phys = r.wrote_offset
        lines = []
        for i, (m, uniq) in enumerate(zip(msgs, r.msg_ids, strict=True)):
            lines.append(format_ack("Q", uniq, topic, queue_id, r.queue_offset + i, phys, m.body))
            props = P.encode_properties({**m.properties, P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq})
            phys += record_size(len(m.body), len(topic.encode()), len(props))
        if phys != r.end_offset:
            self.emit(f"FAIL batch {label} ends at {r.end_offset}, computed {phys}")
            self.failed.set()
            return
        self.emit("\n".join(lines))

    def _delayed(self, rng: random.Random, label: str) -> None:
        self._single(rng, label, delay=rng.randint(1, 3))

    def _prepared(self, rng: random.Random, label: str) -> None:
        self._single(rng, label, sys_flag=sysflag.TRANSACTION_PREPARED_TYPE)

    def _committed(self, rng: random.Random, label: str) -> None:
        self._single(rng, label, sys_flag=sysflag.TRANSACTION_COMMIT_TYPE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bolide.testing.crash_writer",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="store directory")
    ap.add_argument("--flush-disk-type", default="ASYNC_FLUSH",
                    choices=[t.value for t in FlushDiskType])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--count", type=int, default=0,
                    help="messages per thread, then close cleanly (0: until killed)")
    ap.add_argument("--commit-log-size", type=int, default=64 * 1024)
    ap.add_argument("--consume-queue-size", type=int, default=100 * 20)
    ap.add_argument("--max-body", type=int, default=24_000)
    ap.add_argument("--checkpoint-every-ms", type=int, default=0,
                    help="write the checkpoint this often (0: RocketMQ's defaults, 60 s)")
    args = ap.parse_args(argv)
    config = StoreConfig(
        store_path_root_dir=args.root,
        flush_disk_type=FlushDiskType(args.flush_disk_type),
        mapped_file_size_commit_log=args.commit_log_size,
        mapped_file_size_consume_queue=args.consume_queue_size,
    )
    if args.checkpoint_every_ms > 0:
        every = args.checkpoint_every_ms
        config = config.replace(
            flush_interval_commit_log_ms=max(1, every // 4),
            flush_commit_log_thorough_interval_ms=every,
            flush_interval_consume_queue_ms=max(1, every // 4),
            flush_consume_queue_thorough_interval_ms=every,
        )
    store = MessageStore(config).open()
    writer = Writer(store, args.seed, args.max_body)
    writer.emit(f"READY {os.getpid()} {store.recovery_report.summary()}")
    threads = [threading.Thread(target=writer.run, args=(tid, args.count), name=f"writer-{tid}")
               for tid in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    writer.emit("DONE")
    return 1 if writer.failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
