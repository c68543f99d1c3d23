"""RocketMQ-compatible message store: CommitLog, ConsumeQueue, dispatch, flush, recovery."""

from bolide.store.config import BrokerRole, FlushDiskType, StoreConfig
from bolide.store.results import (
    GetMessageResult,
    GetStatus,
    PutMessageResult,
    PutStatus,
    RecoveryReport,
)
from bolide.store.store import MessageStore

__all__ = [
    "BrokerRole",
    "FlushDiskType",
    "GetMessageResult",
    "GetStatus",
    "MessageStore",
    "PutMessageResult",
    "PutStatus",
    "RecoveryReport",
    "StoreConfig",
]
