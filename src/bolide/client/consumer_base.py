"""What push and pull consumers share: subscriptions, heartbeat data, offsets, where a new
queue starts, and rebalancing (which queues of the subscribed topics this member owns)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from pathlib import Path

from bolide.client.config import ClientConfig, as_config
from bolide.client.consumer_stats import ConsumerStats
from bolide.client.errors import ClientConfigError, ClientStateError, MQBrokerError
from bolide.client.filtering import MessageSelector, subscription
from bolide.client.instance import ClientInstance
from bolide.client.offset_store import LocalOffsetStore, OffsetStore, RemoteOffsetStore
from bolide.client.results import ConsumeFrom, MessageModel
from bolide.client.running_info import base_properties, stacks_text
from bolide.client.tracing import TraceDispatcher
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.protocol.allocate import AllocateStrategy, allocate_averagely
from bolide.protocol.bodies.admin import ConsumerRunningInfo, GetConsumerStatusBody, ProcessQueueInfo
from bolide.protocol.bodies.client import EXPRESSION_TAG, ConsumerData, MessageQueue, SubscriptionData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
)
from bolide.remoting import RequestContext

log = logging.getLogger(__name__)


class ConsumerBase:
    """Group membership and offsets of one consumer; subclasses add the message flow."""

    CONSUME_TYPE = "CONSUME_PASSIVELY"

    def __init__(self, namesrv: str | ClientConfig, group: str, *,
                 message_model: MessageModel = MessageModel.CLUSTERING,
                 consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET,
                 consume_timestamp_ms: int | None = None, rebalance_interval_ms: int = 20_000,
                 persist_offset_interval_ms: int = 5_000, offset_store_dir: str | Path | None = None,
                 allocate: AllocateStrategy = allocate_averagely) -> None:
        if not group or group.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise ClientConfigError(f"consumer group {group!r} is not valid: give a non-empty name "
                                    "without the %RETRY% prefix")
        if rebalance_interval_ms <= 0 or persist_offset_interval_ms <= 0:
            raise ClientConfigError("rebalance_interval_ms and persist_offset_interval_ms must be positive")
        self.config = as_config(namesrv)
        self.group = group
        self.message_model = message_model
        self.consume_from = consume_from
        # Java's default: half an hour ago
        self.consume_timestamp_ms = consume_timestamp_ms or int(time.time() * 1000) - 30 * 60 * 1000
        self.rebalance_interval_ms = rebalance_interval_ms
        self.persist_offset_interval_ms = persist_offset_interval_ms
        self.allocate = allocate
        self.subscriptions: dict[str, SubscriptionData] = {}
        self._instance = ClientInstance(self.config)
        self._instance.consumer_data = self._consumer_data
        self.offsets: OffsetStore = (
            LocalOffsetStore(offset_store_dir, group) if message_model is MessageModel.BROADCASTING
            else RemoteOffsetStore(self._instance, group))
        self.stats = ConsumerStats()
        # message traces (enable_trace): push consumers and pull consumers' polls write them
        self._tracer = TraceDispatcher(self.config, group, "CONSUME") if self.config.enable_trace else None
        self.started = False
        self.start_timestamp_ms = 0
        self._stop: asyncio.Event | None = None  # set when closing: the pull loops end
        self._instance.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        self._instance.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_directly)
        self._instance.register_processor(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._on_status)

    async def _begin_close(self) -> bool:
        """The first steps of ``close()``: end the pull loops and stop the timers; False when
        the consumer is closed already."""
        if self._instance.closed:
            return False
        if self._stop is not None:
            self._stop.set()
        await self._instance.stop_timers()
        return True

    @property
    def client_id(self) -> str:
        """This client's id (``ip@instance``), as brokers list it and the queues are shared by."""
        return self._instance.client_id

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` messages matching the tag expression (``"*"`` or ``"A || B"``), or
        a :class:`~bolide.client.filtering.MessageSelector` (``MessageSelector.by_sql(...)``)."""
        if self._instance.closed:
            raise ClientStateError("this consumer is closed: create a new one")
        self.subscriptions[topic] = subscription(topic, expression)

    def _consumer_data(self) -> ConsumerData:
        return ConsumerData(group_name=self.group, consume_type=self.CONSUME_TYPE,
                            message_model=self.message_model.value,
                            consume_from_where=self.consume_from.value,
                            subscription_data_set=list(self.subscriptions.values()))

    def _subscription_of(self, mq: MessageQueue) -> SubscriptionData:
        return self.subscriptions.get(mq.topic) or subscription(mq.topic, "*")

    async def start_instance(self) -> None:
        """Load the stored offsets and connect (what ``start()`` does first); for subclasses."""
        if self._instance.closed:
            raise ClientStateError("this consumer is closed: create a new one")
        await self.offsets.load()
        self.start_timestamp_ms = int(time.time() * 1000)
        await self._instance.start()
        for topic in self.subscriptions:
            await self._instance.route(topic)  # a missing route is fine: the next rebalance retries
        try:
            await self._check_filters()
        except ClientConfigError:
            await self._instance.close(consumer_group=self.group)  # its timers run no more
            raise
        await self._instance.heartbeat()

    async def _check_filters(self) -> None:
        """Ask every broker of a SQL92 subscription's topic whether it serves it (as the Java
        consumer's start does): ClientConfigError with the broker's reason when one does not."""
        instance = self._instance
        for sub in self.subscriptions.values():
            if sub.expression_type == EXPRESSION_TAG:
                continue
            route = instance.routes.get(sub.topic)
            datas = route.data.broker_datas if route is not None else []
            for addr in sorted({a for bd in datas for a in bd.broker_addrs.values()}):
                try:
                    await instance.api.check_client_config(addr, instance.client_id, self.group, sub)
                except MQBrokerError as exc:
                    raise ClientConfigError(f"broker {addr} does not serve the {sub.expression_type} "
                                            f"subscription of {sub.topic!r}: {exc.remark}") from None

    # -- GET_CONSUMER_RUNNING_INFO ------------------------------------------------------------
    def running_info(self, jstack: bool = False) -> ConsumerRunningInfo:
        """This consumer's settings, subscriptions, queues held and per-topic figures, as
        ``mqadmin consumerStatus`` shows them; ``jstack`` adds the process's stacks."""
        queues = self._queue_infos()
        properties = {"consumerGroup": self.group, "messageModel": self.message_model.value,
                      "consumeFromWhere": self.consume_from.value,
                      "consumeTimestamp": str(self.consume_timestamp_ms),
                      "namesrvAddr": self.config.namesrv_addr,
                      "clientIP": self._instance.client_id.split("@", 1)[0],
                      "instanceName": self._instance.client_id.split("@", 1)[-1],
                      "pollNameServerInterval": str(self.config.poll_name_server_interval_ms),
                      "heartbeatBrokerInterval": str(self.config.heartbeat_broker_interval_ms),
                      "persistConsumerOffsetInterval": str(self.persist_offset_interval_ms),
                      "rebalanceInterval": str(self.rebalance_interval_ms),
                      "language": "PYTHON", **self._settings(),
                      **base_properties(self.config.namesrv_addrs, self.CONSUME_TYPE,
                                        self.start_timestamp_ms)}
        topics = sorted(set(self.subscriptions) | {mq.topic for mq in queues})
        return ConsumerRunningInfo(
            properties=properties,
            subscription_set=sorted(self.subscriptions.values(), key=lambda s: s.topic),
            mq_table=dict(sorted(queues.items())),
            status_table={topic: self.stats.status(topic) for topic in topics},
            jstack=stacks_text() if jstack else None)

    def _settings(self) -> dict[str, str]:
        """The subclass's own settings, under the Java consumer's property names."""
        return {}

    def _queue_infos(self) -> dict[MessageQueue, ProcessQueueInfo]:
        """What this consumer holds of each of its queues."""
        return {}

    async def _on_running_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(GetConsumerRunningInfoRequestHeader)
        if header.consumer_group != self.group:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer")
        return request.make_response(body=self.running_info(header.jstack_enable).encode())

    async def _on_status(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_STATUS_FROM_CLIENT (221, ``mqadmin getConsumerStatus`` through the
        broker): this consumer's offsets of the topic's queues (none for another group)."""
        header = request.read_header(GetConsumerStatusRequestHeader)
        table = {mq: offset for mq, offset in self.offsets.table.items()
                 if mq.topic == header.topic} if header.group == self.group else {}
        body = GetConsumerStatusBody(message_queue_table=dict(sorted(table.items())))
        return request.make_response(body=body.encode())

    async def _on_consume_directly(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (309): only push consumers have a listener to run; others
        answer as a Java lite pull consumer does."""
        header = request.read_header(ConsumeMessageDirectlyResultRequestHeader)
        return request.make_response(
            ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{header.consumer_group}> not exist in this "
            "consumer: only push consumers consume a message directly")

    async def initial_offset(self, mq: MessageQueue) -> int:
        """Where to start on a newly owned queue: the stored offset, else per ``consume_from``."""
        stored = await self.offsets.read_stored(mq)
        if stored is not None:
            return stored
        api = self._instance.api
        addr = self._instance.master_addr(self._instance.broker_of(mq))
        if addr is None:
            raise ClientStateError(f"broker {self._instance.broker_of(mq)!r} has no master address yet")
        retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if self.consume_from is ConsumeFrom.FIRST_OFFSET:
            return 0
        if self.consume_from is ConsumeFrom.LAST_OFFSET:
            return 0 if retry else await api.max_offset(addr, mq.topic, mq.queue_id)
        if retry:
            return await api.max_offset(addr, mq.topic, mq.queue_id)
        return await api.search_offset(addr, mq.topic, mq.queue_id, self.consume_timestamp_ms)

    async def allocated(self, topic: str) -> set[MessageQueue] | None:
        """This member's share of ``topic``'s queues; None when it cannot be known now."""
        route = await self._instance.route(topic)
        if route is None or not route.subscribe_queues:
            return None
        queues = sorted(route.subscribe_queues)
        if self.message_model is MessageModel.BROADCASTING:
            return set(queues)
        addrs = sorted(route.broker_addrs())
        if not addrs:
            return None
        ids = await self._instance.api.consumer_ids(random.choice(addrs), self.group)
        if not ids:
            return None
        return set(self.allocate(self.group, self.client_id, queues, sorted(ids)))

    async def target_assignment(self, topics: list[str]) -> dict[str, set[MessageQueue]]:
        """The queues to own per topic; a topic whose share is unknown keeps its current one."""
        out: dict[str, set[MessageQueue]] = {}
        for topic in topics:
            try:
                share = await self.allocated(topic)
            except Exception as exc:  # keep the current queues; the next rebalance retries
                log.warning("rebalance of %s for group %s failed: %s", topic, self.group, exc)
                share = None
            if share is not None:
                out[topic] = share
        return out
