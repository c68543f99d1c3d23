"""SimpleConsumer (asyncio): RocketMQ 5's consumption by pop over remoting. The application
receives messages, acknowledges each one (or changes how long it stays hidden); the broker
keeps the group's progress, so there are no queues to own and no offsets to commit.

::

    consumer = SimpleConsumer("127.0.0.1:9876", "cg", {"Orders": "TagA || TagB"})
    await consumer.start()
    for msg in await consumer.receive(16, invisible_duration_ms=30_000):
        ...                                            # handle it within 30 s, then
        await consumer.ack(msg)            # or: await consumer.change_invisible_duration(msg, 5_000)
    await consumer.close()

A received message stays hidden from the group's other receives for its invisible duration;
one neither acknowledged nor made visible again in time is received again, with its
``reconsume_times`` one higher, and goes to ``%DLQ%<group>`` after the group's retries. Works
against Bolide's brokers and RocketMQ 5's (POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME);
RocketMQ 4.x brokers do not pop.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import Mapping

from bolide.client.api import request
from bolide.client.config import ClientConfig, as_config
from bolide.client.errors import ClientConfigError, ClientStateError, NoRouteError
from bolide.client.filtering import MessageSelector, subscription
from bolide.client.instance import ClientInstance
from bolide.client.results import ConsumeFrom
from bolide.client.tracing import TraceDispatcher
from bolide.common.message import MessageExt
from bolide.common.records import decode_records
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.protocol.bodies.client import ConsumerData, SubscriptionData
from bolide.protocol.bodies.route import PERM_READ
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers.pop import (
    CONSUME_INIT_MAX,
    CONSUME_INIT_MIN,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from bolide.protocol.pop_info import ExtraInfo, build_extra_info, parse_extra_info, pop_handles, real_topic
from bolide.protocol.trace import TraceContext

POP_CK = "POP_CK"  # the property a received message's acknowledgement handle travels in
MAX_RECEIVE = 32  # messages per receive, as RocketMQ's pop
CONSUME_POP = "CONSUME_POP"  # RocketMQ 5's ConsumeType of pop consumers
_EMPTY = (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.POLLING_FULL)
MAX_TRACED = 4096  # received messages whose acknowledgement a trace waits for (the oldest go)


class SimpleConsumer:
    """Receive, acknowledge, change the invisible duration; asyncio API."""

    def __init__(self, namesrv: str | ClientConfig, group: str,
                 subscriptions: Mapping[str, str | MessageSelector] | None = None, *,
                 await_duration_ms: int = 20_000,
                 consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET) -> None:
        if not group or group.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise ClientConfigError(f"consumer group {group!r} is not valid: give a non-empty name "
                                    "without the %RETRY% prefix")
        if not 0 <= await_duration_ms <= 30_000:
            raise ClientConfigError("await_duration_ms must be 0 to 30000 (a broker waits at most 30 s)")
        self.config = as_config(namesrv)
        self.group = group
        self.await_duration_ms = await_duration_ms
        self.consume_from = consume_from
        self.subscriptions: dict[str, SubscriptionData] = {}
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)
        self._instance = ClientInstance(self.config)
        self._instance.consumer_data = self._consumer_data  # heartbeats: the group is online
        self._turn = itertools.count()
        self._tracer = TraceDispatcher(self.config, group, "CONSUME") if self.config.enable_trace else None
        self._traced: OrderedDict[str, tuple[TraceContext, float]] = OrderedDict()  # by message id
        self.started = False

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Receive ``topic``'s messages that match a tag expression or a :class:`MessageSelector`."""
        self.subscriptions[topic] = subscription(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving ``topic``'s messages."""
        self.subscriptions.pop(topic, None)

    @property
    def client_id(self) -> str:
        """This client's id (``ip@instance``)."""
        return self._instance.client_id

    async def start(self) -> SimpleConsumer:
        """Look up the subscribed topics' routes; raises NoRouteError for a topic without one."""
        if self.started:
            return self
        if not self.subscriptions:
            raise ClientConfigError("subscribe to a topic before start()")
        await self._instance.start()
        for topic in self.subscriptions:
            if await self._instance.update_route(topic) is None:
                raise NoRouteError(f"topic {topic!r} has no route on {self.config.namesrv_addr}: "
                                   "create it first")
        await self._instance.heartbeat()  # now that the brokers are known
        self.started = True
        return self

    def _consumer_data(self) -> ConsumerData:
        """What heartbeats say of this consumer (RocketMQ 5's CONSUME_POP, as its pop consumers):
        the broker then shows the group online (consumerConnection, its lag metrics)."""
        return ConsumerData(group_name=self.group, consume_type=CONSUME_POP, message_model="CLUSTERING",
                            consume_from_where=self.consume_from.value,
                            subscription_data_set=list(self.subscriptions.values()))

    async def close(self) -> None:
        """Close the connections (messages received and not acknowledged come back after
        their invisible duration)."""
        if self.started:
            self.started = False
            if self._tracer is not None:
                await self._tracer.close()
            await self._instance.close(consumer_group=self.group)

    async def __aenter__(self) -> SimpleConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- receive --------------------------------------------------------------------------------
    async def receive(self, max_messages: int = 16, invisible_duration_ms: int = 30_000,
                      await_duration_ms: int | None = None) -> list[MessageExt]:
        """Up to ``max_messages`` (1 to 32) messages of one broker of one subscribed topic, in
        turn, each hidden from the group for ``invisible_duration_ms``; waits up to
        ``await_duration_ms`` (the consumer's default) for some, then returns what there is
        (maybe nothing)."""
        if not self.started:
            raise ClientStateError("start() the consumer first")
        if not 1 <= max_messages <= MAX_RECEIVE:
            raise ClientConfigError(f"max_messages must be 1 to {MAX_RECEIVE}")
        if not 1000 <= invisible_duration_ms <= 12 * 3600_000:
            raise ClientConfigError("invisible_duration_ms must be 1 s to 12 h")
        wait_ms = self.await_duration_ms if await_duration_ms is None else await_duration_ms
        targets = await self._targets()
        if not targets:
            raise NoRouteError(f"no readable broker serves {', '.join(self.subscriptions)}")
        topic, broker_name, addr = targets[next(self._turn) % len(targets)]
        sub = self.subscriptions[topic]
        header = PopMessageRequestHeader(
            consumer_group=self.group, topic=topic, queue_id=-1, max_msg_nums=max_messages,
            invisible_time=invisible_duration_ms, poll_time=wait_ms, born_time=int(time.time() * 1000),
            init_mode=CONSUME_INIT_MIN if self.consume_from is ConsumeFrom.FIRST_OFFSET else CONSUME_INIT_MAX,
            exp_type=sub.expression_type, exp=sub.sub_string, order=False, bname=broker_name)
        response = await self._instance.api.call(
            addr, request(RequestCode.POP_MESSAGE, header), f"receive from {topic!r}",
            timeout_ms=wait_ms + 10_000, ok=(ResponseCode.SUCCESS, *_EMPTY))
        if response.code != ResponseCode.SUCCESS:
            return []
        messages = self._handles(topic, broker_name, response.read_header(PopMessageResponseHeader),
                                 decode_records(response.body_bytes()))
        if self._tracer is not None and messages:
            self._trace_received(self._tracer, messages)
        return messages

    def _trace_received(self, tracer: TraceDispatcher, messages: list[MessageExt]) -> None:
        """A SubBefore for the received batch, kept until each message's acknowledgement."""
        before = tracer.before_consume(messages)
        if before is None:
            return
        now = asyncio.get_running_loop().time()
        for bean in before.beans:
            self._traced[bean.msg_id] = (before, now)
            self._traced.move_to_end(bean.msg_id)
        while len(self._traced) > MAX_TRACED:
            self._traced.popitem(last=False)

    async def _targets(self) -> list[tuple[str, str, str]]:
        """(topic, broker name, master address) of every readable broker of the subscriptions."""
        out = []
        for topic in sorted(self.subscriptions):
            route = await self._instance.route(topic)
            if route is None:
                continue
            readable = {qd.broker_name for qd in route.data.queue_datas if qd.perm & PERM_READ}
            for broker_name in sorted(readable):
                addr = route.master_addr(broker_name)
                if addr:
                    out.append((topic, broker_name, addr))
        return out

    def _handles(self, topic: str, broker_name: str, header: PopMessageResponseHeader,
                 messages: list[MessageExt]) -> list[MessageExt]:
        """Give each message its ``POP_CK`` and the subscribed topic's name (a retried one is
        stored in a retry topic)."""
        handles = pop_handles(messages, header.start_offset_info, header.msg_offset_info, header.pop_time,
                              header.invisible_time, header.revive_qid, broker_name)
        for msg, handle in zip(messages, handles, strict=True):
            msg.properties[POP_CK] = handle
            msg.topic = topic
        return messages

    # -- after a receive ----------------------------------------------------------------------
    def _leased(self, msg: MessageExt) -> tuple[ExtraInfo, str, str]:
        handle = msg.properties.get(POP_CK)
        if not handle:
            raise ClientConfigError("the message was not received by a SimpleConsumer (it has no POP_CK)")
        info = parse_extra_info(handle)
        if info.queue_offset is None:
            raise ClientConfigError(f"POP_CK {handle!r} names no message (7 fields, not 8)")
        addr = self._instance.master_addr(info.broker_name)
        if addr is None:
            raise NoRouteError(f"broker {info.broker_name} of the message is not in the routes any more")
        return info, real_topic(info.retry, msg.topic, self.group), addr

    async def ack(self, msg: MessageExt) -> None:
        """Acknowledge a received message: the group is done with it. Raises MQBrokerError
        (code NO_MESSAGE) when it was received again since (its invisible duration ended)."""
        info, topic, addr = self._leased(msg)
        assert info.queue_offset is not None
        header = AckMessageRequestHeader(consumer_group=self.group, topic=topic, queue_id=info.queue_id,
                                         extra_info=msg.properties[POP_CK], offset=info.queue_offset)
        await self._instance.api.call(addr, request(RequestCode.ACK_MESSAGE, header), f"ack in {topic!r}")
        msg_id = msg.msg_id or msg.offset_msg_id
        if self._tracer is not None and msg_id in self._traced:
            before, received = self._traced.pop(msg_id)
            cost_ms = (asyncio.get_running_loop().time() - received) * 1000
            self._tracer.after_consume_one(before, msg_id, cost_ms)

    async def change_invisible_duration(self, msg: MessageExt, invisible_duration_ms: int) -> None:
        """Hide the message for ``invisible_duration_ms`` from now on (0: receive it again now);
        ``msg`` takes the new handle its acknowledgement needs."""
        if not 0 <= invisible_duration_ms <= 12 * 3600_000:
            raise ClientConfigError("invisible_duration_ms must be 0 to 12 h")
        info, topic, addr = self._leased(msg)
        assert info.queue_offset is not None
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group, topic=topic, queue_id=info.queue_id, extra_info=msg.properties[POP_CK],
            offset=info.queue_offset, invisible_time=invisible_duration_ms)
        response = await self._instance.api.call(
            addr, request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header), f"invisible time in {topic!r}")
        lease = response.read_header(ChangeInvisibleTimeResponseHeader)
        msg.properties[POP_CK] = build_extra_info(info.queue_offset, lease.pop_time, lease.invisible_time,
                                                  lease.revive_qid, info.broker_name, info.queue_id,
                                                  info.queue_offset, retry=info.retry)

