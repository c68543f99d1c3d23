"""MessageStore reads: get_message statuses and next_begin_offset (spec 12.1), tag filtering,
raw buffers vs decoded messages, and the by-time / by-offset lookups."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from bolide.common.hashing import java_string_hash
from bolide.common.message import Message
from bolide.store import GetStatus, MessageStore, PutMessageResult
from bolide.store.mapped_file import file_name
from bolide.store.record import read_total_size
from conftest import SMALL_COMMIT_LOG, SMALL_CONSUME_QUEUE

Open = Callable[..., MessageStore]
SEG = SMALL_COMMIT_LOG
CQ_ENTRIES = SMALL_CONSUME_QUEUE // 20  # entries per ConsumeQueue file in the fixture


def put_many(store: MessageStore, n: int, topic: str = "TopicTest", queue_id: int = 0,
             tags: Callable[[int], str | None] = lambda i: "TagA", body_size: int = 0,
             ) -> list[PutMessageResult]:
    results = []
    for i in range(n):
        body = f"m{i}".encode().ljust(body_size, b".")
        r = store.put_message(Message(topic, body, tags=tags(i)), queue_id=queue_id)
        assert r.ok, r.remark
        results.append(r)
    assert store.wait_dispatched()
    return results


def body_of(i: int, body_size: int = 0) -> bytes:
    return f"m{i}".encode().ljust(body_size, b".")


# -- statuses --------------------------------------------------------------------------------
def test_unknown_queue_has_no_message(open_store: Open) -> None:
    store = open_store()
    put_many(store, 3)
    for topic, qid in (("Nope", 0), ("TopicTest", 1)):
        r = store.get_message("g", topic, qid, 0)
        assert r.status is GetStatus.NO_MESSAGE_IN_QUEUE
        assert r.next_begin_offset == 0
        assert r.message_count == 0 and r.buffers == [] and r.messages == []
    assert "Nope" not in store.topics()


def test_empty_queue_has_no_message(open_store: Open) -> None:
    store = open_store()
    store.find_consume_queue("EmptyTopic", 2)  # exists, nothing written
    for offset in (0, 5):
        r = store.get_message("g", "EmptyTopic", 2, offset)
        assert r.status is GetStatus.NO_MESSAGE_IN_QUEUE
        assert r.next_begin_offset == 0
        assert (r.min_offset, r.max_offset) == (0, 0)


def test_offset_overflow_one_and_badly(open_store: Open) -> None:
    store = open_store()
    put_many(store, 10)
    one = store.get_message("g", "TopicTest", 0, 10)
    assert one.status is GetStatus.OFFSET_OVERFLOW_ONE
    assert one.next_begin_offset == 10
    assert (one.min_offset, one.max_offset) == (0, 10)
    assert one.message_count == 0
    small = store.get_message("g", "TopicTest", 0, -1)
    assert small.status is GetStatus.OFFSET_TOO_SMALL and small.next_begin_offset == 0
    for offset in (11, 1000):
        badly = store.get_message("g", "TopicTest", 0, offset)
        assert badly.status is GetStatus.OFFSET_OVERFLOW_BADLY
        assert badly.next_begin_offset == 10
        assert badly.message_count == 0


def test_found_next_is_offset_plus_entries_scanned(open_store: Open) -> None:
    store = open_store()
    put_many(store, 10)
    r = store.get_message("g", "TopicTest", 0, 3, max_count=4)
    assert r.status is GetStatus.FOUND
    assert r.queue_offsets == [3, 4, 5, 6]
    assert [m.body for m in r.messages] == [body_of(i) for i in range(3, 7)]
    assert r.next_begin_offset == 7
    assert (r.min_offset, r.max_offset) == (0, 10)

    rest = store.get_message("g", "TopicTest", 0, 7)
    assert rest.queue_offsets == [7, 8, 9] and rest.next_begin_offset == 10

    one = store.get_message("g", "TopicTest", 0, 0, max_count=1)
    assert one.message_count == 1 and one.next_begin_offset == 1


def test_in_memory_count_cap_is_32(open_store: Open) -> None:
    store = open_store()
    put_many(store, 50)
    r = store.get_message("g", "TopicTest", 0, 0, max_count=64)
    assert r.status is GetStatus.FOUND
    assert r.message_count == 32
    assert r.queue_offsets == list(range(32))
    assert r.next_begin_offset == 32
    assert not r.suggest_pulling_from_slave


def test_count_cap_follows_config(open_store: Open) -> None:
    store = open_store(max_transfer_count_on_message_in_memory=5)
    put_many(store, 20)
    r = store.get_message("g", "TopicTest", 0, 2, max_count=32)
    assert r.queue_offsets == [2, 3, 4, 5, 6] and r.next_begin_offset == 7


def test_in_memory_byte_cap(open_store: Open) -> None:
    store = open_store()
    results = put_many(store, 40, body_size=9000)
    size = results[0].wrote_bytes
    assert all(r.wrote_bytes == size for r in results)
    r = store.get_message("g", "TopicTest", 0, 0, max_count=64)
    expected = 256 * 1024 // size
    assert r.message_count == expected
    assert r.buffer_total_size == expected * size <= 256 * 1024
    assert r.next_begin_offset == expected


def test_first_message_always_fits(open_store: Open) -> None:
    store = open_store(max_transfer_bytes_on_message_in_memory=1000)
    put_many(store, 3, body_size=2000)
    r = store.get_message("g", "TopicTest", 0, 0)
    assert r.status is GetStatus.FOUND
    assert r.message_count == 1 and r.next_begin_offset == 1


# -- tag filter --------------------------------------------------------------------------------
def test_tag_filter_selects_and_advances(open_store: Open) -> None:
    store = open_store()
    put_many(store, 12, tags=lambda i: "TagA" if i % 2 == 0 else "TagB")
    r = store.get_message("g", "TopicTest", 0, 0, max_count=3, tags=["TagA"])
    assert r.status is GetStatus.FOUND
    assert r.queue_offsets == [0, 2, 4]
    assert all(m.tags == "TagA" for m in r.messages)
    assert r.next_begin_offset == 5  # stopped when the batch was full, at entry 5

    r = store.get_message("g", "TopicTest", 0, 5, tags=["TagB", "TagC"])
    assert r.queue_offsets == [5, 7, 9, 11] and r.next_begin_offset == 12

    for everything in (None, ["*"], [], ["TagA", "*"]):
        r = store.get_message("g", "TopicTest", 0, 0, tags=everything)
        assert r.message_count == 12, everything


def test_tag_filter_rejecting_everything(open_store: Open) -> None:
    store = open_store()
    put_many(store, 30, tags=lambda i: "TagB")
    r = store.get_message("g", "TopicTest", 0, 4, tags=["TagA"])
    assert r.status is GetStatus.NO_MATCHED_MESSAGE
    assert r.message_count == 0 and r.buffer_total_size == 0
    assert r.next_begin_offset == 30
    assert store.get_message("g", "TopicTest", 0, 30, tags=["TagA"]).status is GetStatus.OFFSET_OVERFLOW_ONE


def test_tag_filter_scan_stops_at_consume_queue_file_end(open_store: Open) -> None:
    store = open_store()
    put_many(store, CQ_ENTRIES + 50, tags=lambda i: "TagB" if i != CQ_ENTRIES + 20 else "TagA")
    r = store.get_message("g", "TopicTest", 0, 10, tags=["TagA"])
    assert r.status is GetStatus.NO_MATCHED_MESSAGE
    assert r.next_begin_offset == CQ_ENTRIES
    r = store.get_message("g", "TopicTest", 0, r.next_begin_offset, tags=["TagA"])
    assert r.status is GetStatus.FOUND
    assert r.queue_offsets == [CQ_ENTRIES + 20]
    assert r.next_begin_offset == CQ_ENTRIES + 50


def test_tag_filter_scan_is_bounded(open_store: Open) -> None:
    # one call scans at most 16,000 ConsumeQueue entries (docs/adr/0003-scan-limit-in-entries.md)
    store = open_store(mapped_file_size_consume_queue=20_000 * 20)
    put_many(store, 16_100, tags=lambda i: "TagA" if i == 16_050 else "TagB")
    r = store.get_message("g", "TopicTest", 0, 0, max_count=32, tags=["TagA"])
    assert r.status is GetStatus.NO_MATCHED_MESSAGE
    assert r.next_begin_offset == 16_000
    r = store.get_message("g", "TopicTest", 0, 16_000, max_count=32, tags=["TagA"])
    assert r.status is GetStatus.FOUND
    assert r.queue_offsets == [16_050]
    assert r.next_begin_offset == 16_100


def test_tag_filter_is_exact_on_hash_collision(open_store: Open) -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")
    store = open_store()
    put_many(store, 10, tags=lambda i: "Aa" if i % 3 == 0 else "BB")
    cq = store.find_consume_queue("TopicTest", 0)
    codes = {cq.entry(i)[2] for i in range(10)}  # type: ignore[index]
    assert codes == {java_string_hash("Aa")}  # same code in the queue for both tags

    r = store.get_message("g", "TopicTest", 0, 0, tags=["Aa"])
    assert r.queue_offsets == [0, 3, 6, 9]
    assert {m.tags for m in r.messages} == {"Aa"}
    r = store.get_message("g", "TopicTest", 0, 0, tags=["BB"])
    assert r.queue_offsets == [1, 2, 4, 5, 7, 8]
    r = store.get_message("g", "TopicTest", 0, 1, max_count=1, tags=["Aa"])
    assert r.queue_offsets == [3] and r.next_begin_offset == 4


def test_messages_without_tags_match_no_tag_filter(open_store: Open) -> None:
    store = open_store()
    put_many(store, 4, tags=lambda i: None if i % 2 else "TagA")
    r = store.get_message("g", "TopicTest", 0, 0, tags=["TagA"])
    assert r.queue_offsets == [0, 2]
    assert store.get_message("g", "TopicTest", 0, 0).message_count == 4


# -- buffers and decoded messages -------------------------------------------------------------
def test_buffers_are_whole_records_and_match_messages(open_store: Open) -> None:
    store = open_store()
    results = put_many(store, 6, queue_id=2, tags=lambda i: f"T{i}", body_size=100)
    r = store.get_message("g", "TopicTest", 2, 1)
    assert r.status is GetStatus.FOUND
    assert r.message_count == 5
    assert r.buffer_total_size == sum(len(b) for b in r.buffers)
    assert r.buffer_total_size == sum(x.wrote_bytes for x in results[1:])
    for buf, msg, qoff, put in zip(r.buffers, r.messages, r.queue_offsets, results[1:], strict=True):
        assert isinstance(buf, memoryview)
        assert len(buf) == read_total_size(buf, 0) == put.wrote_bytes
        assert msg.queue_offset == qoff
        assert msg.queue_id == 2
        assert msg.commit_log_offset == put.wrote_offset
        assert msg.store_size == put.wrote_bytes
        assert msg.store_timestamp == put.store_timestamp
        assert msg.msg_id == put.msg_id
        assert msg.offset_msg_id == put.offset_msg_id
        assert msg.body == body_of(qoff, 100)
        assert msg.tags == f"T{qoff}"
    # the buffers are the bytes in the segment file
    data = (store.config.commit_log_dir / file_name(0)).read_bytes()
    for buf, put in zip(r.buffers, results[1:], strict=True):
        assert bytes(buf) == data[put.wrote_offset : put.end_offset]
    r.release()
    assert r.buffers == []


def test_reads_across_consume_queue_files(open_store: Open) -> None:
    store = open_store()
    total = 2 * CQ_ENTRIES + 50
    put_many(store, total, body_size=200)
    seen: list[int] = []
    bodies: list[bytes] = []
    offset = 0
    calls = 0
    while offset < total:
        r = store.get_message("g", "TopicTest", 0, offset)
        assert r.status is GetStatus.FOUND
        # one call never crosses a ConsumeQueue file
        assert {q // CQ_ENTRIES for q in r.queue_offsets} == {offset // CQ_ENTRIES}
        assert r.next_begin_offset == r.queue_offsets[-1] + 1
        seen += r.queue_offsets
        bodies += [m.body for m in r.messages]
        offset = r.next_begin_offset
        calls += 1
    assert seen == list(range(total))
    assert bodies == [body_of(i, 200) for i in range(total)]
    assert calls > total // 32  # the file ends cut some calls short
    assert store.get_message("g", "TopicTest", 0, offset).status is GetStatus.OFFSET_OVERFLOW_ONE


def test_offset_too_small_after_oldest_segment_is_gone(open_store: Open) -> None:
    store = open_store()
    results = put_many(store, 150, body_size=1000)
    assert store.max_phy_offset > 2 * SEG
    store.close()
    (store.config.commit_log_dir / file_name(0)).unlink()  # what retention cleanup removes

    store = open_store()
    first = next(i for i, r in enumerate(results) if r.wrote_offset >= SEG)
    assert store.min_phy_offset == SEG
    assert store.get_min_offset_in_queue("TopicTest", 0) == first
    assert store.get_max_offset_in_queue("TopicTest", 0) == 150

    for offset in (0, first - 1):
        r = store.get_message("g", "TopicTest", 0, offset)
        assert r.status is GetStatus.OFFSET_TOO_SMALL
        assert r.next_begin_offset == first
        assert r.message_count == 0
    r = store.get_message("g", "TopicTest", 0, first)
    assert r.status is GetStatus.FOUND
    assert r.queue_offsets[0] == first
    assert r.messages[0].commit_log_offset == results[first].wrote_offset

    assert store.look_message_by_offset(0) is None
    assert store.get_earliest_message_time("TopicTest", 0) == results[first].store_timestamp
    assert store.get_offset_in_queue_by_time("TopicTest", 0, 0) == first
    # writing goes on after the gap
    assert store.put_message(Message("TopicTest", b"new")).queue_offset == 150


# -- lookups by time and offset ------------------------------------------------------------------
def test_get_offset_in_queue_by_time(open_store: Open) -> None:
    store = open_store()
    results: list[PutMessageResult] = []
    while len({r.store_timestamp for r in results}) < 4:  # needs a few distinct milliseconds
        assert len(results) < 100_000
        results.append(store.put_message(Message("TopicTest", b"t"), queue_id=1))
        store.put_message(Message("Other", b"o"), queue_id=1)
    assert store.wait_dispatched()
    stamps = [r.store_timestamp for r in results]
    assert stamps == sorted(stamps)
    queries = {0, stamps[0] - 1, stamps[-1] + 1, 2**62}
    for t in set(stamps):
        queries |= {t - 1, t, t + 1}
    for q in sorted(queries):
        expected = next((i for i, t in enumerate(stamps) if t >= q), len(stamps))
        assert store.get_offset_in_queue_by_time("TopicTest", 1, q) == expected, q
    assert store.get_offset_in_queue_by_time("Unknown", 0, stamps[0]) == 0


def test_get_earliest_message_time(open_store: Open) -> None:
    store = open_store()
    assert store.get_earliest_message_time("TopicTest", 0) == -1
    store.find_consume_queue("EmptyTopic", 0)
    assert store.get_earliest_message_time("EmptyTopic", 0) == -1
    results = put_many(store, 5)
    assert store.get_earliest_message_time("TopicTest", 0) == results[0].store_timestamp


def test_look_message_by_offset(open_store: Open) -> None:
    store = open_store()
    results = put_many(store, 60, body_size=2000)  # crosses a segment: a BLANK sits at the end
    for i, r in enumerate(results):
        m = store.look_message_by_offset(r.wrote_offset)
        assert m is not None
        assert m.commit_log_offset == r.wrote_offset
        assert m.body == body_of(i, 2000)
        assert m.queue_offset == i
        assert m.msg_id == r.msg_id
    blank_at = next(r.end_offset for r, n in itertools.pairwise(results)
                    if n.wrote_offset != r.end_offset)
    assert blank_at < SEG
    assert store.look_message_by_offset(blank_at) is None
    assert store.look_message_by_offset(store.max_phy_offset) is None
    assert store.look_message_by_offset(store.max_phy_offset + 10 * SEG) is None
    assert store.look_message_by_offset(-1) is None
    assert store.look_message_by_offset(results[3].wrote_offset + 1) is None
