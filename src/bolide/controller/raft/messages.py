"""The messages controller peers exchange for Raft, and their wire form: one JSON object per
remoting body (code :data:`RAFT_REQUEST_CODE`, Bolide's own), entry data and snapshots in base64.

Pure values and pure functions, no I/O.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from bolide.errors import ProtocolError

# Bolide's own request code between controller peers (RocketMQ's controllers talk DLedger's
# protocol among themselves; a Bolide group is made of Bolide controllers only).
RAFT_REQUEST_CODE = 901_001


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One Raft log entry: the term it was made in and its data (``b""``: a new leader's no-op)."""

    term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate's request for a vote in ``term``; ``pre``: a pre-vote (would the peer vote
    for it in ``term``? nobody changes term or vote for it)."""

    term: int
    candidate: str
    last_index: int
    last_term: int
    pre: bool = False


@dataclass(frozen=True, slots=True)
class VoteReply:
    term: int
    voter: str
    granted: bool
    pre: bool = False


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """Entries after ``prev_index`` (empty: a heartbeat) and the leader's commit index."""

    term: int
    leader: str
    prev_index: int
    prev_term: int
    entries: tuple[LogEntry, ...]
    commit: int


@dataclass(frozen=True, slots=True)
class AppendReply:
    """``match_index``: the last index known to match on success; on failure the index after
    which the leader should try again."""

    term: int
    follower: str
    success: bool
    match_index: int


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """The leader's snapshot, for a follower behind the leader's compacted log."""

    term: int
    leader: str
    last_index: int
    last_term: int
    data: bytes


@dataclass(frozen=True, slots=True)
class SnapshotReply:
    term: int
    follower: str
    last_index: int


Message = VoteRequest | VoteReply | AppendRequest | AppendReply | SnapshotRequest | SnapshotReply
Request = VoteRequest | AppendRequest | SnapshotRequest

_TYPES: dict[str, type] = {"vote": VoteRequest, "voted": VoteReply, "append": AppendRequest,
                           "appended": AppendReply, "snapshot": SnapshotRequest,
                           "snapshotted": SnapshotReply}
_NAMES = {t: name for name, t in _TYPES.items()}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode_message(message: Message) -> bytes:
    """The JSON body of ``message``."""
    out: dict[str, Any] = {"type": _NAMES[type(message)]}
    for name in message.__slots__:  # type: ignore[union-attr]
        value = getattr(message, name)
        if name == "entries":
            value = [[e.term, _b64(e.data)] for e in value]
        elif name == "data":
            value = _b64(value)
        out[name] = value
    return json.dumps(out, separators=(",", ":")).encode()


def decode_message(body: bytes) -> Message:
    """The message of a body; ProtocolError naming what is wrong."""
    try:
        obj = json.loads(body)
        cls: Any = _TYPES[obj["type"]]
        values = {name: obj[name] for name in cls.__slots__}
        if "entries" in values:
            values["entries"] = tuple(LogEntry(int(t), base64.b64decode(d, validate=True))
                                      for t, d in values["entries"])
        if "data" in values:
            values["data"] = base64.b64decode(values["data"], validate=True)
        for name in ("term", "last_index", "last_term", "prev_index", "prev_term", "commit", "match_index"):
            if name in values and (type(values[name]) is not int or values[name] < 0):
                raise ValueError(f"{name} is not a non-negative integer")
        for name in ("granted", "success", "pre"):
            if name in values and type(values[name]) is not bool:
                raise ValueError(f"{name} is not true or false")
        message: Message = cls(**values)
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        raise ProtocolError(f"not a controller peer's Raft message ({exc}): {body[:80]!r}") from None
    return message
