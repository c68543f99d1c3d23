"""Queue allocation strategies: RocketMQ's answers, and disjoint shares covering every queue."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bolide.client import MessageQueue, allocate_averagely, allocate_by_circle
from bolide.protocol.allocate import AllocateStrategy

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(8)]
CLIENTS = ["c0", "c1", "c2"]


def _ids(strategy: AllocateStrategy, client: str) -> list[int]:
    return [q.queue_id for q in strategy("g", client, QUEUES, CLIENTS)]


def test_what_the_java_strategies_answer() -> None:
    """AllocateMessageQueueAveragely and AllocateMessageQueueAveragelyByCircle for 8 queues
    and 3 clients."""
    assert [_ids(allocate_averagely, c) for c in CLIENTS] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert [_ids(allocate_by_circle, c) for c in CLIENTS] == [[0, 3, 6], [1, 4, 7], [2, 5]]


@pytest.mark.parametrize("strategy", [allocate_averagely, allocate_by_circle])
def test_a_client_outside_the_group_gets_nothing(strategy: AllocateStrategy) -> None:
    assert strategy("g", "stranger", QUEUES, CLIENTS) == []
    assert strategy("g", "c0", [], CLIENTS) == []


@given(queues=st.integers(0, 40), clients=st.integers(1, 12),
       strategy=st.sampled_from([allocate_averagely, allocate_by_circle]))
def test_shares_are_disjoint_and_cover_every_queue(queues: int, clients: int,
                                                   strategy: AllocateStrategy) -> None:
    mqs = [MessageQueue("T", "b", i) for i in range(queues)]
    ids = [f"c{i:02d}" for i in range(clients)]
    shares = [strategy("g", c, mqs, ids) for c in ids]
    flat = [q for share in shares for q in share]
    assert sorted(flat) == sorted(mqs) and len(flat) == len(set(flat))
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1  # both are even
