"""Properties blob encoding and decoding (spec 2.10)."""

import pytest

from bolide.common import properties as P


def test_encode_every_pair_ends_with_0x02_in_insertion_order() -> None:
    props = {"KEYS": "order-1", "TAGS": "TagA"}
    assert P.encode_properties(props) == b"KEYS\x01order-1\x02TAGS\x01TagA\x02"


def test_encode_empty_and_none_values() -> None:
    assert P.encode_properties({}) == b""
    assert P.encode_properties({"A": None, "B": "1"}) == b"B\x011\x02"  # type: ignore[dict-item]


def test_encode_is_utf8() -> None:
    assert P.encode_properties({"K": "é"}) == b"K\x01\xc3\xa9\x02"


def test_spec_example_properties_are_88_bytes() -> None:
    props = {
        "KEYS": "order-1",
        "TAGS": "TagA",
        "UNIQ_KEY": "7F0000010F2C18B4AAC2253A1F2D0000",
        "CLUSTER": "DefaultCluster",
    }
    assert len(P.encode_properties(props)) == 88


def test_decode_round_trip() -> None:
    props = {"KEYS": "a b c", "TAGS": "TagA", "UNIQ_KEY": "0A", "X": "é€😀"}
    assert P.decode_properties(P.encode_properties(props)) == props


@pytest.mark.parametrize(
    ("blob", "expected"),
    [
        (b"\x01v\x02K\x01x\x02", {"K": "x"}),  # empty key dropped
        (b"K\x01\x02L\x01y\x02", {"L": "y"}),  # empty value dropped
        (b"K\x01a\x01b\x02", {"K": "a\x01b"}),  # value containing 0x01 is kept whole
        (b"K\x01v", {"K": "v"}),  # the last pair without its 0x02
        (b"nosep\x02K\x01v\x02", {"K": "v"}),  # segment without 0x01 dropped
        (b"\x02\x02", {}),
        (b"", {}),
        (b"K\x01\x01\x02", {"K": "\x01"}),  # 3 characters, first 0x01 before the last
        (b"K\x01", {}),
    ],
)
def test_decode_rules(blob: bytes, expected: dict[str, str]) -> None:
    assert P.decode_properties(blob) == expected


def test_decode_accepts_str_memoryview_and_bad_utf8() -> None:
    assert P.decode_properties("K\x01v\x02") == {"K": "v"}
    assert P.decode_properties(memoryview(b"K\x01v\x02")) == {"K": "v"}
    assert P.decode_properties(b"K\x01\xff\x02") == {"K": "\ufffd"}


def test_decode_later_duplicate_wins() -> None:
    assert P.decode_properties(b"K\x011\x02K\x012\x02") == {"K": "2"}


def test_find_property() -> None:
    blob = b"XTAGS\x01no\x02TAGS\x01TagA\x02KEYS\x01k1 k2"
    assert P.find_property(blob, b"TAGS") == "TagA"
    assert P.find_property(blob, b"KEYS") == "k1 k2"
    assert P.find_property(blob, b"XTAGS") == "no"
    assert P.find_property(blob, b"MISSING") is None
    assert P.find_property(b"TAGS\x01\x02", b"TAGS") is None
    assert P.find_property(memoryview(blob), b"TAGS") == "TagA"


def test_key_constants_match_rocketmq() -> None:
    assert (P.KEYS, P.TAGS, P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == ("KEYS", "TAGS", "UNIQ_KEY")
    assert (P.DELAY_TIME_LEVEL, P.REAL_TOPIC, P.REAL_QUEUE_ID) == ("DELAY", "REAL_TOPIC", "REAL_QID")
    assert (P.WAIT_STORE_MSG_OK, P.TRANSACTION_PREPARED, P.CLUSTER) == ("WAIT", "TRAN_MSG", "CLUSTER")
    assert P.MAX_PROPERTIES_BYTES == 32767
