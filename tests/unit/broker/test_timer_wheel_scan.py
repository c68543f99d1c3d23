"""Sorting RocketMQ's timer queue into delivered, recalled and waiting messages, and reading its
``timercheck``."""

from __future__ import annotations

import struct
from pathlib import Path

from bolide.broker.timer_takeover import WheelScan
from bolide.common import properties as P
from bolide.store.timer_checkpoint import TimerCheckpoint


def props(due: int, uniq: str | None = None, topic: str = "T", **extra: str) -> dict[str, str]:
    found = {P.TIMER_OUT_MS: str(due), P.REAL_TOPIC: topic, P.REAL_QUEUE_ID: "1", **extra}
    if uniq is not None:
        found[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
    return found


def test_the_wheel_scan_keeps_what_is_still_waiting() -> None:
    scan = WheelScan(last_read_ms=10_000, last_queue_offset=5)
    scan.add(0, 100, props(9_000, "A"))  # in the wheel, due before its last read: delivered
    scan.add(1, 200, props(10_000, "B"))  # due at the last read: not read yet
    scan.add(2, 300, props(20_000, "C"))
    scan.add(3, 400, props(20_000, "C", TIMER_ROLL_TIMES="1"))  # rolled: the copy counts
    scan.add(4, 500, props(30_000, "D"))
    scan.add(5, 600, props(1_000, "E"))  # after the wheel's last offset: not in it yet
    scan.add(6, 700, props(30_000, "X", **{P.TIMER_DEL_UNIQKEY: "T+D"}))  # recalls D
    scan.add(7, 800, props(40_000))  # no UNIQ_KEY: itself
    scan.add(8, 900, props(40_000, "D", topic="Other"))  # another topic's D: not recalled
    scan.add(9, 1000, {P.TIMER_OUT_MS: "soon", P.REAL_TOPIC: "T", P.REAL_QUEUE_ID: "1"})
    scan.add(10, 1100, {P.TIMER_OUT_MS: "5", P.REAL_QUEUE_ID: "1"})  # no REAL_TOPIC
    assert scan.to_deliver() == [(1_000, 600), (10_000, 200), (20_000, 400), (40_000, 800), (40_000, 900)]
    assert (scan.delivered, scan.recalled, scan.unreadable) == (1, 1, 2)


def test_timercheck_is_read_as_rocketmq_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "timercheck"
    assert TimerCheckpoint.read(path) is None
    path.write_bytes(struct.pack(">qqqq", 1_700_000_000_000, 4096, 42, 42) + bytes(4096 - 32))
    assert TimerCheckpoint.read(path) == TimerCheckpoint(1_700_000_000_000, 4096, 42, 42)
    path.write_bytes(bytes(16))
    assert TimerCheckpoint.read(path) is None
