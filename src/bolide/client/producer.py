"""Producer (asyncio): sync, async, oneway and batch sends with the Java producer's rules.

::

    producer = Producer("127.0.0.1:9876", group="pg")
    result = await producer.send(Message("Orders", b"hi", tags="TagA", keys="o-1"))
    await producer.close()

A send picks the topic's queues round-robin (routes from the NameServer, TBW102's route when
the topic does not exist yet, so the broker creates it) and tries up to ``retry_times`` more
queues, on another broker when there is one, after transport errors and the codes the Java
producer retries (17, 14, 1, 16, 204, 205), all within ``send_timeout_ms``. Bodies larger than
``compress_over_bytes`` are compressed (``compress_type`` zlib, or RocketMQ 5's lz4 or zstd).
Every message gets a UNIQ_KEY id. ``request`` sends a message and waits for the reply a
consumer sends back (:mod:`bolide.client.request_reply`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bolide.client.api import request
from bolide.client.config import ClientConfig, as_config
from bolide.client.errors import (
    SEND_RETRY_CODES,
    ClientConfigError,
    ClientStateError,
    MessageError,
    MQBrokerError,
    RequestTimeoutError,
    SendTimeoutError,
    error_for_response,
)
from bolide.client.instance import ClientInstance
from bolide.client.request_reply import PendingReplies, is_reply
from bolide.client.results import SendResult, SendStatus
from bolide.client.route import TopicRoute
from bolide.client.selector import MessageQueueSelector
from bolide.client.tracing import TraceDispatcher
from bolide.common import properties as P
from bolide.common import sysflag
from bolide.common.compression import CompressionType, compress_body
from bolide.common.message import Message, MessageExt
from bolide.common.msgid import UniqKeyGenerator
from bolide.common.recall_handle import RecallError, decode_recall_handle
from bolide.common.topic import AUTO_CREATE_TOPIC_KEY, RETRY_GROUP_TOPIC_PREFIX, validate_topic
from bolide.common.waiting import wait_for
from bolide.errors import ProtocolError, RemotingError, RemotingTimeoutError
from bolide.protocol import RequestCode, ResponseCode
from bolide.protocol.bodies.batch import encode_batch_body
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.headers import SendMessageRequestHeaderV2
from bolide.protocol.headers.send import DEFAULT_REGION, RecallMessageRequestHeader

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_IDS = UniqKeyGenerator()


class Producer:
    """Sends messages to a RocketMQ-compatible cluster; asyncio API (see ``bolide.client.blocking``)."""

    def __init__(self, namesrv: str | ClientConfig, group: str = DEFAULT_PRODUCER_GROUP, *,
                 send_timeout_ms: int = 3000, retry_times: int = 2, compress_over_bytes: int = 4096,
                 compress_level: int = 5, compress_type: str = "zlib",
                 max_message_bytes: int = 4 * 1024 * 1024,
                 default_topic_queue_nums: int = 4) -> None:
        if send_timeout_ms <= 0 or retry_times < 0 or max_message_bytes <= 0:
            raise ClientConfigError("send_timeout_ms and max_message_bytes must be positive and "
                                    "retry_times at least 0")
        try:
            self.compress_type = CompressionType.of(compress_type)
        except ValueError as exc:
            raise ClientConfigError(f"{exc} (zstd and lz4 need RocketMQ 5 consumers)") from None
        self.config = as_config(namesrv)
        self.group = group
        self.send_timeout_ms = send_timeout_ms
        self.retry_times = retry_times
        self.compress_over_bytes = compress_over_bytes
        self.compress_level = compress_level
        self.max_message_bytes = max_message_bytes
        self.default_topic_queue_nums = default_topic_queue_nums
        self._instance = ClientInstance(self.config)
        self._instance.producer_group = group
        self._counters: dict[str, itertools.count[int]] = {}
        self._start_lock: asyncio.Lock | None = None
        self._replies: PendingReplies | None = None  # made by the first request
        self._requested: set[str] = set()  # topics requests went to
        self._tracer = TraceDispatcher(self.config, group, "PRODUCE") if self.config.enable_trace else None

    @property
    def client_id(self) -> str:
        """This client's id (``ip@instance``), as brokers list it."""
        return self._instance.client_id

    async def start(self) -> Producer:
        """Start the timers (route refresh, heartbeat). Sends start the producer when needed."""
        if self._instance.closed:
            raise ClientStateError("this producer is closed: create a new one")
        await self._instance.start()
        return self

    async def close(self) -> None:
        """Send the message traces still waiting (with ``enable_trace``), unregister from the
        brokers and close every connection."""
        if self._tracer is not None:
            await self._tracer.close()
        await self._instance.close(producer_group=self.group)

    async def __aenter__(self) -> Producer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a send to ``topic`` may use."""
        await self.start()
        route = await self._instance.publish_route(topic, self.default_topic_queue_nums)
        return list(route.publish_queues)

    # -- sends ------------------------------------------------------------------------------
    async def send(self, msg: Message, *, queue: MessageQueue | None = None,
                   selector: MessageQueueSelector | None = None, arg: Any = None,
                   timeout_ms: int | None = None) -> SendResult:
        """Send ``msg`` and wait until the broker stored it.

        ``queue`` or ``selector(queues, msg, arg)`` fix the queue (no retry on other queues,
        which keeps per-key order). ``timeout_ms`` (default ``send_timeout_ms``) bounds the whole
        send, route lookup and retries included: past it SendTimeoutError is raised (the broker
        may still store a message whose answer came too late). Raises an MQClientError or
        RemotingError subclass.
        """
        await self.start()
        self._check(msg)
        started = asyncio.get_running_loop().time()
        route = await self._instance.publish_route(msg.topic, self.default_topic_queue_nums)
        body, sys_flag, props = self._prepare(msg)
        fixed = self._fixed_queue(route, msg, queue, selector, arg)

        def attempt(mq: MessageQueue, remaining_ms: int) -> Awaitable[SendResult]:
            return self._send_one(route, mq, body, sys_flag, props, msg, remaining_ms)

        result = await self._with_retries(route, fixed, attempt, started, timeout_ms,
                                          f"sending to topic {msg.topic!r}")
        if self._tracer is not None:
            self._traced(self._tracer, msg, result, route, started)
        return result

    async def recall_message(self, topic: str, recall_handle: str, *, timeout_ms: int | None = None) -> str:
        """Recall a timer message before it is due (RocketMQ 5's ``recallMessage``):
        ``recall_handle`` is its send's ``SendResult.recall_handle``. Returns its message id;
        raises MQBrokerError when the broker refuses (a handle of another topic, a message due
        already). With ``enable_trace`` each answered recall writes a Recall trace (the Java
        client: with ``-Dcom.rocketmq.recall.default.trace.enable=true``)."""
        await self.start()
        try:
            _, broker_name, _, msg_id = decode_recall_handle(recall_handle)
        except RecallError as exc:
            raise MessageError(str(exc)) from None
        route = await self._instance.publish_route(topic, self.default_topic_queue_nums)
        addr = route.master_addr(broker_name) or self._instance.master_addr(broker_name)
        if addr is None:
            raise MessageError(f"broker {broker_name!r} of the recall handle has no master in the route "
                               f"of {topic!r}: recall on the broker that took the send")
        header = RecallMessageRequestHeader(producer_group=self.group, topic=topic,
                                            recall_handle=recall_handle)
        response = await self._instance.remoting.invoke(
            addr, request(RequestCode.RECALL_MESSAGE, header), timeout_ms or self.send_timeout_ms)
        if self._tracer is not None:
            self._tracer.on_recall(topic, msg_id, response.code == ResponseCode.SUCCESS,
                                   response.ext_fields.get(P.MSG_REGION))
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response, f"recall on {topic!r}", addr)
        return response.ext_fields.get("msgId", "")

    async def request(self, msg: Message, *, timeout_ms: int = 3000,
                      queue: MessageQueue | None = None,
                      selector: MessageQueueSelector | None = None,
                      arg: Any = None) -> MessageExt:
        """Send ``msg`` as a request and return the reply a consumer of its topic sends back
        with :func:`~bolide.client.request_reply.create_reply_message` (RocketMQ's
        ``DefaultMQProducer.request``).

        ``timeout_ms`` bounds the send and the wait for the reply: past it RequestTimeoutError
        is raised. ``queue``, ``selector`` and ``arg`` as for :meth:`send`. Raises what
        :meth:`send` raises when the request cannot be sent.
        """
        await self.start()
        self._check(msg)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        replies = self._replies
        if replies is None:
            replies = self._replies = PendingReplies()
            self._instance.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
                                              replies.on_push)
        correlation_id = str(uuid.uuid4())
        msg.properties[P.CORRELATION_ID] = correlation_id
        msg.properties[P.REPLY_TO_CLIENT] = self.client_id
        msg.properties[P.MESSAGE_TTL] = str(timeout_ms)
        if msg.topic not in self._requested:
            # the brokers push replies down the connection of the producer's heartbeat
            await self._instance.publish_route(msg.topic, self.default_topic_queue_nums)
            await self._instance.heartbeat()
            self._requested.add(msg.topic)
        reply = replies.expect(correlation_id)
        try:
            remaining_ms = max(1, int((deadline - loop.time()) * 1000))
            await self.send(msg, queue=queue, selector=selector, arg=arg, timeout_ms=remaining_ms)
            return await wait_for(reply, max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise RequestTimeoutError(
                f"no reply to the request {correlation_id} on topic {msg.topic!r} within "
                f"{timeout_ms} ms: a consumer of the topic must answer it with "
                "create_reply_message") from None
        finally:
            replies.forget(correlation_id)

    def send_async(self, msg: Message, **kwargs: Any) -> asyncio.Task[SendResult]:
        """Start :meth:`send` in the background; await the task (or add a done callback)."""
        return asyncio.ensure_future(self.send(msg, **kwargs))

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None,
                          selector: MessageQueueSelector | None = None, arg: Any = None) -> None:
        """Write ``msg`` to a broker without waiting for an answer (no result, no retry)."""
        await self.start()
        self._check(msg)
        route = await self._instance.publish_route(msg.topic, self.default_topic_queue_nums)
        body, sys_flag, props = self._prepare(msg)
        mq = self._fixed_queue(route, msg, queue, selector, arg) or self._pick(route, None)
        addr = self._addr(route, mq)
        header = self._header(mq, sys_flag, props, msg, route)
        await self._instance.remoting.invoke_oneway(addr, request(RequestCode.SEND_MESSAGE_V2, header, body),
                                                    self.send_timeout_ms)

    async def send_batch(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout_ms: int | None = None) -> SendResult:
        """Send messages of one topic in one request (SEND_BATCH_MESSAGE); all get consecutive
        offsets in one queue. Bodies are not compressed; delays and retry topics are refused.
        Retries and ``timeout_ms`` as :meth:`send`."""
        if not messages:
            raise MessageError("send_batch needs at least one message")
        topic = messages[0].topic
        for m in messages:
            self._check(m)
            if m.topic != topic:
                raise MessageError(f"a batch holds one topic; got {topic!r} and {m.topic!r}: split it")
            if m.delay_time_level > 0 or m.deliver_time_ms is not None or m.delay_time_ms is not None:
                raise MessageError("a batch cannot carry delayed messages: send those one by one")
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise MessageError("a batch cannot go to a retry topic")
            m.properties.setdefault(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, _IDS.next_id())
        body = encode_batch_body(messages)
        if len(body) > self.max_message_bytes:
            raise MessageError(f"the batch takes {len(body)} bytes, more than max_message_bytes "
                               f"{self.max_message_bytes}: send smaller batches")
        await self.start()
        started = asyncio.get_running_loop().time()
        route = await self._instance.publish_route(topic, self.default_topic_queue_nums)
        ids = ",".join(m.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in messages)

        async def attempt(mq: MessageQueue, remaining_ms: int) -> SendResult:
            header = self._header(mq, 0, "", messages[0], route)
            header.batch = True
            addr = self._addr(route, mq)
            response = await self._instance.remoting.invoke(
                addr, request(RequestCode.SEND_BATCH_MESSAGE, header, body), remaining_ms)
            return self._result(response, addr, mq, ids)

        result = await self._with_retries(route, queue, attempt, started, timeout_ms,
                                          f"sending a batch of {len(messages)} to topic {topic!r}")
        if self._tracer is not None:
            self._traced(self._tracer, messages, result, route, started)
        return result

    def _traced(self, tracer: TraceDispatcher, sent: Message | Sequence[Message], result: SendResult,
                route: TopicRoute, started: float) -> None:
        """Record the Pub trace of a send (of a batch: one per message) begun at loop time
        ``started``."""
        cost_ms = int((asyncio.get_running_loop().time() - started) * 1000)
        started_ms, store_host = int(time.time() * 1000) - cost_ms, self._addr(route, result.queue)
        if isinstance(sent, Message):
            tracer.on_send(sent, result, started_ms, cost_ms, store_host=store_host)
        else:
            tracer.on_send_batch(sent, result, started_ms, cost_ms, store_host=store_host)

    # -- internals ------------------------------------------------------------------------------
    async def _with_retries(self, route: TopicRoute, fixed: MessageQueue | None,
                            attempt: Callable[[MessageQueue, int], Awaitable[SendResult]],
                            started: float, timeout_ms: int | None, what: str) -> SendResult:
        """Run ``attempt`` on ``fixed`` once, or on up to ``1 + retry_times`` queues (another
        broker than the one that failed when there is one), after retriable failures, all
        within the timeout counted from ``started``. A failure past the deadline raises
        SendTimeoutError; one with time left (or of a fixed queue) raises as it came."""
        loop = asyncio.get_running_loop()
        timeout_ms = timeout_ms or self.send_timeout_ms
        deadline = started + timeout_ms / 1000
        attempts = 1 if fixed is not None else 1 + self.retry_times
        last_error: Exception | None = None
        avoid: str | None = None
        for _ in range(attempts):
            remaining_ms = int((deadline - loop.time()) * 1000)
            if remaining_ms <= 0:
                break
            mq = fixed or self._pick(route, avoid)
            try:
                return await attempt(mq, remaining_ms)
            except MQBrokerError as exc:
                if exc.code not in SEND_RETRY_CODES:
                    raise
                last_error = exc
            except RemotingError as exc:
                if not exc.retriable:  # e.g. a frame the broker cannot take
                    raise
                last_error = exc
            avoid = route.broker_of(mq)
        if last_error is not None and not isinstance(last_error, RemotingTimeoutError) \
                and loop.time() < deadline:
            raise last_error  # every attempt failed in time: the last failure says why
        raise SendTimeoutError(
            f"{what} did not complete within {timeout_ms} ms ({last_error or 'no attempt finished'}); "
            "check the broker, or raise timeout_ms (send_timeout_ms)") from last_error

    def _check(self, msg: Message) -> None:
        problem = validate_topic(msg.topic)
        if problem:
            raise MessageError(problem)
        if msg.topic == AUTO_CREATE_TOPIC_KEY:
            raise MessageError(f"{AUTO_CREATE_TOPIC_KEY} is the auto-create template, not a topic to send to")
        if not msg.body:
            raise MessageError("the message body is empty: RocketMQ refuses empty bodies")
        if len(msg.body) > self.max_message_bytes:
            raise MessageError(f"the body takes {len(msg.body)} bytes, more than max_message_bytes "
                               f"{self.max_message_bytes}: split it or store it elsewhere")

    def _prepare(self, msg: Message) -> tuple[bytes, int, dict[str, str]]:
        """The body as sent, its sysFlag and the properties for the header."""
        msg.properties.setdefault(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, _IDS.next_id())
        props = dict(msg.properties)
        props.setdefault(P.WAIT_STORE_MSG_OK, "true")
        body, sys_flag = msg.body, 0
        if len(body) > self.compress_over_bytes:
            body, sys_flag = compress_body(body, self.compress_type, self.compress_level)
        if props.get(P.TRANSACTION_PREPARED) == "true":
            sys_flag |= sysflag.TRANSACTION_PREPARED_TYPE
        return body, sys_flag, props

    def _fixed_queue(self, route: TopicRoute, msg: Message, queue: MessageQueue | None,
                     selector: MessageQueueSelector | None, arg: Any) -> MessageQueue | None:
        if queue is not None:
            return queue
        if selector is None:
            return None
        chosen = selector(route.publish_queues, msg, arg)
        if not isinstance(chosen, MessageQueue):
            raise ClientConfigError(f"the selector returned {chosen!r}, not one of the queues it was given")
        return chosen

    def _pick(self, route: TopicRoute, avoid: str | None) -> MessageQueue:
        queues = route.publish_queues
        counter = self._counters.setdefault(route.topic, itertools.count())
        start = next(counter)
        for i in range(len(queues)):
            mq = queues[(start + i) % len(queues)]
            if route.broker_of(mq) != avoid:
                return mq
        return queues[start % len(queues)]

    def _addr(self, route: TopicRoute, mq: MessageQueue) -> str:
        broker_name = route.broker_of(mq)
        addr = route.master_addr(broker_name) or self._instance.master_addr(broker_name)
        if addr is None:
            raise MessageError(f"broker {broker_name!r} has no master in the route of {route.topic!r}: "
                               "wait for it to register with the NameServer")
        return addr

    def _header(self, mq: MessageQueue, sys_flag: int, props: dict[str, str] | str, msg: Message,
                route: TopicRoute) -> SendMessageRequestHeaderV2:
        reconsume: int | None = None
        max_reconsume: int | None = None
        if isinstance(props, dict):
            if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                text = props.pop(P.RECONSUME_TIME, None)
                reconsume = int(text) if text else None
                text = props.pop(P.MAX_RECONSUME_TIMES, None)
                max_reconsume = int(text) if text else None
            props = P.encode_properties(props).decode("utf-8")
        return SendMessageRequestHeaderV2(
            producer_group=self.group, topic=mq.topic, default_topic=AUTO_CREATE_TOPIC_KEY,
            default_topic_queue_nums=self.default_topic_queue_nums, queue_id=mq.queue_id,
            sys_flag=sys_flag, born_timestamp=int(time.time() * 1000), flag=msg.flag,
            properties=props, reconsume_times=reconsume, max_reconsume_times=max_reconsume,
            bname=mq.broker_name)

    async def _send_one(self, route: TopicRoute, mq: MessageQueue, body: bytes, sys_flag: int,
                        props: dict[str, str], msg: Message, timeout_ms: int) -> SendResult:
        addr = self._addr(route, mq)
        header = self._header(mq, sys_flag, dict(props), msg, route)
        code = RequestCode.SEND_REPLY_MESSAGE_V2 if is_reply(msg) else RequestCode.SEND_MESSAGE_V2
        response = await self._instance.remoting.invoke(addr, request(code, header, body), timeout_ms)
        return self._result(response, addr, mq, props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX])

    @staticmethod
    def _result(response: Any, addr: str, mq: MessageQueue, msg_id: str) -> SendResult:
        status = _STATUS.get(response.code)
        if status is None:
            raise error_for_response(response, f"send to {mq.topic!r}", addr)
        ext = response.ext_fields
        try:
            queue_id, queue_offset = int(ext.get("queueId", mq.queue_id)), int(ext.get("queueOffset", -1))
        except ValueError:
            raise ProtocolError(f"the send answer from {addr} has queueId {ext.get('queueId')!r} and "
                                f"queueOffset {ext.get('queueOffset')!r}: not integers") from None
        queue = MessageQueue(mq.topic, mq.broker_name, queue_id)
        return SendResult(status, msg_id, ext.get("msgId", ""), queue, queue_offset,
                          ext.get(P.MSG_REGION, DEFAULT_REGION), ext.get("recallHandle"))
