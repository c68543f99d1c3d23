"""The controllers' Raft files (term, log, snapshot) and messages: round trips, a torn or
corrupt log tail cut off and reported, truncation, snapshots and a stop between a snapshot and
the log's rewrite; malformed messages refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.controller.raft.messages import (
    AppendReply,
    AppendRequest,
    LogEntry,
    SnapshotReply,
    SnapshotRequest,
    VoteReply,
    VoteRequest,
    decode_message,
    encode_message,
)
from bolide.controller.raft.storage import RaftStorage, encode_record
from bolide.errors import BolideError, ProtocolError

ENTRIES = [(1, LogEntry(1, b"")), (2, LogEntry(1, b'[{"a":1}]')), (3, LogEntry(2, b"x" * 300))]


def test_state_and_entries_survive_a_reopen(tmp_path: Path) -> None:
    storage = RaftStorage(tmp_path)
    loaded = storage.open()
    assert (loaded.persisted.term, loaded.persisted.entries, loaded.dropped_bytes) == (0, (), 0)
    storage.save_hard_state(2, "n1")
    storage.append(ENTRIES[:2])
    storage.append(ENTRIES[2:])
    storage.close()
    again = RaftStorage(tmp_path).open()
    assert (again.persisted.term, again.persisted.voted_for) == (2, "n1")
    assert list(again.persisted.entries) == [e for _, e in ENTRIES]


def test_a_torn_tail_is_cut_off_and_reported(tmp_path: Path) -> None:
    storage = RaftStorage(tmp_path)
    storage.open()
    storage.append(ENTRIES)
    storage.close()
    size = (tmp_path / "log").stat().st_size
    with (tmp_path / "log").open("r+b") as f:
        f.truncate(size - 7)  # the last record cut short, as by a crash mid-write
    storage = RaftStorage(tmp_path)
    loaded = storage.open()
    assert list(loaded.persisted.entries) == [e for _, e in ENTRIES[:2]]
    assert loaded.dropped_bytes == len(encode_record(*ENTRIES[2])) - 7 and "cut short" in loaded.reason
    storage.append([(3, LogEntry(3, b"again"))])  # appends follow the last whole record
    storage.close()
    assert RaftStorage(tmp_path).open().persisted.entries[-1] == LogEntry(3, b"again")


def test_a_corrupt_record_ends_the_log(tmp_path: Path) -> None:
    storage = RaftStorage(tmp_path)
    storage.open()
    storage.append(ENTRIES)
    storage.close()
    data = bytearray((tmp_path / "log").read_bytes())
    second = len(encode_record(*ENTRIES[0]))
    data[second + 30] ^= 0xFF  # a byte of the second record's data
    (tmp_path / "log").write_bytes(bytes(data))
    loaded = RaftStorage(tmp_path).open()
    assert list(loaded.persisted.entries) == [ENTRIES[0][1]] and "CRC" in loaded.reason


def test_truncation_drops_a_suffix(tmp_path: Path) -> None:
    storage = RaftStorage(tmp_path)
    storage.open()
    storage.append(ENTRIES)
    storage.truncate_from(2)
    storage.append([(2, LogEntry(3, b"new"))])
    storage.truncate_from(9)  # past the end: nothing
    with pytest.raises(BolideError, match="does not follow"):
        storage.append([(5, LogEntry(3, b"gap"))])
    storage.close()
    assert list(RaftStorage(tmp_path).open().persisted.entries) == [ENTRIES[0][1], LogEntry(3, b"new")]


def test_a_snapshot_replaces_the_compacted_entries(tmp_path: Path) -> None:
    storage = RaftStorage(tmp_path)
    storage.open()
    storage.append(ENTRIES)
    storage.save_snapshot(2, 1, b"state-at-2", [ENTRIES[2][1]])
    storage.append([(4, LogEntry(2, b"four"))])
    storage.close()
    loaded = RaftStorage(tmp_path).open().persisted
    assert (loaded.snapshot_index, loaded.snapshot_term, loaded.snapshot_data) == (2, 1, b"state-at-2")
    assert list(loaded.entries) == [ENTRIES[2][1], LogEntry(2, b"four")]


def test_a_stop_between_snapshot_and_log_rewrite(tmp_path: Path) -> None:
    """The snapshot file was replaced but the old log stayed: its compacted entries are dropped."""
    storage = RaftStorage(tmp_path)
    storage.open()
    storage.append(ENTRIES)
    storage.close()
    (tmp_path / "snapshot").write_bytes(encode_record(2, LogEntry(1, b"state-at-2")))
    storage = RaftStorage(tmp_path)
    loaded = storage.open().persisted
    assert loaded.snapshot_index == 2 and list(loaded.entries) == [ENTRIES[2][1]]
    storage.append([(4, LogEntry(2, b"four"))])
    storage.close()
    assert list(RaftStorage(tmp_path).open().persisted.entries) == [ENTRIES[2][1], LogEntry(2, b"four")]


def test_a_damaged_snapshot_names_the_fix(tmp_path: Path) -> None:
    (tmp_path / "snapshot").write_bytes(encode_record(2, LogEntry(1, b"state"))[:-1])
    with pytest.raises(BolideError, match="remove this peer's raft directory"):
        RaftStorage(tmp_path).open()


@pytest.mark.parametrize("message", [
    VoteRequest(3, "n1", 7, 2), VoteReply(3, "n2", True),
    AppendRequest(4, "n0", 6, 3, (LogEntry(4, b""), LogEntry(4, b"\x00\xff")), 5),
    AppendReply(4, "n1", False, 2), SnapshotRequest(5, "n0", 9, 4, b'{"groups":[]}'),
    SnapshotReply(5, "n2", 9),
])
def test_messages_round_trip(message: object) -> None:
    assert decode_message(encode_message(message)) == message  # type: ignore[arg-type]


@pytest.mark.parametrize("body", [b"", b"[]", b'{"type":"vote"}', b'{"type":"nope"}',
                                  b'{"type":"voted","term":-1,"voter":"n1","granted":true}',
                                  b'{"type":"snapshot","term":1,"leader":"n0","last_index":1,'
                                  b'"last_term":1,"data":"***"}', b"[" * 100_000])
def test_malformed_messages_are_refused(body: bytes) -> None:
    with pytest.raises(ProtocolError, match="not a controller peer's Raft message"):
        decode_message(body)
