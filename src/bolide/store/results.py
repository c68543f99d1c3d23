"""Statuses and results of store operations, named as in RocketMQ."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bolide.common.msgid import create_offset_msg_id
from bolide.store.compiled import load

# a batch's offsetMsgIds in one call (None: not built; the loop below makes the same ids)
_compiled_ids = getattr(load("_append"), "offset_msg_ids", None)

if TYPE_CHECKING:
    from bolide.common.message import MessageExt


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def ok(self) -> bool:
        return self is PutStatus.PUT_OK


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class PutMessageResult:
    """Outcome of a put. For a batch, offsets are those of its first message."""

    status: PutStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    queue_offset: int = -1
    msg_id: str | None = None
    store_timestamp: int = 0
    msg_num: int = 1
    batch_ids: list[str] | None = None
    remark: str = ""
    store_host: bytes = b""
    record_sizes: list[int] | None = None  # a batch's, in order

    @property
    def offset_msg_ids(self) -> list[str]:
        """Broker-side ids of every message written (one for a single put)."""
        if self.wrote_offset < 0 or not self.store_host:
            return []
        if self.record_sizes is None:  # a single put: the common case of every send
            return [create_offset_msg_id(self.store_host, self.wrote_offset)]
        if _compiled_ids is not None and type(self.record_sizes) is list:
            return _compiled_ids(self.store_host, self.wrote_offset, self.record_sizes)  # type: ignore[no-any-return]
        offset = self.wrote_offset
        ids = []
        for size in self.record_sizes:
            ids.append(create_offset_msg_id(self.store_host, offset))
            offset += size
        return ids

    @property
    def msg_ids(self) -> list[str]:
        """UNIQ_KEYs of every message written (one for a single put)."""
        if self.batch_ids is not None:
            return self.batch_ids
        return [self.msg_id] if self.msg_id else []

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def offset_msg_id(self) -> str | None:
        """Broker-side id (store host + CommitLog offset) of the first message."""
        if self.wrote_offset < 0 or not self.store_host:
            return None
        return create_offset_msg_id(self.store_host, self.wrote_offset)

    @property
    def end_offset(self) -> int:
        """CommitLog offset just past the last byte written."""
        return self.wrote_offset + self.wrote_bytes


@dataclass(slots=True)
class GetMessageResult:
    """Outcome of a get: raw record slices (or, ``joined``, one buffer holding the records back
    to back), decoded on demand through :attr:`messages`."""

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[memoryview] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False
    _messages: list[MessageExt] | None = None
    joined: bool = False

    @property
    def message_count(self) -> int:
        return len(self.queue_offsets)

    @property
    def body(self) -> bytes | bytearray:
        """The records back to back, as a pull answer carries them."""
        if self.joined:
            return self.buffers[0] if self.buffers else b""  # type: ignore[return-value]
        return b"".join(self.buffers)

    @property
    def messages(self) -> list[MessageExt]:
        """The records decoded into :class:`MessageExt` objects (bodies copied)."""
        if self._messages is None:
            from bolide.common.records import decode_records
            from bolide.store.record import decode_record

            if self.joined:
                self._messages = decode_records(self.body)  # type: ignore[arg-type]
            else:
                self._messages = [decode_record(buf, 0) for buf in self.buffers]
        return self._messages

    def release(self) -> None:
        """Drop the views into the mapped files (lets segments be closed sooner)."""
        if not self.joined:
            for buf in self.buffers:
                buf.release()
        self.buffers = []


@dataclass(slots=True)
class Truncation:
    """A byte range recovery removed from a file, with the reason."""

    path: str
    start: int
    end: int
    reason: str


@dataclass(slots=True)
class RecoveryReport:
    """What the last open of the store found and changed."""

    abnormal: bool = False
    commit_log_start: int = 0
    commit_log_end: int = 0
    records_checked: int = 0
    bytes_checked: int = 0
    truncations: list[Truncation] = field(default_factory=list)
    queue_entries_removed: int = 0
    queue_entries_rebuilt: int = 0
    files_removed: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.truncations and not self.queue_entries_removed and not self.files_removed

    def summary(self) -> str:
        kind = "abnormal (abort file present)" if self.abnormal else "normal"
        parts = [
            f"{kind} recovery checked {self.records_checked} records "
            f"({self.bytes_checked} bytes); CommitLog ends at {self.commit_log_end}"
        ]
        for t in self.truncations:
            parts.append(f"truncated {t.path} bytes [{t.start}, {t.end}): {t.reason}")
        if self.queue_entries_removed:
            parts.append(f"removed {self.queue_entries_removed} ConsumeQueue entries past the log end")
        if self.queue_entries_rebuilt:
            parts.append(f"rebuilt {self.queue_entries_rebuilt} ConsumeQueue entries from the CommitLog")
        for f in self.files_removed:
            parts.append(f"removed {f}")
        return "; ".join(parts)
