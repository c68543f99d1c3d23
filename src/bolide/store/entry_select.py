"""The entry loop of :meth:`MessageStore.get_message`: which ConsumeQueue entries of a get are
read, within one CommitLog segment at a time.

:func:`select_entries` walks entries ``i .. n-1`` whose records lie in the segment the caller
holds, skipping pre-blank entries, filtering by tag code and by exact tag, applying the
transfer limits, and appends a slice of the segment per accepted record. It stops at the first
entry it cannot decide (its record lies outside the segment, or its tag is not ASCII, or the
record's fields do not fit it, or the entry is damaged: a size or offset below zero): the
caller takes that entry through its general step, which looks the segment up (or skips a
damaged entry), and calls again. The compiled twin (``bolide.store._fastscan``) gives
the same results; this module's pure-Python one is the fallback (``BOLIDE_PURE_PYTHON=1``).
"""

from __future__ import annotations

import struct
from typing import Any

from bolide.common import sysflag
from bolide.common.records import MAGIC_V1
from bolide.store.consume_queue import ENTRY, EXT_ADDRESS_MAX
from bolide.store.fastscan import compiled_module
from bolide.store.record import property_bytes

PRE_BLANK_SIZE = 0x7FFFFFFF
DONE, LIMIT_REACHED, DEFERRED = 0, 1, 2  # why select_entries stopped
MAX_CODES = 16  # the compiled loop compares at most this many tag codes
ENABLED = True  # False: get_message takes every entry through its general step (tests compare)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TAGS = b"TAGS\x01"

# (cl_max, memory_limit, mem_count, mem_bytes, disk_count, disk_bytes)
Limits = tuple[int, int, int, int, int, int]
# (first queue offset of the get, entries scanned, bytes accepted, highest CommitLog offset seen)
State = tuple[int, int, int, int]


def record_tags(rec: memoryview | bytes) -> bytes | None:
    """The raw TAGS value of the record ``rec``; None when it has none. Raises
    struct.error or IndexError when the record's fields do not fit ``rec``."""
    size = len(rec)
    sys_flag = _I32.unpack_from(rec, 36)[0]
    p = 48 + (20 if sys_flag & sysflag.BORNHOST_V6 else 8) + 8
    p += (20 if sys_flag & sysflag.STOREHOST_V6 else 8) + 12
    body_len = _I32.unpack_from(rec, p)[0]
    if body_len < 0:
        raise IndexError("negative body length")
    p += 4 + body_len
    if _I32.unpack_from(rec, 4)[0] == MAGIC_V1:
        p += 1 + rec[p]
    else:
        p += 2 + _I16.unpack_from(rec, p)[0]
    if p < 0:
        raise IndexError("negative topic length")
    props_len = _I16.unpack_from(rec, p)[0]
    if props_len <= 0:
        return None
    if p + 2 + props_len > size:
        raise IndexError("properties past the record")
    return property_bytes(bytes(rec[p + 2 : p + 2 + props_len]), _TAGS)


def select_entries_python(entries: memoryview | bytes, i: int, n: int, seg: memoryview,
                          seg_start: int, seg_end: int, codes: tuple[int, ...] | None,
                          tags: tuple[bytes, ...] | None, limits: Limits,
                          buffers: list[memoryview] | bytearray, qoffsets: list[int], state: State,
                          ) -> tuple[int, int, int, int, int]:
    """The pure-Python loop (see :func:`select_entries`)."""
    offset, scanned, total_bytes, max_phy = state
    cl_max, memory_limit, mem_count, mem_bytes, disk_count, disk_bytes = limits
    code_set = set(codes) if codes is not None else None
    tag_set = set(tags) if tags is not None else None
    n = min(n, len(entries) // ENTRY.size)
    stop = DONE
    first_scanned = scanned  # every entry taken counts once in scanned
    for phys, size, code in ENTRY.iter_unpack(entries[i * ENTRY.size : n * ENTRY.size]):
        if size == PRE_BLANK_SIZE:
            scanned += 1
            continue
        if size <= 0 or phys < 0:  # a damaged entry: the caller's general step skips it
            stop = DEFERRED
            break
        if code <= EXT_ADDRESS_MAX and code_set is not None:  # a ConsumeQueueExt address
            if tag_set is None:  # only the record's tag can say
                stop = DEFERRED
                break
            wanted = True  # the exact tag below decides
        else:
            wanted = code_set is None or code in code_set
        if wanted:
            if phys < seg_start or phys + size > seg_end:  # (seg_end is within seg)
                stop = DEFERRED
                break
            if tag_set is not None:
                start = phys - seg_start
                try:
                    value = record_tags(seg[start : start + size])
                except (struct.error, IndexError):
                    stop = DEFERRED
                    break
                if value is not None and not value.isascii():
                    stop = DEFERRED
                    break
                wanted = value in tag_set
        max_phy = phys
        if qoffsets:
            if cl_max - phys > memory_limit:
                if total_bytes + size > disk_bytes or len(qoffsets) >= disk_count:
                    stop = LIMIT_REACHED
                    break
            elif total_bytes + size > mem_bytes or len(qoffsets) >= mem_count:
                stop = LIMIT_REACHED
                break
        scanned += 1
        if wanted:
            if type(buffers) is bytearray:
                buffers += seg[phys - seg_start : phys - seg_start + size]
            else:
                buffers.append(seg[phys - seg_start : phys - seg_start + size])
            qoffsets.append(offset + scanned - 1)
            total_bytes += size
    i += scanned - first_scanned
    return i, scanned, total_bytes, max_phy, stop


_compiled: Any = getattr(compiled_module(), "select_entries", None)
COMPILED = _compiled is not None


def select_entries(entries: memoryview | bytes, i: int, n: int, seg: memoryview, seg_start: int,
                   seg_end: int, codes: tuple[int, ...] | None, tags: tuple[bytes, ...] | None,
                   limits: Limits, buffers: list[memoryview] | bytearray, qoffsets: list[int],
                   state: State) -> tuple[int, int, int, int, int]:
    """Select from ConsumeQueue entries ``i .. n-1`` (``entries``: 20 bytes each) the records
    to return, in the CommitLog segment ``seg`` that holds the global offsets ``seg_start`` up
    to ``seg_end``. ``codes``: accepted tag codes (at most :data:`MAX_CODES`) or None for all;
    ``tags``: accepted tags, UTF-8, or None. Appends to ``qoffsets`` and to ``buffers``: a slice
    of ``seg`` per record, or when ``buffers`` is a bytearray the record's bytes; returns
    ``(i, scanned, total_bytes, max_phy, stop)`` with ``stop`` one of DONE, LIMIT_REACHED or
    DEFERRED (entry ``i`` needs the caller's general step)."""
    if _compiled is not None:
        return _compiled(entries, i, n, seg, seg_start, seg_end, codes, tags, limits,  # type: ignore[no-any-return]
                         buffers, qoffsets, state)
    return select_entries_python(entries, i, n, seg, seg_start, seg_end, codes, tags, limits,
                                 buffers, qoffsets, state)
