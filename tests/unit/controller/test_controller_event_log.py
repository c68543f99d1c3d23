"""The controller's event log: replay, torn tail cut off and reported, compaction."""

from __future__ import annotations

from pathlib import Path

from bolide.controller.event_log import EventLog, encode_record
from bolide.controller.events import AlterSyncStateSet, ApplyBrokerId, CleanBrokerData, ElectMaster
from bolide.controller.framed import frame
from bolide.controller.replicas import ReplicasState

EVENTS = [ApplyBrokerId("C", "b", "h:1", 1, "h:1;5"), ApplyBrokerId("C", "b", "h:2", 2, "h:2;6"),
          ElectMaster("b", 1), AlterSyncStateSet("b", frozenset({1, 2})), ElectMaster("b", None),
          CleanBrokerData("x", None)]


def _written(tmp_path: Path) -> EventLog:
    log = EventLog(tmp_path)
    assert log.open().events == []
    for event in EVENTS:
        log.append([event])
    log.close()
    return log


def test_replay_returns_every_event(tmp_path: Path) -> None:
    _written(tmp_path)
    again = EventLog(tmp_path)
    replay = again.open()
    assert replay.events == EVENTS and replay.dropped_bytes == 0
    state = ReplicasState()
    for event in replay.events:
        state.apply(event)
    group = state.groups["b"]
    assert (group.master_broker_id, group.master_epoch, group.sync_state_set_epoch) == (None, 2, 2)


def test_torn_tail_is_cut_off_and_reported(tmp_path: Path) -> None:
    log = _written(tmp_path)
    whole = log.path.read_bytes()
    last = len(encode_record(EVENTS[-1]))
    log.path.write_bytes(whole[:-3])  # the last record cut short
    replay = EventLog(tmp_path).open()
    assert replay.events == EVENTS[:-1]
    assert replay.dropped_bytes == last - 3 and "cut short" in replay.reason
    assert log.path.stat().st_size == len(whole) - last


def test_flipped_byte_stops_replay_there(tmp_path: Path) -> None:
    log = _written(tmp_path)
    data = bytearray(log.path.read_bytes())
    data[-5] ^= 0xFF
    log.path.write_bytes(bytes(data))
    reopened = EventLog(tmp_path)
    replay = reopened.open()
    assert replay.events == EVENTS[:-1] and "CRC" in replay.reason
    reopened.append([EVENTS[-1]])  # appends go after the last good record
    reopened.close()
    assert EventLog(tmp_path).open().events == EVENTS


def test_compaction_keeps_the_state(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.open()
    state = ReplicasState()
    for event in EVENTS[:4]:
        log.append([event])
        state.apply(event)
    log.compact(state.snapshot())
    log.append([ElectMaster("b", 2)])
    log.close()
    replay = EventLog(tmp_path).open()
    assert len(replay.events) == 2
    copy = ReplicasState()
    for event in replay.events:
        copy.apply(event)
    state.apply(ElectMaster("b", 2))
    assert copy.to_json() == state.to_json()


def test_a_record_that_is_not_an_event_ends_the_replay(tmp_path: Path) -> None:
    """A whole record (its CRC right) whose payload is no event, even JSON nested too deep for
    the decoder, ends the replay there with the reason."""
    for payload in (b'{"type":"NOPE"}', b"[" * 100_000):
        log = _written(tmp_path)
        with log.path.open("ab") as f:
            f.write(frame(payload))
        replay = EventLog(tmp_path).open()
        assert replay.events == EVENTS and "a record that is not an event" in replay.reason
        assert replay.dropped_bytes == len(frame(payload))
        log.path.unlink()
