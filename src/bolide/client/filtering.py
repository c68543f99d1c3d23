"""Tag subscriptions: ``"*"`` or ``"TagA || TagB"``, matched again on the client.

The broker filters by the tags' hash codes, so a hash collision can let a message of another
tag through; consumers drop messages whose TAGS is not one of the subscribed tags, as the
Java client does.
"""

from __future__ import annotations

from bolide.client.errors import ClientConfigError
from bolide.common.message import Message
from bolide.common.topic import validate_topic
from bolide.protocol.bodies.client import EXPRESSION_TAG, SubscriptionData


def subscription(topic: str, expression: str | None = "*") -> SubscriptionData:
    """The subscription of ``topic`` to a tag expression (None or ``""`` mean ``"*"``)."""
    problem = validate_topic(topic)
    if problem:
        raise ClientConfigError(problem)
    text = (expression or "*").strip()
    if any(ch in text for ch in "()'=<>") or " AND " in text.upper() or " OR " in text.upper():
        raise ClientConfigError(f"{expression!r} is not a tag expression: write '*' or tags "
                                "joined by '||' (SQL92 filters are not supported)")
    return SubscriptionData.of(topic, text)


def matches(sub: SubscriptionData, msg: Message) -> bool:
    """True when ``msg`` belongs to ``sub`` (always for ``"*"``)."""
    if sub.matches_all or sub.expression_type != EXPRESSION_TAG:
        return True
    tags = msg.tags
    return tags is not None and tags in sub.tags_set

__all__ = ["SubscriptionData", "matches", "subscription"]
