"""Where the controller makes its events durable before answering: :class:`LocalJournal` (a
one-peer group: the event log on this controller's disk) or
:class:`bolide.controller.raft.RaftJournal` (a group of several peers: replicated by Raft and
applied once a majority holds them). Both apply the events to the replicas state.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Protocol

from bolide.controller.event_log import EventLog
from bolide.controller.events import Event, event_from_json, event_to_json
from bolide.controller.raft.core import NotLeaderError
from bolide.controller.replicas import ReplicasState

COMPACT_AFTER_RECORDS = 10_000
__all__ = ["Journal", "LocalJournal", "NotLeaderError", "WriteTimeoutError", "decode_events", "encode_events",
           "encode_snapshot"]


class WriteTimeoutError(NotLeaderError):
    """No majority of the group took a change in time."""


def encode_events(events: list[Event]) -> bytes:
    return json.dumps([event_to_json(e) for e in events], separators=(",", ":"), sort_keys=True).encode()


def decode_events(data: bytes) -> list[Event]:
    return [event_from_json(obj) for obj in json.loads(data)]


def encode_snapshot(state: ReplicasState) -> bytes:
    """The whole state as a Raft snapshot's data: one SNAPSHOT event (the same bytes for the
    same state)."""
    return json.dumps(event_to_json(state.snapshot()), separators=(",", ":")).encode()


class Journal(Protocol):
    dropped_bytes: int  # a torn tail cut off at start, and why
    reason: str

    @property
    def is_leader(self) -> bool:
        """Whether this controller may answer requests that read or change the state."""

    @property
    def leader_id(self) -> str | None: ...

    @property
    def role(self) -> str:
        """This peer's role: leader (once it may answer), candidate, follower or unknown."""

    @property
    def leader_address(self) -> str | None: ...

    @property
    def peers_text(self) -> str:
        """GET_METADATA_INFO's peers: ``id:address;`` for each peer."""

    async def write(self, events: list[Event]) -> None:
        """Make ``events`` durable and apply them; NotLeaderError or OSError when they are not."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class LocalJournal:
    """The one-peer group: this controller is the leader and its event log the state."""

    def __init__(self, event_log: EventLog, state: ReplicasState, self_id: str,
                 address: Callable[[], str]) -> None:
        self.event_log = event_log
        self.state = state
        self.self_id = self_id
        self.address = address
        self.dropped_bytes = 0
        self.reason = ""

    is_leader = True
    role = "leader"

    @property
    def leader_id(self) -> str | None:
        return self.self_id

    @property
    def leader_address(self) -> str | None:
        return self.address()

    @property
    def peers_text(self) -> str:
        return f"{self.self_id}:{self.address()};"

    async def start(self) -> None:
        """Replay the event log into the state."""
        replay = await asyncio.to_thread(self.event_log.open)
        for event in replay.events:
            self.state.apply(event)
        self.dropped_bytes, self.reason = replay.dropped_bytes, replay.reason

    async def write(self, events: list[Event]) -> None:
        await asyncio.to_thread(self.event_log.append, events)
        for event in events:
            self.state.apply(event)
        if self.event_log.records > COMPACT_AFTER_RECORDS:
            await asyncio.to_thread(self.event_log.compact, self.state.snapshot())

    async def close(self) -> None:
        self.event_log.close()
