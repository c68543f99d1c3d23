"""Queue allocation among the consumers of a group: RocketMQ's AllocateMessageQueueAveragely
(contiguous shares, the default) and AllocateMessageQueueAveragelyByCircle (dealt round).

Every member sorts the queues and the client ids the same way and takes its own share, so
the shares are disjoint and together cover every queue. All members of a group must use the
same strategy, as in RocketMQ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bolide.protocol.bodies.client import MessageQueue

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def allocate_averagely(group: str, client_id: str, queues: Sequence[MessageQueue],
                       client_ids: Sequence[str]) -> list[MessageQueue]:
    """``client_id``'s share of ``queues`` (both sequences sorted by the caller).

    With ``q`` queues and ``c`` clients, the first ``q % c`` clients get ``q // c + 1``
    queues and the rest ``q // c``; with more clients than queues the extra ones get none.
    """
    if client_id not in client_ids or not queues:
        return []
    n_queues, n_clients = len(queues), len(client_ids)
    index = client_ids.index(client_id)
    base, extra = divmod(n_queues, n_clients)
    if n_queues <= n_clients:
        return [queues[index]] if index < n_queues else []
    count = base + 1 if index < extra else base
    start = index * count if index < extra else index * base + extra
    return list(queues[start:start + count])


def allocate_by_circle(group: str, client_id: str, queues: Sequence[MessageQueue],
                       client_ids: Sequence[str]) -> list[MessageQueue]:
    """``client_id``'s share of ``queues`` dealt round the clients: queue ``i`` goes to the
    client at position ``i % c`` (both sequences sorted by the caller)."""
    if client_id not in client_ids or not queues:
        return []
    index = client_ids.index(client_id)
    return list(queues[index::len(client_ids)])
