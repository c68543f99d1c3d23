"""Message queue selectors: ``selector(queues, message, arg) -> MessageQueue``.

A producer sending with a selector uses the queue it returns and does not retry elsewhere, so
messages with the same key keep their order (RocketMQ's ordered messages).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from bolide.client.errors import ClientConfigError
from bolide.common.hashing import java_string_hash
from bolide.common.message import Message
from bolide.protocol.bodies.client import MessageQueue

MessageQueueSelector: TypeAlias = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def _hash(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return java_string_hash(value)  # the same queue a Java producer picks for a String key
    return java_string_hash(str(value))


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """The queue at ``abs(hash(arg)) % len(queues)``; ``arg`` None means the message's first key.

    Strings hash as Java's ``String.hashCode()``, integers as themselves (Java's
    SelectMessageQueueByHash), so Python and Java producers agree on the queue.
    """
    if arg is None:
        keys = msg.keys
        if not keys:
            raise ClientConfigError("select_by_hash needs an argument or a message with keys: "
                                    "pass arg=<order key> or set keys on the message")
        arg = keys[0]
    return queues[abs(_hash(arg)) % len(queues)]


def select_random(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """Any queue (Java's SelectMessageQueueByRandom)."""
    return random.choice(list(queues))
