"""A slave's CommitLog writes: raw bytes copied from the master at the master's offsets.

The master streams its CommitLog as byte ranges that may end inside a record (HA frames are
cut at 32 KiB). :func:`whole_records` finds how far received bytes hold whole records (BLANK
tails included); :func:`write_raw` places those. The slave keeps the rest in memory until
the record is complete, so its files never hold a torn record that recovery could take for
a whole one (a record whose properties are missing still parses).
"""

from __future__ import annotations

import struct

from bolide.errors import StoreError
from bolide.store.commitlog import CommitLog, SegmentUnavailable
from bolide.store.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2, read_store_timestamp

_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGIC


class ReplicaGapError(StoreError):
    """Raw bytes that do not start where the slave's CommitLog ends; nothing was written."""


def write_raw(commit_log: CommitLog, offset: int, data: bytes | memoryview) -> int:
    """Copy ``data`` into the CommitLog at global ``offset``; returns the new max offset.

    ``offset`` must be the current max offset, or, for an empty CommitLog, the start of a
    segment. Segments are created as the bytes cross their boundaries.
    """
    files = commit_log.files
    size = commit_log.segment_size
    src = memoryview(data).cast("B")
    with commit_log.put_lock:
        end = files.max_offset
        if files.files:
            if offset != end:
                raise ReplicaGapError(
                    f"raw bytes start at {offset} but this CommitLog ends at {end}; the master "
                    f"must send from {end} (the slave reports its max offset on connecting)")
        elif offset % size:
            raise ReplicaGapError(
                f"an empty CommitLog can only start at a segment boundary, not at {offset} "
                f"(segment size {size}); check that master and slave use the same "
                "mappedFileSizeCommitLog")
        try:
            while len(src):
                mf = files.last_file()
                if mf is None:
                    mf = files.new_file(offset)
                elif mf.is_full:
                    mf = files.new_file(mf.file_from_offset + size)
                pos = mf.wrote_position
                n = min(len(src), mf.file_size - pos)
                mf.view[pos : pos + n] = src[:n]
                mf.wrote_position = pos + n
                src = src[n:]
        except OSError as exc:
            raise SegmentUnavailable(
                f"cannot create a CommitLog segment in {files.directory}: "
                f"{exc.strerror or exc}; free disk space on the slave") from exc
        return files.max_offset


def whole_records(buf: bytes | bytearray | memoryview, offset: int,
                  segment_size: int) -> tuple[int, int]:
    """How many leading bytes of ``buf`` (which starts at global ``offset``, a record
    boundary) are whole records, a BLANK with the rest of its segment counting as one; and
    the store time of the last record among them (0 when none): ``(length, store_ts)``.

    Raises :class:`ReplicaGapError` at bytes that cannot start a record: the slave would
    otherwise wait forever for the rest of it.
    """
    pos = 0
    last_ts = 0
    size = len(buf)
    while size - pos >= 8:
        total, magic = _HEAD.unpack_from(buf, pos)
        at = offset + pos
        if magic == BLANK_MAGIC:
            rest = segment_size - at % segment_size
            if size - pos < rest:
                break
            pos += rest
            continue
        if (magic != MAGIC_V1 and magic != MAGIC_V2) or not 91 <= total <= segment_size:
            raise ReplicaGapError(
                f"the bytes at CommitLog offset {at} are not a record (TOTALSIZE {total}, "
                f"magic 0x{magic & 0xFFFFFFFF:08X}); run `bolide store verify` on the master")
        if size - pos < total:
            break
        last_ts = read_store_timestamp(buf, pos)
        pos += total
    return pos, last_ts
