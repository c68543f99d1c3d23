"""QueryRoute and QueryAssignment: the broker's queues of a topic in RocketMQ 5's form.

Every queue points at the endpoints the client dialled (it has just reached them), as
RocketMQ's proxy does; consumers of a FIFO group get one assignment per queue, the others one
for the whole broker (queue id -1: a receive then takes from every queue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bolide.broker.proxy.call import Call
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


def _permission(tc: TopicConfig, queue_id: int, broker_perm: int) -> pb.Permission:
    perm = tc.perm & broker_perm
    readable = perm & PERM_READ and queue_id < tc.read_queue_nums
    writable = perm & PERM_WRITE and queue_id < tc.write_queue_nums
    if readable and writable:
        return pb.READ_WRITE
    return pb.READ if readable else pb.WRITE if writable else pb.NONE


def _broker(broker: BrokerController, endpoints: pb.Endpoints) -> pb.Broker:
    return pb.Broker(name=broker.config.broker_name, id=0, endpoints=endpoints)


def query_route(broker: BrokerController, call: Call, request: pb.QueryRouteRequest) -> pb.QueryRouteResponse:
    name = call.name(request.topic)
    tc = find_topic(broker, name, create=broker.config.auto_create_topic_enable)
    where = _broker(broker, request.endpoints)
    types = accepted_types(tc.attributes)
    queues = [
        pb.MessageQueue(
            topic=request.topic,
            id=i,
            permission=_permission(tc, i, broker.config.broker_permission),
            broker=where,
            accept_message_types=types,
        )
        for i in range(max(tc.read_queue_nums, tc.write_queue_nums))
    ]
    return pb.QueryRouteResponse(status=status(), message_queues=queues)


def query_assignment(
    broker: BrokerController, call: Call, request: pb.QueryAssignmentRequest, fifo: bool
) -> pb.QueryAssignmentResponse:
    name = call.name(request.topic)
    tc = find_topic(broker, name)
    if not tc.perm & broker.config.broker_permission & PERM_READ or tc.read_queue_nums <= 0:
        raise Refused(pb.FORBIDDEN, f"topic {name} has no readable queue on this broker")
    where = _broker(broker, request.endpoints)
    types = accepted_types(tc.attributes)
    ids = range(tc.read_queue_nums) if fifo else (-1,)
    assignments = [
        pb.Assignment(
            message_queue=pb.MessageQueue(
                topic=request.topic, id=i, permission=pb.READ_WRITE, broker=where, accept_message_types=types
            )
        )
        for i in ids
    ]
    return pb.QueryAssignmentResponse(status=status(), assignments=assignments)
