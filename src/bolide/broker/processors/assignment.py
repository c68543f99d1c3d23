"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401): RocketMQ 5's allocation of a
push consumer's queues by the broker, and the choice of PULL or POP per topic and group.

A 5.x Java push consumer with ``setClientRebalance(false)`` asks a broker for its queues
instead of allocating them itself; in POP mode it then pops them (POP_MESSAGE). The topic's
queues are those of every broker serving it (its route from the NameServers; this broker's
own when no NameServer answers).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bolide.broker.namesrv_route import route_from_namesrv
from bolide.broker.topic_config import PERM_READ
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.protocol.allocate import AllocateStrategy, allocate_averagely, allocate_by_circle
from bolide.protocol.bodies.client import BROADCASTING, MessageQueue
from bolide.protocol.bodies.pop import (
    MODE_POP,
    MODE_PULL,
    MessageQueueAssignment,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

STRATEGIES: dict[str, AllocateStrategy] = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_by_circle}


def allocate_for_pop(
    strategy: AllocateStrategy,
    group: str,
    client_id: str,
    queues: list[MessageQueue],
    client_ids: list[str],
    share: int,
) -> list[MessageQueue]:
    """RocketMQ's ``allocate4Pop``: with ``share`` <= 0 (or at least the other consumers) every
    consumer pops every broker's queues (queue id -1: any of them); else its own share and the
    shares of the ``share`` consumers after it; with more consumers than queues, one queue each."""
    if share <= 0 or share >= len(client_ids) - 1:
        return sorted({MessageQueue(q.topic, q.broker_name, -1) for q in queues})
    if len(client_ids) > len(queues):
        if client_id not in client_ids:
            return []
        return [queues[client_ids.index(client_id) % len(queues)]]
    mine = strategy(group, client_id, queues, client_ids)
    if client_id in client_ids:
        index = client_ids.index(client_id)
        for step in range(1, share + 1):
            mine += strategy(group, client_ids[(index + step) % len(client_ids)], queues, client_ids)
    return mine


class AssignmentProcessor:
    """Allocates queues among a group's consumers and keeps the groups' request modes."""

    CODES = (RequestCode.QUERY_ASSIGNMENT, RequestCode.SET_MESSAGE_REQUEST_MODE)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.SET_MESSAGE_REQUEST_MODE:
            return await self._set_mode(request)
        return await self._query(request)

    # -- SET_MESSAGE_REQUEST_MODE ---------------------------------------------------------
    async def _set_mode(self, request: RemotingCommand) -> RemotingCommand:
        body = SetMessageRequestModeRequestBody.decode(request.body_bytes())
        broker = self.broker
        if body.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return request.make_response(
                ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode: it is always pulled"
            )
        if body.mode not in (MODE_PULL, MODE_POP):
            return request.make_response(
                ResponseCode.INVALID_PARAMETER, f"mode {body.mode!r} is neither PULL nor POP"
            )
        if broker.topics.get(body.topic) is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{body.topic}] not exist")
        if broker.subscription_groups.find(body.consumer_group) is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{body.consumer_group}] does not exist: create it with updateSubGroup",
            )
        broker.request_modes.set(body)
        await asyncio.to_thread(broker.request_modes.persist)
        return request.make_response(ResponseCode.SUCCESS)

    # -- QUERY_ASSIGNMENT -----------------------------------------------------------------
    async def _query(self, request: RemotingCommand) -> RemotingCommand:
        body = QueryAssignmentRequestBody.decode(request.body_bytes())
        mode = self.mode(body.topic, body.consumer_group)
        queues = await self._queues(body.topic)
        assigned = self._allocate(body, mode, queues) if queues else None
        answer = QueryAssignmentResponseBody(
            None if assigned is None else [MessageQueueAssignment(q, mode.mode) for q in assigned]
        )
        return request.make_response(ResponseCode.SUCCESS, body=answer.encode())

    def mode(self, topic: str, group: str) -> SetMessageRequestModeRequestBody:
        """The group's mode on the topic: set with setConsumeMode, else the broker's default
        (retry topics are always pulled)."""
        found = self.broker.request_modes.get(topic, group)
        if found is not None:
            return found
        config = self.broker.config
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or config.default_message_request_mode != MODE_POP:
            return SetMessageRequestModeRequestBody(topic, group, MODE_PULL)
        return SetMessageRequestModeRequestBody(topic, group, MODE_POP, config.default_pop_share_queue_num)

    def _allocate(
        self,
        body: QueryAssignmentRequestBody,
        mode: SetMessageRequestModeRequestBody,
        queues: list[MessageQueue],
    ) -> list[MessageQueue] | None:
        """The consumer's queues; None (the client keeps what it has) when the group has no
        consumers here or the strategy is unknown, as RocketMQ answers."""
        if body.message_model == BROADCASTING:
            return queues
        client_ids = self.broker.clients.consumer_ids(body.consumer_group)
        strategy = STRATEGIES.get(body.strategy_name)
        if not client_ids or strategy is None:
            if strategy is None:
                log.warning("QUERY_ASSIGNMENT from %s: unknown allocation strategy %r (Bolide knows %s)",
                            body.client_id, body.strategy_name, ", ".join(STRATEGIES))
            return None
        if mode.mode == MODE_POP:
            return allocate_for_pop(
                strategy, body.consumer_group, body.client_id, queues, client_ids, mode.pop_share_queue_num
            )
        return strategy(body.consumer_group, body.client_id, queues, client_ids)

    async def _queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of every broker serving ``topic``, sorted."""
        route = await route_from_namesrv(self.broker, topic)
        if route is not None:
            return sorted(
                MessageQueue(topic, qd.broker_name, i)
                for qd in route.queue_datas
                if qd.perm & PERM_READ
                for i in range(qd.read_queue_nums)
            )
        tc = self.broker.topics.get(topic)
        if tc is None or not tc.perm & PERM_READ:
            return []
        return [MessageQueue(topic, self.broker.config.broker_name, i) for i in range(tc.read_queue_nums)]
