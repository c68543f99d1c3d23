"""Round trips of the stored encodings: message properties (spec 2.10) and whole CommitLog
records written by a real store (spec 2.2), decoded back."""

from __future__ import annotations

import zlib
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from bolide.common import properties as P
from bolide.common import sysflag
from bolide.common.hashing import java_string_hash
from bolide.common.message import Message
from bolide.store import GetStatus, MessageStore, PutStatus
from bolide.store.record import (
    MAGIC_V1,
    RecordInfo,
    compute_tags_code,
    parse_record,
    record_property,
)
from conftest import assert_consistent, small_config

SEPARATORS = "\x01\x02"


def chars(excluded: str) -> st.SearchStrategy[str]:
    """Any character UTF-8 can encode (no lone surrogates) but ``excluded``."""
    return st.characters(codec="utf-8", exclude_characters=excluded)


plain_text = st.text(chars(SEPARATORS), min_size=1, max_size=20)
property_maps = st.dictionaries(plain_text, plain_text, max_size=8)

TOPIC_CHARS = "abcXYZ0189%|_-"
topics = st.text(TOPIC_CHARS, min_size=1, max_size=127)
# user properties that no store rule reads (unlike TAGS, KEYS, UNIQ_KEY, DELAY, ...)
user_properties = st.dictionaries(
    st.text("abcxyz_", min_size=1, max_size=10).map(lambda k: f"u_{k}"), plain_text, max_size=4
)
tags = st.none() | plain_text
keys = st.lists(st.text(chars(SEPARATORS + " "), min_size=1, max_size=12), max_size=4)
born_hosts = st.sampled_from(["10.1.2.3:50000", "192.168.0.10:1", "[::1]:10911",
                              "[2001:db8::7]:65535"])
sys_flags = st.sampled_from([
    0, sysflag.COMPRESSED, sysflag.MULTI_TAGS, sysflag.TRANSACTION_PREPARED_TYPE,
    sysflag.TRANSACTION_COMMIT_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE,
    sysflag.COMPRESSED | sysflag.TRANSACTION_COMMIT_TYPE,
])
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@given(property_maps)
def test_properties_round_trip(props: dict[str, str]) -> None:
    encoded = P.encode_properties(props)
    assert P.decode_properties(encoded) == props
    assert encoded.count(b"\x02") == len(props)  # every pair, the last too, ends with 0x02
    for key, value in props.items():
        assert P.find_property(encoded, key.encode()) == value


@given(st.dictionaries(plain_text, st.text(chars("\x02"), max_size=20), max_size=8))
def test_properties_drop_empty_values_and_keep_separator_in_values(props: dict[str, str]) -> None:
    """A value may hold 0x01 (the key ends at the first one); empty values are dropped."""
    encoded = P.encode_properties(props)
    assert P.decode_properties(encoded) == {k: v for k, v in props.items() if v}


@given(st.lists(st.tuples(plain_text, plain_text), max_size=6))
def test_properties_decode_a_java_encoded_string(pairs: list[tuple[str, str]]) -> None:
    """Decoding does not depend on our encoder: a blob built by hand (as Java's
    messageProperties2String would) gives the last value of each key."""
    blob = "".join(f"{k}\x01{v}\x02" for k, v in pairs).encode()
    assert P.decode_properties(blob) == dict(pairs)


@given(keys)
def test_message_keys_round_trip(key_list: list[str]) -> None:
    msg = Message("TopicTest", b"", keys=key_list)
    assert msg.keys == key_list
    assert P.decode_properties(P.encode_properties(msg.properties)).get(P.KEYS) == (
        " ".join(key_list) or None)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    config = small_config(Path(tmp_path_factory.mktemp("codec")) / "store")
    with MessageStore(config) as opened:
        yield opened
    assert_consistent(config)


@settings(max_examples=150, deadline=None)
@given(topic=topics, queue_id=st.integers(0, 7), body=st.binary(max_size=2000), tag=tags,
       key_list=keys, flag=i32, extra=user_properties, sys_flag=sys_flags, born_host=born_hosts,
       born_timestamp=st.integers(1, 2**63 - 1), reconsume_times=i32, prepared=i64)
def test_record_written_by_the_store_decodes_to_its_input(
    store: MessageStore, topic: str, queue_id: int, body: bytes, tag: str | None,
    key_list: list[str], flag: int, extra: dict[str, str], sys_flag: int, born_host: str,
    born_timestamp: int, reconsume_times: int, prepared: int,
) -> None:
    msg = Message(topic, body, tags=tag, keys=key_list, flag=flag, properties=extra)
    r = store.put_message(msg, queue_id, sys_flag=sys_flag, born_timestamp=born_timestamp,
                          born_host=born_host, reconsume_times=reconsume_times,
                          prepared_transaction_offset=prepared)
    assert r.status is PutStatus.PUT_OK, r.remark
    got = store.look_message_by_offset(r.wrote_offset)
    assert got is not None

    v6 = (sysflag.BORNHOST_V6 if born_host.startswith("[") else 0)
    assert (got.topic, got.queue_id, got.body, got.flag) == (topic, queue_id, body, flag)
    assert got.tags == (tag or None)
    assert got.keys == key_list
    assert got.properties == {**msg.properties, P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: r.msg_id}
    assert got.sys_flag == sys_flag | v6
    assert (got.born_timestamp, got.born_host) == (born_timestamp, born_host)
    assert (got.reconsume_times, got.prepared_transaction_offset) == (reconsume_times, prepared)
    assert (got.commit_log_offset, got.store_size) == (r.wrote_offset, r.wrote_bytes)
    assert (got.queue_offset, got.store_timestamp) == (r.queue_offset, r.store_timestamp)
    assert got.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    assert got.magic == MAGIC_V1

    buf = store.commit_log.read(r.wrote_offset, r.wrote_bytes)
    assert buf is not None
    try:
        info = parse_record(buf, 0, True)
        assert type(info) is RecordInfo
        assert (info.size, info.topic, info.queue_id, info.queue_offset, info.commit_log_offset,
                info.sys_flag, info.store_timestamp, info.prepared_transaction_offset) == (
            r.wrote_bytes, topic, queue_id, r.queue_offset, r.wrote_offset, sys_flag | v6,
            r.store_timestamp, prepared)
        assert P.decode_properties(info.properties) == got.properties
        assert record_property(buf, b"TAGS\x01") == (tag or None)
        assert compute_tags_code(info, {}) == (java_string_hash(tag) if tag else 0)
    finally:
        buf.release()

    if sysflag.gets_queue_entry(sys_flag):  # the same record through its ConsumeQueue
        assert store.wait_dispatched()
        res = store.get_message("codec", topic, queue_id, r.queue_offset, 1)
        try:
            assert res.status is GetStatus.FOUND
            assert res.queue_offsets == [r.queue_offset]
            (read,) = res.messages
            assert (read.body, read.properties, read.commit_log_offset) == (
                body, got.properties, r.wrote_offset)
        finally:
            res.release()
