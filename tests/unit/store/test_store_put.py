"""MessageStore.put_message / put_messages: results, record placement, delay and transaction
rewrites, and refusal of bad input."""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable

import pytest

from bolide.common import properties as P
from bolide.common import sysflag
from bolide.common.hashing import java_string_hash
from bolide.common.message import Message
from bolide.common.msgid import decode_offset_msg_id
from bolide.store import GetStatus, MessageStore, PutStatus
from bolide.store.mapped_file import file_name
from bolide.store.record import BLANK_MAGIC, decode_record
from conftest import SMALL_COMMIT_LOG, assert_consistent

Open = Callable[..., MessageStore]
SEG = SMALL_COMMIT_LOG
UNIQ = "0A0000010000AAAABBBB0000CCCC0001"  # 32 hex chars, like a client-made UNIQ_KEY


def stored_size(body: bytes, topic: str, props: dict[str, str]) -> int:
    """TOTALSIZE of a v1 record with IPv4 hosts (spec 2.5)."""
    return 91 + len(body) + len(topic.encode()) + len(P.encode_properties(props))


def segment_bytes(store: MessageStore, start: int) -> bytes:
    """The CommitLog segment starting at ``start`` as it is in the file on disk."""
    return (store.config.commit_log_dir / file_name(start)).read_bytes()


def fill_to(store: MessageStore, position: int, topic: str = "Filler") -> None:
    """Put messages until the active segment is written up to exactly ``position``."""
    props = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}
    overhead = stored_size(b"", topic, props)
    while store.max_phy_offset % SEG != position:
        need = position - store.max_phy_offset % SEG
        assert need >= overhead, "cannot land exactly; start from an emptier segment"
        body_len = 8000 if need > 8000 + 2 * overhead else need - overhead
        r = store.put_message(Message(topic, b"f" * body_len, properties=props))
        assert r.ok, r.remark


# -- put_message results ------------------------------------------------------------------
def test_put_message_result_fields(open_store: Open) -> None:
    store = open_store()
    body = b"hello bolide"
    msg = Message("TopicTest", body, tags="TagA", keys="order-1")
    before_ms = int(time.time() * 1000)
    first = store.put_message(msg, queue_id=3)
    after_ms = int(time.time() * 1000)

    assert first.status is PutStatus.PUT_OK and first.ok
    assert first.remark == ""
    assert first.wrote_offset == 0
    assert first.queue_offset == 0
    assert first.msg_num == 1
    assert re.fullmatch(r"[0-9A-F]{32}", first.msg_id or "")
    assert first.msg_ids == [first.msg_id]
    stored_props = {**msg.properties, P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: first.msg_id}
    assert first.wrote_bytes == stored_size(body, "TopicTest", stored_props)
    assert first.end_offset == first.wrote_offset + first.wrote_bytes
    assert before_ms <= first.store_timestamp <= after_ms
    assert store.max_phy_offset == first.end_offset

    host, offset = decode_offset_msg_id(first.offset_msg_id or "")
    assert (host, offset) == ("127.0.0.1:10911", 0)

    second = store.put_message(Message("TopicTest", b"second", tags="TagA"), queue_id=3)
    other_queue = store.put_message(Message("TopicTest", b"other"), queue_id=4)
    other_topic = store.put_message(Message("OtherTopic", b"x"), queue_id=3)
    assert second.queue_offset == 1
    assert other_queue.queue_offset == 0
    assert other_topic.queue_offset == 0
    assert second.wrote_offset == first.end_offset
    assert second.msg_id != first.msg_id
    assert decode_offset_msg_id(second.offset_msg_id or "") == ("127.0.0.1:10911", second.wrote_offset)
    assert first.store_timestamp <= second.store_timestamp <= other_topic.store_timestamp

    # the record on disk says the same
    stored = store.look_message_by_offset(first.wrote_offset)
    assert stored is not None
    assert stored.store_size == first.wrote_bytes
    assert stored.store_timestamp == first.store_timestamp
    assert before_ms <= stored.born_timestamp <= stored.store_timestamp  # born time defaults to now
    assert stored.queue_id == 3 and stored.queue_offset == 0
    assert stored.msg_id == first.msg_id
    assert stored.offset_msg_id == first.offset_msg_id
    assert stored.store_host == "127.0.0.1:10911"
    assert stored.body == body and stored.tags == "TagA" and stored.keys == ["order-1"]


def test_put_message_records_caller_fields(open_store: Open) -> None:
    store = open_store()
    r = store.put_message(Message("TopicTest", b"b", flag=77), queue_id=1, born_timestamp=1_700_000_000_000,
                          born_host="192.168.0.10:50000", reconsume_times=2)
    assert r.ok
    stored = store.look_message_by_offset(r.wrote_offset)
    assert stored is not None
    assert stored.flag == 77
    assert stored.born_timestamp == 1_700_000_000_000
    assert stored.born_host == "192.168.0.10:50000"
    assert stored.reconsume_times == 2


def test_ipv6_store_host_record_size_and_offset_msg_id(open_store: Open) -> None:
    store = open_store(store_host="::1")
    r = store.put_message(Message("TopicTest", b"v6", properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}),
                          born_host="10.0.0.1:1234")
    assert r.ok
    assert r.wrote_bytes == stored_size(b"v6", "TopicTest", {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}) + 12
    assert len(r.offset_msg_id or "") == 56
    assert decode_offset_msg_id(r.offset_msg_id or "") == ("[::1]:10911", 0)
    stored = store.look_message_by_offset(0)
    assert stored is not None
    assert stored.sys_flag & sysflag.STOREHOST_V6 and not stored.sys_flag & sysflag.BORNHOST_V6
    assert stored.store_host == "[::1]:10911" and stored.born_host == "10.0.0.1:1234"
    both = store.put_message(Message("TopicTest", b"v6", properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}))
    assert both.wrote_bytes == r.wrote_bytes + 12  # born host defaults to the (IPv6) store host


def test_provided_uniq_key_is_kept(open_store: Open) -> None:
    store = open_store()
    r = store.put_message(Message("TopicTest", b"x", properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}))
    assert r.ok
    assert r.msg_id == UNIQ and r.msg_ids == [UNIQ]
    stored = store.look_message_by_offset(r.wrote_offset)
    assert stored is not None and stored.msg_id == UNIQ


def test_generated_msg_ids_are_unique(open_store: Open) -> None:
    store = open_store()
    ids = [store.put_message(Message("TopicTest", b"x")).msg_id for _ in range(300)]
    assert len(set(ids)) == 300
    assert all(i is not None and re.fullmatch(r"[0-9A-F]{32}", i) for i in ids)


# -- batches -------------------------------------------------------------------------------
def test_put_messages_batch(open_store: Open) -> None:
    store = open_store()
    store.put_message(Message("BatchTopic", b"before"), queue_id=1)
    msgs = [Message("BatchTopic", f"m{i}".encode(), tags="T") for i in range(5)]
    r = store.put_messages(msgs, queue_id=1)
    assert r.ok, r.remark
    assert r.msg_num == 5
    assert len(r.msg_ids) == 5 and len(set(r.msg_ids)) == 5
    assert r.msg_id == r.msg_ids[0]
    assert r.queue_offset == 1
    assert r.end_offset == store.max_phy_offset
    sizes = [stored_size(m.body, "BatchTopic", {**m.properties, P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uid})
             for m, uid in zip(msgs, r.msg_ids, strict=True)]
    assert r.wrote_bytes == sum(sizes)

    assert store.wait_dispatched()
    got = store.get_message("g", "BatchTopic", 1, 1)
    assert got.status is GetStatus.FOUND
    assert [m.queue_offset for m in got.messages] == [1, 2, 3, 4, 5]
    assert got.queue_offsets == [1, 2, 3, 4, 5]
    assert [m.msg_id for m in got.messages] == r.msg_ids
    assert [m.body for m in got.messages] == [m.body for m in msgs]
    offset = r.wrote_offset
    for m, size in zip(got.messages, sizes, strict=True):  # contiguous, each with its own offset
        assert m.commit_log_offset == offset and m.store_size == size
        offset += size

    after = store.put_message(Message("BatchTopic", b"after"), queue_id=1)
    assert after.queue_offset == 6


def test_batch_never_straddles_segments(open_store: Open) -> None:
    store = open_store()
    fill_to(store, SEG - 2000)
    msgs = [Message("BatchTopic", b"b" * 300) for _ in range(8)]  # ~3 KB: does not fit in 2000
    r = store.put_messages(msgs)
    assert r.ok, r.remark
    assert r.wrote_offset == SEG  # moved whole to the next segment
    assert (r.end_offset - 1) // SEG == 1
    head = segment_bytes(store, 0)[SEG - 2000 : SEG - 1992]
    assert struct.unpack(">ii", head) == (2000, BLANK_MAGIC)


# -- segment roll ----------------------------------------------------------------------------
def test_segment_roll_writes_blank_record(open_store: Open) -> None:
    store = open_store()
    fill_to(store, SEG - 500)
    props = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}
    body = b"r" * (500 - stored_size(b"", "RollTopic", props) - 7)  # record = free - 7: no room
    r = store.put_message(Message("RollTopic", body, properties=props))
    assert r.ok
    assert r.wrote_offset == SEG
    data = segment_bytes(store, 0)
    assert len(data) == SEG
    assert struct.unpack_from(">ii", data, SEG - 500) == (500, BLANK_MAGIC)
    assert struct.unpack_from(">I", data, SEG - 496) == (0xCBD43194,)
    # the new segment starts with the record
    stored = decode_record(segment_bytes(store, SEG), 0)
    assert stored.commit_log_offset == SEG and stored.body == body


def test_record_may_end_exactly_eight_bytes_before_segment_end(open_store: Open) -> None:
    store = open_store()
    fill_to(store, SEG - 500)
    props = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}
    body = b"e" * (500 - stored_size(b"", "EdgeTopic", props) - 8)  # record = free - 8: fits
    r = store.put_message(Message("EdgeTopic", body, properties=props))
    assert r.ok
    assert r.wrote_offset == SEG - 500 and r.end_offset == SEG - 8
    nxt = store.put_message(Message("EdgeTopic", b"next"))
    assert nxt.wrote_offset == SEG
    assert struct.unpack_from(">ii", segment_bytes(store, 0), SEG - 8) == (8, BLANK_MAGIC)


def test_records_always_leave_eight_free_bytes(open_store: Open) -> None:
    store = open_store()
    results = []
    for i in range(400):
        size = (i * 7919) % 3000  # varied sizes so records land at many positions
        r = store.put_message(Message("SpreadTopic", b"s" * size), queue_id=i % 3)
        assert r.ok
        results.append(r)
    assert store.max_phy_offset > 5 * SEG
    for r in results:
        start = r.wrote_offset % SEG
        assert start + r.wrote_bytes + 8 <= SEG
    # every closed segment ends with a BLANK header covering the rest of the file
    ends = {r.wrote_offset // SEG: r.end_offset % SEG for r in results}
    for seg in range(store.max_phy_offset // SEG):
        data = segment_bytes(store, seg * SEG)
        pos = ends[seg]
        assert struct.unpack_from(">ii", data, pos) == (SEG - pos, BLANK_MAGIC)
    assert store.wait_dispatched()
    assert sum(store.get_max_offset_in_queue("SpreadTopic", q) for q in range(3)) == 400


# -- delay and transactions ------------------------------------------------------------------
def test_delayed_message_goes_to_schedule_topic(open_store: Open) -> None:
    store = open_store()
    msg = Message("TopicTest", b"later", tags="TagA", properties={P.DELAY_TIME_LEVEL: "3"})
    r = store.put_message(msg, queue_id=5)
    assert r.ok
    assert r.queue_offset == 0
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("TopicTest", 5) == 0
    assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1

    got = store.get_message("g", "SCHEDULE_TOPIC_XXXX", 2, 0)
    assert got.status is GetStatus.FOUND
    stored = got.messages[0]
    assert stored.topic == "SCHEDULE_TOPIC_XXXX" and stored.queue_id == 2
    assert stored.properties[P.REAL_TOPIC] == "TopicTest"
    assert stored.properties[P.REAL_QUEUE_ID] == "5"
    assert stored.properties[P.DELAY_TIME_LEVEL] == "3"
    assert stored.tags == "TagA"
    assert stored.body == b"later"

    entry = store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 2).entry(0)
    assert entry == (r.wrote_offset, r.wrote_bytes, r.store_timestamp + 10_000)
    assert entry[2] != java_string_hash("TagA")


def test_delay_level_above_max_is_clamped(open_store: Open) -> None:
    store = open_store()
    r = store.put_message(Message("TopicTest", b"x", properties={P.DELAY_TIME_LEVEL: "99"}))
    assert r.ok
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 17) == 1
    stored = store.look_message_by_offset(r.wrote_offset)
    assert stored is not None and stored.properties[P.DELAY_TIME_LEVEL] == "18"
    entry = store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 17).entry(0)
    assert entry is not None and entry[2] == r.store_timestamp + 2 * 3600 * 1000


def test_delay_level_zero_is_a_normal_message(open_store: Open) -> None:
    store = open_store()
    r = store.put_message(Message("TopicTest", b"x", properties={P.DELAY_TIME_LEVEL: "0"}))
    assert r.ok
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("TopicTest", 0) == 1
    assert "SCHEDULE_TOPIC_XXXX" not in store.topics()


def test_transaction_prepared_and_rollback_get_no_queue_entry(open_store: Open) -> None:
    store = open_store()
    normal = store.put_message(Message("TxTopic", b"n0"), queue_id=0)
    prepared = store.put_message(Message("TxTopic", b"half"), queue_id=0,
                                 sys_flag=sysflag.TRANSACTION_PREPARED_TYPE)
    rollback = store.put_message(Message("TxTopic", b"rb"), queue_id=0,
                                 sys_flag=sysflag.TRANSACTION_ROLLBACK_TYPE)
    commit = store.put_message(Message("TxTopic", b"commit"), queue_id=0,
                               sys_flag=sysflag.TRANSACTION_COMMIT_TYPE,
                               prepared_transaction_offset=prepared.wrote_offset)
    after = store.put_message(Message("TxTopic", b"n1"), queue_id=0)
    assert all(r.ok for r in (normal, prepared, rollback, commit, after))
    assert [r.queue_offset for r in (normal, prepared, rollback, commit, after)] == [0, 0, 0, 1, 2]

    half = store.look_message_by_offset(prepared.wrote_offset)
    assert half is not None
    assert half.sys_flag & sysflag.TRANSACTION_MASK == sysflag.TRANSACTION_PREPARED_TYPE
    assert half.queue_offset == 0

    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("TxTopic", 0) == 3
    got = store.get_message("g", "TxTopic", 0, 0)
    assert [m.body for m in got.messages] == [b"n0", b"commit", b"n1"]
    assert got.messages[1].sys_flag & sysflag.TRANSACTION_MASK == sysflag.TRANSACTION_COMMIT_TYPE
    assert got.messages[1].prepared_transaction_offset == prepared.wrote_offset


@pytest.mark.parametrize("encoded", [False, True], ids=["put_message", "put_encoded"])
@pytest.mark.parametrize("flags", [sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6 | sysflag.MULTI_TAGS, -1],
                         ids=["ipv6-bits", "every-bit"])
def test_host_bits_of_the_caller_s_sys_flag_follow_the_hosts_written(
        open_store: Open, store_config, encoded: bool, flags: int) -> None:
    """A client's sysFlag claiming IPv6 hosts over IPv4 ones must not make the record's
    layout disagree with its flag: the store sets those two bits from the hosts it writes."""
    store = open_store()
    if encoded:
        r = store.put_encoded("HostBits", b"body", P.encode_properties({"TAGS": "a"}), sys_flag=flags,
                              born_host="10.0.0.1:1234")
    else:
        r = store.put_message(Message("HostBits", b"body", tags="a"), sys_flag=flags,
                              born_host="10.0.0.1:1234")
    assert r.ok, r.remark
    assert r.wrote_bytes == stored_size(b"body", "HostBits", {}) + len(
        P.encode_properties({"TAGS": "a", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: r.msg_id}))
    stored = store.look_message_by_offset(r.wrote_offset)
    assert stored is not None and stored.body == b"body"
    assert stored.born_host == "10.0.0.1:1234" and not stored.sys_flag & sysflag.BORNHOST_V6
    assert not stored.sys_flag & sysflag.STOREHOST_V6
    assert stored.sys_flag | sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6 == flags | 0x30
    after = store.put_message(Message("HostBits", b"next"))
    assert after.ok and after.wrote_offset == r.wrote_offset + r.wrote_bytes
    if flags > 0:  # a plain message, as -1 says PREPARED|COMMIT (rollback): no queue entry
        assert store.wait_dispatched()
        assert [m.body for m in store.get_message("g", "HostBits", 0, 0).messages] == [b"body", b"next"]
    store.close()
    assert_consistent(store_config)


def test_prepared_delayed_message_is_not_rewritten(open_store: Open) -> None:
    store = open_store()
    r = store.put_message(Message("TxTopic", b"half", properties={P.DELAY_TIME_LEVEL: "2"}),
                          sys_flag=sysflag.TRANSACTION_PREPARED_TYPE)
    assert r.ok
    stored = store.look_message_by_offset(r.wrote_offset)
    assert stored is not None and stored.topic == "TxTopic"
    assert P.REAL_TOPIC not in stored.properties


# -- bad input -------------------------------------------------------------------------------
BAD_MESSAGES = [
    pytest.param(Message("T" * 128, b"x"), 0, PutStatus.MESSAGE_ILLEGAL, "at most 127", id="topic-128-chars"),
    pytest.param(Message("", b"x"), 0, PutStatus.MESSAGE_ILLEGAL, "give a topic name", id="empty-topic"),
    pytest.param(Message("bad topic", b"x"), 0, PutStatus.MESSAGE_ILLEGAL, "use only ASCII", id="space"),
    pytest.param(Message("bad/topic", b"x"), 0, PutStatus.MESSAGE_ILLEGAL, "use only ASCII", id="slash"),
    pytest.param(Message("Topic\n", b"x"), 0, PutStatus.MESSAGE_ILLEGAL, "use only ASCII",
                 id="trailing-newline"),
    pytest.param(Message("Töpic", b"x"), 0, PutStatus.MESSAGE_ILLEGAL, "use only ASCII", id="non-ascii"),
    pytest.param(Message("TopicTest", b"x"), -1, PutStatus.MESSAGE_ILLEGAL, "use 0 to 2147483647",
                 id="negative-queue"),
    pytest.param(Message("TopicTest", b"x"), 2**31, PutStatus.MESSAGE_ILLEGAL, "use 0 to 2147483647",
                 id="queue-over-i32"),
    pytest.param(Message("", b"x", properties={P.DELAY_TIME_LEVEL: "3"}), 0, PutStatus.MESSAGE_ILLEGAL,
                 "give a topic name", id="delayed-empty-topic"),
    pytest.param(Message("bad topic", b"x", properties={P.DELAY_TIME_LEVEL: "3"}), 0,
                 PutStatus.MESSAGE_ILLEGAL, "use only ASCII", id="delayed-bad-topic"),
    pytest.param(Message("TopicTest", b"x", properties={P.DELAY_TIME_LEVEL: "3"}), -1,
                 PutStatus.MESSAGE_ILLEGAL, "use 0 to 2147483647", id="delayed-negative-queue"),
    pytest.param(Message("TopicTest", b"b" * 1025), 0, PutStatus.MESSAGE_ILLEGAL,
                 "send a smaller body or raise maxMessageSize", id="body-over-max"),
    pytest.param(Message("TopicTest", b"x", properties={"BIG": "v" * 32767}), 0,
                 PutStatus.PROPERTIES_SIZE_EXCEEDED, "use fewer or shorter properties", id="properties"),
    pytest.param(Message("TopicTest", b"x", properties={"BIG": "\u00e9" * 16384}), 0,
                 PutStatus.PROPERTIES_SIZE_EXCEEDED, "use fewer or shorter properties",
                 id="properties-counted-in-utf8-bytes"),
]


@pytest.mark.parametrize(("msg", "queue_id", "status", "advice"), BAD_MESSAGES)
def test_bad_message_is_refused_and_nothing_written(open_store: Open, msg: Message, queue_id: int,
                                                    status: PutStatus, advice: str) -> None:
    store = open_store(max_message_size=1024)
    ok = store.put_message(Message("TopicTest", b"good"))
    assert ok.ok
    before = store.max_phy_offset

    r = store.put_message(msg, queue_id=queue_id)
    assert r.status is status
    assert not r.ok
    assert advice in r.remark
    assert r.wrote_offset == -1 and r.msg_id is None and r.offset_msg_id is None
    assert store.max_phy_offset == before

    batch = store.put_messages([Message(msg.topic, b"fine", properties=msg.properties), msg],
                               queue_id=queue_id)
    assert batch.status in (status, PutStatus.MESSAGE_ILLEGAL)
    assert batch.remark
    assert store.max_phy_offset == before
    assert store.wait_dispatched()
    assert set(store.topics()) == {"TopicTest"}
    assert store.get_max_offset_in_queue("TopicTest", 0) == 1


def test_body_at_max_message_size_is_accepted(open_store: Open) -> None:
    store = open_store(max_message_size=1024)
    assert store.put_message(Message("TopicTest", b"b" * 1024)).ok


def test_properties_at_the_limit_are_accepted(open_store: Open) -> None:
    store = open_store()
    base = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ, "BIG": ""}
    fill = 32767 - len(P.encode_properties(base))
    props = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ, "BIG": "v" * fill}
    assert len(P.encode_properties(props)) == 32767
    r = store.put_message(Message("TopicTest", b"x", properties=props))
    assert r.ok, r.remark
    stored = store.look_message_by_offset(r.wrote_offset)
    assert stored is not None and stored.properties["BIG"] == "v" * fill

    props["BIG"] += "v"
    before = store.max_phy_offset
    r = store.put_message(Message("TopicTest", b"x", properties=props))
    assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert "32768" in r.remark and "32767" in r.remark
    assert store.max_phy_offset == before


def test_record_larger_than_a_segment_is_refused(open_store: Open) -> None:
    store = open_store()
    store.put_message(Message("TopicTest", b"first"))
    props = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}
    largest = SEG - 8 - stored_size(b"", "TopicTest", props)
    before = store.max_phy_offset
    r = store.put_message(Message("TopicTest", b"L" * (largest + 1), properties=props))
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert "mappedFileSizeCommitLog" in r.remark
    assert store.max_phy_offset == before

    r = store.put_message(Message("TopicTest", b"L" * largest, properties=props))
    assert r.ok, r.remark
    assert r.wrote_offset == SEG and r.end_offset == 2 * SEG - 8


def test_batch_refusals(open_store: Open) -> None:
    store = open_store()
    store.put_message(Message("A", b"first"))
    before = store.max_phy_offset

    mixed = store.put_messages([Message("A", b"1"), Message("B", b"2")])
    assert mixed.status is PutStatus.MESSAGE_ILLEGAL
    assert "one topic" in mixed.remark

    delayed = store.put_messages([Message("A", b"1"),
                                  Message("A", b"2", properties={P.DELAY_TIME_LEVEL: "1"})])
    assert delayed.status is PutStatus.MESSAGE_ILLEGAL
    assert "delayed" in delayed.remark

    empty = store.put_messages([])
    assert empty.status is PutStatus.MESSAGE_ILLEGAL and "empty" in empty.remark

    too_big = store.put_messages([Message("A", b"z" * 20_000) for _ in range(4)])
    assert too_big.status is PutStatus.MESSAGE_ILLEGAL
    assert "send smaller batches" in too_big.remark

    assert store.max_phy_offset == before
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue("A", 0) == 1
    assert store.get_max_offset_in_queue("B", 0) == 0


def test_put_batch_encoded_keeps_the_members_properties(open_store: Open) -> None:
    """Members as a SEND_BATCH_MESSAGE carries them: properties stored as given, a UNIQ_KEY
    added where missing, the tags code taken from TAGS, delayed members refused."""
    store = open_store()
    members = [(b"one", b"UNIQ_KEY\x01ID1\x02TAGS\x01TagA\x02CLUSTER\x01c\x02", 0),
               (b"two", b"KEYS\x01k2\x02CLUSTER\x01c", 5),  # no UNIQ_KEY, no final separator
               (b"three", b"", 0)]
    result = store.put_batch_encoded("Enc", members, 1)
    assert result.status is PutStatus.PUT_OK and result.msg_ids[0] == "ID1"
    assert len(set(result.msg_ids)) == 3
    assert store.wait_dispatched()
    got = store.get_message("g", "Enc", 1, 0, 8).messages
    assert [m.body for m in got] == [b"one", b"two", b"three"]
    assert got[0].properties == {"UNIQ_KEY": "ID1", "TAGS": "TagA", "CLUSTER": "c"}
    assert got[1].properties == {"KEYS": "k2", "CLUSTER": "c", "UNIQ_KEY": result.msg_ids[1]}
    assert got[1].flag == 5 and got[2].properties == {"UNIQ_KEY": result.msg_ids[2]}
    assert [m.msg_id for m in got] == result.msg_ids
    assert [m.tags for m in got] == ["TagA", None, None]
    assert store.get_message("g", "Enc", 1, 0, 8, tags=["TagA"]).queue_offsets == [0]
    delayed = store.put_batch_encoded("Enc", [(b"x", b"DELAY\x012\x02", 0)], 1)
    assert delayed.status is PutStatus.MESSAGE_ILLEGAL and "delayed" in delayed.remark


def test_store_files_exist_with_segment_size(open_store: Open) -> None:
    store = open_store()
    for _ in range(3):
        store.put_message(Message("TopicTest", b"x" * 30_000))
    store.close()  # the next segment may still be being preallocated while the store runs
    names = sorted(p.name for p in store.config.commit_log_dir.iterdir())
    assert names[:2] == [file_name(0), file_name(SEG)]
    assert all((store.config.commit_log_dir / n).stat().st_size == SEG for n in names)


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
def test_segment_limit_counts_an_ipv6_born_host(open_store: Open, batch: bool) -> None:
    store = open_store()
    store.put_message(Message("TopicTest", b"first"))
    props = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: UNIQ}
    largest = SEG - 8 - stored_size(b"", "TopicTest", props) - 12  # IPv6 born host: 12 more bytes
    before = store.max_phy_offset

    def put(body_len: int):
        msg = Message("TopicTest", b"L" * body_len, properties=props)
        if batch:
            return store.put_messages([msg], born_host="[::1]:5000")
        return store.put_message(msg, born_host="[::1]:5000")

    r = put(largest + 1)
    assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert "mappedFileSizeCommitLog" in r.remark or "smaller batches" in r.remark
    assert store.max_phy_offset == before

    r = put(largest)
    assert r.ok, r.remark
    assert r.wrote_offset == SEG and r.end_offset == 2 * SEG - 8
    stored = store.look_message_by_offset(r.wrote_offset)
    assert stored is not None and stored.born_host == "[::1]:5000"


def test_longest_topic_and_highest_queue_id_are_accepted(open_store: Open) -> None:
    store = open_store()
    topic = "T" * 127
    r = store.put_message(Message(topic, b"x"), queue_id=2**31 - 1)
    assert r.ok, r.remark
    assert store.wait_dispatched()
    got = store.get_message("g", topic, 2**31 - 1, 0)
    assert got.status is GetStatus.FOUND
    assert got.messages[0].topic == topic and got.messages[0].queue_id == 2**31 - 1


def test_non_ascii_tags_and_properties(open_store: Open) -> None:
    store = open_store()
    store.put_message(Message("TopicTest", "标签一".encode(), tags="标签", properties={"说明": "值"}))
    store.put_message(Message("TopicTest", b"other", tags="TagA"))
    assert store.wait_dispatched()
    entry = store.find_consume_queue("TopicTest", 0).entry(0)
    assert entry is not None and entry[2] == java_string_hash("标签")
    got = store.get_message("g", "TopicTest", 0, 0, tags=["标签"])
    assert got.queue_offsets == [0]
    assert got.messages[0].tags == "标签" and got.messages[0].properties["说明"] == "值"


def test_out_of_range_fields_are_refused_without_a_trace(open_store, store_config) -> None:
    st = open_store()
    assert st.put_message(Message("T", b"ok"), 0).ok
    end = st.max_phy_offset
    bad = st.put_message(Message("T", b"x", flag=2**31), 0)
    assert bad.status is PutStatus.MESSAGE_ILLEGAL and "range" in bad.remark
    bad = st.put_messages([Message("T", b"y"), Message("T", b"z", flag=-2**31 - 1)], 0)
    assert bad.status is PutStatus.MESSAGE_ILLEGAL
    assert st.max_phy_offset == end
    assert st.put_message(Message("T", b"after"), 0).queue_offset == 1
    st.close()
    assert_consistent(store_config)
