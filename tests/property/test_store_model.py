"""A real MessageStore with tiny segments driven by random puts, reads, clean and unclean
restarts, against an in-memory model of its queues (spec sections 3, 7 and 12)."""

from __future__ import annotations

import bisect
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from bolide.common.message import Message, MessageExt
from bolide.store import FlushDiskType, GetStatus, MessageStore, PutMessageResult, PutStatus
from bolide.store.record import MAGIC_V1
from bolide.testing.simulate import crash, pause_dispatch
from conftest import assert_consistent, small_config

COMMIT_LOG_SEGMENT = 8192  # a few records per segment: rolls and BLANK records are frequent
CQ_ENTRIES_PER_FILE = 10
TOPICS = ("TopicA", "Topic_B-1", "%RETRY%g|x")
QUEUE_IDS = (0, 1, 2)
QUEUES = [(t, q) for t in TOPICS for q in QUEUE_IDS]
TAGS = ("TagA", "TagB", "Aa", "BB")  # "Aa" and "BB" have the same Java hash (tags code)
MAX_SCAN_ENTRIES = 16_000  # at most 16,000 ConsumeQueue entries per get (docs/adr/0003)

queues = st.sampled_from(QUEUES)
tags = st.none() | st.sampled_from(TAGS)
keys = st.lists(st.text(alphabet="abcXYZ019-_.", min_size=1, max_size=8), max_size=3).map(tuple)
flags = st.integers(-(2**31), 2**31 - 1)
# small bodies shrink well; large ones (a repeated pattern) fill segments quickly
bodies = st.binary(max_size=64) | st.builds(
    lambda size, pattern: (pattern * size)[:size], st.integers(64, 600), st.binary(min_size=1, max_size=8)
)
messages = st.tuples(bodies, tags, keys, flags)
Msg = tuple[bytes, str | None, tuple[str, ...], int]
tag_filters = st.none() | st.just(["*"]) | st.lists(st.sampled_from(TAGS), max_size=3)
# A record cut short by a crash: a v1 header claiming more bytes than were written. The
# filler stops before BODYLENGTH (offset 84), so the rest reads as zeros and the record's
# fields can never add up to its TOTALSIZE.
torn_tails = st.builds(
    lambda total, filler: struct.pack(">ii", total, MAGIC_V1) + filler,
    st.integers(200, 4000), st.binary(max_size=70),
)


@dataclass(slots=True)
class Stored:
    """One message the store acknowledged."""

    body: bytes
    tags: str | None
    keys: tuple[str, ...]
    flag: int
    store_timestamp: int
    end: int  # CommitLog offset just past the put (the whole batch for a batch)


def expected_get(model: list[Stored], offset: int, max_count: int, tag_filter: set[str] | None,
                 ) -> tuple[GetStatus, int, list[int]]:
    """Status, next begin offset and queue offsets of the messages of a get (spec 12.1)."""
    n = len(model)
    if n == 0:
        return GetStatus.NO_MESSAGE_IN_QUEUE, 0, []
    if offset < 0:
        return GetStatus.OFFSET_TOO_SMALL, 0, []
    if offset == n:
        return GetStatus.OFFSET_OVERFLOW_ONE, offset, []
    if offset > n:
        return GetStatus.OFFSET_OVERFLOW_BADLY, n, []
    # the scan covers the rest of the one ConsumeQueue file holding ``offset``
    end = min(n, (offset // CQ_ENTRIES_PER_FILE + 1) * CQ_ENTRIES_PER_FILE,
              offset + MAX_SCAN_ENTRIES)
    found: list[int] = []
    scanned = 0
    for index in range(offset, end):
        if len(found) >= max_count:  # the batch is full (the first message always fits)
            break
        scanned += 1
        if tag_filter is None or model[index].tags in tag_filter:
            found.append(index)
    status = GetStatus.FOUND if found else GetStatus.NO_MATCHED_MESSAGE
    return status, offset + scanned, found


def check_message(msg: MessageExt, key: tuple[str, int], index: int, want: Stored) -> None:
    where = f"{key[0]}/{key[1]}@{index}"
    assert (msg.topic, msg.queue_id, msg.queue_offset) == (*key, index), where
    assert msg.body == want.body, where
    assert msg.tags == want.tags, where
    assert tuple(msg.keys) == want.keys, where
    assert msg.flag == want.flag, where
    assert msg.store_timestamp == want.store_timestamp, where


class StoreModel(RuleBasedStateMachine):
    """The store against a dict of (topic, queue id) -> acknowledged messages."""

    flush_disk_type = FlushDiskType.ASYNC_FLUSH

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="bolide-model-"))
        self.config = small_config(
            self.tmp / "store",
            mapped_file_size_commit_log=COMMIT_LOG_SEGMENT,
            mapped_file_size_consume_queue=CQ_ENTRIES_PER_FILE * 20,
            flush_disk_type=self.flush_disk_type,
            # a small IndexFile: each simulated crash copies every file but the CommitLog
            max_hash_slot_num=4096, max_index_num=16384,
        )
        self.store: MessageStore | None = MessageStore(self.config).open()
        self.model: dict[tuple[str, int], list[Stored]] = {key: [] for key in QUEUES}
        # puts whose records can be looked up: (wrote offset, key, first index, count)
        self.puts: list[tuple[int, tuple[str, int], int, int]] = []

    @property
    def s(self) -> MessageStore:
        assert self.store is not None
        return self.store

    def _acknowledged(self, r: PutMessageResult, key: tuple[str, int], msgs: list[Msg]) -> None:
        assert r.status is PutStatus.PUT_OK, (r.status, r.remark)
        queue = self.model[key]
        assert r.queue_offset == len(queue)
        assert r.wrote_offset >= 0 and r.wrote_bytes > 0 and r.store_timestamp > 0
        assert len(r.msg_ids) == len(msgs)
        self.puts.append((r.wrote_offset, key, len(queue), len(msgs)))
        for body, tag, key_list, flag in msgs:
            queue.append(Stored(body, tag, key_list, flag, r.store_timestamp, r.end_offset))

    # -- writing ------------------------------------------------------------------------
    @rule(key=queues, msg=messages)
    def put_message(self, key: tuple[str, int], msg: Msg) -> None:
        body, tag, key_list, flag = msg
        r = self.s.put_message(Message(key[0], body, tags=tag, keys=key_list, flag=flag), key[1])
        self._acknowledged(r, key, [msg])

    @rule(key=queues, batch=st.lists(messages, min_size=1, max_size=10))
    def put_messages(self, key: tuple[str, int], batch: list[Msg]) -> None:
        msgs = [Message(key[0], body, tags=tag, keys=key_list, flag=flag)
                for body, tag, key_list, flag in batch]
        r = self.s.put_messages(msgs, key[1])
        self._acknowledged(r, key, batch)

    # -- reading ------------------------------------------------------------------------
    @rule(data=st.data(), key=queues, max_count=st.integers(1, 12), tag_filter=tag_filters)
    def get_message(self, data: st.DataObject, key: tuple[str, int], max_count: int,
                    tag_filter: list[str] | None) -> None:
        model = self.model[key]
        offset = data.draw(st.integers(-2, len(model) + 2), label="offset")
        assert self.s.wait_dispatched()
        r = self.s.get_message("model_group", key[0], key[1], offset, max_count, tag_filter)
        try:
            wanted = None if not tag_filter or "*" in tag_filter else set(tag_filter)
            status, next_begin, found = expected_get(model, offset, max_count, wanted)
            assert (r.status, r.next_begin_offset) == (status, next_begin)
            assert (r.min_offset, r.max_offset) == (0, len(model))
            assert r.queue_offsets == found
            assert r.message_count == len(found)
            for index, msg in zip(found, r.messages, strict=True):
                check_message(msg, key, index, model[index])
        finally:
            r.release()

    @rule(data=st.data(), key=queues)
    def get_offset_in_queue_by_time(self, data: st.DataObject, key: tuple[str, int]) -> None:
        times = [m.store_timestamp for m in self.model[key]]
        assert times == sorted(times), "store timestamps went backwards (clock step?)"
        near = st.sampled_from(times).flatmap(lambda t: st.sampled_from((t - 1, t, t + 1)))
        when = data.draw((near if times else st.nothing()) | st.sampled_from((0, 2**62)),
                         label="timestamp")
        assert self.s.wait_dispatched()
        got = self.s.get_offset_in_queue_by_time(key[0], key[1], when)
        assert got == bisect.bisect_left(times, when)

    @precondition(lambda self: self.puts)
    @rule(data=st.data())
    def look_message_by_offset(self, data: st.DataObject) -> None:
        offset, key, first, count = data.draw(st.sampled_from(self.puts), label="put")
        for index in range(first, first + count):  # a batch's records are contiguous
            msg = self.s.look_message_by_offset(offset)
            assert msg is not None, f"no record at {offset}"
            check_message(msg, key, index, self.model[key][index])
            assert msg.commit_log_offset == offset
            offset += msg.store_size
        assert offset == self.model[key][first].end  # and they are the whole put

    @rule()
    def look_past_the_end(self) -> None:
        assert self.s.look_message_by_offset(self.s.max_phy_offset) is None

    # -- restarts -----------------------------------------------------------------------
    @rule()
    def clean_restart(self) -> None:
        self.s.close()
        self.store = None
        assert_consistent(self.config)
        self.store = MessageStore(self.config).open()
        report = self.store.recovery_report
        assert not report.abnormal
        assert report.clean, report.summary()

    @rule(lagging=st.lists(st.tuples(queues, messages), max_size=4), lose_unflushed=st.booleans(),
          queues_survive=st.booleans(), torn=st.none() | torn_tails)
    def crash_restart(self, lagging: list[tuple[tuple[str, int], Msg]], lose_unflushed: bool,
                      queues_survive: bool, torn: bytes | None) -> None:
        """Crash (optionally right after puts not yet dispatched, losing what was not flushed,
        with a torn record at the end), then reopen: abnormal recovery must restore every
        message that survived in the CommitLog, and nothing else."""
        dispatched_end = self.s.max_phy_offset  # the invariant waited for dispatch
        if lagging:
            pause_dispatch(self.s)
            for key, msg in lagging:
                self.put_message(key, msg)
        done = crash(self.s, lose_unflushed=lose_unflushed, queues_survive=queues_survive,
                     torn_tail=torn or b"")
        self.store = None
        if self.config.sync_flush:
            assert all(q[-1].end <= done.kept for q in self.model.values() if q), done
        for queue in self.model.values():
            while queue and queue[-1].end > done.kept:  # lost with the unflushed bytes
                queue.pop()
        self.puts = [p for p in self.puts if p[2] < len(self.model[p[1]])]
        kept_lagging = sum(m.end > dispatched_end for q in self.model.values() for m in q)
        self.store = MessageStore(self.config).open()
        report = self.store.recovery_report
        assert report.abnormal
        if done.torn:
            assert report.truncations, report.summary()
        elif not lose_unflushed:
            assert report.clean, report.summary()
        assert report.queue_entries_rebuilt >= kept_lagging, report.summary()
        assert self.store.wait_dispatched()  # the index catches up on its own thread
        assert_consistent(self.config)

    # -- invariants ---------------------------------------------------------------------
    @invariant()
    def queue_offsets_match_the_model(self) -> None:
        if self.store is None:
            return
        assert self.store.wait_dispatched()
        for key, queue in self.model.items():
            assert self.store.get_max_offset_in_queue(*key) == len(queue), key
            assert self.store.get_min_offset_in_queue(*key) == 0, key

    def teardown(self) -> None:
        try:
            if self.store is not None:
                self.store.close()
                self.store = None
                assert_consistent(self.config)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


StoreModel.TestCase.settings = settings(
    max_examples=30, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestStoreModel = StoreModel.TestCase


class SyncFlushStoreModel(StoreModel):
    """The same under SYNC_FLUSH, where an acknowledged put survives even a power loss."""

    flush_disk_type = FlushDiskType.SYNC_FLUSH


SyncFlushStoreModel.TestCase.settings = settings(
    max_examples=12, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestSyncFlushStoreModel = SyncFlushStoreModel.TestCase


def test_queue_end_hidden_by_empty_files_is_found(tmp_path: Path) -> None:
    """Minimised from SyncFlushStoreModel: a power loss took a queue's unflushed entries 1-10
    while its next files existed, empty. Recovery began at the third-to-last file (an empty
    one), took the partly written first file for full and served its zeroed entries."""
    config = small_config(tmp_path / "store", mapped_file_size_consume_queue=CQ_ENTRIES_PER_FILE * 20,
                          flush_disk_type=FlushDiskType.SYNC_FLUSH)
    bodies = [b"m%d" % i for i in range(11)]
    with MessageStore(config) as store:
        assert store.put_message(Message("TopicA", bodies[0]), 0).ok
    store = MessageStore(config).open()
    assert store.put_messages([Message("TopicA", b) for b in bodies[1:]], 0).ok
    assert store.wait_dispatched()
    crash(store, lose_unflushed=True)  # the CommitLog was flushed (SYNC_FLUSH), entries 1-10 not
    queue_dir = config.consume_queue_dir / "TopicA" / "0"
    for start in (2, 3):  # files made ahead of need, as the put path may leave them
        path = queue_dir / f"{start * CQ_ENTRIES_PER_FILE * 20:020d}"
        if not path.exists():
            path.write_bytes(bytes(CQ_ENTRIES_PER_FILE * 20))
    with MessageStore(config) as store:
        assert store.get_max_offset_in_queue("TopicA", 0) == 11
        got = store.get_message("g", "TopicA", 0, 0, 32)
        assert [m.body for m in got.messages] == bodies[:CQ_ENTRIES_PER_FILE]
        got.release()
    assert_consistent(config)
