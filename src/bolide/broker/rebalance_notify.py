"""NOTIFY_CONSUMER_IDS_CHANGED (40): tell a consumer group's clients to rebalance now, when a
member joins or leaves, instead of at their next periodic rebalance (Java and Go react at once;
ali-ons ignores it)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from bolide.errors import RemotingError
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.consumer import NotifyConsumerIdsChangedRequestHeader
from bolide.remoting import Channel

log = logging.getLogger(__name__)


def notify_consumer_ids_changed(group: str, channels: Iterable[object]) -> int:
    """Send the oneway notification to every live channel of ``group``; how many were sent."""
    header = NotifyConsumerIdsChangedRequestHeader(consumer_group=group)
    sent = 0
    for channel in channels:
        if not isinstance(channel, Channel) or not channel.is_active:
            continue
        try:
            channel.oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header))
            sent += 1
        except RemotingError as exc:  # closed meanwhile: its own close handling follows
            log.debug("consumer ids of %s: %s not notified: %s", group, channel, exc)
    return sent
