"""``bolide store dump``: decoded CommitLog records (the readable version of ``xxd`` on a
segment), chosen by queue and offset or by CommitLog offset, and each record's fields with
their byte boundaries for ``--hex``.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from typing import Any

from bolide.common import sysflag
from bolide.common.hosts import decode_host
from bolide.common.records import MAGIC_V1, decode_record
from bolide.errors import BolideError
from bolide.store.config import StoreConfig
from bolide.store.offline import (
    PRE_BLANK_SIZE,
    Segments,
    open_commit_log,
    open_queue,
    queue_dirs,
    queue_entries,
    read_record,
)
from bolide.store.record import RecordInfo, parse_record

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class DumpError(BolideError):
    """The records asked for are not there; the message says where to look instead."""


@dataclass(slots=True)
class Field:
    name: str
    start: int  # byte position in the record
    end: int
    value: str


@dataclass(slots=True)
class DumpedRecord:
    offset: int  # CommitLog offset
    raw: bytes
    queue_offset_in_cq: int | None = None  # set when read through a ConsumeQueue

    def to_json(self, with_hex: bool = False) -> dict[str, Any]:
        m = decode_record(self.raw)
        body: dict[str, Any]
        try:
            body = {"body": m.body.decode("utf-8")}
        except UnicodeDecodeError:
            body = {"body_base64": base64.b64encode(m.body).decode()}
        out: dict[str, Any] = {
            "commit_log_offset": self.offset, "store_size": m.store_size,
            "magic": f"0x{m.magic & 0xFFFFFFFF:08X}", "body_crc": m.body_crc,
            "topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "flag": m.flag, "sys_flag": m.sys_flag, "born_timestamp": m.born_timestamp,
            "born_host": m.born_host, "store_timestamp": m.store_timestamp,
            "store_host": m.store_host, "reconsume_times": m.reconsume_times,
            "prepared_transaction_offset": m.prepared_transaction_offset,
            "msg_id": m.msg_id, "offset_msg_id": m.offset_msg_id,
            "properties": m.properties, **body,
        }
        if with_hex:
            out["fields"] = [{"name": f.name, "start": f.start, "end": f.end,
                              "hex": self.raw[f.start:f.end].hex(), "value": f.value}
                             for f in record_fields(self.raw)]
        return out


def record_fields(raw: bytes) -> list[Field]:
    """Every field of a record with its byte range, in order (docs/storage-format.md)."""
    fields: list[Field] = []
    pos = 0

    def add(name: str, size: int, value: str) -> None:
        nonlocal pos
        fields.append(Field(name, pos, pos + size, value))
        pos += size

    def i32() -> int:
        return _I32.unpack_from(raw, pos)[0]

    def i64() -> int:
        return _I64.unpack_from(raw, pos)[0]

    add("TOTALSIZE", 4, str(i32()))
    magic = i32()
    add("MAGICCODE", 4, f"0x{magic & 0xFFFFFFFF:08X} ({'v1' if magic == MAGIC_V1 else 'v2'})")
    add("BODYCRC", 4, str(i32()))
    add("QUEUEID", 4, str(i32()))
    add("FLAG", 4, str(i32()))
    add("QUEUEOFFSET", 8, str(i64()))
    add("PHYSICALOFFSET", 8, str(i64()))
    flag = i32()
    add("SYSFLAG", 4, f"0x{flag & 0xFFFFFFFF:X}")
    add("BORNTIMESTAMP", 8, str(i64()))
    born = 20 if flag & sysflag.BORNHOST_V6 else 8
    add("BORNHOST", born, decode_host(raw[pos : pos + born]))
    add("STORETIMESTAMP", 8, str(i64()))
    store = 20 if flag & sysflag.STOREHOST_V6 else 8
    add("STOREHOST", store, decode_host(raw[pos : pos + store]))
    add("RECONSUMETIMES", 4, str(i32()))
    add("PREPAREDTRANSACTIONOFFSET", 8, str(i64()))
    body_len = i32()
    add("BODYLENGTH", 4, str(body_len))
    add("BODY", body_len, f"{body_len} bytes")
    if magic == MAGIC_V1:
        topic_len = raw[pos]
        add("TOPICLENGTH", 1, str(topic_len))
    else:
        topic_len = _I16.unpack_from(raw, pos)[0]
        add("TOPICLENGTH", 2, str(topic_len))
    add("TOPIC", topic_len, raw[pos : pos + topic_len].decode("utf-8", "replace"))
    props_len = _I16.unpack_from(raw, pos)[0]
    add("PROPERTIESLENGTH", 2, str(props_len))
    add("PROPERTIES", props_len, raw[pos : pos + props_len].decode("utf-8", "replace")
        .replace("\x01", "=").replace("\x02", "; "))
    return fields


def dump_queue(config: StoreConfig, topic: str, queue_id: int, from_offset: int | None,
               limit: int) -> list[DumpedRecord]:
    """Up to ``limit`` records of a queue from ``from_offset`` (default: its first entry)."""
    known = queue_dirs(config)
    if (topic, queue_id) not in known:
        have = ", ".join(f"{t}/{q}" for t, q in known) or "none"
        raise DumpError(f"no ConsumeQueue for topic {topic!r} queue {queue_id} in "
                        f"{config.consume_queue_dir} (queues: {have}); `bolide store inspect` "
                        "lists them, or use --phy-offset")
    out: list[DumpedRecord] = []
    with open_queue(config, topic, queue_id) as segs, open_commit_log(config) as log:
        for qoff, phys, size, _tags in queue_entries(segs):
            if len(out) >= limit:
                break
            if size == PRE_BLANK_SIZE or (from_offset is not None and qoff < from_offset):
                continue
            raw = read_record(log, phys)
            if raw is None or len(raw) != size:
                if phys < log.start:
                    continue  # removed by retention
                raise DumpError(f"{topic}/{queue_id} entry {qoff} points at CommitLog offset "
                                f"{phys} ({size} bytes) where no such record is: run `bolide "
                                "store verify`, then `bolide store repair`")
            out.append(DumpedRecord(phys, raw, qoff))
    if from_offset is not None and not out:
        raise DumpError(f"{topic}/{queue_id} has no message at or after offset {from_offset}; "
                        "`bolide store inspect` shows its min and max offsets")
    return out


def dump_commit_log(config: StoreConfig, phy_offset: int, limit: int) -> list[DumpedRecord]:
    """Up to ``limit`` records from the one starting at CommitLog ``phy_offset``."""
    out: list[DumpedRecord] = []
    with open_commit_log(config) as log:
        if log.find(phy_offset) is None:
            span = f"[{log.start}, {log.start + len(log.maps) * log.size})" if log.maps else "none"
            raise DumpError(f"CommitLog offset {phy_offset} is in no segment (segments cover "
                            f"{span}); `bolide store inspect` shows the offsets")
        if read_record(log, phy_offset) is None:
            raise DumpError(_not_a_record(log, phy_offset))
        offset = phy_offset
        while len(out) < limit and (found := log.find(offset)) is not None:
            start, m = found
            info = parse_record(m, offset - start, False)
            if type(info) is not RecordInfo:
                break
            if info.size == 0:
                offset = start + log.size
                continue
            out.append(DumpedRecord(offset, m[offset - start : offset - start + info.size]))
            offset += info.size
    return out


def _not_a_record(log: Segments, offset: int) -> str:
    """Why no record starts at ``offset``, naming the record that holds it if one does."""
    found = log.find(offset)
    assert found is not None
    start, m = found
    pos = 0
    while pos <= offset - start:
        info = parse_record(m, pos, False)
        if type(info) is not RecordInfo or info.size == 0:
            break
        if pos + info.size > offset - start:
            return (f"CommitLog offset {offset} is inside the record at {start + pos} "
                    f"({info.size} bytes): use --phy-offset {start + pos}")
        pos += info.size
    return (f"no record at CommitLog offset {offset}: the record chain of its segment ends at "
            f"{start + pos}; `bolide store verify` tells why")

