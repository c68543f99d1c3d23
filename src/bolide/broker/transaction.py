"""Transactional messages, RocketMQ's half-topic design (4.x and 5.x brokers store the same).

- SEND with ``TRAN_MSG=true``: the message is stored as a *half message* in
  ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, with ``REAL_TOPIC``/``REAL_QID`` properties and the
  transaction bits of its sysflag cleared, so consumers of the real topic do not see it.
- END_TRANSACTION commit: the half message is stored again in its real topic and queue with
  sysflag COMMIT and PREPAREDTRANSACTIONOFFSET = the half message's CommitLog offset; commit
  and rollback both write an *op message* (tag ``d``, body = the half queue offset) to
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, same queue id.
- :class:`TransactionCheckService` scans the half queue from its progress offset (consumer
  offsets of group ``CID_RMQ_SYS_TRANS``, kept in consumerOffset.json), skips half messages
  with an op message, and for those older than ``transactionTimeOut`` appends a copy with
  ``TRANSACTION_CHECK_TIMES`` + 1 and asks a producer of its ``PGROUP`` with
  CHECK_TRANSACTION_STATE about the copy. After ``transactionCheckMax`` checks the message is
  moved to ``TRANS_CHECK_MAX_TIME_TOPIC``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bolide.broker.loop_service import LoopService
from bolide.common import properties as P
from bolide.common import sysflag
from bolide.common.hosts import encode_host
from bolide.common.message import Message, MessageExt
from bolide.common.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from bolide.common.waiting import wait_for
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.send import CheckTransactionStateRequestHeader
from bolide.store import GetStatus
from bolide.store.record import MAGIC_V2, decode_record, encode_record
from bolide.store.results import PutMessageResult

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # progress of the check over the half and op queues
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
REMOVE_TAG = "d"  # tag of op messages: the half message is done (committed or rolled back)
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"

MAX_OPS_PER_RUN = 200_000  # op entries one check run keeps in memory per queue
MAX_SCAN_PER_RUN = 100_000  # half messages one check run looks at per queue
MAX_RUN_SECONDS = 60.0  # as RocketMQ's MAX_PROCESS_TIME_LIMIT, per queue
_BATCH = 32
_END_OF_QUEUE = frozenset({GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.OFFSET_OVERFLOW_BADLY,
                           GetStatus.NO_MESSAGE_IN_QUEUE})


def is_half_message(properties: str | None) -> bool:
    """True when a send header's properties say ``TRAN_MSG=true`` (Java's parseBoolean)."""
    if not properties or "TRAN_MSG\x01" not in properties:
        return False
    return P.decode_properties(properties).get(P.TRANSACTION_PREPARED, "").lower() == "true"


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def op_offsets(body: bytes) -> tuple[int, ...]:
    """Half queue offsets an op message body names: ``"12"`` (4.x) or ``"12,13,"`` (5.x)."""
    return tuple(int(t) for t in body.decode("ascii", "replace").split(",") if t.strip().isdigit())


class TransactionalMessages:
    """Writes half, committed, op and discarded messages of one broker's store."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._topics_ready: set[str] = set()

    def _ensure_topic(self, topic: str) -> None:
        """The system topics exist in the topic table (1 queue, read/write) once used."""
        if topic not in self._topics_ready:
            self.broker.topics.create_for_group(topic)
            self._topics_ready.add(topic)

    # -- SEND ---------------------------------------------------------------------------------
    def put_half(self, topic: str, queue_id: int, body: bytes, properties: bytes, *, flag: int,
                 sys_flag: int, born_timestamp: int, born_host: str | None,
                 reconsume_times: int) -> PutMessageResult:
        """Store a producer's prepared message as a half message (RocketMQ's
        ``parseHalfMessageInner``): the send response then carries the half queue offset,
        which END_TRANSACTION names as ``tranStateTableOffset``."""
        self._ensure_topic(TRANS_HALF_TOPIC)
        props = P.decode_properties(properties)
        props.pop(P.DELAY_TIME_LEVEL, None)  # clients clear it; a half message is never delayed
        props[P.REAL_TOPIC] = topic
        props[P.REAL_QUEUE_ID] = str(queue_id)
        return self.broker.store.put_encoded(
            TRANS_HALF_TOPIC, body, P.encode_properties(props), 0, flag=flag,
            sys_flag=sys_flag & ~sysflag.TRANSACTION_MASK, born_timestamp=born_timestamp,
            born_host=born_host, reconsume_times=reconsume_times, wait_store=False)

    # -- END_TRANSACTION ----------------------------------------------------------------------
    def find_half(self, commit_log_offset: int) -> MessageExt | None:
        """The half message stored at ``commit_log_offset``; None when there is none."""
        store = self.broker.store
        if not store.min_phy_offset <= commit_log_offset < store.max_phy_offset:
            return None
        msg = store.look_message_by_offset(commit_log_offset)
        if (msg is None or msg.topic != TRANS_HALF_TOPIC or msg.commit_log_offset != commit_log_offset
                or P.REAL_TOPIC not in msg.properties
                or not msg.properties.get(P.REAL_QUEUE_ID, "").isdigit()):
            return None
        return msg

    def commit(self, half: MessageExt) -> PutMessageResult:
        """Store ``half`` in its real topic and queue as a committed message.

        Like RocketMQ, the stored properties are the half message's own (``TRAN_MSG``,
        ``PGROUP``, ``REAL_TOPIC`` and ``REAL_QID`` included); the sysflag's transaction type
        becomes COMMIT and PREPAREDTRANSACTIONOFFSET points at the half message.
        """
        return self.broker.store.put_encoded(
            half.properties[P.REAL_TOPIC], half.body, P.encode_properties(half.properties),
            int(half.properties[P.REAL_QUEUE_ID]), flag=half.flag,
            sys_flag=(half.sys_flag & ~sysflag.TRANSACTION_MASK) | sysflag.TRANSACTION_COMMIT_TYPE,
            born_timestamp=half.born_timestamp, born_host=half.born_host,
            reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.commit_log_offset, wait_store=False)

    def delete_prepared(self, half: MessageExt) -> PutMessageResult:
        """Write the op message that marks ``half`` as done (commit or rollback)."""
        self._ensure_topic(TRANS_OP_HALF_TOPIC)
        op = Message(TRANS_OP_HALF_TOPIC, str(half.queue_offset).encode(), tags=REMOVE_TAG)
        result = self.broker.store.put_message(op, half.queue_id, wait_store=False)
        if not result.ok:
            log.error("writing the op message of half message %d (queue offset %d) failed: %s %s",
                      half.commit_log_offset, half.queue_offset, result.status.value, result.remark)
        return result

    # -- checks -------------------------------------------------------------------------------
    def put_back(self, half: MessageExt) -> PutMessageResult:
        """Append a copy of ``half`` (with its current properties) to its half queue."""
        return self.broker.store.put_encoded(
            half.topic, half.body, P.encode_properties(half.properties), half.queue_id,
            flag=half.flag, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp,
            born_host=half.born_host, reconsume_times=half.reconsume_times, wait_store=False)

    def resume_check(self, msg: MessageExt) -> PutMessageResult:
        """Store ``msg`` (a half message, or one discarded to TRANS_CHECK_MAX_TIME_TOPIC) in the
        half queue again with TRANSACTION_CHECK_TIMES=0, so it is checked anew (RocketMQ's
        RESUME_CHECK_HALF_MESSAGE)."""
        self._ensure_topic(TRANS_HALF_TOPIC)
        props = {**msg.properties, CHECK_TIMES: "0"}
        return self.broker.store.put_encoded(
            TRANS_HALF_TOPIC, msg.body, P.encode_properties(props), 0, flag=msg.flag,
            sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
            reconsume_times=msg.reconsume_times, wait_store=False)

    def discard(self, half: MessageExt, why: str) -> PutMessageResult:
        """Move a half message checked too often (or too old) to ``TRANS_CHECK_MAX_TIME_TOPIC``."""
        self._ensure_topic(TRANS_CHECK_MAX_TIME_TOPIC)
        log.warning("half message %s of %s %s: moved to %s", half.msg_id,
                    half.properties.get(P.REAL_TOPIC), why, TRANS_CHECK_MAX_TIME_TOPIC)
        return self.broker.store.put_encoded(
            TRANS_CHECK_MAX_TIME_TOPIC, half.body, P.encode_properties(half.properties), 0,
            flag=half.flag, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp,
            born_host=half.born_host, reconsume_times=half.reconsume_times, wait_store=False)

    def producer_channel(self, group: str) -> object | None:
        """An open, writable connection of a producer of ``group`` (random start, as Java)."""
        channels = list(self.broker.clients.producers.get(group, {}))
        if not channels:
            return None
        start = random.randrange(len(channels))
        for ch in channels[start:] + channels[:start]:
            if getattr(ch, "is_active", False) and getattr(ch, "writable", True):
                return ch
        return None

    def send_check(self, half: MessageExt) -> bool:
        """CHECK_TRANSACTION_STATE (oneway) about ``half`` to a producer of its PGROUP; the
        body is the record with the real topic and queue. False when nobody could be asked."""
        group = half.properties.get(P.PRODUCER_GROUP)
        channel = self.producer_channel(group) if group else None
        if channel is None:
            log.warning("cannot check half message %s: no producer of group %r is connected",
                        half.msg_id, group)
            return False
        uniq = half.msg_id
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=half.queue_offset, commit_log_offset=half.commit_log_offset,
            msg_id=uniq, transaction_id=uniq, offset_msg_id=half.offset_msg_id,
            topic=TRANS_HALF_TOPIC, bname=self.broker.config.broker_name)
        fields = dict(
            queue_id=int(half.properties[P.REAL_QUEUE_ID]), body=half.body,
            properties=P.encode_properties(half.properties), born_timestamp=half.born_timestamp,
            born_host=encode_host(half.born_host), store_timestamp=half.store_timestamp,
            store_host=encode_host(half.store_host), flag=half.flag,
            queue_offset=half.queue_offset, physical_offset=half.commit_log_offset,
            sys_flag=half.sys_flag, reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.prepared_transaction_offset)
        topic = half.properties[P.REAL_TOPIC]
        try:
            body = encode_record(topic, **fields)  # type: ignore[arg-type]
        except ValueError:  # a topic too long for a v1 record
            body = encode_record(topic, magic=MAGIC_V2, **fields)  # type: ignore[arg-type]
        request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header, body)
        try:
            channel.oneway(request)  # type: ignore[attr-defined]
        except Exception as exc:  # the connection closed meanwhile
            log.warning("CHECK_TRANSACTION_STATE to %s failed: %s", channel, exc)
            return False
        return True


def prepared_message(half: MessageExt) -> Message:
    """A half message as the prepared message its producer sent (RocketMQ's
    buildTransactionalMessageFromHalfMessage): its real topic, TRAN_MSG=true, without the
    half queue's bookkeeping properties."""
    props = dict(half.properties)
    topic = props.pop(P.REAL_TOPIC, half.topic)
    props.pop(P.REAL_QUEUE_ID, None)
    props.pop(PREPARED_QUEUE_OFFSET, None)
    props[P.TRANSACTION_PREPARED] = "true"
    return Message(topic, half.body, flag=half.flag, properties=props)


def prepared_flag(half: MessageExt) -> int:
    return (half.sys_flag & ~sysflag.TRANSACTION_MASK) | sysflag.TRANSACTION_PREPARED_TYPE


@dataclass(slots=True)
class CheckReport:
    """What one check run did (for logs and tests)."""

    checked: int = 0
    skipped_done: int = 0
    discarded: int = 0
    escaped: int = 0  # sent to another group's master by a slave acting as master


class TransactionCheckService(LoopService):
    """Every ``transactionCheckInterval`` ms, checks the half messages older than
    ``transactionTimeOut`` that have no op message (RocketMQ's TransactionalMessageCheckService
    and ``TransactionalMessageServiceImpl.check``), as an asyncio task on the broker's loop."""

    TASK_NAME = "bolide-transaction-check"

    def __init__(self, broker: BrokerController, messages: TransactionalMessages) -> None:
        self.broker = broker
        self.messages = messages
        self._wakeup: asyncio.Event | None = None
        # set while a slave acts as master: half messages go to another master (EscapeBridge.put)
        self.escape: Callable[..., Awaitable[PutMessageResult]] | None = None

    def start(self) -> None:
        if not self.running:
            self._wakeup = asyncio.Event()
        super().start()

    def wakeup(self) -> None:
        """Run a check now instead of at the end of the interval."""
        if self._wakeup is not None:
            self._wakeup.set()

    async def _run(self) -> None:
        assert self._wakeup is not None
        interval = self.broker.config.transaction_check_interval_ms / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                await wait_for(self._wakeup.wait(), interval)
            self._wakeup.clear()
            try:
                report = await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the transaction check failed; it runs again in %.0f s", interval)
            else:
                if report.checked or report.discarded or report.escaped:
                    log.info("transaction check: %s", report)

    async def check_once(self) -> CheckReport:
        """One pass over every half queue."""
        report = CheckReport()
        tc = self.broker.topics.get(TRANS_HALF_TOPIC)
        if tc is None:
            return report
        start_ms = int(time.time() * 1000)
        for queue_id in range(tc.read_queue_nums):
            if self.escape is not None:
                await self._escape_queue(queue_id, report)
            else:
                await self._check_queue(queue_id, start_ms, report)
        return report

    def _progress(self, topic: str, queue_id: int) -> int:
        offset = self.broker.offsets.query(CHECK_GROUP, topic, queue_id)
        store = self.broker.store
        return offset if offset is not None else store.get_min_offset_in_queue(topic, queue_id)

    def _read_ops(self, queue_id: int, op_offset: int) -> tuple[list[tuple[int, tuple[int, ...]]], bool]:
        """Op entries from ``op_offset`` on: (op queue offset, half offsets); and whether all
        were read (False past MAX_OPS_PER_RUN)."""
        store = self.broker.store
        entries: list[tuple[int, tuple[int, ...]]] = []
        offset = op_offset
        while len(entries) < MAX_OPS_PER_RUN:
            got = store.get_message(CHECK_GROUP, TRANS_OP_HALF_TOPIC, queue_id, offset, _BATCH)
            try:
                if got.status is GetStatus.FOUND:
                    for buf, qoff in zip(got.buffers, got.queue_offsets, strict=True):
                        op = decode_record(buf, 0)
                        # an unreadable or foreign op marks nothing (RocketMQ: offset -1)
                        done = op_offsets(op.body) if op.tags == REMOVE_TAG else ()
                        entries.append((qoff, done))
                elif got.next_begin_offset <= offset:
                    return entries, got.status in _END_OF_QUEUE
                offset = got.next_begin_offset  # past what was read, or past removed files
            finally:
                got.release()
        return entries, False

    async def _check_queue(self, queue_id: int, start_ms: int, report: CheckReport) -> None:
        store = self.broker.store
        half_offset = self._progress(TRANS_HALF_TOPIC, queue_id)
        op_offset = self._progress(TRANS_OP_HALF_TOPIC, queue_id)
        ops, all_ops = self._read_ops(queue_id, op_offset)
        done = {h for _, hs in ops for h in hs}  # half offsets with an op message
        deadline = time.monotonic() + MAX_RUN_SECONDS
        keep_ms = store.config.file_reserved_time_hours * 3600 * 1000
        offset = half_offset
        scanned = 0
        stop = False
        while not stop and scanned < MAX_SCAN_PER_RUN and time.monotonic() < deadline:
            got = store.get_message(CHECK_GROUP, TRANS_HALF_TOPIC, queue_id, offset, _BATCH)
            try:
                if got.status is not GetStatus.FOUND:
                    if got.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_FOUND_NULL,
                                      GetStatus.NO_MATCHED_MESSAGE) and got.next_begin_offset > offset:
                        offset = got.next_begin_offset  # removed files: skip ahead
                        continue
                    break
                for buf, qoff in zip(got.buffers, got.queue_offsets, strict=True):
                    scanned += 1
                    if qoff in done:
                        report.skipped_done += 1
                        offset = qoff + 1
                        continue
                    half = decode_record(buf, 0)
                    if self._handle(half, start_ms, keep_ms, done, all_ops, report):
                        offset = qoff + 1
                    else:
                        stop = True
                        break
                else:
                    offset = got.next_begin_offset
            finally:
                got.release()
            await asyncio.sleep(0)  # let sends and pulls run between batches
        self._commit_progress(queue_id, half_offset, offset, op_offset, ops)

    def _commit_progress(self, queue_id: int, half_offset: int, offset: int, op_offset: int,
                         ops: list[tuple[int, tuple[int, ...]]]) -> None:
        if offset != half_offset:
            self.broker.offsets.commit(CHECK_GROUP, TRANS_HALF_TOPIC, queue_id, offset)
        new_op_offset = op_offset
        for op_qoff, hs in ops:  # ops all of whose half messages are behind the progress
            if any(h >= offset for h in hs):
                break
            new_op_offset = op_qoff + 1
        if new_op_offset != op_offset:
            self.broker.offsets.commit(CHECK_GROUP, TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)

    async def _escape_queue(self, queue_id: int, report: CheckReport) -> None:
        """A slave acting as master: every half message without an op goes, as a prepared
        message of its real topic, to another group's master, which then checks it with its
        producer (RocketMQ's TransactionalMessageServiceImpl under slave acting master)."""
        assert self.escape is not None
        store = self.broker.store
        half_offset = self._progress(TRANS_HALF_TOPIC, queue_id)
        op_offset = self._progress(TRANS_OP_HALF_TOPIC, queue_id)
        ops, _ = self._read_ops(queue_id, op_offset)
        done = {h for _, hs in ops for h in hs}
        offset = half_offset
        while True:
            got = store.get_message(CHECK_GROUP, TRANS_HALF_TOPIC, queue_id, offset, _BATCH)
            try:
                if got.status is not GetStatus.FOUND:
                    if got.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_FOUND_NULL,
                                      GetStatus.NO_MATCHED_MESSAGE) and got.next_begin_offset > offset:
                        offset = got.next_begin_offset
                        continue
                    break
                batch = [(qoff, decode_record(buf, 0))
                         for buf, qoff in zip(got.buffers, got.queue_offsets, strict=True)]
            finally:
                got.release()
            for qoff, half in batch:
                prepared = _int(half.properties.get(PREPARED_QUEUE_OFFSET), -1)
                if qoff in done or prepared in done:
                    report.skipped_done += 1
                else:
                    result = await self.escape(prepared_message(half), sys_flag=prepared_flag(half),
                                               born_timestamp=half.born_timestamp,
                                               reconsume_times=half.reconsume_times)
                    if not result.ok:
                        log.warning("escaping half message %s failed: %s (retried at the next check)",
                                    half.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), result.remark)
                        self._commit_progress(queue_id, half_offset, offset, op_offset, ops)
                        return
                    report.escaped += 1
                offset = qoff + 1
        self._commit_progress(queue_id, half_offset, offset, op_offset, ops)

    def _handle(self, half: MessageExt, start_ms: int, keep_ms: int, done: set[int],
                all_ops: bool, report: CheckReport) -> bool:
        """Decide about one half message without an op; False stops the scan there."""
        cfg = self.broker.config
        messages = self.messages
        props = half.properties
        now = int(time.time() * 1000)
        times = _int(props.get(CHECK_TIMES), 0)
        if times >= cfg.transaction_check_max or now - half.born_timestamp > keep_ms:
            why = (f"was checked {times} times without an answer" if times >= cfg.transaction_check_max
                   else "is older than fileReservedTime")
            if not messages.discard(half, why).ok:
                return False
            report.discarded += 1
            return True
        if half.store_timestamp >= start_ms:
            return False  # stored during this run: next run
        age = now - half.born_timestamp
        if age < 0:  # the producer's clock is ahead: count from the store time instead
            age = now - half.store_timestamp
        custom = _int(props.get(CHECK_IMMUNITY_SECONDS), -1)
        immunity = custom * 1000 if custom >= 0 else cfg.transaction_timeout_ms
        prepared = _int(props.get(PREPARED_QUEUE_OFFSET), -1)
        if prepared >= 0 and prepared in done:
            report.skipped_done += 1
            return True  # a copy whose original was committed or rolled back meanwhile
        if age < immunity:
            if custom < 0:
                return False  # younger messages follow: stop here until the next run
            # a custom first-check time: keep the copy for later and go on with the others
            if prepared < 0:
                props[PREPARED_QUEUE_OFFSET] = str(half.queue_offset)
            return messages.put_back(half).ok
        if not all_ops:
            return False  # some op messages were not read: do not risk a needless check
        props[CHECK_TIMES] = str(times + 1)
        result = messages.put_back(half)
        if not result.ok:
            return False
        half.queue_offset, half.commit_log_offset = result.queue_offset, result.wrote_offset
        messages.send_check(half)
        report.checked += 1
        return True

