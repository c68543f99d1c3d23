"""A topic's route as clients use it: writable queues, readable queues, broker addresses.

Pure functions over :class:`TopicRouteData` (spec 5.2): publish queues come from writable
QueueData whose broker has a master (sorted by broker name), or from ``orderTopicConf`` when
set; subscribe queues from every readable QueueData. A static topic (RocketMQ 5 logic queues:
the route carries ``topicQueueMappingByBroker``) has instead one queue per logic queue under
the mock broker name ``__syslo__global__``, each served by the broker leading it (its
endpoint), as the Java client's ``topicRouteData2EndpointsForStaticTopic`` gives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bolide.common.topic import MAX_QUEUE_NUMS
from bolide.errors import ProtocolError
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.bodies.route import MASTER_ID, PERM_READ, PERM_WRITE, QueueData, TopicRouteData
from bolide.protocol.bodies.static_topic import (
    MOCK_BROKER_NAME_NOT_EXIST,
    TopicQueueMappingInfo,
    mock_broker_name,
)


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """One topic's route; ``from_default`` when it was derived from the auto-create topic."""

    topic: str
    data: TopicRouteData
    publish_queues: tuple[MessageQueue, ...]
    subscribe_queues: tuple[MessageQueue, ...]
    from_default: bool = False
    endpoints: Mapping[MessageQueue, str] = field(default_factory=dict)  # a static topic's queues

    def broker_of(self, mq: MessageQueue) -> str:
        """The broker serving ``mq``: a static topic's logic queue's leader, else its own."""
        return self.endpoints.get(mq, mq.broker_name) if self.endpoints else mq.broker_name

    def master_addr(self, broker_name: str) -> str | None:
        for bd in self.data.broker_datas:
            if bd.broker_name == broker_name:
                return bd.broker_addrs.get(MASTER_ID)
        return None

    def subscribe_addr(self, broker_name: str, broker_id: int = MASTER_ID,
                       only_this: bool = False) -> tuple[str, bool] | None:
        """Where to pull ``broker_name``'s queues from, as ``(address, is_slave)`` (the Java
        client's findBrokerAddressInSubscribe): ``broker_id``'s address; for a missing slave id
        the next id's; else, unless ``only_this``, the lowest id present (a slave when the
        master is gone). None when the broker has no address here."""
        for bd in self.data.broker_datas:
            if bd.broker_name != broker_name or not bd.broker_addrs:
                continue
            addrs = bd.broker_addrs
            addr = addrs.get(broker_id)
            if addr is None and broker_id != MASTER_ID:
                broker_id += 1
                addr = addrs.get(broker_id)
            if addr is None:
                if only_this:
                    return None
                broker_id = min(addrs)
                addr = addrs[broker_id]
            return addr, broker_id != MASTER_ID
        return None

    def broker_addrs(self, masters_only: bool = False) -> set[str]:
        out: set[str] = set()
        for bd in self.data.broker_datas:
            if masters_only:
                if MASTER_ID in bd.broker_addrs:
                    out.add(bd.broker_addrs[MASTER_ID])
            else:
                out.update(bd.broker_addrs.values())
        return out


def _queues(topic: str, broker_name: str, count: int, what: str) -> list[MessageQueue]:
    """Queues 0 to ``count - 1`` of ``topic`` on ``broker_name``; ProtocolError for a count no
    broker serves (a route of 2**31 queues would take the client's memory)."""
    if not 0 <= count <= MAX_QUEUE_NUMS:
        raise ProtocolError(f"the route of topic {topic!r} gives broker {broker_name!r} {count} "
                            f"{what} queues, not 0 to {MAX_QUEUE_NUMS}: the NameServer's answer is "
                            "malformed")
    return [MessageQueue(topic, broker_name, i) for i in range(count)]


def _publish_queues(topic: str, data: TopicRouteData) -> list[MessageQueue]:
    if data.order_topic_conf:
        queues = []
        for item in data.order_topic_conf.split(";"):
            name, _, num = item.partition(":")
            if name and num.strip().isdigit():
                queues += _queues(topic, name, int(num), "ordered")
        return queues
    masters = {bd.broker_name for bd in data.broker_datas if MASTER_ID in bd.broker_addrs}
    queues = []
    for qd in sorted(data.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            queues += _queues(topic, qd.broker_name, qd.write_queue_nums, "write")
    return queues


def _subscribe_queues(topic: str, data: TopicRouteData) -> list[MessageQueue]:
    queues = []
    for qd in sorted(data.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_READ:
            queues += _queues(topic, qd.broker_name, qd.read_queue_nums, "read")
    return queues


def static_endpoints(topic: str, data: TopicRouteData) -> dict[MessageQueue, str]:
    """A static topic's logic queues and the broker leading each (``__syslo__none__`` for one
    no broker leads); empty for other topics. Per scope, a logic queue's leader is the broker
    whose mapping info of the highest epoch lists it, and the queues number the largest total."""
    by_scope: dict[str, list[TopicQueueMappingInfo]] = {}
    for info in (data.topic_queue_mapping_by_broker or {}).values():
        if info.scope is not None:
            by_scope.setdefault(info.scope, []).append(info)
    out: dict[MessageQueue, str] = {}
    for scope, infos in by_scope.items():
        leaders: dict[int, TopicQueueMappingInfo] = {}
        total = 0
        for info in sorted(infos, key=lambda i: -i.epoch):
            total = max(total, info.total_queues)
            for global_id in info.curr_id_map:
                old = leaders.get(global_id)
                if old is None or old.epoch <= info.epoch:
                    leaders[global_id] = info
        name = mock_broker_name(scope)
        for mq in _queues(topic, name, total, "logic"):
            leader = leaders.get(mq.queue_id)
            out[mq] = (leader.bname or MOCK_BROKER_NAME_NOT_EXIST) if leader is not None \
                else MOCK_BROKER_NAME_NOT_EXIST
    return out


def build_route(topic: str, data: TopicRouteData) -> TopicRoute:
    """The route of ``topic`` from the NameServer's answer for it."""
    endpoints = static_endpoints(topic, data) if data.topic_queue_mapping_by_broker else {}
    if endpoints:  # the logic queues; a producer leaves out those no broker leads
        logic = sorted(endpoints, key=lambda mq: (mq.queue_id, mq.broker_name))
        led = [mq for mq in logic if endpoints[mq] != MOCK_BROKER_NAME_NOT_EXIST]
        return TopicRoute(topic, data, tuple(led), tuple(logic), endpoints=endpoints)
    return TopicRoute(topic, data, tuple(_publish_queues(topic, data)),
                      tuple(_subscribe_queues(topic, data)))


def default_route(topic: str, template: TopicRouteData, queue_nums: int) -> TopicRoute:
    """A route for a topic the broker will create on first send, from TBW102's route, with
    queue counts clamped to ``queue_nums`` as the Java producer does."""
    qds = []
    for qd in template.queue_datas:
        n = min(queue_nums, qd.read_queue_nums)
        qds.append(QueueData(broker_name=qd.broker_name, read_queue_nums=n, write_queue_nums=n,
                             perm=qd.perm, topic_sys_flag=qd.topic_sys_flag))
    data = TopicRouteData(queue_datas=qds, broker_datas=list(template.broker_datas))
    return TopicRoute(topic, data, tuple(_publish_queues(topic, data)),
                      tuple(_subscribe_queues(topic, data)), from_default=True)
