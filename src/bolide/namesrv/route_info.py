"""The NameServer's routing state (RocketMQ's RouteInfoManager) as pure data: no I/O, no clock
of its own beyond an injectable one, no asyncio.

Tables, all filled only by broker registrations and emptied as brokers leave:

- broker groups by broker name: cluster and ``{brokerId: "ip:port"}`` (id 0 is the master);
- clusters: cluster name -> broker names;
- queue data by topic, then broker name (copied from the master's topic configs);
- liveness by broker address: last registration time, DataVersion, connection, HA address;
- filter servers by broker address.

A registration with an unchanged DataVersion refreshes liveness and addresses but leaves queue
data alone; masters (id 0) write queue data, and so does a 5.x slave that is its group's lowest
live id (RocketMQ's prime slave; without write permission in an acting-master group, see
:mod:`bolide.namesrv.acting`). A broker is dropped when its connection
closes (:meth:`RouteInfoManager.on_channel_destroy`) or after its timeout without a registration
or heartbeat (120 s, or the ``heartbeatTimeoutMillis`` it registered with:
:meth:`RouteInfoManager.scan_not_active_broker`); a group with no address left takes its
queue data with it. Not thread-safe: drive it from one thread (the event loop).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from bolide.namesrv.acting import MinBrokerIdChange, acting_route, min_broker_id_change, without_write
from bolide.protocol.bodies.admin import TopicList
from bolide.protocol.bodies.broker import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from bolide.protocol.bodies.route import (
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    QueueData,
    TopicRouteData,
)
from bolide.protocol.bodies.static_topic import TopicQueueMappingInfo

BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000
TOPIC_SYS_FLAG_UNIT = 0x1  # TopicSysFlag.FLAG_UNIT
TOPIC_SYS_FLAG_UNIT_SUB = 0x2  # TopicSysFlag.FLAG_UNIT_SUB


def wall_clock_ms() -> int:
    """Milliseconds since the epoch, the unit of every timestamp here."""
    return time.time_ns() // 1_000_000


class RegisterBrokerResult(NamedTuple):
    """What REGISTER_BROKER answers: for a slave, its live master's HA and broker addresses."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


class ExpiredBroker(NamedTuple):
    """A broker dropped for silence; the transport should close ``channel``."""

    broker_addr: str
    channel: object | None


@dataclass(slots=True)
class BrokerLiveInfo:
    """Liveness of one broker address."""

    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    channel: object | None
    ha_server_addr: str | None


@dataclass(slots=True)
class _Group:
    cluster: str
    broker_name: str
    addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool | None = None
    zone_name: str | None = None

    def to_bean(self) -> BrokerData:
        return BrokerData(cluster=self.cluster, broker_name=self.broker_name,
                          broker_addrs=dict(sorted(self.addrs.items())),
                          enable_acting_master=self.enable_acting_master, zone_name=self.zone_name)


def _same_version(a: DataVersion, b: DataVersion) -> bool:
    return (a.timestamp == b.timestamp and a.counter == b.counter
            and (a.state_version or 0) == (b.state_version or 0))


def _queue_data(broker_name: str, topic: TopicConfig) -> QueueData:
    return QueueData(broker_name=broker_name, read_queue_nums=topic.read_queue_nums,
                     write_queue_nums=topic.write_queue_nums, perm=topic.perm,
                     topic_sys_flag=topic.topic_sys_flag)


class RouteInfoManager:
    """Broker registrations and the topic routes derived from them."""

    def __init__(self, *, clock: Callable[[], int] = wall_clock_ms,
                 broker_timeout_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS,
                 delete_topic_with_broker_registration: bool = False) -> None:
        self._clock = clock
        self._broker_timeout_ms = broker_timeout_ms
        self._delete_missing_topics = delete_topic_with_broker_registration
        self._topics: dict[str, dict[str, QueueData]] = {}
        self._groups: dict[str, _Group] = {}
        self._clusters: dict[str, set[str]] = {}
        self._live: dict[str, BrokerLiveInfo] = {}
        self._filter_servers: dict[str, list[str]] = {}
        # static topics: topic -> the mapping info each broker registered (by its ``bname``)
        self._mappings: dict[str, dict[str, TopicQueueMappingInfo]] = {}
        # groups whose lowest live id changed, for NOTIFY_MIN_BROKER_ID_CHANGE (drain_notices)
        self._notices: list[MinBrokerIdChange] = []

    # -- registration ---------------------------------------------------------------------
    def register_broker(
        self,
        *,
        cluster: str,
        broker_name: str,
        broker_addr: str,
        broker_id: int,
        ha_server_addr: str | None = None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None = None,
        filter_servers: list[str] | None = None,
        channel: object | None = None,
        timeout_ms: int | None = None,
        enable_acting_master: bool | None = None,
        zone_name: str | None = None,
    ) -> RegisterBrokerResult:
        """Record a REGISTER_BROKER. ``filter_servers`` None leaves the stored list alone."""
        self._detach_address(broker_addr, keep=broker_name)
        group = self._groups.get(broker_name)
        register_first = group is None
        if group is None:
            group = self._groups[broker_name] = _Group(cluster, broker_name)
        elif group.cluster != cluster:
            self._forget_in_cluster(group.cluster, broker_name)
            group.cluster = cluster
        self._clusters.setdefault(cluster, set()).add(broker_name)
        if enable_acting_master is not None:
            group.enable_acting_master = enable_acting_master
        elif group.enable_acting_master:  # a 4.x broker's registration turns it off, as in Java
            group.enable_acting_master = False
        prev_min = min(group.addrs) if group.addrs else MASTER_ID
        if zone_name is not None:
            group.zone_name = zone_name

        # One address has one id: a slave promoted to master drops its old entry.
        for other_id in [i for i, a in group.addrs.items() if a == broker_addr and i != broker_id]:
            del group.addrs[other_id]
        old_addr = group.addrs.get(broker_id)
        group.addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None
        if old_addr is not None and old_addr != broker_addr:
            self._live.pop(old_addr, None)  # replaced: the old address is no broker any more
            self._filter_servers.pop(old_addr, None)

        version = topic_config_wrapper.data_version if topic_config_wrapper else DataVersion()
        changed = register_first or self.is_data_version_changed(broker_addr, version)
        if topic_config_wrapper is not None and broker_id == MASTER_ID and changed:
            self._update_queue_datas(broker_name, topic_config_wrapper.topic_config_table)
            for topic, info in (topic_config_wrapper.topic_queue_mapping_info_map or {}).items():
                self._mappings.setdefault(info.topic or topic, {})[info.bname or broker_name] = info
        elif (topic_config_wrapper is not None and enable_acting_master is not None
                and broker_id != MASTER_ID and broker_id == min(group.addrs)):  # no master: prime slave
            self._update_prime_slave_queue_datas(group, topic_config_wrapper, changed)

        self._live[broker_addr] = BrokerLiveInfo(
            self._clock(), timeout_ms or self._broker_timeout_ms, version, channel, ha_server_addr)
        if filter_servers is not None:
            if filter_servers:
                self._filter_servers[broker_addr] = list(filter_servers)
            else:
                self._filter_servers.pop(broker_addr, None)

        if broker_id < prev_min:  # a lower id came (the master is back): tell the others
            self._notice(group, None, ha_server_addr, check_acting=False)
        if broker_id != MASTER_ID:
            master_addr = group.addrs.get(MASTER_ID)
            master = self._live.get(master_addr) if master_addr else None
            if master is not None:
                return RegisterBrokerResult(master.ha_server_addr, master_addr)
        return RegisterBrokerResult()

    def _update_prime_slave_queue_datas(self, group: _Group, wrapper: TopicConfigSerializeWrapper,
                                        changed: bool) -> None:
        """Queue data from the lowest-id slave of a group without master: topics new to the
        NameServer or to the group, or all when its DataVersion changed; read-only when the
        group acts with a slave as master."""
        for key, topic in wrapper.topic_config_table.items():
            name = topic.topic_name or key
            if changed or group.broker_name not in self._topics.get(name, {}):
                queue = _queue_data(group.broker_name, topic)
                if group.enable_acting_master:
                    queue.perm = without_write(queue.perm)
                self._topics.setdefault(name, {})[group.broker_name] = queue

    def _notice(self, group: _Group, offline_addr: str | None, ha_addr: str | None, *,
                check_acting: bool = True) -> None:
        if check_acting and not group.enable_acting_master:
            return
        notice = min_broker_id_change(group.broker_name, group.addrs, offline_addr, ha_addr)
        if notice is not None:
            self._notices.append(notice)

    def drain_notices(self) -> list[MinBrokerIdChange]:
        """The NOTIFY_MIN_BROKER_ID_CHANGE messages due since the last call (the caller sends
        them when ``notifyMinBrokerIdChanged`` is on)."""
        notices, self._notices = self._notices, []
        return notices

    def _members_left(self, group: _Group, removed_ids: list[int], offline_addr: str) -> None:
        """After ``removed_ids`` left a group that still has members: notify when its lowest id
        went, and take write permission from an acting-master group left without master."""
        if not removed_ids or not group.addrs:
            return
        if min(removed_ids) < min(group.addrs):
            self._notice(group, offline_addr, None)
        if group.enable_acting_master and MASTER_ID not in group.addrs:
            self._set_perm(group.broker_name, without_write)

    def _update_queue_datas(self, broker_name: str, table: dict[str, TopicConfig]) -> None:
        names: set[str] = set()
        for key, topic in table.items():
            name = topic.topic_name or key
            names.add(name)
            self._topics.setdefault(name, {})[broker_name] = _queue_data(broker_name, topic)
        if self._delete_missing_topics:
            for topic_name in [t for t, q in self._topics.items() if broker_name in q and t not in names]:
                self._remove_queue_data(topic_name, broker_name)

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> bool:
        """REGISTER_TOPIC_IN_NAMESRV (5.x): add queue data for known broker groups only."""
        datas = list(queue_datas)
        if not datas or any(q.broker_name not in self._groups for q in datas):
            return False
        queues = self._topics.setdefault(topic, {})
        for q in datas:
            queues[q.broker_name] = dataclasses.replace(q)
        return True

    def unregister_broker(self, *, cluster: str, broker_name: str, broker_addr: str,
                          broker_id: int) -> bool:
        """UNREGISTER_BROKER: forget ``broker_addr`` in ``broker_name``; True if it was known.

        Entries are matched by address, as RocketMQ 5.x does (4.9.8 removed ``broker_id``'s
        entry whatever its address); ``cluster`` and ``broker_id`` are taken for the header's sake.
        """
        known = self._live.pop(broker_addr, None) is not None
        self._filter_servers.pop(broker_addr, None)
        group = self._groups.get(broker_name)
        if group is not None:
            ids = [i for i, a in group.addrs.items() if a == broker_addr]  # 5.x: by address
            for i in ids:
                del group.addrs[i]
            known = known or bool(ids)
            if not group.addrs:
                self._drop_group(broker_name)
            else:
                self._members_left(group, ids, broker_addr)
        return known

    # -- liveness -------------------------------------------------------------------------
    def query_data_version(self, broker_addr: str) -> DataVersion | None:
        """The DataVersion of the broker's last registration."""
        live = self._live.get(broker_addr)
        return live.data_version if live else None

    def is_data_version_changed(self, broker_addr: str, version: DataVersion) -> bool:
        """True unless the broker's last registration carried the same DataVersion."""
        prev = self.query_data_version(broker_addr)
        return prev is None or not _same_version(prev, version)

    def refresh_broker(self, broker_addr: str, now_ms: int | None = None) -> bool:
        """Count a heartbeat without re-registration (QUERY_DATA_VERSION, BROKER_HEARTBEAT)."""
        live = self._live.get(broker_addr)
        if live is None:
            return False
        live.last_update_ms = self._clock() if now_ms is None else now_ms
        return True

    def broker_live_info(self, broker_addr: str) -> BrokerLiveInfo | None:
        return self._live.get(broker_addr)

    def live_broker_addrs(self) -> list[str]:
        return sorted(self._live)

    def scan_not_active_broker(self, now_ms: int | None = None) -> list[ExpiredBroker]:
        """Drop brokers silent for longer than their timeout; close their channels."""
        now = self._clock() if now_ms is None else now_ms
        expired = [ExpiredBroker(addr, live.channel) for addr, live in self._live.items()
                   if live.last_update_ms + live.timeout_ms < now]
        for broker in expired:
            self._remove_address(broker.broker_addr)
        return expired

    def on_channel_destroy(self, channel: object) -> list[str]:
        """A connection closed: drop every broker address registered on it (returned)."""
        if channel is None:
            return []
        addrs = [addr for addr, live in self._live.items() if live.channel == channel]
        for addr in addrs:
            self._remove_address(addr)
        return addrs

    # -- removal helpers ------------------------------------------------------------------
    def _remove_address(self, broker_addr: str) -> None:
        self._live.pop(broker_addr, None)
        self._filter_servers.pop(broker_addr, None)
        self._detach_address(broker_addr, keep=None)

    def _detach_address(self, broker_addr: str, keep: str | None) -> None:
        for name, group in list(self._groups.items()):
            if name == keep or broker_addr not in group.addrs.values():
                continue
            removed = [i for i, a in group.addrs.items() if a == broker_addr]
            group.addrs = {i: a for i, a in group.addrs.items() if a != broker_addr}
            if not group.addrs:
                self._drop_group(name)
            else:
                self._members_left(group, removed, broker_addr)

    def _drop_group(self, broker_name: str) -> None:
        group = self._groups.pop(broker_name, None)
        if group is not None:
            self._forget_in_cluster(group.cluster, broker_name)
        for topic in [t for t, queues in self._topics.items() if broker_name in queues]:
            self._remove_queue_data(topic, broker_name)

    def _forget_in_cluster(self, cluster: str, broker_name: str) -> None:
        names = self._clusters.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self._clusters[cluster]

    def _remove_queue_data(self, topic: str, broker_name: str) -> None:
        queues = self._topics.get(topic)
        if queues is not None:
            queues.pop(broker_name, None)
            if not queues:
                del self._topics[topic]

    # -- routes and admin views -----------------------------------------------------------
    def pick_topic_route_data(self, topic: str, support_acting_master: bool = False) -> TopicRouteData | None:
        """The route of ``topic``, or None without queue data or a broker group serving it;
        with ``support_acting_master``, masterless acting groups show their lowest-id slave as
        brokerId 0 (:func:`~bolide.namesrv.acting.acting_route`)."""
        queues = self._topics.get(topic)
        if not queues:
            return None
        names = sorted(queues)
        brokers = [self._groups[n].to_bean() for n in names if n in self._groups]
        if not brokers:
            return None
        filters: dict[str, list[str]] = {}
        if self._filter_servers:
            for broker in brokers:
                for addr in broker.broker_addrs.values():
                    if addr in self._filter_servers:
                        filters[addr] = list(self._filter_servers[addr])
        mappings = self._mappings.get(topic)
        route = TopicRouteData(queue_datas=[dataclasses.replace(queues[n]) for n in names],
                               broker_datas=brokers, filter_server_table=filters,
                               topic_queue_mapping_by_broker=dict(mappings) if mappings else None)
        return acting_route(topic, route) if support_acting_master else route

    def get_all_cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every broker group and each cluster's broker names."""
        return ClusterInfo(
            broker_addr_table={n: g.to_bean() for n, g in sorted(self._groups.items())},
            cluster_addr_table={c: set(names) for c, names in sorted(self._clusters.items())})

    def get_broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup:
        """GET_BROKER_MEMBER_GROUP: the addresses of the group ``broker_name`` (none when it is
        unknown); as in RocketMQ, ``cluster`` is only echoed."""
        group = self._groups.get(broker_name)
        addrs = dict(sorted(group.addrs.items())) if group is not None else {}
        return BrokerMemberGroup(cluster=cluster, broker_name=broker_name, broker_addrs=addrs)

    def get_all_topic_list(self) -> TopicList:
        return TopicList(topic_list=sorted(self._topics))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        names = self._clusters.get(cluster, set())
        return TopicList(topic_list=sorted(t for t, q in self._topics.items() if names & q.keys()))

    def get_system_topic_list(self) -> TopicList:
        """Cluster and broker names (the per-cluster/per-broker topics) and one broker address."""
        topics = set(self._clusters)
        for names in self._clusters.values():
            topics |= names
        broker_addr = None
        for _, group in sorted(self._groups.items()):
            if group.addrs:
                broker_addr = group.addrs[min(group.addrs)]
                break
        return TopicList(topic_list=sorted(topics), broker_addr=broker_addr)

    def _topics_by_flag(self, test: Callable[[int], bool]) -> TopicList:
        return TopicList(topic_list=sorted(
            t for t, q in self._topics.items() if q and test(q[min(q)].topic_sys_flag)))

    def get_unit_topics(self) -> TopicList:
        return self._topics_by_flag(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_by_flag(lambda f: bool(f & TOPIC_SYS_FLAG_UNIT_SUB))

    def get_has_unit_sub_un_unit_topic_list(self) -> TopicList:
        return self._topics_by_flag(
            lambda f: not f & TOPIC_SYS_FLAG_UNIT and bool(f & TOPIC_SYS_FLAG_UNIT_SUB))

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forget ``topic`` everywhere, or only on the broker groups of ``cluster``."""
        if not cluster:
            self._mappings.pop(topic, None)
            return self._topics.pop(topic, None) is not None
        queues = self._topics.get(topic)
        names = self._clusters.get(cluster, set())
        if queues is None or not names & queues.keys():
            return False
        for name in names:
            self._remove_queue_data(topic, name)
        return True

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear the write bit of every topic on ``broker_name``; returns the topic count."""
        return self._set_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """Make every topic on ``broker_name`` read-write again (as Java does, perm = 6)."""
        return self._set_perm(broker_name, lambda perm: PERM_READ | PERM_WRITE)

    def _set_perm(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        for queues in self._topics.values():
            queue = queues.get(broker_name)
            if queue is not None:
                queue.perm = change(queue.perm)
                count += 1
        return count
