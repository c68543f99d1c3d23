"""Messages: :class:`Message` as a producer builds it, :class:`MessageExt` as the store holds it."""

from __future__ import annotations

from collections.abc import Iterable

from bolide.common import properties as P
from bolide.common.hosts import encode_host
from bolide.common.msgid import create_offset_msg_id


def _int_property(key: str, doc: str) -> property:
    """A property of the message holding a whole number (None when absent)."""

    def get(self: Message) -> int | None:
        text = self.properties.get(key)
        return int(text) if text else None

    def set(self: Message, value: int | None) -> None:
        if value is None:
            self.properties.pop(key, None)
        else:
            self.properties[key] = str(int(value))

    return property(get, set, doc=doc)


class Message:
    """A message to send: topic, body, user flag and properties (tags and keys live there)."""

    __slots__ = ("body", "flag", "properties", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        properties: dict[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self.properties: dict[str, str] = dict(properties) if properties else {}
        if tags:
            self.properties[P.TAGS] = tags
        if keys:
            self.properties[P.KEYS] = keys if isinstance(keys, str) else P.KEY_SEPARATOR.join(keys)

    @property
    def tags(self) -> str | None:
        """The TAGS property: what consumers filter on (None when not set)."""
        return self.properties.get(P.TAGS)

    @property
    def keys(self) -> list[str]:
        """The KEYS property split into keys (query by key finds the message by any of them)."""
        raw = self.properties.get(P.KEYS, "")
        return [k for k in raw.split(P.KEY_SEPARATOR) if k]

    @property
    def delay_time_level(self) -> int:
        """Deliver the message after delay level ``level`` (1 = 1 s, ... 18 = 2 h); 0: at once."""
        return int(self.properties.get(P.DELAY_TIME_LEVEL, "0") or 0)

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        if level > 0:
            self.properties[P.DELAY_TIME_LEVEL] = str(level)
        else:
            self.properties.pop(P.DELAY_TIME_LEVEL, None)

    deliver_time_ms = _int_property(
        P.TIMER_DELIVER_MS,
        """Deliver the message at this time (ms since the epoch; RocketMQ 5's timer messages,
        ``setDeliverTimeMs``): consumers see it then, not before. None: at once.""")
    delay_time_ms = _int_property(
        P.TIMER_DELAY_MS,
        """Deliver the message this many ms after the broker stores it (``setDelayTimeMs``).""")

    def __repr__(self) -> str:
        return f"Message(topic={self.topic!r}, body={len(self.body)} bytes, props={self.properties})"


class MessageExt(Message):
    """A stored message with every field of its CommitLog record."""

    __slots__ = (
        "body_crc",
        "born_host",
        "born_timestamp",
        "commit_log_offset",
        "magic",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
    )

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        *,
        flag: int = 0,
        properties: dict[str, str] | None = None,
        queue_id: int = 0,
        queue_offset: int = 0,
        commit_log_offset: int = 0,
        store_size: int = 0,
        body_crc: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "",
        store_timestamp: int = 0,
        store_host: str = "",
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        magic: int = 0,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self.properties = properties if properties is not None else {}
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.store_size = store_size
        self.body_crc = body_crc
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_timestamp = store_timestamp
        self.store_host = store_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.magic = magic

    @property
    def msg_id(self) -> str | None:
        """The client message id (UNIQ_KEY) when the producer set one."""
        return self.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def offset_msg_id(self) -> str:
        """The broker-side id made of store host and CommitLog offset."""
        return create_offset_msg_id(encode_host(self.store_host), self.commit_log_offset)

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, "
            f"queue_offset={self.queue_offset}, commit_log_offset={self.commit_log_offset}, "
            f"body={len(self.body)} bytes, props={self.properties})"
        )
