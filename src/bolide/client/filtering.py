"""Subscriptions: a tag expression (``"*"`` or ``"TagA || TagB"``), matched again on the
client, or a SQL92 expression over the message properties (``MessageSelector.by_sql``),
evaluated by the broker (which needs ``enablePropertyFilter=true``).

The broker filters tags by their hash codes, so a hash collision can let a message of another
tag through; consumers drop messages whose TAGS is not one of the subscribed tags, as the
Java client does.
"""

from __future__ import annotations

from dataclasses import dataclass

from bolide.client.errors import ClientConfigError
from bolide.common.message import Message
from bolide.common.sql92 import SelectorError, compile_selector
from bolide.common.topic import validate_topic
from bolide.protocol.bodies.client import EXPRESSION_SQL92, EXPRESSION_TAG, SubscriptionData


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """Which messages of a topic to consume (Java MessageSelector): by tags or by SQL92."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str = "*") -> MessageSelector:
        """A tag expression: ``"*"`` or tags joined by ``||``."""
        return cls(EXPRESSION_TAG, expression)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """A SQL92 expression over the message properties, e.g. ``"region = 'eu' AND a > 5"``
        (see :mod:`bolide.common.sql92`); the broker needs ``enablePropertyFilter=true``."""
        return cls(EXPRESSION_SQL92, expression)


def subscription(topic: str, expression: str | MessageSelector | None = "*") -> SubscriptionData:
    """The subscription of ``topic`` to a tag expression (None or ``""`` mean ``"*"``) or to
    a :class:`MessageSelector`."""
    problem = validate_topic(topic)
    if problem:
        raise ClientConfigError(problem)
    if isinstance(expression, MessageSelector):
        if expression.expression_type == EXPRESSION_SQL92:
            try:
                compile_selector(expression.expression)
            except SelectorError as exc:
                raise ClientConfigError(f"not a SQL92 selector: {exc}") from None
            return SubscriptionData.of(topic, expression.expression.strip(), 0, EXPRESSION_SQL92)
        if expression.expression_type != EXPRESSION_TAG:
            raise ClientConfigError(f"expression type {expression.expression_type!r} is not "
                                    "known: use MessageSelector.by_tag or by_sql")
        expression = expression.expression
    text = (expression or "*").strip()
    if any(ch in text for ch in "()'=<>") or " AND " in text.upper() or " OR " in text.upper():
        raise ClientConfigError(f"{expression!r} is not a tag expression: write '*' or tags "
                                "joined by '||', or subscribe with MessageSelector.by_sql(...)")
    return SubscriptionData.of(topic, text)


def matches(sub: SubscriptionData, msg: Message) -> bool:
    """True when ``msg`` belongs to ``sub`` (always for ``"*"``)."""
    if sub.matches_all or sub.expression_type != EXPRESSION_TAG:
        return True
    tags = msg.tags
    return tags is not None and tags in sub.tags_set

__all__ = ["MessageSelector", "SubscriptionData", "matches", "subscription"]
