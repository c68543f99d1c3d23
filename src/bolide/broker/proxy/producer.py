"""SendMessage and EndTransaction over gRPC: v5 messages stored as RocketMQ's proxy stores them.

The broker picks the queue (a FIFO message's group always maps to the same queue), checks the
message's type against the topic's ``message.type``, and answers once the message is as safe
as a remoting send would be (flushed under SYNC_FLUSH, on a slave under SYNC_MASTER).
"""

from __future__ import annotations

import itertools
import time
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from bolide.broker.processors.send import born_host
from bolide.broker.proxy.call import Call
from bolide.broker.proxy.convert import (
    SHARDING_KEY,
    TYPE_NAMES,
    Refused,
    accepted_types,
    message_type,
    status,
    stored_form,
)
from bolide.broker.proxy.routes import find_topic
from bolide.broker.retry import group_of_retry_topic
from bolide.broker.timer import TimerRefusal, timer_properties, waiting_timer
from bolide.broker.timer_recall import timer_recall_handle
from bolide.broker.topic_config import NOT_SENDABLE, PERM_WRITE
from bolide.common import properties as P
from bolide.common.message import MessageExt
from bolide.common.recall_handle import RecallError
from bolide.common.sysflag import TRANSACTION_PREPARED_TYPE
from bolide.common.topic import DLQ_GROUP_TOPIC_PREFIX, TRANS_HALF_TOPIC
from bolide.protocol.headers.send import DEFAULT_REGION
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.store import PutStatus
from bolide.store.results import PutMessageResult

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

_PUT_CODES = {
    PutStatus.PUT_OK: pb.OK,
    PutStatus.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: pb.MESSAGE_PROPERTIES_TOO_LARGE,
    PutStatus.OS_PAGECACHE_BUSY: pb.TOO_MANY_REQUESTS,
}
_STORED = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)  # stored, maybe not yet safe: answered as sent
MAX_TRANSACTIONS = 100_000  # half messages remembered by transaction id (the index finds older ones)

_METRICS_TYPES = {pb.FIFO: "fifo", pb.DELAY: "delay", pb.TRANSACTION: "transaction"}  # message_type label


class GrpcProducer:
    """Stores the messages of SendMessage calls and ends their transactions."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._round_robin = itertools.count()
        self._halves: OrderedDict[str, int] = OrderedDict()  # transaction id -> half's CommitLog offset
        self._ended: OrderedDict[str, None] = OrderedDict()  # transactions ended lately (not twice)

    async def send(self, call: Call, request: pb.SendMessageRequest) -> pb.SendMessageResponse:
        if not request.messages:
            raise Refused(pb.BAD_REQUEST, "SendMessage without messages: send at least one")
        entries = []
        for msg in request.messages:
            try:
                entries.append(await self._send_one(call, msg))
            except Refused as refused:
                entries.append(pb.SendResultEntry(status=status(refused.code, refused.message)))
        codes = {entry.status.code for entry in entries}
        top = (
            entries[0].status
            if len(codes) == 1
            else status(pb.MULTIPLE_RESULTS, "the messages had different results")
        )
        return pb.SendMessageResponse(status=top, entries=entries)

    async def _send_one(self, call: Call, msg: pb.Message) -> pb.SendResultEntry:
        broker = self.broker
        topic = call.name(msg.topic)
        if topic in NOT_SENDABLE:
            raise Refused(pb.ILLEGAL_TOPIC, f"sending to the system topic {topic} is forbidden")
        tc = find_topic(broker, topic, create=broker.config.auto_create_topic_enable)
        if not tc.perm & PERM_WRITE or not broker.config.broker_permission & PERM_WRITE:
            raise Refused(pb.FORBIDDEN, f"topic {topic} or this broker is not writable now")
        body, props = stored_form(msg, broker.store.config.max_message_size)
        kind = message_type(props)
        system = group_of_retry_topic(topic) is not None or topic.startswith(DLQ_GROUP_TOPIC_PREFIX)
        if not system and kind not in accepted_types(tc.attributes):
            raise Refused(
                pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"a {TYPE_NAMES[kind]} message cannot go to topic {topic}, whose message.type "
                f"is {(tc.attributes or {}).get('message.type', 'NORMAL')}: send it to a topic of "
                f"that type (bolide admin updateTopic -t T -a +message.type={TYPE_NAMES[kind]})",
            )
        writable = max(1, tc.write_queue_nums)
        group = props.get(SHARDING_KEY)
        queue_id = (zlib.crc32(group.encode()) if group is not None else next(self._round_robin)) % writable
        props[P.CLUSTER] = broker.config.broker_cluster_name
        props[P.MSG_REGION] = DEFAULT_REGION
        props[P.TRACE_SWITCH] = "true" if broker.config.trace_on else "false"
        born_ts = int(props.get("BORN_TIMESTAMP") or time.time() * 1000)
        if P.TIMER_DELIVER_MS in props:
            props = self._timer(props)
        encoded = P.encode_properties(props)
        if kind == pb.TRANSACTION:
            if broker.config.reject_transaction_message:
                raise Refused(
                    pb.FORBIDDEN, "this broker refuses transaction messages (rejectTransactionMessage=true)"
                )
            result = broker.transactions.put_half(
                topic,
                queue_id,
                body,
                encoded,
                flag=0,
                sys_flag=TRANSACTION_PREPARED_TYPE,
                born_timestamp=born_ts,
                born_host=born_host(call.peer),
                reconsume_times=0,
            )
        else:
            result = broker.store.put_encoded(
                topic,
                body,
                encoded,
                queue_id,
                born_timestamp=born_ts,
                born_host=born_host(call.peer),
                wait_store=False,
            )
        await self._settle(result)
        code = _PUT_CODES.get(result.status, pb.INTERNAL_SERVER_ERROR)
        if result.status not in _STORED:
            raise Refused(code, f"{result.status.value}: {result.remark}".rstrip(": "))
        broker.stats.on_put(1, result.wrote_bytes)
        if kind != pb.TRANSACTION and waiting_timer(props):
            broker.timer_metrics.add(topic, 1)  # a timer message waiting in the delay levels
        broker.stats_items.on_put(topic, 1, result.wrote_bytes)
        if broker.metrics is not None:
            broker.metrics.on_put(topic, _METRICS_TYPES.get(kind, "normal"), 1, result.wrote_bytes)
        message_id = props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        entry = pb.SendResultEntry(
            status=status(code, "OK" if code == pb.OK else result.status.value),
            message_id=message_id,
            offset=result.queue_offset,
        )
        if kind == pb.TRANSACTION:
            entry.transaction_id = message_id
            self.remember_half(message_id, result.wrote_offset)
        elif (recall := timer_recall_handle(topic, broker.config.broker_name, props)) is not None:
            entry.recall_handle = recall
        return entry

    async def recall(self, call: Call, request: pb.RecallMessageRequest) -> pb.RecallMessageResponse:
        """Recall a timer message before it is due, by the handle its send answered."""
        topic = call.name(request.topic)
        find_topic(self.broker, topic)
        try:
            message_id = await self.broker.recall_timer_message(topic, request.recall_handle)
        except RecallError as exc:
            raise Refused(pb.BAD_REQUEST, str(exc)) from None
        return pb.RecallMessageResponse(status=status(), message_id=message_id)

    def _timer(self, props: dict[str, str]) -> dict[str, str]:
        config = self.broker.config
        try:
            timed = timer_properties(
                props,
                int(time.time() * 1000),
                self.broker.store.delay_millis,
                enabled=config.timer_wheel_enable,
                max_delay_s=config.timer_max_delay_sec,
            )
        except TimerRefusal as refusal:
            raise Refused(pb.ILLEGAL_DELIVERY_TIME, refusal.remark) from None
        if timed is None:  # due now: a plain message
            props.pop(P.TIMER_DELIVER_MS, None)
            return props
        return timed

    async def _settle(self, result: PutMessageResult) -> None:
        await self.broker.flush_waiters.settle(result)
        if (ha := self.broker.sync_master) is not None:
            await ha.wait_replicated(result)

    # -- transactions ---------------------------------------------------------------------
    def remember_half(self, transaction_id: str, commit_log_offset: int) -> None:
        """Where the half message of a transaction is (sends and checks tell)."""
        if not transaction_id or commit_log_offset < 0:
            return
        self._ended.pop(transaction_id, None)
        _bounded_put(self._halves, transaction_id, commit_log_offset)

    def _find_half(self, topic: str, transaction_id: str) -> MessageExt | None:
        tx = self.broker.transactions
        offset = self._halves.get(transaction_id)
        if offset is not None:
            half = tx.find_half(offset)
            if half is not None:
                return half
        copies = [
            m
            for m in self.broker.store.query_message(TRANS_HALF_TOPIC, transaction_id)
            if m.properties.get(P.REAL_TOPIC) == topic
        ]
        return (
            tx.find_half(max(copies, key=lambda m: m.commit_log_offset).commit_log_offset) if copies else None
        )

    async def end_transaction(
        self, call: Call, request: pb.EndTransactionRequest
    ) -> pb.EndTransactionResponse:
        transaction_id = request.transaction_id
        if not transaction_id:
            raise Refused(
                pb.INVALID_TRANSACTION_ID,
                "EndTransaction without a transaction_id: give the one SendMessage answered",
            )
        if request.resolution not in (pb.COMMIT, pb.ROLLBACK):
            return pb.EndTransactionResponse(status=status())  # unknown yet: the check asks again later
        topic = call.name(request.topic)
        half = None if transaction_id in self._ended else self._find_half(topic, transaction_id)
        if half is None:
            raise Refused(
                pb.INVALID_TRANSACTION_ID,
                f"no open transaction {transaction_id} on topic {topic}: "
                "it was ended already or never sent here",
            )
        tx = self.broker.transactions
        if request.resolution == pb.COMMIT:
            result = tx.commit(half)
            await self._settle(result)
            if result.status not in _STORED:
                raise Refused(
                    _PUT_CODES.get(result.status, pb.INTERNAL_SERVER_ERROR),
                    f"committing the transaction failed: {result.status.value} {result.remark}",
                )
        tx.delete_prepared(half)
        self._halves.pop(transaction_id, None)
        _bounded_put(self._ended, transaction_id, None)
        return pb.EndTransactionResponse(status=status())


def _bounded_put(table: OrderedDict[str, Any], key: str, value: Any) -> None:
    """Put ``key`` last in ``table``, dropping the oldest keys beyond MAX_TRANSACTIONS."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > MAX_TRANSACTIONS:
        table.popitem(last=False)
