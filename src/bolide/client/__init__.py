"""Bolide's RocketMQ client: producer, transactional producer, push consumer (concurrent or
orderly), pull consumer and simple consumer (RocketMQ 5's pop).

The classes here are the asyncio API; :mod:`bolide.client.blocking` has the same classes with
blocking methods (each client object runs its own event loop in a background thread). Guide:
docs/client.md.

Each name is imported from its module when first used, so that importing a submodule such as
:mod:`bolide.client.config` does not load the whole client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bolide.client.admin import Admin
    from bolide.client.config import ClientConfig
    from bolide.client.errors import (
        AclRefusedError,
        AuthRefusedError,
        ClientConfigError,
        ClientStateError,
        MessageError,
        MQBrokerError,
        MQClientError,
        NoRouteError,
        RequestTimeoutError,
        SendTimeoutError,
    )
    from bolide.client.filtering import MessageSelector
    from bolide.client.producer import DEFAULT_PRODUCER_GROUP, Producer
    from bolide.client.pull_consumer import PullConsumer
    from bolide.client.push_consumer import ConsumeContext, PushConsumer
    from bolide.client.request_reply import create_reply_message
    from bolide.client.results import (
        ConsumeFrom,
        ConsumeStatus,
        MessageModel,
        MessageQueue,
        PullResult,
        PullStatus,
        SendResult,
        SendStatus,
    )
    from bolide.client.selector import select_by_hash, select_random
    from bolide.client.simple_consumer import SimpleConsumer
    from bolide.client.transaction import LocalTransactionState, TransactionProducer, TransactionSendResult
    from bolide.common.message import Message, MessageExt
    from bolide.protocol.allocate import allocate_averagely, allocate_by_circle

_WHERE = {
    "Admin": "bolide.client.admin",
    "ClientConfig": "bolide.client.config",
    "AclRefusedError": "bolide.client.errors",
    "AuthRefusedError": "bolide.client.errors",
    "ClientConfigError": "bolide.client.errors",
    "ClientStateError": "bolide.client.errors",
    "MQBrokerError": "bolide.client.errors",
    "MQClientError": "bolide.client.errors",
    "MessageError": "bolide.client.errors",
    "NoRouteError": "bolide.client.errors",
    "RequestTimeoutError": "bolide.client.errors",
    "SendTimeoutError": "bolide.client.errors",
    "MessageSelector": "bolide.client.filtering",
    "DEFAULT_PRODUCER_GROUP": "bolide.client.producer",
    "Producer": "bolide.client.producer",
    "PullConsumer": "bolide.client.pull_consumer",
    "ConsumeContext": "bolide.client.push_consumer",
    "PushConsumer": "bolide.client.push_consumer",
    "create_reply_message": "bolide.client.request_reply",
    "ConsumeFrom": "bolide.client.results",
    "ConsumeStatus": "bolide.client.results",
    "MessageModel": "bolide.client.results",
    "MessageQueue": "bolide.client.results",
    "PullResult": "bolide.client.results",
    "PullStatus": "bolide.client.results",
    "SendResult": "bolide.client.results",
    "SendStatus": "bolide.client.results",
    "select_by_hash": "bolide.client.selector",
    "select_random": "bolide.client.selector",
    "SimpleConsumer": "bolide.client.simple_consumer",
    "LocalTransactionState": "bolide.client.transaction",
    "TransactionProducer": "bolide.client.transaction",
    "TransactionSendResult": "bolide.client.transaction",
    "Message": "bolide.common.message",
    "MessageExt": "bolide.common.message",
    "allocate_averagely": "bolide.protocol.allocate",
    "allocate_by_circle": "bolide.protocol.allocate",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "DEFAULT_PRODUCER_GROUP",
    "AclRefusedError",
    "Admin",
    "AuthRefusedError",
    "ClientConfig",
    "ClientConfigError",
    "ClientStateError",
    "ConsumeContext",
    "ConsumeFrom",
    "ConsumeStatus",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageError",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "NoRouteError",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RequestTimeoutError",
    "SendResult",
    "SendStatus",
    "SendTimeoutError",
    "SimpleConsumer",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_averagely",
    "allocate_by_circle",
    "create_reply_message",
    "select_by_hash",
    "select_random",
]
