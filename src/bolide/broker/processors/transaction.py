"""END_TRANSACTION (37): commit (8) or roll back (12) a half message; 0 leaves it to the
transaction check (spec 3.4). Java clients send it oneway, so most answers are never sent."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bolide.broker.processors.send import PUT_STATUS_CODES
from bolide.common import properties as P
from bolide.common.message import MessageExt
from bolide.common.waiting import wait_for
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.send import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    EndTransactionRequestHeader,
)
from bolide.remoting import RequestContext
from bolide.store import PutStatus
from bolide.store.config import BrokerRole

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

# put statuses RocketMQ's EndTransactionProcessor answers SUCCESS for (stored, maybe not safe)
_STORED = frozenset({PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT,
                     PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE})


class EndTransactionProcessor:
    """Finds the half message by CommitLog offset, checks it against the header, then
    commits it into its real topic or rolls it back; both write the op message."""

    CODES = (RequestCode.END_TRANSACTION,)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = request.read_header(EndTransactionRequestHeader)
        broker = self.broker
        if broker.store.config.broker_role is BrokerRole.SLAVE:
            return request.make_response(ResponseCode.SLAVE_NOT_AVAILABLE,
                                         "this broker is a slave: end transactions on the master")
        state = header.commit_or_rollback
        if state not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return None  # 0 (unknown) or anything else: the check will ask the producer later
        if state == TRANSACTION_ROLLBACK_TYPE or header.from_transaction_check:
            log.info("%s %s half message %s (offset %d)%s", ctx.remote_address,
                     "commits" if state == TRANSACTION_COMMIT_TYPE else "rolls back",
                     header.msg_id, header.commit_log_offset,
                     " after a check" if header.from_transaction_check else "")
        tx = broker.transactions
        half = tx.find_half(header.commit_log_offset)
        if half is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         "Find prepared transaction message failed")
        why = self._mismatch(half, header)
        if why is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, why)
        if state == TRANSACTION_COMMIT_TYPE:
            result = tx.commit(half)
            if result.ok and broker.store.config.sync_flush:
                await self._wait_flushed(result.end_offset)
            if result.status not in _STORED:
                return request.make_response(PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR),
                                             f"{result.status.value}: {result.remark}")
            broker.stats_items.on_put(half.properties[P.REAL_TOPIC], 1, result.wrote_bytes)
        tx.delete_prepared(half)
        if broker.metrics is not None:
            broker.metrics.on_end_transaction(state == TRANSACTION_COMMIT_TYPE)
        return request.make_response()

    @staticmethod
    def _mismatch(half: MessageExt, header: EndTransactionRequestHeader) -> str | None:
        """Why the half message is not the one the header names (RocketMQ's remarks)."""
        if half.properties.get(P.PRODUCER_GROUP) != header.producer_group:
            return "The producer group wrong"
        if half.queue_offset != header.tran_state_table_offset:
            return "The transaction state table offset wrong"
        if half.commit_log_offset != header.commit_log_offset:
            return "The commit log offset wrong"
        return None

    async def _wait_flushed(self, end_offset: int) -> None:
        """Under SYNC_FLUSH, wait for the committed message as RocketMQ's putMessage does; a
        timeout still counts as stored."""
        timeout = self.broker.store.config.sync_flush_timeout_ms / 1000
        try:
            await wait_for(self.broker.flush_waiters.wait(end_offset), timeout)
        except TimeoutError:
            log.warning("a committed transaction message was not flushed within syncFlushTimeout")
