"""The columnar record decoder (bolide.spark.record_columns) and the store reader built on it
give exactly the rows of the per-message decoder, for common records and for every odd one
(v2 magic, IPv6 hosts, compressed bodies, repeated or empty property keys, text that is not
UTF-8), with the store reader's rules for where data ends; pull answers that overlap or hold
unwanted tags. Plain Python: no SparkSession."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bolide.common.compression import decompress_message
from bolide.common.hosts import encode_host
from bolide.common.records import MAGIC_V1, MAGIC_V2, decode_record
from bolide.common.sysflag import COMPRESSED
from bolide.errors import ProtocolError
from bolide.protocol.bodies.client import SubscriptionData
from bolide.spark.pulled_rows import pulled_batches
from bolide.spark.record_columns import BODY, PROPERTIES, TOPIC, RecordBuffer, _Properties
from bolide.spark.schema import to_record_batch
from bolide.spark.store_reader import StoreOptions, read_range
from bolide.spark.store_splits import ReadRange
from bolide.store.fastscan import compiled_module
from bolide.store.record import encode_record, write_blank

pytestmark = pytest.mark.spark
BROKER = "broker-c"

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"),
               max_size=12)
prop_pairs = st.lists(st.tuples(text, text), max_size=6)
raw_props = st.one_of(
    prop_pairs.map(lambda pairs: b"".join(k.encode() + b"\x01" + v.encode() + b"\x02" for k, v in pairs)),
    st.binary(max_size=40).map(lambda b: b + b"\x02"),  # anything: not UTF-8, no separator, ...
    st.just(b""),
)
hosts = st.sampled_from(["127.0.0.1:10911", "10.1.2.3:4567", "[::1]:10911", "192.168.0.9:0"])
record_args = st.fixed_dictionaries({
    "topic": st.sampled_from(["TopicA", "TopicB", "%RETRY%g", "Δ-topic", ""]),
    "queue_id": st.integers(0, 7),
    "body": st.binary(max_size=300),
    "properties": raw_props,
    "born_host": hosts,
    "store_host": hosts,
    "born_timestamp": st.integers(0, 2**41),
    "store_timestamp": st.integers(0, 2**41),
    "queue_offset": st.integers(0, 2**40),
    "reconsume_times": st.integers(0, 16),
    "compressed": st.booleans(),
    "v2": st.integers(0, 9).map(lambda n: n == 0),
})


def record(args: dict[str, Any], physical_offset: int) -> bytes:
    body, sys_flag = args["body"], 0
    if args["compressed"]:
        body, sys_flag = zlib.compress(body), COMPRESSED
    return encode_record(
        args["topic"], args["queue_id"], body, args["properties"],
        born_timestamp=args["born_timestamp"], born_host=encode_host(args["born_host"]),
        store_timestamp=args["store_timestamp"], store_host=encode_host(args["store_host"]),
        queue_offset=args["queue_offset"], physical_offset=physical_offset, sys_flag=sys_flag,
        reconsume_times=args["reconsume_times"], magic=MAGIC_V2 if args["v2"] else MAGIC_V1)


def records(many: list[dict[str, Any]], base: int = 0) -> tuple[bytes, list[int]]:
    out, starts = bytearray(), []
    for args in many:
        starts.append(len(out))
        out += record(args, base + len(out))
    return bytes(out), starts


def expected_rows(data: bytes, starts: list[int], keep: Any = lambda m, pos: True) -> list[dict[str, Any]]:
    msgs = []
    for pos in starts:
        msg = decode_record(data, pos)
        decompress_message(msg)
        if keep(msg, pos):
            msgs.append(msg)
    return to_record_batch(BROKER, msgs).to_pylist() if msgs else []


def rows(batches: Any) -> list[dict[str, Any]]:
    return [row for batch in batches for row in batch.to_pylist()]


@settings(max_examples=150, deadline=None)
@given(st.lists(record_args, min_size=1, max_size=12))
def test_decode_gives_the_rows_of_the_per_message_decoder(many: list[dict[str, Any]]) -> None:
    data, starts = records(many)
    buf = RecordBuffer(data)
    walked, end = buf.walk(0, len(data), 1000)
    assert list(walked) == starts and end == len(data)
    ok, recs = buf.classify(walked)
    common = [i for i, args in enumerate(many) if not (args["v2"] or args["compressed"]
                                                        or "[" in args["born_host"] + args["store_host"])]
    assert [i for i, good in enumerate(ok) if good] == common
    if not common:
        return
    chosen = recs.select(ok)
    batch = buf.decode(chosen, BROKER)
    if batch is None:  # only for text that is not UTF-8 or a key given twice
        assert any(_odd_properties(many[i]["properties"]) for i in common)
        return
    assert batch.to_pylist() == expected_rows(data, [starts[i] for i in common])
    for columns in (["body"], ["queueOffset", "topic"], ["tags", "storeHost", "msgId"]):
        assert buf.decode(chosen, BROKER, columns=columns) == batch.select(columns)


def _odd_properties(blob: bytes) -> bool:
    try:
        text_ = blob.decode()
    except UnicodeDecodeError:
        return True
    keys = [item.split("\x01", 1)[0] for item in text_.split("\x02") if "\x01" in item]
    return len(keys) != len(set(keys))


def write_segment(tmp_path: Path, data: bytes, size: int, start: int = 0, blank: bool = True) -> Path:
    path = tmp_path / f"{start:020d}"
    segment = bytearray(size)
    segment[:len(data)] = data
    if blank and len(data) + 8 <= size:
        write_blank(segment, len(data), size - len(data))
    path.write_bytes(bytes(segment))
    return path


def options(tmp_path: Path, **kwargs: Any) -> StoreOptions:
    return StoreOptions(str(tmp_path), kwargs.pop("topics", frozenset()), BROKER, **kwargs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(many=st.lists(record_args, min_size=1, max_size=30), batch=st.integers(1, 8),
       first=st.integers(0, 29), topic=st.sampled_from(["", "TopicA", "TopicA,Δ-topic"]))
def test_read_range_gives_the_rows_of_the_per_message_decoder(
        tmp_path: Path, many: list[dict[str, Any]], batch: int, first: int, topic: str) -> None:
    base = 1 << 30
    data, starts = records(many, base)
    path = write_segment(tmp_path, data, len(data) + 4096, base)
    lo = base + starts[min(first, len(starts) - 1)]
    topics = frozenset(t for t in topic.split(",") if t)
    opts = options(tmp_path, topics=topics, read_batch_size=batch, start_offset=lo)
    got = list(read_range(ReadRange(str(path), base, base, base + len(data) + 4096, False), opts))
    assert all(b.num_rows <= batch for b in got)
    want = expected_rows(data, starts, lambda m, pos: base + pos >= lo and (not topics or m.topic in topics))
    assert rows(got) == want


def test_read_range_ends_where_the_data_ends(tmp_path: Path) -> None:
    common = {"topic": "T", "queue_id": 1, "body": b"x" * 50, "properties": b"KEYS\x01k\x02",
              "born_host": "127.0.0.1:1", "store_host": "127.0.0.1:2", "born_timestamp": 1,
              "store_timestamp": 2, "queue_offset": 0, "reconsume_times": 0, "compressed": False,
              "v2": False}
    data, starts = records([common] * 5)
    whole = expected_rows(data, starts)
    size = len(data) + 500

    zeros = write_segment(tmp_path, data, size, blank=False)  # a live store's end
    assert rows(read_range(ReadRange(str(zeros), 0, 0, size, False), options(tmp_path))) == whole

    torn = bytearray(data)
    torn[starts[4] + 30:] = bytes(len(data) - starts[4] - 30)  # the last write cut short
    tail = write_segment(tmp_path, bytes(torn), size, start=size, blank=False)
    assert rows(read_range(ReadRange(str(tail), size, size, 2 * size, True), options(tmp_path))) == whole[:4]

    damaged = bytearray(data)
    damaged[starts[2] + 4] ^= 0xFF  # bad magic in a segment that is not the last
    middle = write_segment(tmp_path, bytes(damaged), size, start=2 * size)
    with pytest.raises(OSError, match=f"unreadable record at byte {starts[2]}.*bolide store verify"):
        list(read_range(ReadRange(str(middle), 2 * size, 2 * size, 3 * size, False), options(tmp_path)))


def test_the_mapped_segment_outlives_the_batches(tmp_path: Path) -> None:
    many = [{"topic": "T", "queue_id": 0, "body": bytes([i]) * 40, "properties": b"a\x01b\x02",
             "born_host": "127.0.0.1:1", "store_host": "127.0.0.1:2", "born_timestamp": i,
             "store_timestamp": i, "queue_offset": i, "reconsume_times": 0, "compressed": False,
             "v2": False} for i in range(50)]
    data, _ = records(many)
    path = write_segment(tmp_path, data, len(data) + 100)
    batches = list(read_range(ReadRange(str(path), 0, 0, len(data) + 100, False),
                              options(tmp_path, read_batch_size=7)))
    path.unlink()
    table = pa.Table.from_batches(batches)
    assert table.num_rows == 50 and [bytes(b) for b in table.column("body").to_pylist()] == [
        bytes([i]) * 40 for i in range(50)]


# -- pull answers (the rocketmq source) -----------------------------------------------------------
def plain(i: int, tags: str = "A", **changes: Any) -> dict[str, Any]:
    args = {"topic": "T", "queue_id": 0, "body": b"m%d" % i, "properties": f"TAGS\x01{tags}\x02".encode(),
            "born_host": "127.0.0.1:1", "store_host": "127.0.0.1:2", "born_timestamp": i,
            "store_timestamp": i, "queue_offset": i, "reconsume_times": 0, "compressed": False,
            "v2": False}
    return {**args, **changes}


def offsets_of(batches: list[pa.RecordBatch]) -> list[int]:
    return [row["queueOffset"] for row in rows(batches)]


def test_pulled_batches_drop_overlaps_the_end_and_unwanted_tags() -> None:
    first, _ = records([plain(i, "AB"[i % 2]) for i in range(0, 6)])
    overlap, _ = records([plain(i, "AB"[i % 2]) for i in range(4, 10)])  # 4, 5 came in the first answer
    sub = SubscriptionData.of("T", "*")
    assert offsets_of(pulled_batches([(first, 0), (overlap, 6)], 9, sub, BROKER)) == list(range(9))
    only_a = SubscriptionData.of("T", "A || C")
    got = pulled_batches([(first, 0), (overlap, 6)], 100, only_a, BROKER)
    assert offsets_of(got) == [0, 2, 4, 6, 8] and {r["tags"] for r in rows(got)} == {"A"}
    # only some columns: the tag filter still applies, and the tags column is not handed over
    lean = pulled_batches([(first, 0), (overlap, 6)], 100, only_a, BROKER, ("queueOffset", "body"))
    assert [b.schema.names for b in lean] == [["queueOffset", "body"]]
    assert [r["queueOffset"] for r in rows(lean)] == [0, 2, 4, 6, 8]


def test_pulled_batches_decode_uncommon_records_one_by_one() -> None:
    many = [plain(0), plain(1, compressed=True, body=b"z" * 500), plain(2, v2=True), plain(3, tags="B"),
            plain(4, properties=b"TAGS\x01A\x02TAGS\x01A\x02")]  # a key given twice
    data, starts = records(many)
    sub = SubscriptionData.of("T", "A")
    got = pulled_batches([(data, 0)], 100, sub, BROKER)
    assert offsets_of(got) == [0, 1, 2, 4]  # in queue order, the uncommon ones among the rest
    mixed, _ = records([plain(0), plain(1, compressed=True), plain(2), plain(3, v2=True), plain(4)])
    everything = SubscriptionData.of("T", "*")
    assert offsets_of(pulled_batches([(mixed, 0)], 100, everything, BROKER)) == [0, 1, 2, 3, 4]
    assert offsets_of(pulled_batches([(mixed, 0)], 100, everything, BROKER, ("queueOffset",))) == [
        0, 1, 2, 3, 4]
    want = {r["queueOffset"]: r for r in expected_rows(data, starts)}
    assert all(row == want[row["queueOffset"]] for row in rows(got))
    assert [r["body"] for r in rows(got) if r["queueOffset"] == 1] == [b"z" * 500]
    lean = pulled_batches([(data, 0)], 100, sub, BROKER, ("body", "queueOffset"))
    assert all(b.schema.names == ["body", "queueOffset"] for b in lean)
    assert [(r["queueOffset"], r["body"]) for r in rows(lean)] == [
        (r["queueOffset"], r["body"]) for r in rows(got)]


def test_a_malformed_pull_answer_is_a_protocol_error() -> None:
    data, _ = records([plain(0), plain(1)])
    with pytest.raises(ProtocolError, match="malformed"):
        pulled_batches([(data[:-5], 0)], 100, SubscriptionData.of("T", "*"), BROKER)
    with pytest.raises(ProtocolError, match="malformed"):
        pulled_batches([(data + bytes(20), 0)], 100, SubscriptionData.of("T", "*"), BROKER)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([91, 120, 400, 7, 0, -5, 2**31 - 1]), max_size=12),
       st.integers(0, 40), st.integers(-8, 3000), st.integers(0, 14), st.integers(0, 3))
def test_compiled_walk_matches_the_python_walk(sizes: list[int], pos: int, stop: int,
                                               max_rows: int, cut: int) -> None:
    """Record starts by TOTALSIZE prefixes: the compiled walk (when built) and the Python one
    agree on any bytes, stop bound, row limit and cut-off end."""
    data = bytearray()
    for size in sizes:
        data += size.to_bytes(4, "big", signed=True) + bytes(max(0, min(size, 500) - 4))
    data = data[:max(0, len(data) - cut)]
    buf = RecordBuffer(bytes(data))
    starts, after = buf.walk(pos, stop, max_rows)
    py_starts, py_after = buf.walk_python(pos, stop, max_rows)
    assert starts.tolist() == py_starts.tolist() and after == py_after


compiled = pytest.mark.skipif(compiled_module() is None,
                              reason="bolide.store._fastscan is not built (BOLIDE_PURE_PYTHON)")


@compiled
@settings(max_examples=200, deadline=None)
@given(st.lists(record_args, min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=6),
       st.lists(st.integers(-3, 2100), max_size=4), st.integers(0, 40))
def test_compiled_classify_matches_the_numpy_classify(many: list[dict[str, Any]],
                                                      flips: list[tuple[int, int]],
                                                      extra: list[int], cut: int) -> None:
    """On records with flipped bytes, cut short, and at starts that are not records, the
    compiled classify and the numpy one take the same records with the same fields."""
    data, starts = records(many)
    raw = bytearray(data[:max(0, len(data) - cut)])
    for at, value in flips:
        if at < len(raw):
            raw[at] = value
    buf = RecordBuffer(bytes(raw))
    pos = np.array(starts + extra, np.int64)
    ok, recs = buf.classify(pos)
    py_ok, py_recs = buf.classify_python(pos)
    assert ok.tolist() == py_ok.tolist()
    assert recs.head.tobytes() == py_recs.head.tobytes()


@compiled
@settings(max_examples=100, deadline=None)
@given(st.lists(record_args, min_size=1, max_size=10))
def test_compiled_pieces_match_the_arrow_takes(many: list[dict[str, Any]]) -> None:
    """Body, topic and properties of each record: gathered in C, as Arrow's take gives them."""
    data, starts = records(many)
    buf = RecordBuffer(data)
    ok, recs = buf.classify(np.array(starts, np.int64))
    chosen = recs.select(ok)
    for which in (BODY, TOPIC, PROPERTIES):
        taken = buf._pieces(chosen).take(np.arange(2 * which, 6 * len(chosen), 6)) if len(chosen) else None
        assert buf.part(chosen, which).to_pylist() == (taken.to_pylist() if taken is not None else [])


@compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(raw_props, max_size=8), st.sampled_from([(), ("UNIQ_KEY",), ("a", "b", "")]))
@example(blobs=[b"0\x010\x020\x010\x02", b"\x00\x01\x80\x02"], drop=())  # a repeat, then bad UTF-8
def test_compiled_property_split_matches_numpy(blobs: list[bytes], drop: tuple[str, ...]) -> None:
    """Properties blobs (anything ending with 0x02, repeated keys, bad UTF-8) split in C as in
    numpy: the same pairs, key ids and values, or None (for the per-message decoder) alike."""
    array = pa.array(blobs, pa.binary())

    def split(parse: Any) -> Any:
        props = parse(array, len(blobs), drop)
        if props is None:
            return None
        return (props.map.to_pylist(), props.rec.tolist(), props.key_ids.tolist(), props.names,
                [props.column(name).to_pylist() for name in props.names])

    assert split(_Properties.parse_compiled) == split(_Properties.parse_numpy)


def test_many_distinct_property_keys_split() -> None:
    """More distinct keys than the compiled key table starts with (it grows)."""
    blobs = [b"".join(f"k{i}_{j}\x01v{j}\x02".encode() for j in range(40)) for i in range(30)]
    array = pa.array(blobs, pa.binary())
    props = _Properties.parse(array, len(blobs), ())
    assert props is not None and len(props.names) == 1200
    assert props.map.to_pylist()[29][39] == ("k29_39", "v39")
    assert props.column("k3_7").to_pylist()[3] == "v7"


def test_classify_turns_away_each_kind_of_odd_record() -> None:
    """Each rule of the fast path, broken once: both classify twins refuse the record."""
    args = {**plain(3), "properties": b"KEYS\x01k\x02"}
    good = record(args, 0)
    body_end = 88 + len(args["body"])
    topic_len = good[body_end]

    def edited(at: int, value: bytes) -> bytes:
        return good[:at] + value + good[at + len(value):]

    odd = [
        edited(body_end + 1, b"\x00"),  # a topic starting with a zero byte
        edited(len(good) - 1, b"\x03"),  # properties not ending with 0x02
        edited(body_end + 1 + topic_len, (len(good) - body_end - 2 - topic_len).to_bytes(2, "big")),
        edited(body_end, b"\x80"),  # a topic longer than 127 bytes
        edited(4, MAGIC_V2.to_bytes(4, "big", signed=True)),
        edited(36, COMPRESSED.to_bytes(4, "big")),
        edited(52, (70000).to_bytes(4, "big")),  # born port
        edited(68, (70000).to_bytes(4, "big")),  # store port
        edited(84, (len(good)).to_bytes(4, "big")),  # a body longer than the record
        edited(0, (len(good) + 1).to_bytes(4, "big")),  # TOTALSIZE past the end
    ]
    for data in odd:
        buf = RecordBuffer(data)
        for classify in (buf.classify, buf.classify_python):
            ok, _ = classify(np.array([0], np.int64))
            assert not ok[0], data
    assert RecordBuffer(good).classify(np.array([0], np.int64))[0][0]


@pytest.mark.parametrize("data", [b"", b"\x00" * 10, b"\xff" * 87])
def test_classify_takes_nothing_from_a_buffer_too_short_for_a_record(data: bytes) -> None:
    """Found by the fuzzer: the numpy twin indexed an empty buffer."""
    buf = RecordBuffer(data)
    starts = np.array([0, len(data), 5], np.int64)
    for classify in (buf.classify, buf.classify_python):
        ok, recs = classify(starts)
        assert not ok.any() and len(recs.head) == 3
