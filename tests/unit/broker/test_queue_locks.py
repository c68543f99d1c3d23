"""QueueLocks: one owner per (group, queue), renewal, expiry and the group bound."""

from __future__ import annotations

from bolide.broker.queue_locks import QueueLocks
from bolide.protocol.bodies.client import MessageQueue

Q0, Q1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_one_owner_until_expiry_or_unlock() -> None:
    clock = Clock()
    locks = QueueLocks(max_live_ms=60_000, clock=clock)
    assert locks.lock("g", "c1", [Q0, Q1]) == {Q0, Q1}
    assert locks.lock("g", "c2", [Q0, Q1]) == set()
    assert locks.lock("other", "c2", [Q0]) == {Q0}  # groups are independent
    clock.now = 50_000
    assert locks.lock("g", "c1", [Q0]) == {Q0}  # renewal
    clock.now = 70_000  # Q1 expired, Q0 renewed 20 s ago
    assert locks.lock("g", "c2", [Q0, Q1]) == {Q1}
    assert locks.owner("g", Q1) == "c2" and locks.owner("g", Q0) == "c1"
    locks.unlock("g", "c2", [Q0])  # not its lock: nothing happens
    assert locks.owner("g", Q0) == "c1"
    locks.unlock("g", "c1", [Q0])
    assert locks.owner("g", Q0) is None
    assert locks.lock("g", "c2", [Q0]) == {Q0}


def test_group_table_is_bounded() -> None:
    clock = Clock()
    locks = QueueLocks(max_groups=2, max_live_ms=10, clock=clock)
    assert locks.lock("g1", "c", [Q0]) and locks.lock("g2", "c", [Q0])
    assert locks.lock("g3", "c", [Q0]) == set()  # full
    clock.now = 11  # every lock expired: their groups make room
    assert locks.lock("g3", "c", [Q0]) == {Q0}
