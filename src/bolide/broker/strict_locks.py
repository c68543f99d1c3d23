"""Queue locks on a quorum of a broker group (RocketMQ 5's ``lockInStrictMode``, with slave
acting master).

An orderly consumer locks its queues with LOCK_BATCH_MQ on the group's master. In strict mode
the broker asked takes the locks, then asks the other live members of its group (the member
group learned by :mod:`bolide.broker.acting_master`) to take the ones it got, with
``onlyThisBroker=true``, 1 s each, 2 s in all; a queue is locked for the client when at least
``totalReplicas / 2 + 1`` brokers took it. So a slave acting for a master that went away
already holds the locks the consumers had, and two consumers cannot both lock one queue, one on
the master and one on the slave. A group that cannot reach its quorum (a lone acting slave of a
group of two) locks nothing: orderly consumption waits for the master. UNLOCK_BATCH_MQ is
passed on to every member, one way, as RocketMQ does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from typing import TYPE_CHECKING

from bolide.errors import ProtocolError, RemotingError
from bolide.protocol.bodies.client import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    UnlockBatchRequestBody,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

CALL_TIMEOUT_MS = 1000  # each member's answer, as RocketMQ
ALL_TIMEOUT_S = 2.0  # every member's answer


def quorum(total_replicas: int) -> int:
    """How many of the group's brokers must hold a lock."""
    return total_replicas // 2 + 1


def _others(broker: BrokerController) -> dict[int, str]:
    members = dict(broker.acting_master.members) if broker.acting_master is not None else {}
    members.pop(broker.config.broker_id, None)
    return members


async def _lock_on(broker: BrokerController, addr: str, body: LockBatchRequestBody) -> set[MessageQueue]:
    request = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body.encode())
    response = await broker.namesrv_client.invoke(addr, request, CALL_TIMEOUT_MS)
    if response.code != ResponseCode.SUCCESS:
        raise RemotingError(f"LOCK_BATCH_MQ answered code {response.code}: {response.remark}")
    return LockBatchResponseBody.decode(response.body_bytes()).lock_ok_mq_set


async def lock_on_quorum(broker: BrokerController, body: LockBatchRequestBody,
                         held_here: set[MessageQueue]) -> set[MessageQueue]:
    """The queues of ``held_here`` (locked on this broker) that a quorum of the group holds."""
    need = quorum(broker.config.total_replicas)
    if need <= 1:
        return held_here
    counts = Counter(held_here)
    ask = dataclasses.replace(body, mq_set=set(held_here), only_this_broker=True)
    others = _others(broker)
    calls = {asyncio.ensure_future(_lock_on(broker, addr, ask)): addr for addr in others.values()}
    if calls:
        done, pending = await asyncio.wait(calls, timeout=ALL_TIMEOUT_S)
        for task in pending:
            task.cancel()
        for task in done:
            exc = task.exception()
            if exc is not None:
                log.warning("lockInStrictMode: LOCK_BATCH_MQ on %s failed: %s", calls[task], exc)
                continue
            counts.update(task.result())
    return {mq for mq, n in counts.items() if n >= need}


async def _unlock_on(broker: BrokerController, addr: str, body: UnlockBatchRequestBody) -> None:
    request = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body.encode())
    try:
        await broker.namesrv_client.invoke(addr, request, CALL_TIMEOUT_MS)
    except (RemotingError, ProtocolError, OSError) as exc:
        log.warning("lockInStrictMode: UNLOCK_BATCH_MQ on %s failed: %s", addr, exc)


def unlock_everywhere(broker: BrokerController, body: UnlockBatchRequestBody) -> list[asyncio.Task[None]]:
    """Pass an unlock on to the group's other members (not waited for); their tasks."""
    ask = dataclasses.replace(body, only_this_broker=True)
    loop = asyncio.get_running_loop()
    return [loop.create_task(_unlock_on(broker, addr, ask)) for addr in _others(broker).values()]
