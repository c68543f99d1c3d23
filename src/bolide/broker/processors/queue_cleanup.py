"""ConsumeQueue cleanup on request (mqadmin cleanExpiredCQ and cleanUnusedTopic): codes 306
and 316 delete the queues all of whose messages retention has removed from the CommitLog, of
every topic (306) or of the topics the broker no longer has (316)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bolide.broker.topic_config import SYSTEM_TOPICS
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import RequestContext

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)


class QueueCleanupProcessor:
    """Runs :meth:`bolide.store.MessageStore.clean_expired_queues` off the event loop."""

    CODES = (RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, RequestCode.CLEAN_UNUSED_TOPIC)

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def _unused(self, topic: str) -> bool:
        return topic not in self.broker.topics.table and topic not in SYSTEM_TOPICS

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        store = self.broker.store
        unused_only = request.code == RequestCode.CLEAN_UNUSED_TOPIC
        which = self._unused if unused_only else None
        dropped = await asyncio.to_thread(store.clean_expired_queues, which)
        what = "unused topics" if unused_only else "topics"
        remark = f"deleted {len(dropped)} ConsumeQueues of {what} whose messages are all gone"
        if unused_only:
            left = sum(len(qids) for topic, qids in store.topics().items() if self._unused(topic))
            if left:
                remark += (f"; {left} queues of unused topics still have messages in the "
                           "CommitLog and are deleted once retention has removed them")
        log.info("%s (%s from %s)", remark, "cleanUnusedTopic" if unused_only else "cleanExpiredCQ",
                 ctx.channel.remote_address)
        return request.make_response(remark=remark)
