"""Consumer-group lookups and offset copies an admin asks a broker for, answered as RocketMQ
5.3's AdminBrokerProcessor answers them:

- QUERY_TOPICS_BY_CONSUMER (343): the topics the group has committed offsets on (TopicList).
- QUERY_SUBSCRIPTION_BY_CONSUMER (345): the group's online subscription of a topic.
- QUERY_CONSUME_TIME_SPAN (303): per write queue, the store times of the first, the last and
  the last consumed message, and how long the next one has waited (TOPIC_NOT_EXIST when the
  broker has no such topic).
- GET_SUBSCRIPTIONGROUP_CONFIG (352): one group's SubscriptionGroupConfig
  (SUBSCRIPTION_GROUP_NOT_EXIST when unknown).
- CLONE_GROUP_OFFSET (314): copy a group's committed offsets of a topic (of all its topics when
  none is named) to another group. Topics the broker does not have are skipped; so are, unless
  ``offline``, topics the source group's online consumers do not subscribe to.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bolide.protocol import fastjson
from bolide.protocol.bodies.admin import (
    QueryConsumeTimeSpanBody,
    QuerySubscriptionResponseBody,
    QueueTimeSpan,
    TopicList,
)
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import (
    CloneGroupOffsetRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QuerySubscriptionByConsumerRequestHeader,
    QueryTopicsByConsumerRequestHeader,
)
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


def java_time(ms: int) -> str:
    """``ms`` as RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time (QueueTimeSpan's strings)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000)
    return moment.strftime("%Y-%m-%d#%H:%M:%S:") + f"{moment.microsecond // 1000:03d}"


class GroupAdminProcessor:
    """Answers from the offsets, the consumers online, the store and the group settings."""

    CODES = (RequestCode.QUERY_TOPICS_BY_CONSUMER, RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER,
             RequestCode.QUERY_CONSUME_TIME_SPAN, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
             RequestCode.CLONE_GROUP_OFFSET)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        c = RequestCode
        self._handlers: dict[int, Callable[[RemotingCommand], RemotingCommand]] = {
            c.QUERY_TOPICS_BY_CONSUMER: self.topics_by_consumer,
            c.QUERY_SUBSCRIPTION_BY_CONSUMER: self.subscription_by_consumer,
            c.QUERY_CONSUME_TIME_SPAN: self.consume_time_span,
            c.GET_SUBSCRIPTIONGROUP_CONFIG: self.group_config,
            c.CLONE_GROUP_OFFSET: self.clone_offsets,
        }

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self._handlers[request.code](request)

    def topics_by_consumer(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(QueryTopicsByConsumerRequestHeader)
        topics = sorted(self.broker.offsets.topics_of_group(header.group))
        body = TopicList(topic_list=topics, broker_addr=self.broker.broker_addr)
        return request.make_response(body=body.encode())

    def subscription_by_consumer(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(QuerySubscriptionByConsumerRequestHeader)
        found = self.broker.clients.subscription(header.group, header.topic) if header.topic else None
        body = QuerySubscriptionResponseBody(subscription_data=found, group=header.group, topic=header.topic)
        return request.make_response(body=body.encode())

    def consume_time_span(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(QueryConsumeTimeSpanRequestHeader)
        broker, topic = self.broker, header.topic
        tc = broker.topics.get(topic)
        if tc is None:
            return request.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store, now = broker.store, int(time.time() * 1000)
        spans = []
        for queue_id in range(tc.write_queue_nums):
            min_time = store.get_earliest_message_time(topic, queue_id)
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            max_time = store.get_message_store_timestamp(topic, queue_id, max_offset - 1)
            committed = broker.offsets.query(header.group, topic, queue_id)
            consumed = committed if committed is not None else -1
            consume_time = (store.get_message_store_timestamp(topic, queue_id, consumed - 1)
                            if consumed > 0 else min_time)
            delay = 0
            if consumed < max_offset:  # the next message's wait (none when it is gone already)
                next_time = store.get_message_store_timestamp(topic, queue_id, max(consumed, 0))
                delay = now - next_time if next_time > 0 else 0
            spans.append(QueueTimeSpan(
                message_queue=MessageQueue(topic=topic, broker_name=broker.config.broker_name,
                                           queue_id=queue_id),
                min_time_stamp=min_time, max_time_stamp=max_time, consume_time_stamp=consume_time,
                delay_time=delay, min_time_stamp_str=java_time(min_time),
                max_time_stamp_str=java_time(max_time), consume_time_stamp_str=java_time(consume_time)))
        return request.make_response(body=QueryConsumeTimeSpanBody(consume_time_span_set=spans).encode())

    def group_config(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(GetSubscriptionGroupConfigRequestHeader)
        config = self.broker.subscription_groups.get(header.group)
        if config is None:
            return request.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                         f"No group in this broker: {header.group}")
        return request.make_response(body=fastjson.dumps(config.to_json_obj()))

    def clone_offsets(self, request: RemotingCommand) -> RemotingCommand:
        header = request.read_header(CloneGroupOffsetRequestHeader)
        broker, src = self.broker, header.src_group
        topics = [header.topic] if header.topic and header.topic.strip() else sorted(
            broker.offsets.topics_of_group(src))
        _, subscribed = broker.clients.membership(src)
        cloned, skipped = [], []
        for topic in topics:
            if broker.topics.get(topic) is None or (not header.offline and subscribed
                                                    and topic not in subscribed):
                skipped.append(topic)
                continue
            if broker.offsets.clone(src, header.dest_group, topic):
                cloned.append(topic)
        if cloned:
            return request.make_response()
        why = (f"the topics {', '.join(skipped)} are not on this broker or not subscribed by {src}'s "
               "online consumers (offline=true copies those)" if skipped
               else f"{src} has no offsets on {header.topic or 'any topic'} in this broker")
        return request.make_response(remark=f"nothing cloned: {why}")
