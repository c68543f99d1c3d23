"""Raft's safety properties hold for the controllers' Raft core over random runs (hypothesis):
groups of 3 and 5 nodes whose messages are delayed, reordered, duplicated and dropped, with
partitions, crashes and restarts from what each node made durable, proposals and compactions.

Checked after every step: at most one leader per term (election safety), the entries every
node applied form one sequence (state machine safety: no node applies a different entry at an
index another applied), no committed entry is ever lost (leader completeness: every leader
holds every entry committed before its term), terms never go back on disk. After the network
heals, a leader is elected and a proposal commits on every node (liveness).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.controller.raft.core import Persisted, RaftNode, Role, Timing
from bolide.controller.raft.messages import LogEntry, Message

TIMING = Timing(heartbeat_ms=50, election_min_ms=150, election_max_ms=300)


@dataclass
class Disk:
    """What a node made durable (as the journal does before sending)."""

    term: int = 0
    voted_for: str | None = None
    snapshot_index: int = 0
    snapshot_term: int = 0
    snapshot_data: bytes = b""
    entries: list[LogEntry] = field(default_factory=list)

    def persisted(self) -> Persisted:
        return Persisted(self.term, self.voted_for, self.snapshot_index, self.snapshot_term,
                         self.snapshot_data, tuple(self.entries))


class Cluster:
    def __init__(self, size: int, seed: int) -> None:
        self.ids = [f"n{i}" for i in range(size)]
        self.rng = random.Random(seed)
        self.now = 0
        self.disks = {i: Disk() for i in self.ids}
        self.nodes: dict[str, RaftNode | None] = {}
        self.applied: dict[str, list[bytes]] = {i: [] for i in self.ids}  # state machine: data by index
        self.in_flight: list[tuple[str, str, Message]] = []
        self.cut: set[str] = set()  # nodes on the other side of a partition
        self.leaders: dict[int, str] = {}
        self.committed: dict[int, LogEntry] = {}
        self.proposals = 0
        self.seen: Counter[str] = Counter()  # what happened, for the long run's checks
        for node_id in self.ids:
            self.start(node_id)

    def start(self, node_id: str) -> None:
        disk = self.disks[node_id]
        node = RaftNode(node_id, self.ids, disk.persisted(), self.now, timing=TIMING,
                        rng=random.Random(self.rng.random()))
        self.nodes[node_id] = node
        # the state machine restarts from the snapshot (its data: how many entries it covers)
        self.applied[node_id] = self.applied_prefix(disk.snapshot_index)

    def applied_prefix(self, index: int) -> list[bytes]:
        return [self.committed[i].data for i in range(1, index + 1)]

    def crash(self, node_id: str) -> None:
        self.nodes[node_id] = None
        self.in_flight = [m for m in self.in_flight if node_id not in (m[0], m[1])]

    def drain(self, node_id: str) -> None:
        node = self.nodes[node_id]
        assert node is not None
        ready = node.take_ready()
        disk = self.disks[node_id]
        if ready.hard_state is not None:
            assert ready.hard_state[0] >= disk.term, "a term went back on disk"
            disk.term, disk.voted_for = ready.hard_state
        if ready.snapshot is not None:
            disk.snapshot_index, disk.snapshot_term = ready.snapshot.last_index, ready.snapshot.last_term
            disk.snapshot_data = ready.snapshot.data
            disk.entries = list(node.entries)
            self.applied[node_id] = self.applied_prefix(ready.snapshot.last_index)
        else:
            if ready.truncate_from is not None:
                self.seen["truncation"] += 1
                del disk.entries[max(ready.truncate_from - disk.snapshot_index - 1, 0):]
            for index, entry in ready.appended:
                assert index == disk.snapshot_index + len(disk.entries) + 1
                disk.entries.append(entry)
        for index, entry in ready.committed:
            applied = self.applied[node_id]
            assert index == len(applied) + 1, f"{node_id} applies {index} after {len(applied)}"
            known = self.committed.setdefault(index, entry)
            assert known == entry, f"{node_id} applies another entry at {index}"
            applied.append(entry.data)
        self.in_flight.extend((node_id, to, m) for to, m in ready.messages)
        self.check()

    def check(self) -> None:
        for node_id, node in self.nodes.items():
            if node is None or node.role is not Role.LEADER:
                continue
            assert self.leaders.setdefault(node.term, node_id) == node_id, f"two leaders in term {node.term}"
            for index, entry in self.committed.items():  # leader completeness
                if index > node.snapshot_index:
                    assert node.term_at(index) == entry.term, f"leader {node_id} lacks committed {index}"

    def step(self, action: str) -> None:
        rng = self.rng
        live = [i for i, n in self.nodes.items() if n is not None]
        if action == "tick":
            self.now += rng.randint(1, 120)
            for node_id in live:
                node = self.nodes[node_id]
                assert node is not None
                node.tick(self.now)
                self.drain(node_id)
        elif action == "deliver" and self.in_flight:
            sender, to, message = self.in_flight.pop(rng.randrange(len(self.in_flight)))
            if rng.random() < 0.1:
                self.in_flight.append((sender, to, message))  # duplicated
            node = self.nodes[to]
            if node is not None and (sender in self.cut) == (to in self.cut) and rng.random() > 0.05:
                node.step(sender, message, self.now)
                self.seen[type(message).__name__] += 1
                self.drain(to)
        elif action == "propose":
            for node_id in live:
                node = self.nodes[node_id]
                assert node is not None
                if node.role is Role.LEADER:
                    self.proposals += 1
                    node.propose(f"p{self.proposals}".encode())
                    self.drain(node_id)
                    break
        elif action == "partition":
            self.cut = set(rng.sample(self.ids, rng.randint(0, len(self.ids) // 2)))
        elif action == "heal":
            self.cut = set()
        elif action == "crash" and len(live) > 1:
            self.crash(rng.choice(live))
        elif action == "restart":
            down = [i for i, n in self.nodes.items() if n is None]
            if down:
                self.start(rng.choice(down))
        elif action == "compact":
            node_id = rng.choice(live)
            node = self.nodes[node_id]
            assert node is not None
            if node.applied_index > node.snapshot_index:
                node.compact(node.applied_index, b"s")
                disk = self.disks[node_id]
                disk.snapshot_index, disk.snapshot_term = node.snapshot_index, node.snapshot_term
                disk.snapshot_data, disk.entries = b"s", list(node.entries)

    def settle(self) -> None:
        """Heal and restart everything; a leader commits a proposal on every node."""
        self.cut = set()
        for node_id in self.ids:
            if self.nodes[node_id] is None:
                self.start(node_id)
        proposed: int | None = None
        for _ in range(4000):
            self.step("tick" if not self.in_flight or self.rng.random() < 0.05 else "deliver")
            made = self.committed.get(proposed) if proposed is not None else None
            if made is not None and made.data != b"final":
                proposed = None  # a new leader overwrote it before it was committed: propose again
            leader = next((n for n in self.nodes.values() if n is not None and n.role is Role.LEADER), None)
            if proposed is None and leader is not None:
                leader.propose(b"final")
                self.drain(leader.id)
                proposed = leader.last_index
            if proposed is not None and all(n is not None and n.applied_index >= proposed
                                            for n in self.nodes.values()):
                assert self.committed[proposed].data == b"final"
                return
        raise AssertionError("no leader committed a proposal on every node after the network healed")


ACTIONS = st.sampled_from(["tick", "deliver", "deliver", "deliver", "deliver", "propose", "partition",
                           "heal", "crash", "restart", "compact"])


@settings(max_examples=120, deadline=None)
@given(st.sampled_from([3, 5]), st.integers(0, 2**32), st.lists(ACTIONS, min_size=20, max_size=300))
def test_raft_safety_and_liveness(size: int, seed: int, actions: list[str]) -> None:
    cluster = Cluster(size, seed)
    for action in actions:
        cluster.step(action)
    cluster.settle()


def test_a_long_random_run_commits_many_entries() -> None:
    """One long run with every fault: the group keeps committing."""
    cluster = Cluster(5, 7)
    rng = random.Random(11)
    # enough deliveries for the messages of each tick (a network that keeps up, mostly)
    choices = ["tick"] * 2 + ["deliver"] * 40 + ["propose"] * 2 + ["partition", "heal", "heal", "crash",
                                                                   "restart", "restart", "compact"]
    for _ in range(20_000):
        cluster.step(rng.choice(choices))
    cluster.settle()
    assert len(cluster.committed) > 200
    assert cluster.seen["SnapshotRequest"] > 0 and cluster.seen["truncation"] > 0, cluster.seen
    assert len(cluster.leaders) > 10


def _run(cluster: Cluster, rounds: int) -> None:
    """Time passes in small steps, every message sent is delivered (or dropped at the cut)."""
    for _ in range(rounds):
        cluster.now += 20
        for node in cluster.nodes.values():
            if node is not None:
                node.tick(cluster.now)
                cluster.drain(node.id)
        while cluster.in_flight:
            sender, to, message = cluster.in_flight.pop(0)
            node = cluster.nodes[to]
            if node is not None and (sender in cluster.cut) == (to in cluster.cut):
                node.step(sender, message, cluster.now)
                cluster.drain(to)


def test_a_peer_cut_off_and_back_does_not_depose_the_leader() -> None:
    """Pre-votes: a follower cut off for many election timeouts asks in vain and never raises
    its term; back, it follows the leader, whose term and leadership stay."""
    cluster = Cluster(3, 5)
    _run(cluster, 100)
    leaders = [n for n in cluster.nodes.values() if n is not None and n.role is Role.LEADER]
    assert len(leaders) == 1
    leader, term = leaders[0], leaders[0].term
    away = next(n for n in cluster.nodes.values() if n is not None and n is not leader)
    cluster.cut = {away.id}
    _run(cluster, 500)  # 10 s: a dozen election timeouts
    assert away.term == term and away.role is Role.PRE_CANDIDATE
    assert leader.role is Role.LEADER and leader.term == term
    cluster.cut = set()
    _run(cluster, 100)
    assert leader.role is Role.LEADER and leader.term == term
    assert away.role is Role.FOLLOWER and away.leader_id == leader.id and away.term == term
