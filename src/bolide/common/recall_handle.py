"""RocketMQ 5's recall handles: what a send of a timer message answers and a recall names.

URL-safe base64 of ``v1 <topic> <brokerName> <dueMs> <uniqKey>`` (RocketMQ's
``RecallMessageHandle.HandleV1``), where the due time is one millisecond past the stored
``TIMER_OUT_MS``, as RocketMQ writes it.
"""

from __future__ import annotations

import base64
import binascii

from bolide.errors import BolideError

VERSION = "v1"


class RecallError(BolideError):
    """A recall handle that does not name a timer message still to come on this broker."""


def recall_handle(topic: str, broker_name: str, due_ms: int, uniq_key: str) -> str:
    """The handle of the timer message ``uniq_key`` of ``topic``, due at ``due_ms``."""
    raw = " ".join((VERSION, topic, broker_name, str(due_ms), uniq_key))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_recall_handle(handle: str) -> tuple[str, str, int, str]:
    """(topic, broker name, due time in ms, UNIQ_KEY) of a recall handle; RecallError when it
    is not one."""
    try:
        raw = base64.urlsafe_b64decode(handle.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise RecallError("recall handle is invalid: give the recall handle the send answered") from None
    items = raw.split(" ")
    if len(items) < 5 or items[0] != VERSION or not items[3].lstrip("-").isdecimal():
        raise RecallError("recall handle is invalid: give the recall handle the send answered")
    return items[1], items[2], int(items[3]), items[4]
