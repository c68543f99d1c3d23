"""The CommitLog: one append-only stream of records over fixed-size mapped segments.

A single writer appends under ``put_lock`` (uncontended on the broker's loop thread). A
record is placed only if 8 bytes stay free after it; otherwise the segment is closed with
a BLANK header and the record goes to the next segment.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from bolide.common import sysflag
from bolide.common.hosts import encode_host
from bolide.errors import StoreError
from bolide.store.config import StoreConfig
from bolide.store.mapped_file import MappedFile
from bolide.store.mapped_file_queue import MappedFileQueue, SegmentAllocator
from bolide.store.record import HEADERS, MAGIC_V1, MIN_FREE_AFTER_RECORD, record_size, write_blank
from bolide.store.results import PutStatus


class SegmentUnavailable(StoreError):
    """No segment could be created for the next record (usually a full disk)."""


@dataclass(slots=True)
class Entry:
    """One message to append, already encoded where it can be."""

    topic: bytes
    queue_id: int
    body: bytes
    properties: bytes
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = b""
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0


@dataclass(slots=True)
class AppendResult:
    status: PutStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    queue_offset: int = -1
    store_timestamp: int = 0
    offsets: list[int] | None = None  # per message of a batch
    remark: str = ""


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

    # -- writing ------------------------------------------------------------------------
    def append(self, e: Entry) -> AppendResult:
        """Append one record; the caller validated sizes and encoded the properties."""
        sys_flag = e.sys_flag | (sysflag.STOREHOST_V6 if self.store_v6 else 0)
        born_len = len(e.born_host)
        if born_len == 20:
            sys_flag |= sysflag.BORNHOST_V6
        body_len = len(e.body)
        topic_len = len(e.topic)
        header = HEADERS[(born_len, len(self.store_host))]
        hsize = header.size
        total = hsize + body_len + 1 + topic_len + 2 + len(e.properties)
        gets_entry = sysflag.gets_queue_entry(sys_flag)
        key = (e.topic.decode(), e.queue_id)
        with self.put_lock:
            try:
                mf, pos = self._reserve(total)
            except SegmentUnavailable as exc:
                return AppendResult(PutStatus.CREATE_MAPEDFILE_FAILED, remark=str(exc))
            store_ts = int(time.time() * 1000)
            queue_offset = self.queue_offsets.get(key, 0) if gets_entry else 0
            phys = mf.file_from_offset + pos
            view = mf.view
            header.pack_into(
                view, pos, total, MAGIC_V1, e.body_crc, e.queue_id, e.flag, queue_offset, phys,
                sys_flag, e.born_timestamp, e.born_host, store_ts, self.store_host,
                e.reconsume_times, e.prepared_transaction_offset, body_len,
            )
            p = pos + hsize
            view[p : p + body_len] = e.body
            p += body_len
            view[p] = topic_len
            view[p + 1 : p + 1 + topic_len] = e.topic
            p += 1 + topic_len
            props = e.properties
            view[p] = len(props) >> 8
            view[p + 1] = len(props) & 0xFF
            view[p + 2 : p + 2 + len(props)] = props
            mf.wrote_position = pos + total
            if gets_entry:
                self.queue_offsets[key] = queue_offset + 1
            self.last_store_timestamp = store_ts
        return AppendResult(PutStatus.PUT_OK, phys, total, queue_offset, store_ts)

    def append_batch(self, entries: list[Entry]) -> AppendResult:
        """Append records of one topic and queue contiguously, in one segment."""
        first = entries[0]
        sys_flag = first.sys_flag | (sysflag.STOREHOST_V6 if self.store_v6 else 0)
        born_len = len(first.born_host)
        if born_len == 20:
            sys_flag |= sysflag.BORNHOST_V6
        header = HEADERS[(born_len, len(self.store_host))]
        hsize = header.size
        topic = first.topic
        topic_len = len(topic)
        sizes = [hsize + len(e.body) + 1 + topic_len + 2 + len(e.properties) for e in entries]
        total = sum(sizes)
        key = (topic.decode(), first.queue_id)
        gets_entry = sysflag.gets_queue_entry(sys_flag)
        store_host = self.store_host
        with self.put_lock:
            try:
                mf, pos = self._reserve(total)
            except SegmentUnavailable as exc:
                return AppendResult(PutStatus.CREATE_MAPEDFILE_FAILED, remark=str(exc))
            store_ts = int(time.time() * 1000)
            base_qoff = self.queue_offsets.get(key, 0) if gets_entry else 0
            qoff = base_qoff
            start_pos = pos
            view = mf.view
            base = mf.file_from_offset
            offsets = []
            for e, size in zip(entries, sizes, strict=True):
                offsets.append(base + pos)
                body = e.body
                header.pack_into(
                    view, pos, size, MAGIC_V1, e.body_crc, e.queue_id, e.flag, qoff, base + pos,
                    sys_flag, e.born_timestamp, e.born_host, store_ts, store_host,
                    e.reconsume_times, 0, len(body),
                )
                p = pos + hsize
                view[p : p + len(body)] = body
                p += len(body)
                view[p] = topic_len
                view[p + 1 : p + 1 + topic_len] = topic
                p += 1 + topic_len
                props = e.properties
                view[p] = len(props) >> 8
                view[p + 1] = len(props) & 0xFF
                view[p + 2 : p + 2 + len(props)] = props
                pos += size
                if gets_entry:
                    qoff += 1
            mf.wrote_position = pos
            if gets_entry:
                self.queue_offsets[key] = qoff
            self.last_store_timestamp = store_ts
        return AppendResult(PutStatus.PUT_OK, base + start_pos, total, base_qoff, store_ts, offsets)

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

