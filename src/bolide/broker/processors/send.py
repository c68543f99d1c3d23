"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320)."""

from __future__ import annotations

import random
import time
from functools import lru_cache
from typing import TYPE_CHECKING

from bolide.broker.metrics.collect import message_type
from bolide.broker.retry import dlq_topic, group_of_retry_topic, max_reconsume_times
from bolide.broker.static_rewrite import LogicQueue, Refusal, logic_queue, send_offset, send_queue
from bolide.broker.timer import TimerRefusal, timer_properties
from bolide.broker.timer_recall import timer_recall_handle
from bolide.broker.topic_config import NOT_SENDABLE, PERM_WRITE
from bolide.broker.transaction import is_half_message
from bolide.common import properties as P
from bolide.common.compiled import load
from bolide.common.hosts import encode_host
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX, TRANS_HALF_TOPIC, validate_topic
from bolide.protocol.bodies.batch import batch_members
from bolide.protocol.codes import RequestCode, ResponseCode, SerializeType
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.send import (
    DEFAULT_REGION,
    decode_send_request_header,
    send_ok_frame,
    send_response_ext,
)
from bolide.remoting import NOT_NOW, NotNow, RequestContext
from bolide.store import PutStatus
from bolide.store.results import PutMessageResult

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

PUT_STATUS_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.OS_PAGECACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.CREATE_MAPEDFILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}


_JSON = SerializeType.JSON
_STORED = frozenset((ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                     ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE))
_DROPPED = ("WAIT\x01", "CLUSTER\x01", "MSG_REGION\x01", "TRACE_ON\x01")
_DROPPED_DEAD = (*_DROPPED, "DELAY\x01")  # a dead letter is stored at once


_properties_without = getattr(load("bolide.protocol._codec"), "properties_without", None)


def broker_properties(cluster: str, trace_on: bool = True) -> str:
    """The pairs the broker adds to every message it stores, as RocketMQ 5's does: its region
    (``MSG_REGION``, which consumers' trace hooks need to trace a message), ``TRACE_ON`` and
    ``CLUSTER``."""
    return f"MSG_REGION\x01{DEFAULT_REGION}\x02TRACE_ON\x01{'true' if trace_on else 'false'}\x02" \
           f"CLUSTER\x01{cluster}\x02"


def stored_properties(header_properties: str | None, added: str, *, dead: bool = False) -> bytes:
    """The send header's property string as the Java broker stores it: ``WAIT`` dropped, the
    broker's pairs (``added``, from :func:`broker_properties`) set (spec 3.4 step 5), ``DELAY``
    dropped from a message redirected to a dead letter queue; the rest is not decoded."""
    if _properties_without is not None:  # the compiled twin (ASCII text; None otherwise)
        out = _properties_without(header_properties or "", _DROPPED_DEAD if dead else _DROPPED, added)
        if out is not None:
            return out
    return stored_properties_pure(header_properties, added, dead=dead)


def stored_properties_pure(header_properties: str | None, added: str, *, dead: bool = False) -> bytes:
    """:func:`stored_properties` in Python (the fallback; tests compare the two)."""
    text = header_properties or ""
    for key in _DROPPED_DEAD if dead else _DROPPED:
        if key in text:
            text = _without(text, key)
    if text and not text.endswith("\x02"):
        text += "\x02"
    return f"{text}{added}".encode()


def _without(text: str, key: str) -> str:
    """``text`` (``k\x01v\x02`` pairs) without the pairs whose key is ``key`` (``"NAME\x01"``)."""
    start = 0
    while (i := text.find(key, start)) >= 0:
        if i and text[i - 1] != "\x02":  # the name ends another key: not this one
            start = i + 1
            continue
        end = text.find("\x02", i)
        text = text[:i] + (text[end + 1:] if end >= 0 else "")
        start = i
    return text


def waits_for_store(ext_fields: dict[str, str]) -> bool:
    """False when the message says ``WAIT=false`` (``waitStoreMsgOK`` off): its send is
    answered once stored, without waiting for the flush (SYNC_FLUSH) or a slave (SYNC_MASTER),
    as RocketMQ does; header ``properties`` (v1) or ``i`` (v2)."""
    text = ext_fields.get("properties") or ext_fields.get("i") or ""
    i = text.find("WAIT\x01false")
    while i >= 0:
        end = i + 10
        if (i == 0 or text[i - 1] == "\x02") and (end == len(text) or text[end] == "\x02"):
            return False
        i = text.find("WAIT\x01false", i + 1)
    return True


@lru_cache(maxsize=4096)
def born_host(remote: str) -> str | None:
    """The sender's address for the record's BORNHOST: IPv4 only, as every client decodes
    (spec 4.2); None (the store host) otherwise."""
    try:
        return remote if len(encode_host(remote)) == 8 else None
    except ValueError:
        return None


class SendProcessor:
    """Turns send headers into store puts and put results into send responses."""

    CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # created once the store is open; SYNC_FLUSH and SYNC_MASTER sends wait (in controller
        # mode the role comes later and changes: sends take the waiting path throughout)
        self._sync_flush = (broker.store.config.sync_flush or broker.sync_master is not None
                            or broker.config.enable_controller_mode)
        self._added: dict[tuple[str, bool], str] = {}  # broker_properties by (cluster, traceOn)

    def process_now(self, ctx: RequestContext, request: RemotingCommand, *, frame: bool = False,
                    ) -> RemotingCommand | bytes | NotNow:
        """The whole send under ASYNC_FLUSH, where nothing is waited for; with ``frame``, a
        stored JSON send is answered with its encoded response frame."""
        if self._sync_flush:
            return NOT_NOW
        put = self._put(ctx, request)
        if type(put) is RemotingCommand:
            return put
        return self._answer(request, *put, frame=frame)  # type: ignore[misc]

    def process_now_frame(self, ctx: RequestContext, request: RemotingCommand,
                          ) -> RemotingCommand | bytes | NotNow:
        """:meth:`process_now` with ready frames (used while no RPC hook looks at responses;
        see ProcessorTable.dispatch_now)."""
        return self.process_now(ctx, request, frame=True)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        put = self._put(ctx, request)
        if type(put) is RemotingCommand:
            return put
        result, queue_id, extra, logic = put  # type: ignore[misc]
        if waits_for_store(request.ext_fields):
            await self.broker.flush_waiters.settle(result)
            if (ha := self.broker.sync_master) is not None:
                await ha.wait_replicated(result)
        return self._answer(request, result, queue_id, extra, logic)

    def _put(self, ctx: RequestContext, request: RemotingCommand,
             ) -> RemotingCommand | tuple[PutMessageResult, int, dict[str, str] | None,
                                          LogicQueue | None]:
        """Store the message(s) of a send; (put result, queue id, extFields the answer adds:
        a timer message's recall handle, a half message's transaction id; the static topic's
        logic queue it was sent to), or the response refusing it."""
        header = decode_send_request_header(request.code, request.ext_fields)
        topic = header.topic
        if topic in NOT_SENDABLE:
            return request.make_response(ResponseCode.NO_PERMISSION,
                                         f"sending message to topic {topic} is forbidden")
        topics = self.broker.topics
        tc = topics.get(topic)
        if tc is None:  # topics in the table have valid names
            why = validate_topic(topic)
            if why is not None:
                return request.make_response(ResponseCode.SYSTEM_ERROR, why)
            tc = topics.create_in_send(topic, header.default_topic, header.default_topic_queue_nums)
            if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc = topics.create_for_group(topic)
            if tc is None:
                return request.make_response(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please! (create it with "
                    "UPDATE_AND_CREATE_TOPIC or enable autoCreateTopicEnable)")
        if not tc.perm & PERM_WRITE or not self.broker.config.broker_permission & PERM_WRITE:
            return request.make_response(ResponseCode.NO_PERMISSION,
                                         f"the topic {topic} or this broker is not writable")
        queue_id = header.queue_id
        logic = None
        statics = self.broker.static_topics.table
        if statics and (logic := logic_queue(statics, topic, queue_id, request.ext_fields,
                                             select_one=True)) is not None:
            physical = send_queue(logic)
            if type(physical) is Refusal:
                return request.make_response(*physical)
            queue_id = physical  # type: ignore[assignment]
        dead = False
        extra: dict[str, str] | None = None
        waits = False
        half = False
        group = group_of_retry_topic(topic)
        # a batch by its header's flag, as RocketMQ decides (the C++ client sends its batches as
        # SEND_MESSAGE_V2 with batch=true)
        batch = header.batch or request.code == RequestCode.SEND_BATCH_MESSAGE
        if group is not None and not batch:
            settings = self.broker.subscription_groups.find(group)
            if settings is None:
                return request.make_response(
                    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                    f"subscription group [{group}] does not exist: create it with updateSubGroup, "
                    "or set autoCreateSubscriptionGroup=true")
            limit = max_reconsume_times(request.version, header.max_reconsume_times,
                                        settings.retry_max_times)
            if (header.reconsume_times or 0) >= limit:  # out of retries: to the DLQ, no delay
                if self.broker.metrics is not None:
                    self.broker.metrics.on_dead_letter(group, topic)
                topic, queue_id, dead = dlq_topic(group), 0, True
                tc = topics.create_for_group(topic)
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))
        if queue_id >= max(tc.read_queue_nums, tc.write_queue_nums):
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic {topic} has "
                f"{max(tc.read_queue_nums, tc.write_queue_nums)} queues")
        config = self.broker.config
        cluster = config.broker_cluster_name
        added = self._added.get((cluster, config.trace_on))
        if added is None:
            added = self._added[(cluster, config.trace_on)] = broker_properties(cluster, config.trace_on)
        store = self.broker.store
        body = request.body_bytes()
        born = born_host(ctx.peer_address)  # the socket's peer, as RocketMQ
        if batch:
            props = P.decode_properties(header.properties) if header.properties else {}
            props.pop(P.WAIT_STORE_MSG_OK, None)
            props[P.CLUSTER] = cluster
            props[P.MSG_REGION] = DEFAULT_REGION
            props[P.TRACE_SWITCH] = "true" if config.trace_on else "false"
            batch_props = P.encode_properties(props)
            result = store.try_put_batch_body(topic, body, batch_props, queue_id,
                                              born_timestamp=header.born_timestamp,
                                              born_host=born, wait_store=False)
            if result is None:  # decoded here: a body that does not parse is refused by name
                result = store.put_batch_encoded(topic, batch_members(body, batch_props), queue_id,
                                                 born_timestamp=header.born_timestamp,
                                                 born_host=born, wait_store=False)
        elif half := is_half_message(header.properties):  # TRAN_MSG=true (spec 3.4 step 5)
            if self.broker.config.reject_transaction_message:
                return request.make_response(ResponseCode.NO_PERMISSION,
                                             f"the broker[{self.broker.config.broker_ip1}] sending "
                                             "transaction message is forbidden")
            result = self.broker.transactions.put_half(
                topic, queue_id, body, stored_properties(header.properties, added),
                flag=header.flag, sys_flag=header.sys_flag, born_timestamp=header.born_timestamp,
                born_host=born, reconsume_times=header.reconsume_times or 0)
            # the UNIQ_KEY, as RocketMQ answers it: RocketMQ 5's proxy ends the transaction by it
            uniq = P.decode_properties(header.properties or "").get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            extra = {"transactionId": uniq} if uniq else None
        else:
            encoded = stored_properties(header.properties, added, dead=dead)
            if b"TIMER_" in encoded and not dead:  # maybe a timer message (RocketMQ 5)
                try:
                    encoded, recall, waits = self._timer(topic, encoded)
                    extra = {"recallHandle": recall} if recall is not None else None
                except TimerRefusal as refusal:
                    return request.make_response(refusal.code, refusal.remark)
            result = store.put_encoded(topic, body, encoded,
                                       queue_id, flag=header.flag, sys_flag=header.sys_flag,
                                       born_timestamp=header.born_timestamp, born_host=born,
                                       reconsume_times=header.reconsume_times or 0, wait_store=False)
        if result.ok:
            if waits:  # a timer message waiting in the delay levels
                self.broker.timer_metrics.add(topic, 1)
            self.broker.stats_items.on_put(TRANS_HALF_TOPIC if half else topic, result.msg_num,
                                           result.wrote_bytes)
            metrics = self.broker.metrics
            if metrics is not None:
                metrics.on_put(topic, message_type(header.properties, half=half), result.msg_num,
                               result.wrote_bytes)
        return result, queue_id, extra, logic

    def _timer(self, topic: str, encoded: bytes) -> tuple[bytes, str | None, bool]:
        """The properties of a timer message as stored (due time, first delay level), its
        recall handle and whether it waits in a delay level; the same bytes, None and False for
        any other message. Raises TimerRefusal."""
        config = self.broker.config
        props = timer_properties(P.decode_properties(encoded), int(time.time() * 1000),
                                 self.broker.store.delay_millis, enabled=config.timer_wheel_enable,
                                 max_delay_s=config.timer_max_delay_sec)
        if props is None:
            return encoded, None, False
        return (P.encode_properties(props), timer_recall_handle(topic, config.broker_name, props),
                P.DELAY_TIME_LEVEL in props)

    def _answer(self, request: RemotingCommand, result: PutMessageResult, queue_id: int,
                extra: dict[str, str] | None = None, logic: LogicQueue | None = None, *,
                frame: bool = False) -> RemotingCommand | bytes:
        """The send response for a put result, with the ``extra`` extFields (a send to a
        static topic answers its logic queue and offset); with ``frame``, a plain success to a
        JSON request as its encoded frame (``send_ok_frame``)."""
        code = PUT_STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
        if code not in _STORED:
            return request.make_response(code, f"{result.status.value}: {result.remark}")
        self.broker.stats.on_put(result.msg_num, result.wrote_bytes)
        msg_id = ",".join(result.offset_msg_ids)  # a batch's ids, comma-separated
        queue_offset = result.queue_offset
        if logic is not None:
            queue_id, queue_offset = logic.global_id, send_offset(logic, queue_offset)
        if (frame and code == ResponseCode.SUCCESS and not result.remark and extra is None
                and request.serialize_type is _JSON):
            return send_ok_frame(request.opaque, msg_id, queue_id, queue_offset)
        ext = send_response_ext(msg_id, queue_id, queue_offset)
        if extra is not None:
            ext.update(extra)
        return request.make_response_ext(code, ext, result.remark or None)
