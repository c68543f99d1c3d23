"""TransactionProducer (asyncio): transactional messages, as Java's TransactionMQProducer.

::

    def execute(msg, arg):                   # the local transaction
        db.save(arg)
        return LocalTransactionState.COMMIT

    def check(msg):                          # the broker asks about an unfinished one
        return LocalTransactionState.COMMIT if db.has(msg.keys[0]) else LocalTransactionState.ROLLBACK

    producer = TransactionProducer("127.0.0.1:9876", "tx-pg", check_listener=check)
    result = await producer.send_message_in_transaction(Message("Orders", b"o-1", keys="o-1"),
                                                        execute, arg=order)

1. The message is sent as a *half message* (``TRAN_MSG=true``, ``PGROUP=<group>``, sysFlag
   0x4): the broker stores it where consumers do not see it.
2. The local executor runs; it returns COMMIT, ROLLBACK or UNKNOWN (None and exceptions count
   as UNKNOWN).
3. END_TRANSACTION (oneway) tells the broker: commit makes the message visible, rollback drops
   it, unknown leaves it to the broker's check. The half message is found by the CommitLog
   offset decoded from the send's offset message id.
4. Later, for half messages still open, the broker sends CHECK_TRANSACTION_STATE (39) down a
   connection of a producer of the group; the check listener answers, and END_TRANSACTION
   (``fromTransactionCheck=true``) carries the answer back on that connection.

Executors and check listeners are coroutine functions (run on the event loop) or plain
functions (the executor runs on the loop, the check listener in the loop's thread pool).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from bolide.client.api import request
from bolide.client.callbacks import require_arguments
from bolide.client.config import ClientConfig
from bolide.client.producer import Producer
from bolide.client.results import SendResult, SendStatus
from bolide.common import properties as P
from bolide.common.compression import decompress_message
from bolide.common.message import Message, MessageExt
from bolide.common.msgid import decode_offset_msg_id
from bolide.common.records import RecordFormatError, decode_records
from bolide.common.topic import AUTO_CREATE_TOPIC_KEY
from bolide.errors import BolideError
from bolide.protocol import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from bolide.remoting import RequestContext

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    """The outcome of a local transaction (Java COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW)."""

    COMMIT = 8  # the END_TRANSACTION commitOrRollback value
    ROLLBACK = 12
    UNKNOWN = 0

    @property
    def java_name(self) -> str:
        """The name of Java's LocalTransactionState (in message traces)."""
        return _JAVA_NAMES[self]


_JAVA_NAMES = {LocalTransactionState.COMMIT: "COMMIT_MESSAGE",
               LocalTransactionState.ROLLBACK: "ROLLBACK_MESSAGE", LocalTransactionState.UNKNOWN: "UNKNOW"}


@dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """A :class:`SendResult` of the half message with the local transaction's outcome;
    ``transaction_id`` is the message's UNIQ_KEY."""

    local_state: LocalTransactionState = LocalTransactionState.UNKNOWN
    transaction_id: str = ""


LocalExecutor: TypeAlias = Callable[
    [Message, Any], "LocalTransactionState | Awaitable[LocalTransactionState | None] | None"]
CheckListener: TypeAlias = Callable[
    [MessageExt], "LocalTransactionState | Awaitable[LocalTransactionState | None] | None"]


def as_state(value: object, what: str) -> LocalTransactionState:
    """A callback's answer as a state: None and anything else than a state are UNKNOWN."""
    if isinstance(value, LocalTransactionState):
        return value
    if value is not None:
        log.error("%s returned %r, not a LocalTransactionState; treated as UNKNOWN", what, value)
    return LocalTransactionState.UNKNOWN


class TransactionProducer(Producer):
    """A producer of transactional messages; asyncio API (blocking: ``bolide.client.blocking``).

    Takes the :class:`Producer` options; ``check_listener(msg)`` answers the broker's checks of
    half messages whose outcome it does not know (without one, checks are logged and ignored).
    """

    def __init__(self, namesrv: str | ClientConfig, group: str, *,
                 check_listener: CheckListener | None = None, **producer_options: Any) -> None:
        super().__init__(namesrv, group, **producer_options)
        if check_listener is not None:
            _check_listener(check_listener)
        self.check_listener = check_listener
        self.checks_answered = 0  # END_TRANSACTION answers sent for broker checks
        self._introduced = False
        self._instance.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)

    def register_check_listener(self, listener: CheckListener) -> None:
        """Answer the broker's checks of undecided transactions with ``listener(msg)`` (returning
        a LocalTransactionState)."""
        _check_listener(listener)
        self.check_listener = listener

    async def start(self) -> TransactionProducer:
        """Start, and introduce the producer to the brokers (found through TBW102's route), so
        the broker can check half messages of an earlier run before the first send."""
        await super().start()
        if not self._introduced:
            self._introduced = True
            try:
                await self._instance.route(AUTO_CREATE_TOPIC_KEY)
                await self._instance.heartbeat()
            except BolideError as exc:
                log.info("producer %s could not reach the brokers yet (%s); its first send will",
                         self.group, exc)
        return self

    # -- sending ----------------------------------------------------------------------------
    async def send_message_in_transaction(self, msg: Message, local_executor: LocalExecutor,
                                          arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``local_executor(msg, arg)``, and commit or roll
        back per its answer (UNKNOWN: the broker checks later). Send errors raise; the
        executor's exceptions count as UNKNOWN and their text goes to the broker."""
        sent = await self.send_half(msg)
        state, error = LocalTransactionState.ROLLBACK, None
        if sent.status is SendStatus.SEND_OK:
            state, error = await self.execute_local(local_executor, msg, arg)
        await self.end_transaction(msg, sent, state, error)
        return self.transaction_result(sent, state)

    async def send_half(self, msg: Message) -> SendResult:
        """Step 1: the half message (a delay level is dropped, as in Java)."""
        msg.delay_time_level = 0
        msg.properties[P.TRANSACTION_PREPARED] = "true"
        msg.properties[P.PRODUCER_GROUP] = self.group
        return await self.send(msg)

    @staticmethod
    async def execute_local(local_executor: LocalExecutor, msg: Message,
                            arg: Any) -> tuple[LocalTransactionState, BaseException | None]:
        """Step 2: the local transaction's state, and its exception if it raised."""
        try:
            result: Any = local_executor(msg, arg)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("the local transaction of message %s raised (%s): its state is UNKNOWN",
                        msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), exc)
            return LocalTransactionState.UNKNOWN, exc
        return as_state(result, "the local transaction executor"), None

    async def end_transaction(self, msg: Message, sent: SendResult, state: LocalTransactionState,
                              error: BaseException | None = None) -> None:
        """Step 3: END_TRANSACTION (oneway) for the half message ``sent``; failures are logged
        (the broker's check settles the transaction then)."""
        try:
            _, commit_log_offset = decode_offset_msg_id(sent.offset_msg_id or sent.msg_id)
        except ValueError as exc:
            log.warning("cannot end the transaction of %s: %s", sent.msg_id, exc)
            return
        addr = self._instance.master_addr(self._instance.broker_of(sent.queue))
        if addr is None:
            log.warning("cannot end the transaction of %s: no master address for broker %s",
                        sent.msg_id, sent.queue.broker_name)
            return
        header = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=sent.queue_offset,
            commit_log_offset=commit_log_offset, commit_or_rollback=state.value,
            from_transaction_check=False, msg_id=sent.msg_id, transaction_id=sent.msg_id,
            topic=msg.topic, bname=sent.queue.broker_name)
        remark = f"executeLocalTransactionBranch exception: {error}" if error is not None else None
        try:
            await self._instance.api.end_transaction(addr, header, remark)
        except BolideError as exc:
            log.warning("END_TRANSACTION of %s to %s failed (%s); the broker will check it",
                        sent.msg_id, addr, exc)
            return
        if self._tracer is not None:
            self._tracer.on_end_transaction(msg, sent.msg_id, state.java_name, region=sent.region_id,
                                            store_host=addr, from_check=False)

    @staticmethod
    def transaction_result(sent: SendResult, state: LocalTransactionState) -> TransactionSendResult:
        """The result of a transactional send: the half message's send result and the local state."""
        return TransactionSendResult(sent.status, sent.msg_id, sent.offset_msg_id, sent.queue,
                                     sent.queue_offset, sent.region_id, local_state=state,
                                     transaction_id=sent.msg_id)

    # -- broker checks ----------------------------------------------------------------------
    async def _on_check(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand | None:
        """CHECK_TRANSACTION_STATE (39): ask the check listener, answer on the same connection."""
        header = CheckTransactionStateRequestHeader.from_ext_fields(req.ext_fields)
        try:
            msgs = decode_records(req.body_bytes())
        except RecordFormatError as exc:
            log.warning("a transaction check from %s has a bad message body: %s", ctx.remote_address, exc)
            return None
        if not msgs:
            return None
        msg = msgs[0]
        decompress_message(msg)
        listener = self.check_listener
        if listener is None:
            log.warning("broker %s checks transaction %s but producer %s has no check_listener",
                        ctx.remote_address, msg.msg_id, self.group)
            return None
        group = msg.properties.get(P.PRODUCER_GROUP)
        if group and group != self.group:
            log.warning("a transaction check for group %s reached producer group %s; ignored",
                        group, self.group)
            return None
        error: BaseException | None = None
        try:
            if inspect.iscoroutinefunction(listener):
                result: Any = await listener(msg)
            else:
                result = await asyncio.get_running_loop().run_in_executor(
                    None, functools.partial(listener, msg))
                if inspect.isawaitable(result):
                    result = await result
            state = as_state(result, "the check listener")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("the check listener raised for %s (%s): answering UNKNOWN", msg.msg_id, exc)
            state, error = LocalTransactionState.UNKNOWN, exc
        uniq = msg.msg_id or msg.offset_msg_id
        answer = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=msg.queue_offset,
            commit_log_offset=msg.commit_log_offset, commit_or_rollback=state.value,
            from_transaction_check=True, msg_id=uniq, transaction_id=header.transaction_id or uniq,
            topic=msg.topic, bname=header.bname)
        cmd = request(RequestCode.END_TRANSACTION, answer)
        if error is not None:
            cmd.remark = f"checkLocalTransactionState exception: {error}"
        try:
            ctx.channel.oneway(cmd)
            self.checks_answered += 1
        except BolideError as exc:
            log.info("the answer to a transaction check could not be sent to %s: %s", ctx.remote_address, exc)
            return None
        if self._tracer is not None:
            self._tracer.on_end_transaction(msg, uniq, state.java_name,
                                            region=msg.properties.get(P.MSG_REGION),
                                            store_host=ctx.remote_address, from_check=True)
        return None


def _check_listener(listener: CheckListener) -> None:
    require_arguments(listener, 1, "the check listener", "the half message, def check(msg)")
