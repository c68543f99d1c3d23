"""QueryRoute and QueryAssignment: the queues of a topic on every broker serving it, in
RocketMQ 5's form.

This broker's queues point at the endpoints the client dialled (it has just reached them), as
RocketMQ's proxy does; the other brokers' at their own gRPC endpoints
(:mod:`bolide.broker.proxy.cluster`). Consumers of a FIFO group get one assignment per queue,
the others one per broker (queue id -1: a receive then takes from every queue of it).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bolide.broker.proxy.call import Call
from bolide.broker.proxy.cluster import ClusterRoutes, TopicView
from bolide.broker.proxy.convert import Refused, accepted_types, status
from bolide.broker.topic_config import PERM_READ, PERM_WRITE
from bolide.common.topic import validate_topic
from bolide.protocol.bodies.broker import TopicConfig
from bolide.protocol.v5 import messaging_pb2 as pb

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

AUTO_CREATE_TEMPLATE = "TBW102"


def find_topic(broker: BrokerController, name: str, *, create: bool = False) -> TopicConfig:
    """The topic's config; with ``create``, made from the TBW102 template when it is unknown
    and autoCreateTopicEnable is on. Raises Refused (ILLEGAL_TOPIC, TOPIC_NOT_FOUND)."""
    tc = broker.topics.get(name)
    if tc is not None:
        return tc
    why = validate_topic(name)
    if why is not None:
        raise Refused(pb.ILLEGAL_TOPIC, why)
    if create:
        tc = broker.topics.create_in_send(name, AUTO_CREATE_TEMPLATE, broker.config.default_topic_queue_nums)
        if tc is not None:
            return tc
    raise Refused(
        pb.TOPIC_NOT_FOUND,
        f"topic {name} does not exist: create it with `bolide admin "
        "updateTopic` (or turn autoCreateTopicEnable on)",
    )


def _permission(perm: int, read_queue_nums: int, write_queue_nums: int, queue_id: int) -> pb.Permission:
    readable = perm & PERM_READ and queue_id < read_queue_nums
    writable = perm & PERM_WRITE and queue_id < write_queue_nums
    if readable and writable:
        return pb.READ_WRITE
    return pb.READ if readable else pb.WRITE if writable else pb.NONE


def endpoints_of(host: str, port: int) -> pb.Endpoints:
    """The gRPC endpoints of a broker at ``host`` (an IPv4 or IPv6 address, or a name)."""
    try:
        scheme = pb.IPv4 if ipaddress.ip_address(host).version == 4 else pb.IPv6
    except ValueError:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


@dataclass(frozen=True, slots=True)
class _Serving:
    """One broker's queues of a topic and its gRPC endpoint."""

    broker: pb.Broker
    perm: int
    read_queue_nums: int
    write_queue_nums: int


def _serving(
    broker: BrokerController, tc: TopicConfig | None, view: TopicView, here: pb.Endpoints
) -> list[_Serving]:
    """The brokers serving a topic: this one (at the endpoints the client dialled) when it has
    the topic, then the others."""
    found = []
    if tc is not None:
        me = pb.Broker(name=broker.config.broker_name, id=0, endpoints=here)
        found.append(_Serving(me, tc.perm & broker.config.broker_permission, tc.read_queue_nums,
                              tc.write_queue_nums))
    for p in view.peers:
        other = pb.Broker(name=p.broker_name, id=0, endpoints=endpoints_of(p.host, p.grpc_port))
        found.append(_Serving(other, p.perm, p.read_queue_nums, p.write_queue_nums))
    return found


async def query_route(
    broker: BrokerController, cluster: ClusterRoutes, call: Call, request: pb.QueryRouteRequest
) -> pb.QueryRouteResponse:
    """The topic's queues on every broker serving it (this one's made from TBW102 when no
    broker has the topic and autoCreateTopicEnable is on)."""
    name = call.name(request.topic)
    why = validate_topic(name)
    if why is not None:
        raise Refused(pb.ILLEGAL_TOPIC, why)
    view = await cluster.view(name)
    tc = broker.topics.get(name)
    if tc is None and not view.peers:
        tc = find_topic(broker, name, create=broker.config.auto_create_topic_enable)
    types = accepted_types(tc.attributes if tc is not None else view.attributes)
    queues = [
        pb.MessageQueue(
            topic=request.topic,
            id=i,
            permission=_permission(b.perm, b.read_queue_nums, b.write_queue_nums, i),
            broker=b.broker,
            accept_message_types=types,
        )
        for b in _serving(broker, tc, view, request.endpoints)
        for i in range(max(b.read_queue_nums, b.write_queue_nums))
    ]
    return pb.QueryRouteResponse(status=status(), message_queues=queues)


async def query_assignment(
    broker: BrokerController,
    cluster: ClusterRoutes,
    call: Call,
    request: pb.QueryAssignmentRequest,
    fifo: bool,
) -> pb.QueryAssignmentResponse:
    """The queues a consumer receives from: for a FIFO group each readable queue of every
    broker, else every broker with a readable queue (queue id -1: any of its queues)."""
    name = call.name(request.topic)
    view = await cluster.view(name)
    tc = broker.topics.get(name)
    if tc is None and not view.peers:
        find_topic(broker, name)  # raises TOPIC_NOT_FOUND
    types = accepted_types(tc.attributes if tc is not None else view.attributes)
    assignments = [
        pb.Assignment(
            message_queue=pb.MessageQueue(
                topic=request.topic,
                id=i,
                permission=pb.READ_WRITE,
                broker=b.broker,
                accept_message_types=types,
            )
        )
        for b in _serving(broker, tc, view, request.endpoints)
        if b.perm & PERM_READ and b.read_queue_nums > 0
        for i in (range(b.read_queue_nums) if fifo else (-1,))
    ]
    if not assignments:
        raise Refused(pb.FORBIDDEN, f"topic {name} has no readable queue on any broker")
    return pb.QueryAssignmentResponse(status=status(), assignments=assignments)
