"""Who becomes master (RocketMQ's DefaultElectPolicy).

Among the alive brokers of the syncStateSet (then, with ``enableElectUncleanMaster``, of all
replicas): the old master if it is still alive and no other is designated; a designated broker
(mqadmin electMaster) only if it is a candidate; else the one with the highest epoch, then the
highest CommitLog max offset, then the lowest election priority value (then the lowest id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from bolide.controller.heartbeat import BrokerLiveInfo

Alive = Callable[[int], bool]
LiveInfo = Callable[[int], BrokerLiveInfo | None]


def elect(sync_state_brokers: Iterable[int] | None, all_replica_brokers: Iterable[int] | None,
          old_master: int | None, prefer_broker_id: int | None, *, alive: Alive,
          live_info: LiveInfo) -> int | None:
    """The new master's id, or None when no candidate is alive."""
    for candidates in (sync_state_brokers, all_replica_brokers):
        if candidates is not None:
            chosen = _try_elect(candidates, old_master, prefer_broker_id, alive, live_info)
            if chosen is not None:
                return chosen
    return None


def _try_elect(brokers: Iterable[int], old_master: int | None, prefer: int | None, alive: Alive,
               live_info: LiveInfo) -> int | None:
    candidates = sorted(b for b in set(brokers) if alive(b))
    if not candidates:
        return None
    if old_master in candidates and (prefer is None or prefer == old_master):
        return old_master
    if prefer is not None:
        return prefer if prefer in candidates else None

    def rank(broker_id: int) -> tuple[bool, int, int, int, int]:
        info = live_info(broker_id)
        if info is None:
            return (True, 0, 0, 0, broker_id)
        return (False, -info.epoch, -info.max_offset, info.election_priority, broker_id)

    return min(candidates, key=rank)
