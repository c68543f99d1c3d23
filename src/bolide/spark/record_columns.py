"""Arrow columns built straight from stored message records: the Spark readers' fast decoder.

Both readers hold records back to back in one buffer: a mapped CommitLog segment
(``rocketmq-store``) or the body of a PULL_MESSAGE answer (``rocketmq``). Instead of a
MessageExt per row, :class:`RecordBuffer` walks the TOTALSIZE prefixes once and builds every
column of :data:`~bolide.spark.schema.SCHEMA_DDL` with numpy gathers and Arrow kernels: fixed
header fields through an overlapping structured view of the buffer (one gather per batch),
body, topic and properties through one binary array whose offsets interleave their bounds
(one ``take`` each), and the properties map by splitting the 0x02/0x01 separators in numpy.

Only the common records take this path (:meth:`RecordBuffer.classify`): v1 magic, IPv4 hosts
with ports below 65536, an uncompressed body, field lengths that add up to TOTALSIZE, no torn
topic, properties that end with 0x02. Anything else (v2 or IPv6 records, compressed bodies,
damaged or end-of-data bytes), and batches whose text is not valid UTF-8 or that repeat a
property key, go to the per-message decoder (:func:`bolide.common.records.decode_record`), so
the rows are the same either way.
"""

from __future__ import annotations

import array
import itertools
import struct
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bolide.common import properties as P
from bolide.common.hosts import decode_host
from bolide.common.records import MAGIC_V1
from bolide.common.sysflag import BORNHOST_V6, COMPRESSED, STOREHOST_V6
from bolide.spark.schema import arrow_schema
from bolide.store.fastscan import compiled_module

MIN_RECORD = 91  # a record with an empty body, topic and properties
HEAD = 88  # bytes before BODY in a v1 record with IPv4 hosts
_I32 = struct.Struct(">i")
_HEADER = np.dtype({
    "names": ["total", "magic", "queue_id", "queue_offset", "phys", "sys_flag", "born_ts",
              "born_host", "store_ts", "store_host", "reconsume", "body_len"],
    "formats": [">i4", ">i4", ">i4", ">i8", ">i8", ">i4", ">i8", ">u8", ">i8", ">u8", ">i4", ">i4"],
    "offsets": [0, 4, 12, 20, 28, 36, 40, 48, 56, 64, 72, 84],
    "itemsize": HEAD,
})
_SLOW_FLAGS = BORNHOST_V6 | STOREHOST_V6 | COMPRESSED
_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_EMPTY = np.empty(0, np.int64)
_walk_compiled = getattr(compiled_module(), "walk_records", None)
_classify_compiled = getattr(compiled_module(), "classify_records", None)
_gather_compiled = getattr(compiled_module(), "gather_spans", None)
_split_compiled = getattr(compiled_module(), "split_properties", None)
BODY, TOPIC, PROPERTIES = 0, 1, 2  # pieces of a record (RecordBuffer.part)


def _overlapping(u8: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A read-only view whose element ``i`` is the ``dtype`` value at byte ``i`` of ``u8``."""
    count = len(u8) - dtype.itemsize + 1
    if count <= 0:
        return np.empty(0, dtype)
    view = np.ndarray(shape=(count,), dtype=dtype, buffer=u8, offset=0, strides=(1,))
    view.flags.writeable = False
    return view


# Header fields of a record, native byte order: what classify_records (C) writes per record
FIELDS = np.dtype({
    "names": ["total", "queue_offset", "phys", "born_ts", "store_ts", "born_host", "store_host",
              "body_len", "topic_len", "queue_id", "sys_flag", "reconsume", "magic", "ok"],
    "formats": ["i8", "i8", "i8", "i8", "i8", "u8", "u8", "i8", "i8", "i4", "i4", "i4", "i4", "u1"],
    "offsets": [0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 76, 80, 84, 88],
    "itemsize": 96,
})


@dataclass(slots=True)
class Records:
    """Records and their header fields (:data:`FIELDS`, meaningful where classified True)."""

    pos: np.ndarray  # int64 start of each record in the buffer
    head: np.ndarray  # FIELDS of each

    def __len__(self) -> int:
        return len(self.pos)

    @property
    def total(self) -> np.ndarray:
        return self.head["total"]

    @property
    def body_len(self) -> np.ndarray:
        return self.head["body_len"]

    @property
    def topic_len(self) -> np.ndarray:
        return self.head["topic_len"]

    def select(self, which: np.ndarray | slice) -> Records:
        if isinstance(which, np.ndarray) and which.dtype == np.bool_ and which.all():
            return self
        return Records(self.pos[which], self.head[which])


class RecordBuffer:
    """Records back to back in ``data``; positions are byte offsets into it."""

    def __init__(self, data: pa.Buffer | bytes | bytearray | memoryview) -> None:
        self.buf = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
        self.size = self.buf.size
        self.mv = memoryview(self.buf)  # for the walk and the per-message decoder
        self.u8 = np.frombuffer(self.buf, np.uint8)

    # -- finding records -----------------------------------------------------------------------
    def walk(self, pos: int, stop: int, max_rows: int) -> tuple[np.ndarray, int]:
        """Starts of the consecutive records from ``pos`` (a record start) that begin before
        ``stop``, at most ``max_rows``; stops before a TOTALSIZE below 91 (a BLANK tail, zeros,
        damage: the caller's per-record parser decides). Returns them and the next position."""
        if _walk_compiled is not None:
            starts, after = _walk_compiled(self.mv, pos, stop, max_rows)
            return (np.frombuffer(starts, np.int64) if starts else _EMPTY), after
        return self.walk_python(pos, stop, max_rows)

    def walk_python(self, pos: int, stop: int, max_rows: int) -> tuple[np.ndarray, int]:
        """The pure-Python :meth:`walk` (the fallback; tests compare the two)."""
        out = array.array("q")
        append = out.append
        unpack = _I32.unpack_from
        mv = self.mv
        end = min(stop, self.size - 3)
        for _ in itertools.repeat(None, max_rows):
            if pos >= end:
                break
            size = unpack(mv, pos)[0]
            if size < MIN_RECORD:
                break
            append(pos)
            pos += size
        return (np.frombuffer(out, np.int64) if out else _EMPTY), pos

    def classify(self, pos: np.ndarray) -> tuple[np.ndarray, Records]:
        """Which records at ``pos`` the fast path decodes (a bool per record), and their
        fields (meaningful where True). Each record is judged on its own bytes only."""
        if _classify_compiled is None:
            return self.classify_python(pos)
        starts = np.ascontiguousarray(pos, np.int64)
        head = np.frombuffer(_classify_compiled(self.mv, starts), FIELDS)
        return head["ok"].view(np.bool_), Records(starts, head)

    def classify_python(self, pos: np.ndarray) -> tuple[np.ndarray, Records]:
        """The numpy :meth:`classify` (the fallback; tests compare the two)."""
        size = self.size
        if size < HEAD:  # no record fits: nothing to index below
            head = np.zeros(len(pos), FIELDS)
            return head["ok"].view(np.bool_), Records(np.asarray(pos, np.int64), head)
        inside = (pos >= 0) & (pos <= size - HEAD)
        safe = np.where(inside, pos, 0)
        raw = _overlapping(self.u8, _HEADER)
        head = np.zeros(len(pos), FIELDS)
        if len(raw):
            for name in _HEADER.names:
                head[name] = raw[name][safe]
        total, body_len = head["total"], head["body_len"]
        ok = (inside & (head["magic"] == MAGIC_V1) & (total >= MIN_RECORD) & (pos + total <= size)
              & ((head["sys_flag"] & _SLOW_FLAGS) == 0) & (body_len >= 0)
              & (body_len <= total - MIN_RECORD)
              & ((head["born_host"] & 0xFFFFFFFF) <= 65535) & ((head["store_host"] & 0xFFFFFFFF) <= 65535))
        topic_at = np.where(ok, pos + HEAD + body_len, 0)
        topic_len = self.u8[topic_at].astype(np.int64) if size else np.zeros(len(pos), np.int64)
        ok &= (topic_len <= 127) & (MIN_RECORD + body_len + topic_len <= total)
        u16 = _overlapping(self.u8, np.dtype(">u2"))
        props_at = np.where(ok, topic_at + 1 + topic_len, 0)
        props_len = (u16[np.minimum(props_at, len(u16) - 1)].astype(np.int64) if len(u16)
                     else np.zeros(len(pos), np.int64))
        ok &= MIN_RECORD + body_len + topic_len + props_len == total
        last = np.where(ok, pos + total - 1, 0)
        first_topic = np.where(ok, topic_at + 1, 0)
        ok &= (topic_len == 0) | (self.u8[first_topic] != 0)
        ok &= (props_len == 0) | (self.u8[last] == 2)
        head["topic_len"] = np.where(ok, topic_len, 0)
        head["ok"] = ok
        return ok, Records(np.asarray(pos, np.int64), head)

    # -- columns -------------------------------------------------------------------------------
    def _pieces(self, recs: Records) -> pa.Array:
        """One binary array over the buffer: per record its body, topic-length byte, topic,
        properties-length bytes, properties, then the bytes up to the next record's body."""
        base = int(recs.pos[0])
        end = int(recs.pos[-1] + recs.total[-1])
        body = recs.pos + HEAD - base
        body_end = body + recs.body_len
        topic_end = body_end + 1 + recs.topic_len
        offsets = np.empty(6 * len(recs), np.int32)
        offsets[0::6] = body
        offsets[1::6] = body_end
        offsets[2::6] = body_end + 1
        offsets[3::6] = topic_end
        offsets[4::6] = topic_end + 2
        offsets[5::6] = recs.pos + recs.total - base
        return pa.Array.from_buffers(pa.binary(), len(offsets) - 1,
                                     [None, pa.py_buffer(offsets), self.buf.slice(base, end - base)])

    def part(self, recs: Records, which: int) -> pa.Array:
        """One piece of each record as a binary array: BODY, TOPIC or PROPERTIES."""
        if _gather_compiled is None:
            return self._pieces(recs).take(np.arange(2 * which, 6 * len(recs), 6))
        head = recs.head
        if which == BODY:
            starts, lengths = recs.pos + HEAD, head["body_len"]
        elif which == TOPIC:
            starts, lengths = recs.pos + (HEAD + 1) + head["body_len"], head["topic_len"]
        else:
            before = head["body_len"] + head["topic_len"]
            starts, lengths = recs.pos + MIN_RECORD + before, head["total"] - MIN_RECORD - before
        offsets, data = _gather_compiled(self.mv, np.ascontiguousarray(starts, np.int64),
                                         np.ascontiguousarray(lengths, np.int64))
        return pa.Array.from_buffers(pa.binary(), len(recs), [None, pa.py_buffer(offsets),
                                                              pa.py_buffer(data)])

    def topics(self, recs: Records) -> pa.Array:
        """The topic of each record (raises ArrowInvalid when one is not UTF-8)."""
        return self.part(recs, TOPIC).cast(pa.string())

    def decode(self, recs: Records, broker_name: str, drop_properties: Collection[str] = (),
               columns: Collection[str] | None = None) -> pa.RecordBatch | None:
        """The rows of ``recs`` (classified True) as one record batch of the reader schema, or
        of only ``columns`` (in that order); None when the per-message decoder must do it (text
        not UTF-8, a key repeated). ``drop_properties`` are left out of the properties map (and
        of keys/tags/msgId)."""
        n = len(recs)
        schema = arrow_schema()
        names = schema.names if columns is None else list(columns)
        head = recs.head
        props = None
        try:
            topic = self.topics(recs) if "topic" in names else None
            if not {"msgId", "keys", "tags", "properties"}.isdisjoint(names):
                props = _Properties.parse(self.part(recs, PROPERTIES), n, drop_properties)
                if props is None:
                    return None
        except pa.ArrowInvalid:  # not UTF-8: the per-message decoder replaces or raises
            return None
        ts = pa.timestamp("us", tz="UTC")

        def msg_id() -> pa.Array:
            assert props is not None
            ids = props.column(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            return _coalesce(ids, _offset_msg_ids(head)) if ids.null_count else ids

        build = {
            "topic": lambda: topic,
            "brokerName": lambda: _repeated(broker_name, n),
            "queueId": lambda: pa.array(head["queue_id"].astype(np.int32)),
            "queueOffset": lambda: pa.array(head["queue_offset"].astype(np.int64)),
            "commitLogOffset": lambda: pa.array(head["phys"].astype(np.int64)),
            "msgId": msg_id,
            "keys": lambda: props.column(P.KEYS),
            "tags": lambda: props.column(P.TAGS),
            "body": lambda: self.part(recs, BODY),
            "properties": lambda: props.map,
            "bornTimestamp": lambda: pa.array(head["born_ts"].astype(np.int64) * 1000, type=ts),
            "storeTimestamp": lambda: pa.array(head["store_ts"].astype(np.int64) * 1000, type=ts),
            "bornHost": lambda: _hosts(head["born_host"]),
            "storeHost": lambda: _hosts(head["store_host"]),
            "reconsumeTimes": lambda: pa.array(head["reconsume"].astype(np.int32)),
            "sysFlag": lambda: pa.array(head["sys_flag"].astype(np.int32)),
        }
        if columns is not None:
            schema = pa.schema([schema.field(name) for name in names])
        return pa.RecordBatch.from_arrays([build[name]() for name in names], schema=schema)


class _Properties:
    """The properties blobs of a batch split into (record, key, value) triples."""

    def __init__(self, n: int, rec: np.ndarray, keys: pa.Array, values: pa.Array,
                 key_ids: np.ndarray, names: list[str]) -> None:
        self.n = n
        self.rec = rec  # record of each kept pair (ascending)
        self.values = values
        self.key_ids = key_ids  # index into names of each kept pair
        self.names = names
        counts = np.bincount(rec, minlength=n)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        map_type = arrow_schema().field("properties").type
        self.map = pa.MapArray.from_arrays(pa.array(offsets), keys, values, type=map_type)

    @classmethod
    def parse(cls, blobs: pa.Array, n: int, drop: Collection[str]) -> _Properties | None:
        """As :func:`bolide.common.properties.decode_properties` per record: pairs end with
        0x02 (every non-empty blob here does), key and value split at the first 0x01, pairs
        with an empty key or value dropped. None when the per-message decoder must decide: a
        record repeats a key, or a key or value is not UTF-8."""
        if _split_compiled is not None:
            return cls.parse_compiled(blobs, n, drop)
        return cls.parse_numpy(blobs, n, drop)

    @classmethod
    def parse_numpy(cls, blobs: pa.Array, n: int, drop: Collection[str]) -> _Properties | None:
        """:meth:`parse` in numpy (the fallback; tests compare the two)."""
        try:
            return cls._split_numpy(blobs, n, drop)
        except pa.ArrowInvalid:  # not UTF-8
            return None

    @classmethod
    def _split_numpy(cls, blobs: pa.Array, n: int, drop: Collection[str]) -> _Properties | None:
        offs = np.frombuffer(blobs.buffers()[1], np.int32, n + 1)
        total = int(offs[-1])
        data = np.frombuffer(blobs.buffers()[2], np.uint8, total) if total else np.empty(0, np.uint8)
        ends = np.flatnonzero(data == 2)  # one per pair
        starts = np.empty_like(ends)
        if len(ends):
            starts[0] = 0
            starts[1:] = ends[:-1] + 1
        ones = np.flatnonzero(data == 1)
        first = np.searchsorted(ones, starts)
        sep = ones[np.minimum(first, len(ones) - 1)] if len(ones) else np.zeros_like(starts)
        keep = (first < len(ones)) & (sep > starts) & (sep < ends - 1)
        starts, sep, ends = starts[keep], sep[keep], ends[keep]
        bounds = np.empty(4 * len(starts), np.int32)
        bounds[0::4] = starts
        bounds[1::4] = sep
        bounds[2::4] = sep + 1
        bounds[3::4] = ends
        rec = np.searchsorted(offs, ends, side="right") - 1
        if len(starts):
            parts = pa.Array.from_buffers(pa.binary(), len(bounds) - 1,
                                          [None, pa.py_buffer(bounds), blobs.buffers()[2]])
            step = np.arange(0, len(bounds), 4)
            keys = parts.take(step).cast(pa.string())
            values = parts.take(step + 2).cast(pa.string())
        else:
            keys = values = pa.array([], pa.string())
        encoded = keys.dictionary_encode()
        names = encoded.dictionary.to_pylist()
        key_ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        if _repeats_a_key(rec, key_ids, len(names)):
            return None
        return cls._dropping(n, rec, keys, values, key_ids, names, drop)

    @classmethod
    def _dropping(cls, n: int, rec: np.ndarray, keys: pa.Array, values: pa.Array,
                  key_ids: np.ndarray, names: list[str], drop: Collection[str]) -> _Properties:
        dropped = [i for i, name in enumerate(names) if name in drop]
        if dropped:
            kept = ~np.isin(key_ids, dropped)
            rec, key_ids = rec[kept], key_ids[kept]
            keys, values = keys.filter(kept), values.filter(kept)
        return cls(n, rec, keys, values, key_ids, names)

    @classmethod
    def parse_compiled(cls, blobs: pa.Array, n: int, drop: Collection[str]) -> _Properties | None:
        """:meth:`parse` by split_properties (C)."""
        offsets, data = blobs.buffers()[1:]
        split = _split_compiled(offsets.slice(blobs.offset * 4, (n + 1) * 4), data or b"")
        if split is None:
            return None
        rec, key_ids, raw_names, key_offsets, key_data, value_offsets, value_data = split
        pairs = len(rec) // 4
        try:
            names = [name.decode() for name in raw_names]
            values = pa.Array.from_buffers(pa.binary(), pairs, [None, pa.py_buffer(value_offsets),
                                                                pa.py_buffer(value_data)]).cast(pa.string())
        except (UnicodeDecodeError, pa.ArrowInvalid):  # not UTF-8
            return None
        keys = pa.Array.from_buffers(pa.string(), pairs, [None, pa.py_buffer(key_offsets),
                                                          pa.py_buffer(key_data)])
        return cls._dropping(n, np.frombuffer(rec, np.int32), keys, values,
                             np.frombuffer(key_ids, np.int32), names, drop)

    def column(self, name: str) -> pa.Array:
        """The value of property ``name`` per record (null where absent)."""
        try:
            key = self.names.index(name)
        except ValueError:
            return pa.nulls(self.n, pa.string())
        hits = np.flatnonzero(self.key_ids == key)
        index = np.full(self.n, -1, np.int64)
        index[self.rec[hits]] = hits
        return self.values.take(pa.array(index, mask=index < 0))


def _repeats_a_key(rec: np.ndarray, key_ids: np.ndarray, distinct: int) -> bool:
    """True when some record holds a key twice (``rec`` ascending)."""
    if len(rec) < 2:
        return False
    if distinct <= 64:  # one bit per key: a record repeats a key when its bits are fewer than its pairs
        first = np.flatnonzero(np.diff(rec, prepend=-1))
        bits = np.bitwise_or.reduceat(np.left_shift(np.uint64(1), key_ids.astype(np.uint64)), first)
        pairs = np.diff(np.append(first, len(rec)))
        return bool((np.bitwise_count(bits) != pairs).any())
    return len(np.unique(rec * distinct + key_ids)) != len(rec)


def _hosts(raw: np.ndarray) -> pa.Array:
    """``ip:port`` strings of 8-byte IPv4 host fields (as big-endian integers)."""
    values = raw.astype(np.uint64)
    if not len(values):
        return pa.array([], pa.string())
    if (values == values[0]).all():
        return _repeated(decode_host(int(values[0]).to_bytes(8, "big")), len(values))
    distinct, index = np.unique(values, return_inverse=True)
    names = pa.array([decode_host(int(v).to_bytes(8, "big")) for v in distinct], pa.string())
    return names.take(index)


def _repeated(text: str, n: int) -> pa.Array:
    """``text`` ``n`` times as a string array (pa.repeat builds strings one by one)."""
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _offset_msg_ids(head: np.ndarray) -> pa.Array:
    """offsetMsgId of each record: hex of store host and CommitLog offset, uppercase."""
    n = len(head)
    raw = np.empty((n, 16), np.uint8)
    raw[:, :8] = head["store_host"].astype(">u8").view(np.uint8).reshape(n, 8)
    raw[:, 8:] = head["phys"].astype(">i8").view(np.uint8).reshape(n, 8)
    text = np.empty((n, 32), np.uint8)
    text[:, 0::2] = _HEX[raw >> 4]
    text[:, 1::2] = _HEX[raw & 15]
    offsets = np.arange(0, 32 * (n + 1), 32, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])


def _coalesce(first: pa.Array, second: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    return pc.coalesce(first, second)
