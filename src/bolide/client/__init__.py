"""Bolide's RocketMQ client: producer, transactional producer, push consumer (concurrent or
orderly), pull consumer and simple consumer (RocketMQ 5's pop).

The classes here are the asyncio API; :mod:`bolide.client.blocking` has the same classes with
blocking methods (each client object runs its own event loop in a background thread). Guide:
docs/client.md.
"""

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
