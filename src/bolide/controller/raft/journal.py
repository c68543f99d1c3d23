"""The controller's journal in a group of several peers: events go into the Raft log of
:class:`~bolide.controller.raft.core.RaftNode`, are answered once a majority holds them, and
every peer applies the committed entries to its replicas state in order.

Peers talk over the controller's own remoting port with :data:`RAFT_REQUEST_CODE`: each Raft
request is a remoting request and its reply the response. A peer has at most one request in
flight to each other peer; what would go to a busy peer is dropped and sent again on a later
tick (Raft tolerates lost messages). Everything a Ready asks to persist is fsynced (in a
thread, under the node's lock) before its messages leave and before its replies are answered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence

from bolide.common.waiting import cancel_and_wait, wait_for
from bolide.controller.config import Peer
from bolide.controller.events import Event, event_from_json
from bolide.controller.journal import (
    COMPACT_AFTER_RECORDS,
    WriteTimeoutError,
    decode_events,
    encode_events,
    encode_snapshot,
)
from bolide.controller.raft.core import DEFAULT_TIMING, NotLeaderError, RaftNode, Ready, Role, Timing
from bolide.controller.raft.messages import (
    RAFT_REQUEST_CODE,
    AppendReply,
    AppendRequest,
    LogEntry,
    Message,
    SnapshotReply,
    SnapshotRequest,
    VoteReply,
    VoteRequest,
    decode_message,
    encode_message,
)
from bolide.controller.raft.storage import RaftStorage
from bolide.controller.replicas import ReplicasState
from bolide.errors import ProtocolError, RemotingError
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import RemotingClient, RemotingServer, RequestContext

log = logging.getLogger(__name__)

TICK_S = 0.05
WRITE_TIMEOUT_S = 10.0
REPLIES = (VoteReply, AppendReply, SnapshotReply)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _sender(message: Message) -> str:
    match message:
        case VoteRequest():
            return message.candidate
        case AppendRequest() | SnapshotRequest():
            return message.leader
        case VoteReply():
            return message.voter
        case AppendReply() | SnapshotReply():
            return message.follower


class RaftJournal:
    """This controller's member of the group ``peers`` (``self_id`` among them)."""

    def __init__(self, state: ReplicasState, server: RemotingServer, peers: list[Peer], self_id: str,
                 storage: RaftStorage, *, timing: Timing = DEFAULT_TIMING) -> None:
        self.state = state
        self.server = server
        self.peers = {p.peer_id: p.address for p in peers}
        self.self_id = self_id
        self.storage = storage
        self.timing = timing
        self.client = RemotingClient()
        self.node: RaftNode | None = None
        self.dropped_bytes = 0
        self.reason = ""
        self.on_leadership: Callable[[bool], None] | None = None
        self._lock = asyncio.Lock()
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._waiters: dict[int, tuple[int, asyncio.Future[None]]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._was_leader = False
        self.failed = ""  # why this peer stopped taking part (its disk refused a write)

    # -- the group as the controller sees it ------------------------------------------------
    @property
    def is_leader(self) -> bool:
        """Leader, and every entry of earlier terms applied (its own term's no-op committed)."""
        node = self.node
        return (node is not None and not self.failed and node.is_leader
                and node.applied_index >= node.leader_since_index)

    @property
    def leader_id(self) -> str | None:
        return self.node.leader_id if self.node is not None else None

    @property
    def role(self) -> str:
        """leader once it may answer (a leader still applying its predecessors' entries counts
        as candidate, as RocketMQ's until its first append commits); unknown when stopped."""
        node = self.node
        if node is None or self.failed:
            return "unknown"
        if self.is_leader:
            return "leader"
        return "follower" if node.role is Role.FOLLOWER else "candidate"

    @property
    def leader_address(self) -> str | None:
        leader = self.leader_id
        return self.peers.get(leader) if leader is not None else None

    @property
    def peers_text(self) -> str:
        return "".join(f"{peer_id}:{address};" for peer_id, address in self.peers.items())

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        loaded = await asyncio.to_thread(self.storage.open)
        self.dropped_bytes, self.reason = loaded.dropped_bytes, loaded.reason
        persisted = loaded.persisted
        if persisted.snapshot_data:
            self.state.apply(event_from_json(json.loads(persisted.snapshot_data)))
        self.node = RaftNode(self.self_id, list(self.peers), persisted, _now_ms(), timing=self.timing)
        self.server.register(RAFT_REQUEST_CODE, self._on_request)
        self._ticker = asyncio.get_running_loop().create_task(self._tick_forever())

    async def close(self) -> None:
        await cancel_and_wait([t for t in (self._ticker, *self._in_flight.values()) if t is not None])
        self._fail_waiters("the controller is stopping")
        await self.client.close()
        self.storage.close()

    # -- writes -----------------------------------------------------------------------------
    async def write(self, events: list[Event]) -> None:
        """Replicate ``events``; return once committed and applied here."""
        async with self._lock:
            node = self.node
            if self.failed:
                raise OSError(self.failed)
            if node is None or not self.is_leader:
                raise NotLeaderError(f"{self.self_id} is not the controller leader")
            index = node.propose(encode_events(events))
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters[index] = (node.term, future)
            await self._handle(node.take_ready())
        try:
            await wait_for(asyncio.shield(future), WRITE_TIMEOUT_S)
        except TimeoutError:
            self._waiters.pop(index, None)
            raise WriteTimeoutError(f"no majority of the controllers {self.peers_text} took the change "
                                    f"within {WRITE_TIMEOUT_S:.0f} s") from None

    def _fail_waiters(self, why: str) -> None:
        for _, future in self._waiters.values():
            if not future.done():
                future.set_exception(NotLeaderError(why))
        self._waiters.clear()

    # -- the node's inputs ------------------------------------------------------------------
    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            if self.failed:
                return
            try:
                async with self._lock:
                    assert self.node is not None
                    self.node.tick(_now_ms())
                    await self._handle(self.node.take_ready())
            except Exception:
                log.exception("controller Raft tick failed")

    async def _on_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            message = decode_message(request.body_bytes())
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        sender = _sender(message)
        if sender not in self.peers or sender == self.self_id:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"{sender} is not a peer of "
                                         f"{self.self_id} (controllerDLegerPeers={self.peers_text})")
        async with self._lock:
            if self.failed:
                return request.make_response(ResponseCode.SYSTEM_ERROR, self.failed)
            assert self.node is not None
            self.node.step(sender, message, _now_ms())
            reply = await self._handle(self.node.take_ready(), reply_to=sender)
        if reply is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "no reply")
        return request.make_response(body=encode_message(reply))

    async def _exchange(self, peer: str, message: Message) -> None:
        """Send one request to ``peer`` and step its reply."""
        try:
            response = await self.client.invoke(self.peers[peer], RemotingCommand.request(
                RAFT_REQUEST_CODE, None, encode_message(message)), timeout_ms=self.timing.heartbeat_ms * 3)
            if response.code != ResponseCode.SUCCESS:
                log.debug("controller peer %s refused a Raft message: %s", peer, response.remark)
                return
            reply = decode_message(response.body_bytes())
        except (OSError, TimeoutError, RemotingError, ProtocolError) as exc:
            log.debug("controller peer %s unreachable: %s", peer, exc)
            return
        finally:
            self._in_flight.pop(peer, None)
        async with self._lock:
            if self.failed:
                return
            assert self.node is not None
            self.node.step(peer, reply, _now_ms())
            await self._handle(self.node.take_ready())

    # -- the node's outputs -----------------------------------------------------------------
    async def _handle(self, ready: Ready, reply_to: str | None = None) -> Message | None:
        """Persist, apply, then send what ``ready`` holds (under the lock); the reply to
        ``reply_to`` is returned instead of sent."""
        node = self.node
        assert node is not None
        # A leader's appends leave before its own fsync (they overlap the followers'): no entry
        # counts as committed before that fsync, as replies are stepped under the lock held here.
        # Votes and replies leave only once what they promise is on disk.
        early = [(p, m) for p, m in ready.messages if isinstance(m, AppendRequest | SnapshotRequest)]
        self._send(early)
        if ready.hard_state or ready.truncate_from is not None or ready.appended or ready.snapshot:
            entries = list(node.entries) if ready.snapshot is not None else []
            try:
                await asyncio.to_thread(self._persist, ready, entries)
            except Exception as exc:  # memory is now ahead of the disk: stop taking part
                self.failed = (f"controller {self.self_id} could not write its Raft state under "
                               f"{self.storage.directory} ({exc}); it stopped taking part in its "
                               "group: fix the disk and restart it")
                log.error("%s", self.failed)
                self._fail_waiters(self.failed)
                raise OSError(self.failed) from exc
        if ready.snapshot is not None:
            self.state.apply(event_from_json(json.loads(ready.snapshot.data)))
            self._fail_waiters("a snapshot from the leader replaced this controller's log")
        for index, entry in ready.committed:
            if entry.data:
                for event in decode_events(entry.data):
                    self.state.apply(event)
            waiter = self._waiters.pop(index, None)
            if waiter is not None and not waiter[1].done():
                if waiter[0] == entry.term:
                    waiter[1].set_result(None)
                else:
                    waiter[1].set_exception(NotLeaderError("a new leader replaced the change"))
        if node.applied_index - node.snapshot_index > COMPACT_AFTER_RECORDS:
            data = encode_snapshot(self.state)
            node.compact(node.applied_index, data)
            await asyncio.to_thread(self.storage.save_snapshot, node.snapshot_index, node.snapshot_term,
                                    data, list(node.entries))
        self._leadership_changed()
        reply = None
        later = []
        for peer, message in ready.messages:
            if reply is None and peer == reply_to and isinstance(message, REPLIES):
                reply = message
            elif not isinstance(message, AppendRequest | SnapshotRequest):
                later.append((peer, message))
        self._send(later)
        return reply

    def _send(self, messages: Sequence[tuple[str, Message]]) -> None:
        """Send each message as a request, unless one is in flight to its peer (dropped then:
        the next tick sends what is still needed)."""
        for peer, message in messages:
            if peer not in self._in_flight:
                self._in_flight[peer] = asyncio.get_running_loop().create_task(self._exchange(peer, message))

    def _persist(self, ready: Ready, entries: list[LogEntry]) -> None:
        """Make ``ready`` durable; ``entries``: the log after a received snapshot."""
        if ready.hard_state is not None:
            self.storage.save_hard_state(*ready.hard_state)
        if ready.snapshot is not None:
            snap = ready.snapshot
            self.storage.save_snapshot(snap.last_index, snap.last_term, snap.data, entries)
            return
        if ready.truncate_from is not None:
            self.storage.truncate_from(ready.truncate_from)
            if not ready.appended:
                self.storage.sync()
        if ready.appended:
            self.storage.append(ready.appended)

    def _leadership_changed(self) -> None:
        leading = self.is_leader
        if leading == self._was_leader:
            return
        self._was_leader = leading
        node = self.node
        assert node is not None
        if leading:
            log.warning("controller %s is the leader of its group (term %d)", self.self_id, node.term)
        else:
            log.warning("controller %s is no longer the leader (term %d, leader %s)", self.self_id,
                        node.term, node.leader_id)
            self._fail_waiters("this controller lost the leadership")
        if self.on_leadership is not None:
            self.on_leadership(leading)
