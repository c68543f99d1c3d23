"""offsetMsgId and UNIQ_KEY (spec 13)."""

import os
import time
from datetime import datetime

import pytest

from bolide.common.hosts import encode_host
from bolide.common.msgid import (
    UniqKeyGenerator,
    create_offset_msg_id,
    decode_offset_msg_id,
    decode_uniq_msg_id,
)


def test_offset_msg_id_ipv4() -> None:
    msg_id = create_offset_msg_id(encode_host("192.168.0.1:10911"), 202)
    assert msg_id == "C0A8000100002A9F00000000000000CA"
    assert len(msg_id) == 32
    assert decode_offset_msg_id(msg_id) == ("192.168.0.1:10911", 202)


def test_offset_msg_id_ipv6() -> None:
    msg_id = create_offset_msg_id(encode_host("[2001:db8::1]:10911"), 1 << 40)
    assert len(msg_id) == 56
    assert msg_id == "20010DB8000000000000000000000001" + "00002A9F" + "0000010000000000"
    assert decode_offset_msg_id(msg_id) == ("[2001:db8::1]:10911", 1 << 40)


def test_offset_msg_id_decodes_lowercase_and_large_offsets() -> None:
    msg_id = create_offset_msg_id(encode_host("10.0.0.1:1"), 2**62)
    assert decode_offset_msg_id(msg_id.lower()) == ("10.0.0.1:1", 2**62)


@pytest.mark.parametrize("bad", ["", "ABC", "0" * 31, "0" * 33, "0" * 55, "Z" * 32])
def test_decode_rejects_bad_ids(bad: str) -> None:
    with pytest.raises(ValueError):
        decode_offset_msg_id(bad)


def test_uniq_key_layout_ipv4() -> None:
    gen = UniqKeyGenerator(ip=bytes([10, 0, 0, 1]))
    ids = [gen.next_id() for _ in range(3)]
    for uid in ids:
        assert len(uid) == 32
        assert uid == uid.upper()
        int(uid, 16)
        assert uid.startswith("0A000001")
        assert uid[8:12] == f"{os.getpid() & 0x7FFF:04X}"
    assert len({uid[:20] for uid in ids}) == 1  # the first 10 bytes are constant
    counters = [int(uid[28:], 16) for uid in ids]
    assert counters[1] == (counters[0] + 1) & 0xFFFF
    assert counters[2] == (counters[1] + 1) & 0xFFFF


def test_uniq_key_ipv6_is_56_hex() -> None:
    gen = UniqKeyGenerator(ip=bytes(range(16)))
    uid = gen.next_id()
    assert len(uid) == 56
    assert uid.startswith(bytes(range(16)).hex().upper())


def test_uniq_key_default_ip_is_ipv4() -> None:
    assert len(UniqKeyGenerator().next_id()) == 32


def test_uniq_key_unique_over_100k_calls() -> None:
    gen = UniqKeyGenerator(ip=bytes([127, 0, 0, 1]))
    ids = [gen.next_id() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)


def test_two_generators_differ_in_prefix() -> None:
    a = UniqKeyGenerator(ip=bytes(4)).next_id()
    b = UniqKeyGenerator(ip=bytes(4)).next_id()
    assert a[:12] == b[:12]  # same ip and pid
    assert a[12:20] != b[12:20]  # a random salt per generator


def test_uniq_key_time_is_ms_since_month_start() -> None:
    gen = UniqKeyGenerator(ip=bytes([127, 0, 0, 1]))
    before = time.time() * 1000
    uid = gen.next_id()
    after = time.time() * 1000
    now = datetime.now()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp() * 1000
    elapsed = int(uid[20:28], 16)
    assert before - start - 1 <= elapsed <= after - start + 1
    assert elapsed < 31 * 86_400_000  # less than a month, not ms since the epoch


def test_a_unique_id_decodes_to_its_client_and_time() -> None:
    before = int(time.time() * 1000)
    msg_id = UniqKeyGenerator(ip=bytes([10, 1, 2, 3])).next_id()
    ip, pid, ms = decode_uniq_msg_id(msg_id)
    assert (ip, pid) == ("10.1.2.3", os.getpid() & 0x7FFF)
    assert before - 1 <= ms <= int(time.time() * 1000)


def test_a_unique_id_made_last_month_decodes_to_last_month() -> None:
    # 10 days into a month, an id made 20 days after the start of a month is from the month before
    now = datetime(2026, 3, 10, 12, 0).timestamp() * 1000
    span = 20 * 86_400_000
    msg_id = f"7F000001{0x1234:04X}00000000{span:08X}0001"
    ip, pid, ms = decode_uniq_msg_id(msg_id, now_ms=now)
    assert (ip, pid, datetime.fromtimestamp(ms / 1000)) == ("127.0.0.1", 0x1234, datetime(2026, 2, 21, 0, 0))
    ipv6 = decode_uniq_msg_id("20010DB8000000000000000000000001" + "0001" + "00000000" + "00000005" + "0001",
                              now_ms=now)
    assert ipv6[:2] == ("2001:db8::1", 1)


@pytest.mark.parametrize("bad", ["", "XYZ", "0" * 30, "0" * 34])
def test_decode_uniq_rejects_bad_ids(bad: str) -> None:
    with pytest.raises(ValueError):
        decode_uniq_msg_id(bad)
