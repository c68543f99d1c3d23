"""Deleting topics and their ConsumeQueues (mqadmin deleteTopic, cleanExpiredCQ and
cleanUnusedTopic).

DELETE_TOPIC_IN_BROKER (215) forgets the topic's config, consumer offsets and timer metrics and deletes its
ConsumeQueues at once, as RocketMQ 5 does: a topic created again under the name starts empty.
CLEAN_UNUSED_TOPIC (316) deletes the queues of every topic the broker no longer has;
CLEAN_EXPIRED_CONSUMEQUEUE (306) only those whose messages retention has all removed. The
store work runs off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bolide.broker.topic_config import SYSTEM_TOPICS
from bolide.errors import ConfigError
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import DeleteTopicRequestHeader
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)


class QueueCleanupProcessor:
    """deleteTopic, cleanUnusedTopic and cleanExpiredCQ over the broker's store."""

    CODES = (RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
             RequestCode.CLEAN_UNUSED_TOPIC)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def _unused(self, topic: str) -> bool:
        return topic not in self.broker.topics.table and topic not in SYSTEM_TOPICS

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        who = ctx.channel.remote_address
        try:
            if request.code == RequestCode.DELETE_TOPIC_IN_BROKER:
                return await self.delete_topic(request, who)
            if request.code == RequestCode.CLEAN_UNUSED_TOPIC:
                return await self.clean_unused_topics(request, who)
            return await self.clean_expired_queues(request, who)
        except ConfigError as exc:  # the deleted-queue record could not be written
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"nothing deleted: {exc}")

    async def delete_topic(self, request: RemotingCommand, who: str) -> RemotingCommand:
        """Delete the topic's queues (messages and all), config and consumer offsets; 0 for
        an unknown topic, as Java answers."""
        header = request.read_header(DeleteTopicRequestHeader)
        topic = header.topic
        if topic in SYSTEM_TOPICS:
            return request.make_response(ResponseCode.SYSTEM_ERROR,
                                         f"The topic[{topic}] is conflict with system topic.")
        dropped = await asyncio.to_thread(self.broker.store.delete_queues, topic.__eq__)
        self.broker.topics.delete(topic)
        self.broker.static_topics.delete(topic)
        self.broker.timer_metrics.remove(topic)
        self.broker.stats_items.forget_topic(topic)
        offsets = self.broker.offsets
        groups = sorted(offsets.groups_of_topic(topic))
        for group in groups:
            offsets.remove(group, topic)
        log.info("deleted topic %s (%d queue(s), offsets of %d group(s)) for %s", topic,
                 len(dropped), len(groups), who)
        return request.make_response()

    async def clean_unused_topics(self, request: RemotingCommand, who: str) -> RemotingCommand:
        """Delete every queue of the topics the broker has no config for (RocketMQ's
        cleanUnusedTopic), system topics apart."""
        dropped = await asyncio.to_thread(self.broker.store.delete_queues, self._unused)
        topics = sorted({topic for topic, _ in dropped})
        remark = f"deleted {len(dropped)} ConsumeQueues of {len(topics)} unused topics"
        if topics:
            remark += ": " + ", ".join(topics)
        log.info("%s (cleanUnusedTopic from %s)", remark, who)
        return request.make_response(remark=remark)

    async def clean_expired_queues(self, request: RemotingCommand, who: str) -> RemotingCommand:
        dropped = await asyncio.to_thread(self.broker.store.clean_expired_queues)
        remark = f"deleted {len(dropped)} ConsumeQueues whose messages are all gone"
        log.info("%s (cleanExpiredCQ from %s)", remark, who)
        return request.make_response(remark=remark)
