"""Bulk scan of CommitLog records for recovery, dispatch and verify: records of the common
kind (v1, IPv4 hosts, a ConsumeQueue entry, ASCII tags) are read in one call and returned as
runs of ready-made ConsumeQueue entries, one run per stretch of consecutive records of one
queue. The first record of another kind (or damaged, or a BLANK) ends the scan: the caller
parses it with :func:`bolide.store.record.parse_record`, which says what it is.

A compiled twin (``bolide.store._fastscan``, built by ``pip install`` when a C compiler is
there) gives the same results; ``BOLIDE_PURE_PYTHON=1`` keeps the pure-Python one, which is
the tested fallback.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, NamedTuple

from bolide.common.hashing import java_string_hash
from bolide.store.compiled import load
from bolide.store.consume_queue import ENTRY
from bolide.store.record import MAGIC_V1, property_bytes

_V1_IPV4 = struct.Struct(">iiiiiqqiq8xq8xiqi")  # fields up to BODYLENGTH, IPv4 hosts
_SCHEDULE = b"SCHEDULE_TOPIC_XXXX"
_TAGS = b"TAGS\x01"


class Run(NamedTuple):
    """Consecutive records of one queue with consecutive queue offsets."""

    topic: str
    queue_id: int
    first_queue_offset: int
    entries: bytes  # ConsumeQueue entries, 20 bytes each (offset, size, tags code)
    first_phys: int  # CommitLog offset of the first record
    end_phys: int  # where the last record ends
    last_store_timestamp: int


def _tags_code(props: bytes) -> int | None:
    """The tags code of a properties blob; None when the tags are not ASCII."""
    tags = property_bytes(props, _TAGS)
    if not tags:
        return 0
    if not tags.isascii():
        return None
    return java_string_hash(tags.decode("ascii"))


def scan_runs_python(buf: memoryview | bytes, pos: int, base: int, check_crc: bool,
                     max_records: int, topics: dict[bytes, str]) -> tuple[int, int, list[Run]]:
    """The pure-Python scan (see :func:`scan_runs`)."""
    limit = len(buf)
    runs: list[Run] = []
    records = 0
    entries: list[bytes] = []
    run_key: tuple[bytes, int] | None = None
    topic = ""
    first_qoff = first_phys = next_qoff = end_phys = last_ts = 0

    def close() -> None:
        if entries:
            runs.append(Run(topic, run_key[1] if run_key else 0, first_qoff, b"".join(entries),
                            first_phys, end_phys, last_ts))
            entries.clear()

    while records < max_records and pos >= 0 and pos + 8 <= limit:
        total, magic = struct.unpack_from(">ii", buf, pos)
        if magic != MAGIC_V1 or total < 91 or pos + total > limit:
            break
        (_, _, crc, queue_id, _flag, qoff, phys, sys_flag, _born, store_ts, _reconsume,
         _prepared, body_len) = _V1_IPV4.unpack_from(buf, pos)
        if sys_flag & 0x34 or body_len < 0 or body_len > total - 91:
            break
        p = pos + 88 + body_len
        topic_len = buf[p]
        if topic_len > 127 or 91 + body_len + topic_len > total:
            break
        props_len = (buf[p + 1 + topic_len] << 8) | buf[p + 2 + topic_len]
        if 91 + body_len + topic_len + props_len != total:
            break
        if (topic_len and buf[p + 1] == 0) or (props_len and buf[pos + total - 1] == 0):
            break
        if phys != base + pos:
            break
        raw_topic = bytes(buf[p + 1 : p + 1 + topic_len])
        if raw_topic == _SCHEDULE:
            break
        code = _tags_code(bytes(buf[p + 3 + topic_len : pos + total]))
        if code is None:
            break
        if check_crc and body_len and zlib.crc32(buf[pos + 88 : p]) & 0x7FFFFFFF != crc:
            break
        key = (raw_topic, queue_id)
        if not (entries and key == run_key and qoff == next_qoff):
            close()
            run_key = key
            topic = topics.get(raw_topic) or topics.setdefault(
                raw_topic, raw_topic.decode("utf-8", "replace"))
            first_qoff, first_phys = qoff, phys
        entries.append(ENTRY.pack(phys, total, code))
        next_qoff, end_phys, last_ts = qoff + 1, phys + total, store_ts
        pos += total
        records += 1
    close()
    return pos, records, runs


_fastscan = load("_fastscan")

COMPILED = _fastscan is not None


def compiled_module() -> Any:
    """``bolide.store._fastscan`` (its other compiled loops too), or None on the pure path."""
    return _fastscan
_TOPICS: dict[bytes, str] = {}


def scan_runs(buf: memoryview | bytes, pos: int, base: int, check_crc: bool,
              max_records: int = 65536) -> tuple[int, int, list[Run]]:
    """Scan records of the common kind from ``pos`` in ``buf`` (a segment mapped at global
    offset ``base``); returns ``(pos_after, records, runs)``. ``pos_after`` is where the
    first record that is not of that kind starts (or the end, or after ``max_records``).
    With ``check_crc`` a record whose body CRC does not match ends the scan too."""
    if len(_TOPICS) > 65536:
        _TOPICS.clear()
    if _fastscan is not None:
        return _fastscan.scan_runs(buf, pos, base, check_crc, max_records, Run, _TOPICS)  # type: ignore[no-any-return]
    return scan_runs_python(buf, pos, base, check_crc, max_records, _TOPICS)
