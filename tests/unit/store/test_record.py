"""CommitLog record codec: the spec's worked example (2.16), v2 and IPv6 records, and the
parser's verdicts on blank, corrupt and truncated data (2.12b)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from bolide.common import sysflag
from bolide.common.hosts import encode_host
from bolide.common.properties import encode_properties
from bolide.store.commitlog import CommitLog
from bolide.store.config import StoreConfig
from bolide.store.delay import parse_delay_levels
from bolide.store.record import (
    BLANK,
    BLANK_MAGIC,
    HEADER_V4,
    HEADERS,
    MAGIC_V1,
    MAGIC_V2,
    RecordError,
    RecordInfo,
    body_crc,
    compute_tags_code,
    decode_record,
    encode_record,
    parse_record,
    read_store_timestamp,
    read_total_size,
    record_property,
    record_size,
    write_blank,
)

SPEC_HEX = """
0000  00 00 00 ca da a3 20 a7 69 c8 65 ed 00 00 00 00
0010  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0020  00 00 00 00 00 00 00 00 00 00 01 8b cf e5 68 00
0030  c0 a8 00 0a 00 00 c3 50 00 00 01 8b cf e5 68 7b
0040  c0 a8 00 01 00 00 2a 9f 00 00 00 00 00 00 00 00
0050  00 00 00 00 00 00 00 0e 48 65 6c 6c 6f 20 52 6f
0060  63 6b 65 74 4d 51 09 54 6f 70 69 63 54 65 73 74
0070  00 58 4b 45 59 53 01 6f 72 64 65 72 2d 31 02 54
"""
SPEC_PREFIX = bytes.fromhex("".join(line[6:] for line in SPEC_HEX.strip().splitlines()))

SPEC_PROPS = {
    "KEYS": "order-1",
    "TAGS": "TagA",
    "UNIQ_KEY": "7F0000010F2C18B4AAC2253A1F2D0000",
    "CLUSTER": "DefaultCluster",
}
DELAYS = parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")


def spec_record() -> bytes:
    return encode_record(
        "TopicTest", 0, b"Hello RocketMQ", encode_properties(SPEC_PROPS),
        born_timestamp=1700000000000, born_host=encode_host("192.168.0.10:50000"),
        store_timestamp=1700000000123, store_host=encode_host("192.168.0.1:10911"),
    )


def make(topic: str = "T", body: bytes = b"body", props: bytes = b"TAGS\x01t\x02", *,
         born: str = "10.0.0.1:1", store: str = "10.0.0.2:2", **kw: object) -> bytes:
    return encode_record(topic, 1, body, props, born_timestamp=11, born_host=encode_host(born),
                         store_timestamp=22, store_host=encode_host(store), **kw)  # type: ignore[arg-type]


# -- the worked example -------------------------------------------------------------------
def test_spec_example_bytes() -> None:
    rec = spec_record()
    assert len(SPEC_PREFIX) == 0x80
    assert len(rec) == 202
    assert rec[:0x80] == SPEC_PREFIX
    assert struct.unpack_from(">i", rec, 0)[0] == 202
    assert struct.unpack_from(">i", rec, 8)[0] == 1774740973 == body_crc(b"Hello RocketMQ")
    assert rec[0x80:] == encode_properties(SPEC_PROPS)[14:]  # the rest of the properties
    assert record_size(14, 9, 88) == 202
    assert read_total_size(rec, 0) == 202
    assert read_store_timestamp(rec, 0) == 1700000000123


def test_spec_example_decode_record() -> None:
    m = decode_record(spec_record())
    assert m.topic == "TopicTest"
    assert m.body == b"Hello RocketMQ"
    assert m.properties == SPEC_PROPS
    assert list(m.properties) == ["KEYS", "TAGS", "UNIQ_KEY", "CLUSTER"]
    assert (m.queue_id, m.flag, m.queue_offset, m.commit_log_offset, m.sys_flag) == (0, 0, 0, 0, 0)
    assert m.store_size == 202
    assert m.body_crc == 1774740973
    assert m.magic == MAGIC_V1
    assert m.born_timestamp == 1700000000000
    assert m.born_host == "192.168.0.10:50000"
    assert m.store_timestamp == 1700000000123
    assert m.store_host == "192.168.0.1:10911"
    assert (m.reconsume_times, m.prepared_transaction_offset) == (0, 0)
    assert m.tags == "TagA" and m.keys == ["order-1"]
    assert m.msg_id == "7F0000010F2C18B4AAC2253A1F2D0000"
    assert m.offset_msg_id == "C0A8000100002A9F0000000000000000"


def test_spec_example_parse_record() -> None:
    rec = spec_record()
    info = parse_record(rec, 0, True)
    assert isinstance(info, RecordInfo)
    assert info == RecordInfo(202, "TopicTest", 0, 0, 0, 0, 1700000000123,
                              encode_properties(SPEC_PROPS), 0)
    assert compute_tags_code(info, DELAYS) == 2598919
    assert record_property(rec, b"TAGS\x01") == "TagA"
    assert record_property(rec, b"KEYS\x01") == "order-1"
    assert record_property(rec, b"NOPE\x01") is None


def test_parse_at_an_offset_inside_a_larger_buffer() -> None:
    rec = spec_record()
    buf = memoryview(b"\xee" * 50 + rec + bytes(30))
    info = parse_record(buf, 50, True)
    assert isinstance(info, RecordInfo) and info.size == 202 and info.topic == "TopicTest"
    assert decode_record(buf, 50).body == b"Hello RocketMQ"
    assert parse_record(buf, 50 + 202, True) == RecordError(-1, "end of data (zero bytes)")


def test_encode_record_matches_commitlog_append(tmp_path: Path) -> None:
    """The codec and the CommitLog's inlined writer produce the same bytes."""
    config = StoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=64 * 1024,
                         store_host="192.168.0.1", listen_port=10911)
    cl = CommitLog(config, None)
    body = b"Hello RocketMQ"
    props = encode_properties(SPEC_PROPS)
    born_host = encode_host("192.168.0.10:50000")
    try:
        cl.append("Other", 0, b"x", b"", 0, 0, 1, born_host, 0, 0, body_crc(b"x"))
        offset, size, queue_offset, store_ts = cl.append(
            "TopicTest", 3, body, props, 5, sysflag.MULTI_TAGS, 1700000000000, born_host, 2, 77,
            body_crc(body),
        )
        written = bytes(cl.read(offset, size))  # type: ignore[arg-type]
    finally:
        cl.close()
    expected = encode_record(
        "TopicTest", 3, body, props, born_timestamp=1700000000000, born_host=born_host,
        store_timestamp=store_ts, store_host=encode_host("192.168.0.1:10911"), flag=5,
        queue_offset=queue_offset, physical_offset=offset, sys_flag=sysflag.MULTI_TAGS,
        reconsume_times=2, prepared_transaction_offset=77,
    )
    assert offset > 0
    assert written == expected


# -- v2 and IPv6 --------------------------------------------------------------------------
def test_v2_record_has_two_byte_topic_length() -> None:
    v1 = make("TopicTest")
    v2 = make("TopicTest", magic=MAGIC_V2)
    assert len(v2) == len(v1) + 1
    assert struct.unpack_from(">I", v2, 4)[0] == 0xDAA320AB
    p = HEADER_V4.size + 4
    assert v2[p : p + 2] == b"\x00\x09"
    info = parse_record(v2, 0, True)
    assert isinstance(info, RecordInfo) and info.topic == "TopicTest" and info.size == len(v2)
    m = decode_record(v2)
    assert m.topic == "TopicTest" and m.magic == MAGIC_V2 and m.body == b"body"
    assert record_property(v2, b"TAGS\x01") == "t"


def test_v2_record_with_long_topic() -> None:
    topic = "L" * 300
    rec = make(topic, magic=MAGIC_V2)
    info = parse_record(rec, 0, True)
    assert isinstance(info, RecordInfo) and info.topic == topic
    assert decode_record(rec).topic == topic
    with pytest.raises(ValueError, match="127"):
        make(topic)


@pytest.mark.parametrize(
    ("born", "store", "flags"),
    [
        ("[2001:db8::1]:50000", "192.168.0.1:10911", sysflag.BORNHOST_V6),
        ("192.168.0.10:50000", "[fe80::1]:10911", sysflag.STOREHOST_V6),
        ("[2001:db8::1]:50000", "[fe80::1]:10911", sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6),
    ],
)
@pytest.mark.parametrize("magic", [MAGIC_V1, MAGIC_V2])
def test_ipv6_hosts_round_trip(born: str, store: str, flags: int, magic: int) -> None:
    rec = make("TopicTest", b"payload", encode_properties(SPEC_PROPS), born=born, store=store,
               magic=magic, sys_flag=sysflag.TRANSACTION_COMMIT_TYPE)
    extra = (12 if flags & sysflag.BORNHOST_V6 else 0) + (12 if flags & sysflag.STOREHOST_V6 else 0)
    assert len(rec) == 91 + 7 + 9 + 88 + extra + (magic == MAGIC_V2)
    sys_flag = struct.unpack_from(">i", rec, 36)[0]
    assert sys_flag == flags | sysflag.TRANSACTION_COMMIT_TYPE
    info = parse_record(rec, 0, True)
    assert isinstance(info, RecordInfo)
    assert (info.size, info.topic, info.sys_flag, info.store_timestamp) == (len(rec), "TopicTest",
                                                                           sys_flag, 22)
    m = decode_record(rec)
    assert (m.born_host, m.store_host) == (born, store)
    assert m.properties == SPEC_PROPS
    assert read_store_timestamp(rec, 0) == 22
    ts_at = 68 if flags & sysflag.BORNHOST_V6 else 56
    assert struct.unpack_from(">q", rec, ts_at)[0] == 22
    assert record_property(rec, b"UNIQ_KEY\x01") == SPEC_PROPS["UNIQ_KEY"]


def test_headers_sizes() -> None:
    assert HEADERS[(8, 8)].size == 88
    assert HEADERS[(20, 8)].size == HEADERS[(8, 20)].size == 100
    assert HEADERS[(20, 20)].size == 112


def test_empty_body_topic_fields_and_no_properties() -> None:
    rec = make("T", b"", b"")
    assert len(rec) == 92
    assert struct.unpack_from(">i", rec, 8)[0] == 0  # crc of an empty body is 0
    info = parse_record(rec, 0, True)
    assert isinstance(info, RecordInfo) and info.properties == b""
    assert compute_tags_code(info, DELAYS) == 0
    assert decode_record(rec).properties == {}


def test_encode_record_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="8 \\(IPv4\\) or 20"):
        encode_record("T", 0, b"", b"", born_timestamp=0, born_host=b"1234", store_timestamp=0,
                      store_host=encode_host("1.2.3.4:5"))
    with pytest.raises(ValueError, match="neither"):
        make(magic=BLANK_MAGIC)


# -- parser verdicts ----------------------------------------------------------------------
def test_blank_magic_returns_blank() -> None:
    buf = bytearray(64)
    write_blank(buf, 16, 48)
    assert struct.unpack_from(">iI", buf, 16) == (48, 0xCBD43194)
    assert parse_record(buf, 16, True) is BLANK
    assert BLANK.size == 0


def test_zero_bytes_are_end_of_data() -> None:
    assert parse_record(bytes(200), 0, True) == RecordError(-1, "end of data (zero bytes)")


def test_bad_magic() -> None:
    rec = bytearray(spec_record())
    rec[4:8] = b"\x12\x34\x56\x78"
    result = parse_record(rec, 0, True)
    assert isinstance(result, RecordError)
    assert result.size == -1 and "magic" in result.reason and "12345678" in result.reason


def test_crc_mismatch_only_when_checking() -> None:
    rec = bytearray(spec_record())
    rec[0x58] ^= 0x01  # first body byte
    result = parse_record(rec, 0, True)
    assert isinstance(result, RecordError) and result.size == -1 and "CRC" in result.reason
    assert isinstance(parse_record(rec, 0, False), RecordInfo)


def test_totalsize_mismatch_reports_the_size() -> None:
    rec = bytearray(spec_record()) + bytes(10)
    struct.pack_into(">i", rec, 0, 205)
    result = parse_record(rec, 0, True)
    assert isinstance(result, RecordError)
    assert result.size == 205
    assert "TOTALSIZE 205" in result.reason and "202" in result.reason


def test_truncated_buffer() -> None:
    rec = spec_record()
    result = parse_record(rec[:-1], 0, True)
    assert isinstance(result, RecordError) and result.size == -1 and result.reason
    result = parse_record(rec[:5], 0, True)
    assert isinstance(result, RecordError) and result.size == -1 and "8 bytes" in result.reason
    assert isinstance(parse_record(rec, 5, True), RecordError)


def test_small_totalsize_is_an_error_with_a_reason() -> None:
    rec = bytearray(spec_record())
    struct.pack_into(">i", rec, 0, 40)
    result = parse_record(rec, 0, True)
    assert isinstance(result, RecordError) and result.size == -1 and "40" in result.reason


def test_ipv6_flags_on_a_short_record_do_not_read_past_the_buffer() -> None:
    # An IPv4 record of 92 bytes whose sysflag claims both hosts are IPv6: the fixed fields
    # then need 112 bytes, more than the record and the buffer hold.
    rec = bytearray(make("T", b"", b""))
    struct.pack_into(">i", rec, 36, sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6)
    result = parse_record(bytes(rec), 0, True)
    assert isinstance(result, RecordError) and result.size == -1 and result.reason


def test_body_length_up_to_the_record_end_does_not_read_past_the_buffer() -> None:
    rec = bytearray(make("T", b"abc", b""))
    struct.pack_into(">i", rec, 84, len(rec) - 88)  # body swallows topic and properties
    for check_crc in (False, True):
        result = parse_record(bytes(rec), 0, check_crc)
        assert isinstance(result, RecordError) and result.size == -1 and result.reason
    v2 = bytearray(make("T", b"abc", b"", magic=MAGIC_V2))
    struct.pack_into(">i", v2, 84, len(v2) - 89)  # one byte left: half a v2 topic length
    result = parse_record(bytes(v2), 0, False)
    assert isinstance(result, RecordError) and result.size == -1


@pytest.mark.parametrize("magic", [MAGIC_V1, MAGIC_V2])
def test_every_single_byte_corruption_gives_info_or_error(magic: int) -> None:
    base = make("TopicTest", b"Hello", b"TAGS\x01TagA\x02", magic=magic,
                born="[::1]:1" if magic == MAGIC_V2 else "10.0.0.1:1")
    for i in range(len(base)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            rec = bytearray(base)
            rec[i] = value
            for check_crc in (False, True):
                result = parse_record(bytes(rec), 0, check_crc)
                assert isinstance(result, RecordInfo | RecordError), (i, value)


def test_every_truncation_gives_an_error() -> None:
    rec = spec_record()
    for n in range(len(rec)):
        result = parse_record(rec[:n], 0, True)
        assert isinstance(result, RecordError), n
        assert result.reason


def test_crc_is_masked_to_31_bits() -> None:
    for body in (b"", b"a", b"Hello RocketMQ", bytes(range(256)) * 3):
        assert body_crc(body) == zlib.crc32(body) & 0x7FFFFFFF
        assert body_crc(body) >= 0
    assert body_crc(b"") == 0


# -- tags codes ---------------------------------------------------------------------------
def _info(topic: str, props: dict[str, str], store_ts: int = 1_000_000) -> RecordInfo:
    return RecordInfo(100, topic, 0, 0, 0, 0, store_ts, encode_properties(props), 0)


def test_tags_code_of_normal_topics() -> None:
    assert compute_tags_code(_info("T", {"TAGS": "TagA"}), DELAYS) == 2598919
    assert compute_tags_code(_info("T", {"XTAGS": "TagA"}), DELAYS) == 0
    assert compute_tags_code(_info("T", {"TAGS": "polygenelubricants"}), DELAYS) == -(2**31)
    assert compute_tags_code(_info("T", {"KEYS": "k", "TAGS": "TagB"}), DELAYS) == 2598920
    assert compute_tags_code(_info("T", {"TAGS": "TagA", "DELAY": "3"}), DELAYS) == 2598919


def test_tags_code_of_schedule_topic_is_delivery_time() -> None:
    topic = "SCHEDULE_TOPIC_XXXX"
    assert compute_tags_code(_info(topic, {"DELAY": "3", "TAGS": "TagA"}), DELAYS) == 1_010_000
    assert compute_tags_code(_info(topic, {"DELAY": "18"}), DELAYS) == 1_000_000 + 7_200_000
    assert compute_tags_code(_info(topic, {"DELAY": "99"}), DELAYS) == 1_000_000 + 7_200_000
    assert compute_tags_code(_info(topic, {"DELAY": "1"}), {}) == 1_001_000  # no table entry
    assert compute_tags_code(_info(topic, {"DELAY": "0", "TAGS": "TagA"}), DELAYS) == 2598919
    assert compute_tags_code(_info(topic, {"DELAY": "x", "TAGS": "TagA"}), DELAYS) == 2598919


def test_tags_code_with_a_non_ascii_digit_delay_does_not_raise() -> None:
    topic = "SCHEDULE_TOPIC_XXXX"
    assert compute_tags_code(_info(topic, {"DELAY": "²", "TAGS": "TagA"}), DELAYS) == 2598919


def test_a_record_whose_topic_or_properties_are_zeros_is_torn() -> None:
    host = encode_host("127.0.0.1:10911")
    good = encode_record("TopicA", 0, b"body", b"KEYS\x01k\x02", born_timestamp=1, born_host=host,
                         store_timestamp=2, store_host=host)
    assert isinstance(parse_record(good, 0, True), RecordInfo)
    total = len(good)
    props_cut = bytearray(good)
    props_cut[total - 3:] = bytes(3)  # the end of the properties never reached the file
    topic_cut = bytearray(good)
    topic_at = total - 2 - len(b"KEYS\x01k\x02") - len(b"TopicA")
    topic_cut[topic_at:topic_at + 6] = bytes(6)
    for torn in (props_cut, topic_cut):
        found = parse_record(bytes(torn), 0, True)  # the body CRC still matches
        assert isinstance(found, RecordError) and found.size == -1 and "cut short" in found.reason
