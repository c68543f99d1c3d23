"""The CommitLog: one append-only stream of records over fixed-size mapped segments.

A single writer appends under ``put_lock`` (uncontended on the broker's loop thread). A
record is placed only if 8 bytes stay free after it; otherwise the segment is closed with
a BLANK header and the record goes to the next segment.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque

from bolide.common import sysflag
from bolide.common.hosts import encode_host
from bolide.errors import StoreError
from bolide.store.config import StoreConfig
from bolide.store.mapped_file import MappedFile
from bolide.store.mapped_file_queue import MappedFileQueue, SegmentAllocator
from bolide.store.record import HEADERS, MAGIC_V1, MIN_FREE_AFTER_RECORD, record_size, write_blank

_I16 = struct.Struct(">h")
HOST_BITS = sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6  # set from the hosts' lengths only
FEED_MAX = 16384  # records handed to the dispatcher without re-parsing


class SegmentUnavailable(StoreError):
    """No segment could be created for the next record (usually a full disk)."""


class RecordFieldError(StoreError):
    """A record field does not fit its type (e.g. a flag past 32 bits); nothing was written."""


class CommitLog:
    """Appends records and serves byte ranges by global offset."""

    def __init__(self, config: StoreConfig, allocator: SegmentAllocator | None) -> None:
        self.config = config
        self.segment_size = config.mapped_file_size_commit_log
        self.files = MappedFileQueue(config.commit_log_dir, self.segment_size, allocator)
        self.store_host = encode_host(config.store_address)
        self.store_v6 = len(self.store_host) == 20
        self.put_lock = threading.Lock()
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self.last_store_timestamp = 0
        # TOPICLENGTH + topic of each topic stored so far (so validated): the compiled put
        # path takes only these topics
        self.topic_fields: dict[str, bytes] = {}
        # What the writer knows of each record, for the dispatcher to use without parsing
        # it again: (offset, size, topic, queue id, queue offset, sysflag, store time,
        # properties, tags code). Bounded: past the cap the dispatcher parses the log.
        self.feed: deque[tuple[int, int, str, int, int, int, int, bytes, int]] = deque()

    def topic_field(self, topic: str) -> bytes:
        """TOPICLENGTH (1 byte, v1) followed by the topic's UTF-8 bytes, cached per topic."""
        field = self.topic_fields.get(topic)
        if field is None:
            raw = topic.encode()
            if len(raw) > 127:
                raise ValueError(f"topic {topic!r} is over 127 bytes; v1 records cannot hold it")
            field = self.topic_fields[topic] = bytes((len(raw),)) + raw
        return field

    # -- writing ------------------------------------------------------------------------
    def append(self, topic: str, queue_id: int, body: bytes, props: bytes, flag: int,
               sys_flag: int, born_timestamp: int, born_host: bytes, reconsume_times: int,
               prepared_offset: int, crc: int, tags_code: int | None = None,
               ) -> tuple[int, int, int, int]:
        """Append one record; returns ``(wrote_offset, wrote_bytes, queue_offset, store_ts)``.

        The caller validated sizes. A ``born_timestamp`` of 0 means "now". With a
        ``tags_code`` the record is also handed to the dispatcher through :attr:`feed`.
        Raises :class:`SegmentUnavailable` when no segment can be created.
        """
        sys_flag &= ~HOST_BITS  # the hosts written say how long they are, not the caller
        if self.store_v6:
            sys_flag |= sysflag.STOREHOST_V6
        if len(born_host) == 20:
            sys_flag |= sysflag.BORNHOST_V6
            header = HEADERS[(20, len(self.store_host))]
        else:
            header = HEADERS[(8, len(self.store_host))]
        tail = self.topic_field(topic) + _I16.pack(len(props)) + props
        body_len = len(body)
        hsize = header.size
        total = hsize + body_len + len(tail)
        gets_entry = not sys_flag & 0x4  # transaction NOT_TYPE (0) and COMMIT (8)
        key = (topic, queue_id)
        with self.put_lock:
            mf, pos = self._reserve(total)
            store_ts = int(time.time() * 1000)
            queue_offset = self.queue_offsets.get(key, 0) if gets_entry else 0
            phys = mf.file_from_offset + pos
            view = mf.view
            try:
                header.pack_into(
                    view, pos, total, MAGIC_V1, crc, queue_id, flag, queue_offset, phys, sys_flag,
                    born_timestamp or store_ts, born_host, store_ts, self.store_host,
                    reconsume_times, prepared_offset, body_len,
                )
            except struct.error as exc:
                view[pos : pos + hsize] = bytes(hsize)  # undo the fields packed before the bad one
                raise RecordFieldError(f"a record field is out of its range: {exc}") from None
            p = pos + hsize
            view[p : p + body_len] = body
            view[p + body_len : pos + total] = tail
            mf.wrote_position = pos + total
            if gets_entry:
                self.queue_offsets[key] = queue_offset + 1
            self.last_store_timestamp = store_ts
            if tags_code is not None and len(self.feed) < FEED_MAX:
                self.feed.append((phys, total, topic, queue_id, queue_offset, sys_flag, store_ts,
                                  props, tags_code))
        return phys, total, queue_offset, store_ts

    def append_batch(self, topic: str, queue_id: int, items: list[tuple[bytes, bytes, int, int]],
                     sys_flag: int, born_timestamp: int, born_host: bytes,
                     tags_codes: list[int] | None = None) -> tuple[int, int, int, int]:
        """Append records of one topic and queue contiguously, in one segment.

        ``items`` are ``(body, encoded properties, flag, body CRC)``; ``tags_codes`` (one per
        item) hands the records to the dispatcher as :meth:`append` does. Returns
        ``(first offset, the records' sizes, first queue offset, store_ts)``.
        """
        sys_flag &= ~HOST_BITS
        if self.store_v6:
            sys_flag |= sysflag.STOREHOST_V6
        born_len = len(born_host)
        if born_len == 20:
            sys_flag |= sysflag.BORNHOST_V6
        header = HEADERS[(born_len, len(self.store_host))]
        hsize = header.size
        prefix = self.topic_field(topic)
        tails = [prefix + _I16.pack(len(props)) + props for _, props, _, _ in items]
        sizes = [hsize + len(it[0]) + len(t) for it, t in zip(items, tails, strict=True)]
        total = sum(sizes)
        key = (topic, queue_id)
        gets_entry = not sys_flag & 0x4
        store_host = self.store_host
        with self.put_lock:
            mf, pos = self._reserve(total)
            store_ts = int(time.time() * 1000)
            born = born_timestamp or store_ts
            base_qoff = self.queue_offsets.get(key, 0) if gets_entry else 0
            qoff = base_qoff
            start = mf.file_from_offset + pos
            view = mf.view
            base = mf.file_from_offset
            first = pos
            for (body, _, flag, crc), tail, size in zip(items, tails, sizes, strict=True):
                try:
                    header.pack_into(
                        view, pos, size, MAGIC_V1, crc, queue_id, flag, qoff, base + pos,
                        sys_flag, born, born_host, store_ts, store_host, 0, 0, len(body),
                    )
                except struct.error as exc:
                    view[first : pos + hsize] = bytes(pos + hsize - first)  # nothing was appended
                    raise RecordFieldError(f"a record field is out of its range: {exc}") from None
                p = pos + hsize
                view[p : p + len(body)] = body
                view[p + len(body) : pos + size] = tail
                pos += size
                if gets_entry:
                    qoff += 1
            mf.wrote_position = pos
            if gets_entry:
                self.queue_offsets[key] = qoff
            self.last_store_timestamp = store_ts
            feed = self.feed
            if tags_codes is not None and len(feed) + len(items) <= FEED_MAX:
                phys = start
                qoff = base_qoff
                for (_, props, _, _), size, code in zip(items, sizes, tags_codes, strict=True):
                    feed.append((phys, size, topic, queue_id, qoff, sys_flag, store_ts, props,
                                 code))
                    phys += size
                    if gets_entry:
                        qoff += 1
        return start, sizes, base_qoff, store_ts

    def _reserve(self, total: int) -> tuple[MappedFile, int]:
        """Segment and position for ``total`` bytes, rolling to a new segment when needed."""
        files = self.files
        mf = files.files[-1] if files.files else None
        try:
            if mf is None:
                mf = files.new_file(0)
            elif mf.wrote_position >= mf.file_size:
                mf = files.new_file(mf.file_from_offset + self.segment_size)
            pos = mf.wrote_position
            free = mf.file_size - pos
            if total + MIN_FREE_AFTER_RECORD > free:
                write_blank(mf.view, pos, free)
                mf.wrote_position = mf.file_size
                mf = files.new_file(mf.file_from_offset + self.segment_size)
                pos = 0
        except OSError as exc:
            raise SegmentUnavailable(
                f"cannot create a CommitLog segment in {files.directory}: {exc.strerror or exc}; "
                "free disk space or point storePathCommitLog at a larger disk"
            ) from exc
        return mf, pos

    def max_record_size(self) -> int:
        return self.segment_size - MIN_FREE_AFTER_RECORD

    # -- reading ------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.files.flushed_where

    def read(self, offset: int, size: int) -> memoryview | None:
        """A view of ``size`` bytes at global ``offset``, or None when not (or no longer) there."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            return None
        return mf.view[pos : pos + size]

    def readable_from(self, offset: int, limit: int) -> tuple[memoryview, int] | None:
        """Bytes of the segment holding ``offset`` from there up to ``limit`` or its written end."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        end = min(mf.wrote_position, limit - mf.file_from_offset)
        if pos >= end:
            return None
        return mf.view[:end], pos

    def roll_next_file(self, offset: int) -> int:
        return offset + self.segment_size - offset % self.segment_size

    def record_size_for(self, body_len: int, topic_len: int, props_len: int,
                        born_len: int = 8) -> int:
        return record_size(body_len, topic_len, props_len, born_len, len(self.store_host))

    def close(self) -> None:
        self.files.close()

