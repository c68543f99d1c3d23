"""Raft (Ongaro and Ousterhout, 2014) for a group of controllers, as a pure state machine: no
I/O and no clock. The caller feeds it the time (milliseconds), the messages it receives and the
data to replicate, and after each call takes a :class:`Ready`: what to make durable, then what to
send, then the committed entries to apply, in that order.

Leader election with randomized timeouts, log replication with the consistency check, commit
of entries of the leader's own term by a majority (a new leader commits a no-op first),
snapshots for followers behind the compacted log, and a leader that steps down when it has
not heard from a majority for an election timeout (so that an isolated leader stops answering
as one). Elections start with a pre-vote (the thesis' section 9.6): a peer whose leader fell
silent first asks whether a majority would vote for it, without changing any term, and peers
that heard from their leader within the minimum election timeout say no; so a peer cut off
for a while and back does not depose a working leader with its higher term.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from bolide.controller.raft.messages import (
    AppendReply,
    AppendRequest,
    LogEntry,
    Message,
    SnapshotReply,
    SnapshotRequest,
    VoteReply,
    VoteRequest,
)

MAX_ENTRIES_PER_APPEND = 256


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


class NotLeaderError(Exception):
    """This controller is not (or no longer) its group's leader."""


@dataclass(frozen=True, slots=True)
class Timing:
    """Heartbeat interval and election timeout range, in milliseconds."""

    heartbeat_ms: int = 300
    election_min_ms: int = 1500
    election_max_ms: int = 3000


@dataclass(slots=True)
class Ready:
    """What a call changed. Persist ``hard_state``, then drop the log from ``truncate_from``,
    then append ``appended`` (and store ``snapshot``) before sending ``messages``; apply
    ``committed`` (and a received ``snapshot``) to the state machine in order."""

    messages: list[tuple[str, Message]] = field(default_factory=list)
    hard_state: tuple[int, str | None] | None = None
    truncate_from: int | None = None
    appended: list[tuple[int, LogEntry]] = field(default_factory=list)
    snapshot: SnapshotRequest | None = None
    committed: list[tuple[int, LogEntry]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.messages or self.hard_state or self.truncate_from is not None or self.appended
                    or self.snapshot or self.committed)


@dataclass(frozen=True, slots=True)
class Persisted:
    """A node's durable state at start: term, vote, snapshot point and data, the entries after it."""

    term: int = 0
    voted_for: str | None = None
    snapshot_index: int = 0
    snapshot_term: int = 0
    snapshot_data: bytes = b""
    entries: tuple[LogEntry, ...] = ()


DEFAULT_TIMING = Timing()


class RaftNode:
    """One member of a group of ``peers`` (the ids of every member, this one included)."""

    def __init__(self, node_id: str, peers: Sequence[str], persisted: Persisted, now: int, *,
                 timing: Timing = DEFAULT_TIMING, rng: random.Random | None = None) -> None:
        if node_id not in peers:
            raise ValueError(f"{node_id} is not one of the peers {list(peers)}")
        self.id = node_id
        self.peers = list(peers)
        self.others = [p for p in self.peers if p != node_id]
        self.timing = timing
        self.rng = rng or random.Random()
        self.term = persisted.term
        self.voted_for = persisted.voted_for
        self.snapshot_index = persisted.snapshot_index
        self.snapshot_term = persisted.snapshot_term
        self.snapshot_data = persisted.snapshot_data
        self.entries: list[LogEntry] = list(persisted.entries)
        self.role = Role.FOLLOWER
        self.leader_id: str | None = None
        self.commit_index = self.snapshot_index
        self.applied_index = self.snapshot_index
        self.votes: set[str] = set()
        self.last_leader_contact: int | None = None  # when the current leader last reached us
        self.next_index: dict[str, int] = {}
        self.match_index: dict[str, int] = {}
        self.last_ack: dict[str, int] = {}
        self.leader_since_index = 0  # the index of the no-op of this node's leadership
        self._ready = Ready()
        self._election_deadline = 0
        self._heartbeat_due = 0
        self._reset_election(now)

    # -- the log --------------------------------------------------------------------------
    @property
    def last_index(self) -> int:
        return self.snapshot_index + len(self.entries)

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot_term

    def term_at(self, index: int) -> int | None:
        """The term of the entry at ``index``; None when it is compacted away or absent."""
        if index == self.snapshot_index:
            return self.snapshot_term
        if self.snapshot_index < index <= self.last_index:
            return self.entries[index - self.snapshot_index - 1].term
        return None

    def entry(self, index: int) -> LogEntry:
        return self.entries[index - self.snapshot_index - 1]

    def _append(self, entry: LogEntry) -> int:
        self.entries.append(entry)
        index = self.last_index
        self._ready.appended.append((index, entry))
        return index

    def _truncate(self, index: int) -> None:
        """Drop the entries from ``index`` on (never committed ones: Raft's safety)."""
        assert index > self.commit_index, "a committed entry cannot be truncated"
        del self.entries[index - self.snapshot_index - 1:]
        self._ready.appended = [(i, e) for i, e in self._ready.appended if i < index]
        current = self._ready.truncate_from
        self._ready.truncate_from = index if current is None else min(current, index)

    # -- state changes --------------------------------------------------------------------
    @property
    def quorum(self) -> int:
        return len(self.peers) // 2 + 1

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def _reset_election(self, now: int) -> None:
        timing = self.timing
        self._election_deadline = now + self.rng.randint(timing.election_min_ms, timing.election_max_ms)

    def _set_hard_state(self, term: int, voted_for: str | None) -> None:
        if (term, voted_for) != (self.term, self.voted_for):
            self.term, self.voted_for = term, voted_for
            self._ready.hard_state = (term, voted_for)

    def _become_follower(self, term: int, leader: str | None, now: int) -> None:
        if term > self.term:
            self._set_hard_state(term, None)
        self.role = Role.FOLLOWER
        self.leader_id = leader
        self.votes = set()
        self._reset_election(now)

    def _start_pre_vote(self, now: int) -> None:
        self.role = Role.PRE_CANDIDATE
        self.leader_id = None
        self.votes = {self.id}
        self._reset_election(now)
        if len(self.votes) >= self.quorum:
            self._start_election(now)
            return
        request = VoteRequest(self.term + 1, self.id, self.last_index, self.last_term, pre=True)
        self._ready.messages.extend((peer, request) for peer in self.others)

    def _start_election(self, now: int) -> None:
        self.role = Role.CANDIDATE
        self.leader_id = None
        self._set_hard_state(self.term + 1, self.id)
        self.votes = {self.id}
        self._reset_election(now)
        if len(self.votes) >= self.quorum:
            self._become_leader(now)
            return
        request = VoteRequest(self.term, self.id, self.last_index, self.last_term)
        self._ready.messages.extend((peer, request) for peer in self.others)

    def _become_leader(self, now: int) -> None:
        self.role = Role.LEADER
        self.leader_id = self.id
        self.next_index = {p: self.last_index + 1 for p in self.others}
        self.match_index = {p: 0 for p in self.others}
        self.last_ack = {p: now for p in self.others}
        self.leader_since_index = self._append(LogEntry(self.term, b""))
        self._advance_commit()
        self._broadcast(now)

    # -- inputs ---------------------------------------------------------------------------
    def tick(self, now: int) -> None:
        """Time passed: heartbeats and resends as leader, an election when the leader is silent."""
        if self.role is Role.LEADER:
            heard = sum(1 for p in self.others if now - self.last_ack[p] < self.timing.election_min_ms)
            if heard + 1 < self.quorum:  # isolated: let the majority elect another
                self._become_follower(self.term, None, now)
                return
            if now >= self._heartbeat_due:
                self._broadcast(now)
            else:
                for peer in self.others:
                    if self.next_index[peer] <= self.last_index:
                        self._send_append(peer)
        elif now >= self._election_deadline:
            self._start_pre_vote(now)

    def propose(self, data: bytes) -> int:
        """Append ``data`` as leader and send it; its index. NotLeaderError elsewhere."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(f"{self.id} is not the leader (leader: {self.leader_id})")
        index = self._append(LogEntry(self.term, data))
        self._advance_commit()
        for peer in self.others:
            self._send_append(peer)
        return index

    def step(self, sender: str, message: Message, now: int) -> None:
        """Handle a message from ``sender`` (a peer id)."""
        if sender not in self.others:
            return
        # a pre-vote, and a pre-vote granted, carry a term nobody is in yet
        hypothetical = (isinstance(message, VoteRequest) and message.pre) or (
            isinstance(message, VoteReply) and message.pre and message.granted)
        if message.term > self.term and not hypothetical:
            leader = message.leader if isinstance(message, AppendRequest | SnapshotRequest) else None
            self._become_follower(message.term, leader, now)
        match message:
            case VoteRequest():
                self._on_vote_request(sender, message, now)
            case VoteReply():
                self._on_vote_reply(sender, message, now)
            case AppendRequest():
                self._on_append(sender, message, now)
            case AppendReply():
                self._on_append_reply(sender, message, now)
            case SnapshotRequest():
                self._on_snapshot(sender, message, now)
            case SnapshotReply():
                self._on_snapshot_reply(sender, message, now)

    def compact(self, index: int, data: bytes) -> None:
        """Forget the entries up to ``index`` (applied), which ``data`` (a snapshot of the state
        machine at ``index``) replaces; the caller stores the snapshot."""
        if not self.snapshot_index < index <= self.applied_index:
            raise ValueError(f"cannot compact to {index}: snapshot at {self.snapshot_index}, "
                             f"applied to {self.applied_index}")
        term = self.term_at(index)
        assert term is not None
        del self.entries[:index - self.snapshot_index]
        self.snapshot_index, self.snapshot_term, self.snapshot_data = index, term, data

    def take_ready(self) -> Ready:
        """What changed since the last call (see :class:`Ready`); committed entries are then
        counted as applied."""
        ready = self._ready
        if self.commit_index > self.applied_index:
            indexes = range(self.applied_index + 1, self.commit_index + 1)
            ready.committed = [(i, self.entry(i)) for i in indexes]
            self.applied_index = self.commit_index
        self._ready = Ready()
        return ready

    # -- votes ----------------------------------------------------------------------------
    def _on_vote_request(self, sender: str, request: VoteRequest, now: int) -> None:
        up_to_date = (request.last_term, request.last_index) >= (self.last_term, self.last_index)
        if request.pre:
            heard = (self.role is Role.LEADER or (
                self.leader_id is not None and self.last_leader_contact is not None
                and now - self.last_leader_contact < self.timing.election_min_ms))
            granted = request.term > self.term and up_to_date and not heard
            reply = VoteReply(request.term if granted else self.term, self.id, granted, pre=True)
            self._ready.messages.append((sender, reply))
            return
        granted = (request.term == self.term and self.voted_for in (None, request.candidate)
                   and up_to_date and self.role is not Role.LEADER)
        if granted:
            self._set_hard_state(self.term, request.candidate)
            self._reset_election(now)
        self._ready.messages.append((sender, VoteReply(self.term, self.id, granted)))

    def _on_vote_reply(self, sender: str, reply: VoteReply, now: int) -> None:
        if reply.pre:
            if self.role is Role.PRE_CANDIDATE and reply.granted and reply.term == self.term + 1:
                self.votes.add(sender)
                if len(self.votes) >= self.quorum:
                    self._start_election(now)
            return
        if self.role is not Role.CANDIDATE or reply.term != self.term or not reply.granted:
            return
        self.votes.add(sender)
        if len(self.votes) >= self.quorum:
            self._become_leader(now)

    # -- replication ----------------------------------------------------------------------
    def _broadcast(self, now: int) -> None:
        self._heartbeat_due = now + self.timing.heartbeat_ms
        for peer in self.others:
            self._send_append(peer)

    def _send_append(self, peer: str) -> None:
        next_index = self.next_index[peer]
        if next_index <= self.snapshot_index:
            self._ready.messages.append((peer, SnapshotRequest(
                self.term, self.id, self.snapshot_index, self.snapshot_term, self.snapshot_data)))
            return
        prev = next_index - 1
        prev_term = self.term_at(prev)
        assert prev_term is not None
        last = min(self.last_index, prev + MAX_ENTRIES_PER_APPEND)
        entries = tuple(self.entry(i) for i in range(next_index, last + 1))
        self._ready.messages.append((peer, AppendRequest(self.term, self.id, prev, prev_term, entries,
                                                         self.commit_index)))

    def _on_append(self, sender: str, request: AppendRequest, now: int) -> None:
        if request.term < self.term:
            self._ready.messages.append((sender, AppendReply(self.term, self.id, False, self.last_index)))
            return
        if self.role is not Role.FOLLOWER or self.leader_id != request.leader:
            self._become_follower(request.term, request.leader, now)
        self._reset_election(now)
        self.last_leader_contact = now
        prev, entries = request.prev_index, request.entries
        if prev < self.snapshot_index:  # entries up to the snapshot are committed here already
            skip = min(len(entries), self.snapshot_index - prev)
            prev, entries = prev + skip, entries[skip:]
            if prev < self.snapshot_index:
                reply = AppendReply(self.term, self.id, True, self.snapshot_index)
                self._ready.messages.append((sender, reply))
                return
            prev_term = self.snapshot_term
        else:
            prev_term = request.prev_term
        if self.term_at(prev) != prev_term:
            hint = min(prev - 1, self.last_index)
            self._ready.messages.append((sender, AppendReply(self.term, self.id, False, max(hint, 0))))
            return
        for offset, entry in enumerate(entries):
            index = prev + 1 + offset
            if index <= self.last_index:
                if self.term_at(index) == entry.term:
                    continue
                self._truncate(index)
            self._append(entry)
        match = prev + len(entries)
        commit = min(request.commit, match)
        if commit > self.commit_index:
            self.commit_index = commit
        self._ready.messages.append((sender, AppendReply(self.term, self.id, True, match)))

    def _on_append_reply(self, sender: str, reply: AppendReply, now: int) -> None:
        if self.role is not Role.LEADER or reply.term != self.term:
            return
        self.last_ack[sender] = now
        if reply.success:
            if reply.match_index > self.match_index[sender]:
                self.match_index[sender] = reply.match_index
            self.next_index[sender] = max(self.next_index[sender], self.match_index[sender] + 1)
            self._advance_commit()
            if self.next_index[sender] <= self.last_index:  # more to send: at once, not at the next tick
                self._send_append(sender)
        else:
            self.next_index[sender] = max(self.match_index[sender] + 1, min(self.next_index[sender] - 1,
                                                                             reply.match_index + 1))
            self._send_append(sender)

    def _advance_commit(self) -> None:
        """Commit the highest index of this term that a majority holds."""
        matches = sorted([self.last_index, *self.match_index.values()], reverse=True)
        candidate = matches[self.quorum - 1]
        if candidate > self.commit_index and self.term_at(candidate) == self.term:
            self.commit_index = candidate

    # -- snapshots ------------------------------------------------------------------------
    def _on_snapshot(self, sender: str, request: SnapshotRequest, now: int) -> None:
        if request.term < self.term:
            self._ready.messages.append((sender, SnapshotReply(self.term, self.id, 0)))
            return
        if self.role is not Role.FOLLOWER or self.leader_id != request.leader:
            self._become_follower(request.term, request.leader, now)
        self._reset_election(now)
        self.last_leader_contact = now
        if request.last_index > self.commit_index:
            if self.term_at(request.last_index) == request.last_term:
                del self.entries[:request.last_index - self.snapshot_index]  # keep what follows
            else:
                self.entries = []
            self.snapshot_index, self.snapshot_term = request.last_index, request.last_term
            self.snapshot_data = request.data
            self.commit_index = self.applied_index = request.last_index
            self._ready.snapshot = request
            self._ready.appended = []
            self._ready.committed = []
        self._ready.messages.append((sender, SnapshotReply(self.term, self.id, self.commit_index)))

    def _on_snapshot_reply(self, sender: str, reply: SnapshotReply, now: int) -> None:
        if self.role is not Role.LEADER or reply.term != self.term:
            return
        self.last_ack[sender] = now
        if reply.last_index > self.match_index[sender]:
            self.match_index[sender] = reply.last_index
        self.next_index[sender] = max(self.next_index[sender], self.match_index[sender] + 1)
        self._advance_commit()
