"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): queue locks of orderly consumers (on a
quorum of the group with ``lockInStrictMode``, :mod:`bolide.broker.strict_locks`)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from bolide.broker.strict_locks import lock_on_quorum, unlock_everywhere
from bolide.protocol.bodies.client import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


class LockProcessor:
    """Lock, renew and release queues in the broker's :class:`QueueLocks`."""

    CODES = (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._unlocking: set[asyncio.Task[None]] = set()  # unlocks passed on (lockInStrictMode)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        locks = self.broker.queue_locks
        strict = self.broker.config.lock_in_strict_mode
        if request.code == RequestCode.LOCK_BATCH_MQ:
            body = LockBatchRequestBody.decode(request.body_bytes())
            held = locks.lock(body.consumer_group, body.client_id, body.mq_set)
            if strict and not body.only_this_broker:
                held = await lock_on_quorum(self.broker, body, held)
            return request.make_response(body=LockBatchResponseBody(lock_ok_mq_set=held).encode())
        unlock = UnlockBatchRequestBody.decode(request.body_bytes())
        locks.unlock(unlock.consumer_group, unlock.client_id, unlock.mq_set)
        if strict and not unlock.only_this_broker:
            for task in unlock_everywhere(self.broker, unlock):
                self._unlocking.add(task)
                task.add_done_callback(self._unlocking.discard)
        return request.make_response()
