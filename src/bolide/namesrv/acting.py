"""RocketMQ 5's slave acting master, the NameServer's part, as pure functions (no I/O).

A broker group registered with ``enableActingMaster=true`` whose master (brokerId 0) is gone
keeps serving reads from its lowest-id live slave:

- when the master leaves, the group's queue data lose their write permission (producers send
  elsewhere); a slave that is the group's lowest id registers its topics the same way;
- with ``supportActingMaster=true``, routes then present that slave as brokerId 0 of the group
  (:func:`acting_route`), so consumers pull, commit offsets and lock queues on it unchanged;
- with ``notifyMinBrokerIdChanged=true``, the group's brokers are told each time its lowest
  live id changes (NOTIFY_MIN_BROKER_ID_CHANGE, :class:`MinBrokerIdChange`).
"""

from __future__ import annotations

from typing import NamedTuple

from bolide.protocol.bodies.route import MASTER_ID, PERM_WRITE, TopicRouteData

# TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX: each 5.x broker's own system topic, whose
# route tells its group's live members to brokers with compatibleWithOldNameSrv (never mapped)
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


class MinBrokerIdChange(NamedTuple):
    """One NOTIFY_MIN_BROKER_ID_CHANGE to send to each of ``targets`` (broker addresses)."""

    broker_name: str
    min_broker_id: int
    min_broker_addr: str
    offline_broker_addr: str | None
    ha_broker_addr: str | None
    targets: tuple[str, ...]


def min_broker_id_change(broker_name: str, addrs: dict[int, str], offline_broker_addr: str | None,
                         ha_broker_addr: str | None) -> MinBrokerIdChange | None:
    """The notice for a group whose lowest id changed (RocketMQ's notifyMinBrokerIdChanged):
    after a broker went offline every remaining broker is told; after a lower id registered,
    every other broker of the group (all of them when it is alone)."""
    if not addrs:
        return None
    min_id = min(addrs)
    if offline_broker_addr is not None or len(addrs) == 1:
        targets = tuple(addrs[i] for i in sorted(addrs))
    else:
        targets = tuple(addrs[i] for i in sorted(addrs) if i != min_id)
    return MinBrokerIdChange(broker_name, min_id, addrs[min_id], offline_broker_addr,
                             ha_broker_addr, targets)


def without_write(perm: int) -> int:
    return perm & ~PERM_WRITE


def acting_route(topic: str, route: TopicRouteData) -> TopicRouteData:
    """``route`` with, in each acting-master group that has no master and whose queue data are
    not writable, its lowest-id broker presented as brokerId 0 (RocketMQ's
    pickupTopicRouteData under ``supportActingMaster``). ``route`` is a fresh copy: changed
    in place and returned."""
    if topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
        return route
    perms = {q.broker_name: q.perm for q in route.queue_datas}
    for broker in route.broker_datas:
        addrs = broker.broker_addrs
        if not addrs or MASTER_ID in addrs or not broker.enable_acting_master:
            continue
        perm = perms.get(broker.broker_name)
        if perm is not None and not perm & PERM_WRITE:
            addrs[MASTER_ID] = addrs.pop(min(addrs))
            broker.broker_addrs = dict(sorted(addrs.items()))
    return route
