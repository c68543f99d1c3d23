"""CommitLog record codec: write v1 records, read v1 and v2, and the parser used by recovery
and dispatch (RocketMQ's ``checkMessageAndReturnSize``). Layout: docs/storage-format.md.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from bolide.common import sysflag
from bolide.common.hashing import tags_code as _tags_code
from bolide.common.records import MAGIC_V1, MAGIC_V2
from bolide.common.records import decode_record as decode_record  # the store's reader too

BLANK_MAGIC = -875286124  # 0xCBD43194
BLANK_SIZE = 8
MIN_FREE_AFTER_RECORD = 8

# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
_PREFIX = struct.Struct(">iiiiiqqiq")  # 48 bytes, up to the born host
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_BLANK = struct.Struct(">ii")
PREFIX_SIZE = _PREFIX.size


def _header(born_len: int, store_len: int) -> struct.Struct:
    # prefix, BORNHOST, STORETIMESTAMP, STOREHOST, RECONSUMETIMES, PREPAREDTXOFFSET, BODYLENGTH
    return struct.Struct(f">iiiiiqqiq{born_len}sq{store_len}siqi")


HEADERS = {(b, s): _header(b, s) for b in (8, 20) for s in (8, 20)}
# From offset 48, by SYSFLAG host bits: STORETIMESTAMP, RECONSUMETIMES, PREPARED..., BODYLENGTH
_MIDDLE = {
    bits: struct.Struct(f">{20 if bits & 0x10 else 8}xq{20 if bits & 0x20 else 8}xiqi")
    for bits in (0, 0x10, 0x20, 0x30)
}
_TOPICS: dict[bytes, str] = {}
# BODYCRC, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP,
# PREPAREDTRANSACTIONOFFSET, BODYLENGTH of a record with IPv4 hosts.
_V1_IPV4 = struct.Struct(">8xii4xqqi8x8xq8x4xqi")
HEADER_V4 = HEADERS[(8, 8)]  # 88 bytes


def body_crc(body: bytes | memoryview) -> int:
    """BODYCRC: CRC-32 of the stored body, masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_size(body_len: int, topic_len: int, props_len: int,
                born_len: int = 8, store_len: int = 8, topic_field: int = 1) -> int:
    """TOTALSIZE of a record (91 + body + topic + properties for IPv4 hosts and v1)."""
    return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_len + 8 + store_len + 4 + 8 + 4 \
        + body_len + topic_field + topic_len + 2 + props_len


def encode_record(
    topic: str | bytes, queue_id: int, body: bytes, properties: bytes, *,
    born_timestamp: int, born_host: bytes, store_timestamp: int, store_host: bytes,
    flag: int = 0, queue_offset: int = 0, physical_offset: int = 0, sys_flag: int = 0,
    reconsume_times: int = 0, prepared_transaction_offset: int = 0,
    body_crc_value: int | None = None, magic: int = MAGIC_V1,
) -> bytes:
    """One complete record as bytes, laid out exactly as ``CommitLog.append`` writes it.

    Hosts are encoded addresses (8 bytes IPv4, 20 IPv6); the two IPv6 bits of ``sys_flag``
    are set from their lengths. ``magic`` selects v1 (1-byte topic length) or v2 (2 bytes).
    BODYCRC is computed from ``body`` unless ``body_crc_value`` is given.
    """
    topic_bytes = topic.encode() if isinstance(topic, str) else topic
    header = HEADERS.get((len(born_host), len(store_host)))
    if header is None:
        raise ValueError(
            f"hosts must be 8 (IPv4) or 20 (IPv6) bytes; got {len(born_host)} and {len(store_host)}"
        )
    if magic == MAGIC_V1:
        if len(topic_bytes) > 127:
            raise ValueError(f"a v1 record holds topics of at most 127 bytes, not {len(topic_bytes)}; "
                             "use MAGIC_V2")
        topic_field = bytes([len(topic_bytes)])
    elif magic == MAGIC_V2:
        topic_field = _I16.pack(len(topic_bytes))
    else:
        raise ValueError(f"magic 0x{magic & 0xFFFFFFFF:08X} is neither MAGIC_V1 nor MAGIC_V2")
    if len(properties) > 32767:
        raise ValueError(f"properties take {len(properties)} bytes; at most 32767 fit")
    sys_flag &= ~(sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6)
    if len(born_host) == 20:
        sys_flag |= sysflag.BORNHOST_V6
    if len(store_host) == 20:
        sys_flag |= sysflag.STOREHOST_V6
    crc = body_crc(body) if body_crc_value is None else body_crc_value
    total = header.size + len(body) + len(topic_field) + len(topic_bytes) + 2 + len(properties)
    head = header.pack(
        total, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
        born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
        prepared_transaction_offset, len(body),
    )
    return b"".join((head, body, topic_field, topic_bytes, _I16.pack(len(properties)), properties))


def write_blank(buf: memoryview | bytearray, pos: int, size: int) -> None:
    """Write the 8-byte end-of-segment header at ``pos`` covering ``size`` bytes."""
    _BLANK.pack_into(buf, pos, size, BLANK_MAGIC)


class RecordInfo(NamedTuple):
    """What recovery and dispatch need from one record (RocketMQ's DispatchRequest)."""

    size: int
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    store_timestamp: int
    properties: bytes
    prepared_transaction_offset: int


class RecordError(NamedTuple):
    """A record that failed to parse: ``size`` > 0 when its length is known but wrong."""

    size: int
    reason: str


BLANK = RecordInfo(0, "", 0, 0, 0, 0, 0, b"", 0)
# Zero bytes where the topic starts or the properties end (always 0x02) are a write cut short:
# the body CRC does not cover those fields.
_TORN = "zero bytes in the topic or properties: a write cut short"


def parse_record(buf: memoryview | bytes, pos: int, check_crc: bool) -> RecordInfo | RecordError:
    """Parse the record at ``pos``: :data:`BLANK` at a segment's end, else info or an error.

    ``buf`` must end where the readable data ends.
    """
    limit = len(buf)
    if pos + 8 > limit:
        return RecordError(-1, "fewer than 8 bytes left for a record header")
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return BLANK
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        if total == 0 and magic == 0:
            return RecordError(-1, "end of data (zero bytes)")
        return RecordError(-1, f"bad magic code 0x{magic & 0xFFFFFFFF:08X}")
    if total < 91:
        return RecordError(-1, f"TOTALSIZE {total} is below the 91 bytes every record needs")
    if pos + total > limit:
        return RecordError(-1, f"TOTALSIZE {total} runs past the end of the data")
    if magic == MAGIC_V1:  # fast path: v1 with IPv4 hosts, the common case
        crc, queue_id, queue_offset, phys, sys_flag, store_ts, prepared, body_len = (
            _V1_IPV4.unpack_from(buf, pos)
        )
        if not sys_flag & 0x30 and 0 <= body_len <= total - 91:
            p = pos + 88 + body_len
            topic_len = buf[p]
            if topic_len <= 127 and 91 + body_len + topic_len <= total:
                props_len = (buf[p + 1 + topic_len] << 8) | buf[p + 2 + topic_len]
                if 91 + body_len + topic_len + props_len == total:
                    if (topic_len and buf[p + 1] == 0) or (props_len and buf[pos + total - 1] == 0):
                        return RecordError(-1, _TORN)
                    if check_crc and body_len and (
                        zlib.crc32(buf[pos + 88 : p]) & 0x7FFFFFFF != crc
                    ):
                        return RecordError(-1, "body CRC mismatch")
                    raw_topic = bytes(buf[p + 1 : p + 1 + topic_len])
                    topic = _TOPICS.get(raw_topic)
                    if topic is None:
                        topic = _topic_text(raw_topic)
                    return RecordInfo(total, topic, queue_id, queue_offset, phys, sys_flag,
                                      store_ts, bytes(buf[p + 3 + topic_len : pos + total]),
                                      prepared)
    (_, _, crc, queue_id, _flag, queue_offset, phys, sys_flag, _born_ts) = _PREFIX.unpack_from(
        buf, pos
    )
    hosts = sys_flag & 0x30
    born_len = 20 if hosts & sysflag.BORNHOST_V6 else 8
    store_len = 20 if hosts & sysflag.STOREHOST_V6 else 8
    p = pos + 48 + born_len + 8 + store_len + 16
    topic_field = 1 if magic == MAGIC_V1 else 2
    if p + topic_field + 2 > pos + total:
        return RecordError(-1, f"TOTALSIZE {total} is too small for the fixed fields "
                           f"(SYSFLAG 0x{sys_flag & 0xFFFFFFFF:X})")
    store_ts, _reconsume, prepared, body_len = _MIDDLE[hosts].unpack_from(buf, pos + 48)
    if body_len < 0 or p + body_len + topic_field + 2 > pos + total:
        return RecordError(-1, f"BODYLENGTH {body_len} does not fit in the record")
    if check_crc and body_len > 0 and zlib.crc32(buf[p : p + body_len]) & 0x7FFFFFFF != crc:
        return RecordError(-1, "body CRC mismatch")
    p += body_len
    if magic == MAGIC_V1:
        topic_len = buf[p]
        if topic_len > 127:
            topic_len -= 256
        p += 1
    else:
        topic_len = _I16.unpack_from(buf, p)[0]
        p += 2
    if topic_len < 0 or p + topic_len + 2 > pos + total:
        return RecordError(-1, f"TOPICLENGTH {topic_len} does not fit in the record")
    raw_topic = bytes(buf[p : p + topic_len])
    topic = _TOPICS.get(raw_topic)
    if topic is None:
        topic = _topic_text(raw_topic)
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len > pos + total:
        return RecordError(-1, f"PROPERTIESLENGTH {props_len} does not fit in the record")
    props = bytes(buf[p : p + props_len])
    expected = record_size(body_len, topic_len, props_len, born_len, store_len, topic_field)
    if expected != total:
        return RecordError(total, f"TOTALSIZE {total} differs from the fields' sum {expected}")
    if (raw_topic and raw_topic[0] == 0) or (props and props[-1] == 0):
        return RecordError(-1, _TORN)
    return RecordInfo(total, topic, queue_id, queue_offset, phys, sys_flag, store_ts, props,
                      prepared)


def _topic_text(raw: bytes) -> str:
    topic = raw.decode("utf-8", "replace")
    if len(_TOPICS) < 65536:
        _TOPICS[raw] = topic
    return topic


def compute_tags_code(info: RecordInfo, delay_millis: dict[int, int]) -> int:
    """ConsumeQueue tags code: hash of TAGS, or the delivery time for SCHEDULE_TOPIC_XXXX."""
    props = info.properties
    if not props:
        return 0
    if info.topic == "SCHEDULE_TOPIC_XXXX":
        level_text = _property(props, b"DELAY\x01")
        if level_text and level_text.isdecimal() and int(level_text) > 0:
            level = min(int(level_text), max(delay_millis, default=1))
            return info.store_timestamp + delay_millis.get(level, 1000)
    return _tags_code(_property(props, b"TAGS\x01"))


def property_bytes(props: bytes, needle: bytes) -> bytes | None:
    """The raw value of one property in an encoded blob; ``needle`` is ``b"KEY\\x01"``."""
    i = props.find(needle)
    while i > 0 and props[i - 1] != 2:
        i = props.find(needle, i + 1)
    if i < 0:
        return None
    start = i + len(needle)
    end = props.find(b"\x02", start)
    return props[start : end if end >= 0 else len(props)]


def _property(props: bytes, needle: bytes) -> str | None:
    value = property_bytes(props, needle)
    return value.decode("utf-8", "replace") if value is not None else None


def record_properties_blob(buf: memoryview | bytes) -> bytes:
    """The encoded properties of the record at the start of ``buf``."""
    sys_flag = _I32.unpack_from(buf, 36)[0]
    p = 48 + (20 if sys_flag & sysflag.BORNHOST_V6 else 8) + 8
    p += (20 if sys_flag & sysflag.STOREHOST_V6 else 8) + 12
    p += 4 + _I32.unpack_from(buf, p)[0]
    if _I32.unpack_from(buf, 4)[0] == MAGIC_V1:
        p += 1 + buf[p]
    else:
        p += 2 + _I16.unpack_from(buf, p)[0]
    props_len = _I16.unpack_from(buf, p)[0]
    return bytes(buf[p + 2 : p + 2 + props_len]) if props_len > 0 else b""


def record_property(buf: memoryview | bytes, needle: bytes) -> str | None:
    """One property of the record at the start of ``buf``; ``needle`` is ``b"KEY\\x01"``."""
    props = record_properties_blob(buf)
    return _property(props, needle) if props else None


def read_store_timestamp(buf: memoryview | bytes, pos: int) -> int:
    """STORETIMESTAMP of the record at ``pos`` (at 48 + born host length)."""
    sys_flag = _I32.unpack_from(buf, pos + 36)[0]
    return _I64.unpack_from(buf, pos + (68 if sys_flag & sysflag.BORNHOST_V6 else 56))[0]


def reconsume_times_at(buf: memoryview | bytes | bytearray, pos: int = 0) -> int:
    """Where RECONSUMETIMES of the record at ``pos`` is (after the store host)."""
    sys_flag = _I32.unpack_from(buf, pos + 36)[0]
    hosts = (20 if sys_flag & sysflag.BORNHOST_V6 else 8) + (20 if sys_flag & sysflag.STOREHOST_V6 else 8)
    return pos + 56 + hosts


def read_total_size(buf: memoryview | bytes, pos: int) -> int:
    return _I32.unpack_from(buf, pos)[0]


# TOTALSIZE and PHYSICALOFFSET (the record's CommitLog offset, after MAGIC BODYCRC QUEUEID FLAG
# QUEUEOFFSET) in one unpack
SIZE_AND_PHYSICAL_OFFSET = struct.Struct(">i24xq")
