"""The controller's durable state: an append-only log of events, each record
``[u32 length][u32 crc32(payload)][payload: JSON event]`` (big-endian, :mod:`.framed`), fsynced before the
request that made it is answered, and replayed at start.

A torn or corrupt tail (a record cut short, or whose CRC does not match) is truncated at the
last whole record and reported in :attr:`Replay.dropped_bytes`. When the log holds many
records, :meth:`EventLog.compact` replaces it atomically with one snapshot record.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from bolide.common.config_persist import sync_dir, write_atomic
from bolide.controller.events import Event, event_from_json, event_to_json
from bolide.controller.framed import frame, read_frames
from bolide.errors import BolideError

log = logging.getLogger(__name__)

MAX_RECORD = 64 << 20  # a length above this is corruption, not a record
LOG_NAME = "controller-events.log"


def encode_record(event: Event) -> bytes:
    return frame(json.dumps(event_to_json(event), separators=(",", ":"), sort_keys=True).encode())


@dataclass(slots=True)
class Replay:
    """What :meth:`EventLog.open` read: the events, and the bytes of a bad tail it cut off."""

    events: list[Event] = field(default_factory=list)
    dropped_bytes: int = 0
    reason: str = ""
    good_bytes: int = 0  # the length of the whole records read

    def describe_cut(self, path: Path) -> str:
        """What was cut off, for the log and the operator."""
        return (f"controller event log {path}: cut off {self.dropped_bytes} bytes after "
                f"{len(self.events)} events at offset {self.good_bytes}: {self.reason}")


def _event(payload: bytes) -> Event:
    try:
        return event_from_json(json.loads(payload))
    except (ValueError, BolideError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        raise ValueError(f"a record that is not an event ({exc})") from None


def read_records(data: bytes) -> tuple[list[Event], int, str]:
    """The events of a log's bytes, the length of its good prefix and why it stops early."""
    return read_frames(data, _event, max_record=MAX_RECORD)


def read_log(path: Path) -> Replay:
    """The events of the log file ``path`` (none when it does not exist), without changing it;
    OSError when it cannot be read."""
    data = path.read_bytes() if path.exists() else b""
    events, good, reason = read_records(data)
    return Replay(events, len(data) - good, reason, good)


class EventLog:
    """The log file under ``directory``; :meth:`open` replays it, :meth:`append` adds events."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOG_NAME
        self.records = 0
        self._fd: int | None = None

    def open(self) -> Replay:
        """Read the log (cutting off a bad tail) and open it for appends."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            replay = read_log(self.path)
        except OSError as exc:
            raise BolideError(f"cannot read the controller's state in {self.directory}: {exc.strerror}; "
                              "make controllerStorePath a writable directory") from exc
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if replay.dropped_bytes:
            log.warning("%s", replay.describe_cut(self.path))
            os.ftruncate(self._fd, replay.good_bytes)
            os.fsync(self._fd)
        sync_dir(self.directory)
        self.records = len(replay.events)
        return replay

    def append(self, events: list[Event]) -> None:
        """Write and fsync ``events``; OSError when the disk refuses (nothing is applied then)."""
        if self._fd is None:
            raise BolideError("the controller event log is not open")
        data = b"".join(encode_record(e) for e in events)
        size = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
            os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):  # leave no partial record for later appends to follow
                os.ftruncate(self._fd, size)
            raise
        self.records += len(events)

    def compact(self, snapshot: Event) -> None:
        """Replace the log with the one record ``snapshot`` (atomic rename)."""
        self.close()
        write_atomic(self.path, encode_record(snapshot))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self.records = 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
