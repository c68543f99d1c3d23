"""Reading stored message records: one decoder for the store, the broker and clients.

A record is a CommitLog record (docs/storage-format.md): V1 magic 0xDAA320A7 with a 1-byte
topic length, or V2 0xDAA320AB with a 2-byte one; hosts are IPv4 unless SYSFLAG bits 0x10
(born host) / 0x20 (store host) say IPv6. PULL_MESSAGE, QUERY_MESSAGE and VIEW_MESSAGE_BY_ID
bodies are such records back to back. The store's writer and recovery parser are in
``bolide.store.record``.
"""

from __future__ import annotations

import struct

from bolide.common import sysflag
from bolide.common.hosts import decode_host
from bolide.common.message import MessageExt
from bolide.common.properties import decode_properties
from bolide.errors import BolideError

MAGIC_V1 = -626843481  # 0xDAA320A7
MAGIC_V2 = -626843477  # 0xDAA320AB

# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
_HEAD = struct.Struct(">iiiiiqqiq")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# after the store host: RECONSUMETIMES PREPAREDTRANSACTIONOFFSET BODYLENGTH
_TAIL = struct.Struct(">iqi")


class RecordFormatError(BolideError, ValueError):
    """Bytes that are not a whole, well-formed message record."""


def decode_record(data: bytes | memoryview, pos: int = 0) -> MessageExt:
    """The record at ``pos`` as a :class:`MessageExt` (its size is ``store_size``); raises
    RecordFormatError when the bytes there are not a whole record."""
    if len(data) - pos < _HEAD.size:
        raise RecordFormatError(f"record at byte {pos}: {len(data) - pos} bytes left, too few for a header")
    total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = _HEAD.unpack_from(data, pos)
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise RecordFormatError(f"record at byte {pos}: magic 0x{magic & 0xFFFFFFFF:08X} is not a "
                            "message record (expected 0xDAA320A7 or 0xDAA320AB)")
    end = pos + total
    if total < 91 or end > len(data):
        raise RecordFormatError(f"record at byte {pos}: TOTALSIZE {total} does not fit the "
                                f"{len(data)}-byte body")
    try:
        p = pos + _HEAD.size
        born_len = 20 if sys_flag & sysflag.BORNHOST_V6 else 8
        born_host = decode_host(data[p:p + born_len])
        p += born_len
        store_ts = _I64.unpack_from(data, p)[0]
        p += 8
        store_len = 20 if sys_flag & sysflag.STOREHOST_V6 else 8
        store_host = decode_host(data[p:p + store_len])
        p += store_len
        reconsume, prepared, body_len = _TAIL.unpack_from(data, p)
        p += _TAIL.size
        body = bytes(data[p:p + body_len])
        p += body_len
        if magic == MAGIC_V1:
            topic_len = data[p]
            p += 1
        else:
            topic_len = _I16.unpack_from(data, p)[0]
            p += 2
        topic = bytes(data[p:p + topic_len]).decode("utf-8")
        p += topic_len
        props_len = _I16.unpack_from(data, p)[0]
        p += 2
        if body_len < 0 or topic_len < 0 or props_len < 0 or p + props_len != end:
            raise RecordFormatError(f"record at byte {pos}: field lengths do not add up to TOTALSIZE {total}")
        props = decode_properties(data[p:end]) if props_len else {}
    except (struct.error, IndexError, ValueError) as exc:
        raise RecordFormatError(f"record at byte {pos} is cut short or malformed: {exc}") from None
    return MessageExt(topic, body, flag=flag, properties=props, queue_id=queue_id,
                     queue_offset=queue_offset, commit_log_offset=phys, store_size=total,
                     body_crc=crc, sys_flag=sys_flag, born_timestamp=born_ts, born_host=born_host,
                     store_timestamp=store_ts, store_host=store_host, reconsume_times=reconsume,
                     prepared_transaction_offset=prepared, magic=magic)


def decode_records(body: bytes | memoryview) -> list[MessageExt]:
    """Every record of a pull/query body, in order; raises RecordFormatError on a bad one."""
    out: list[MessageExt] = []
    pos = 0
    n = len(body)
    while pos < n:
        msg = decode_record(body, pos)
        out.append(msg)
        pos += msg.store_size
    return out
