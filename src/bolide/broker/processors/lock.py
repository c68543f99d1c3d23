"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): queue locks of orderly consumers."""

from __future__ import annotations

from typing import TYPE_CHECKING

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

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        locks = self.broker.queue_locks
        if request.code == RequestCode.LOCK_BATCH_MQ:
            body = LockBatchRequestBody.decode(request.body_bytes())
            held = locks.lock(body.consumer_group, body.client_id, body.mq_set)
            return request.make_response(body=LockBatchResponseBody(lock_ok_mq_set=held).encode())
        unlock = UnlockBatchRequestBody.decode(request.body_bytes())
        locks.unlock(unlock.consumer_group, unlock.client_id, unlock.mq_set)
        return request.make_response()
