"""Consumption by receive and acknowledge (RocketMQ 5's "pop"), as the gRPC clients consume.

A receive hands out messages of a group's queues and hides each from the group's other
receives for an invisible time; the consumer acknowledges it with the receipt handle it got,
or changes the invisible time. A message neither acknowledged nor renewed in time is handed
out again with its delivery attempt one higher, and goes to the group's dead letter queue once
it has had the group's ``retryMaxTimes + 1`` attempts. FIFO groups (``consumeMessageOrderly``)
get nothing more from a queue while a message of it is out, and get the expired ones again in
their order.

What is out lives in memory only, one small lease per message; the group's committed offset
of each queue (``consumerOffset.json``, what ``consumerProgress`` shows) is the first offset
not yet acknowledged. A broker that restarts hands out again everything from there: delivery
is at least once. Receipt handles name the queue, the offset and the lease's generation, so a
handle stays valid until the message is acknowledged, handed out again or its handle changed.

A generation is a microsecond time stamp, one per receive (shared by the messages it hands
out) or invisible-time change, kept strictly increasing: RocketMQ's remoting handles carry it
as ``popTime`` (milliseconds) and ``reviveQid`` (the microseconds, never 999).

A receive also takes the messages of the group's pop retry topics (``%RETRY%<group>_<topic>``,
``%RETRY%<group>+<topic>``) that the caller names, as RocketMQ 5's pops do: a RocketMQ broker
whose store Bolide took over put the messages it revived there. Their handles carry the retry
topic's mark (``pop_info.retry_flag``), so an acknowledgement naming the topic finds them.
Leases RocketMQ handed out before the takeover are adopted with :meth:`PopService.adopt`
(:mod:`bolide.broker.pop_takeover`), with the generation its handles carry, so its consumers'
acknowledgements still work.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import random
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bolide.common.message import MessageExt
from bolide.errors import BolideError
from bolide.protocol.pop_info import NORMAL_TOPIC, real_topic, retry_flag
from bolide.store import GetStatus, MessageStore
from bolide.store.config_files import ConsumerOffsetManager
from bolide.store.record import reconsume_times_at

_I32, _I64 = struct.Struct(">i"), struct.Struct(">q")

AUTO_RENEW_MS = 60_000  # the invisible time of a receive that asks the broker to renew it
RENEW_LIMIT_MS = 3 * 3600_000  # renewed for so long at most, then handed out again
MAX_INVISIBLE_MS = 12 * 3600_000
MAX_IDLE_QUEUES = 100_000  # states of queues with nothing out kept; past it they are dropped
IDLE_QUEUE_S = 300.0  # a queue state with nothing out that no call used for so long is dropped
SWEEP_S = 30.0  # how often the idle queue states are looked for
ORDER_REVIVE_QID = 999  # RocketMQ's reviveQid of orderly pops: never the low digits of a generation
RETRY_FIRST_PERCENT = 20  # RocketMQ's popFromRetryProbability: receives that try the retry topics first

Key = tuple[str, str, int]  # group, topic, queue id
RecordFilter = Callable[[memoryview], bool]


class ReceiptHandleError(BolideError):
    """A receipt handle that does not name a message out now (malformed, or the message was
    handed out again since)."""


@dataclass(slots=True)
class StoredRecord:
    """A message as the store holds it (pops over remoting answer the records as they are)."""

    record: bytearray  # a copy: the reconsume times are set before it goes out
    queue_offset: int
    reconsume_times: int

    @classmethod
    def of(cls, buf: memoryview) -> StoredRecord:
        record = bytearray(buf)
        reconsume_times = _I32.unpack_from(record, reconsume_times_at(record))[0]
        return cls(record, _I64.unpack_from(record, 20)[0], reconsume_times)


@dataclass(slots=True)
class Delivery:
    """A message handed out: its attempt (1 the first time) and receipt handle."""

    message: MessageExt | StoredRecord  # StoredRecord when popped with ``raw``
    attempt: int
    handle: str
    invisible_ms: int
    gen: int  # the lease's generation (also in the handle)
    stored_topic: str = ""  # the pop retry topic it was taken from ("": the topic popped)


@dataclass(slots=True)
class _Lease:
    gen: int  # the handle's generation
    deadline: float  # clock() seconds
    attempt: int
    renew_for: str | None = None  # the client whose receive asked for renewal
    renew_until: float = 0.0


class _Queue:
    """One group's state on one queue: the first offset never handed out and the leases of
    the offsets handed out and not acknowledged."""

    __slots__ = ("due", "leases", "low", "next", "saved", "used")

    def __init__(self, start: int, now: float) -> None:
        self.used = now  # clock() of the latest receive, acknowledgement or change on it
        self.next = start
        self.saved = start  # the offset last committed to the offset table
        self.leases: dict[int, _Lease] = {}
        self.due: set[int] = set()  # leased offsets whose invisible time ended: to hand out again
        self.low: list[int] = []  # heap of the leased offsets (stale entries skipped)

    def committed(self) -> int:
        low, leases = self.low, self.leases
        while low and low[0] not in leases:
            heapq.heappop(low)
        return low[0] if low else self.next

    def in_flight(self) -> int:
        """How many of its messages are out now."""
        return len(self.leases) - len(self.due)


def make_handle(queue_id: int, offset: int, gen: int, retry: str = NORMAL_TOPIC) -> str:
    """The receipt handle of a lease (``retry``: the mark of the pop retry topic it is in)."""
    handle = f"{queue_id}:{offset}:{gen:x}"
    return handle if retry == NORMAL_TOPIC else f"{handle}:{retry}"


def parse_handle(handle: str) -> tuple[int, int, int, str]:
    """(queue id, offset, generation, pop retry topic mark) of a receipt handle this service
    made; the mark is ``0`` for the topic itself."""
    fields = handle.split(":")
    try:
        if len(fields) == 3:
            return int(fields[0]), int(fields[1]), int(fields[2], 16), NORMAL_TOPIC
        if len(fields) == 4:
            return int(fields[0]), int(fields[1]), int(fields[2], 16), fields[3]
    except ValueError:
        pass
    raise ReceiptHandleError(f"receipt handle {handle[:80]!r} is not one this broker gave")


class PopService:
    """Hands out, hides and takes back messages of the store for consumer groups.

    Runs on the broker's event loop (the dispatch listener is the only call from another
    thread). ``max_attempts(group)`` is the number of deliveries before the dead letter queue,
    ``orderly(group)`` whether the group is FIFO, ``dead_letter(group, message)`` stores a
    message in the group's DLQ, ``client_alive(client_id)`` whether a client that asked for
    renewal is still connected.
    """

    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetManager,
        *,
        max_attempts: Callable[[str], int],
        orderly: Callable[[str], bool],
        dead_letter: Callable[[str, MessageExt], bool],
        client_alive: Callable[[str], bool] = lambda client_id: False,
        max_in_flight: int = 100_000,
        max_waiters: int = 10_000,
        idle_queue_s: float = IDLE_QUEUE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.offsets = store, offsets
        self.max_attempts, self.orderly = max_attempts, orderly
        self.dead_letter, self.client_alive = dead_letter, client_alive
        self.max_in_flight, self.max_waiters = max_in_flight, max_waiters
        self.clock = clock
        self.idle_queue_s = idle_queue_s
        self._next_sweep = clock() + SWEEP_S
        self.loop: asyncio.AbstractEventLoop | None = None
        self._queues: dict[Key, _Queue] = {}
        self._timeline: list[tuple[float, int, Key, int]] = []  # (deadline, gen, key, offset)
        self._last_gen = 0
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._aliases: dict[str, str] = {}  # pop retry topic -> the topic whose receives it wakes
        self._waiting = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self.in_flight = 0  # leases out now (not come due)
        self.leased = 0  # every lease: out now or come due and not handed out again yet
        self.dead_lettered = 0

    def progress_of(self, group: str, topic: str, queue_id: int) -> tuple[int, int, int] | None:
        """(the first offset not acknowledged, messages out now, the first offset never handed
        out) of ``group`` on a queue; None when the group pops nothing from it."""
        q = self._queues.get((group, topic, queue_id))
        return (q.committed(), q.in_flight(), q.next) if q is not None else None

    def _new_gen(self) -> int:
        """A generation newer than every earlier one (so handles of an earlier run never match)."""
        gen = max(self._last_gen + 1, time.time_ns() // 1000)
        if gen % 1000 == ORDER_REVIVE_QID:
            gen += 1
        self._last_gen = gen
        return gen

    # -- handing out ----------------------------------------------------------------------
    def pop(
        self,
        group: str,
        topic: str,
        queue_ids: Sequence[int],
        max_count: int,
        invisible_ms: int,
        *,
        tags: Iterable[str] | None = None,
        record_filter: RecordFilter | None = None,
        renew_for: str | None = None,
        from_end: bool = False,
        raw: bool = False,
        orderly: bool = False,
        retry_topics: Sequence[str] = (),
    ) -> list[Delivery]:
        """Up to ``max_count`` messages of ``topic``'s ``queue_ids`` for ``group``, each hidden
        for ``invisible_ms``: messages due again first, then new ones (filtered by ``tags`` or
        ``record_filter``). ``renew_for``: keep them hidden while that client is connected (up
        to three hours). ``from_end``: a queue the group has no offset on yet starts at its
        last message, unless retention has removed none of it (RocketMQ's ConsumeInitMode.MAX).
        ``raw``: the messages as :class:`StoredRecord` instead of decoded. ``orderly`` (a pop that
        asks for order, as RocketMQ's ``order`` header), or a FIFO group: a queue with messages
        out hands out nothing until they are acknowledged or come back. ``retry_topics``: the
        group's pop retry topics of ``topic`` to take from too (queue 0, from their first
        message; not for orderly pops), after the topic's queues or, one receive in five,
        before them, as RocketMQ does."""
        now = self.clock()
        self._expire(now)
        gen = self._new_gen()
        orderly = orderly or self.orderly(group)
        tag_set = frozenset(tags) if tags is not None else None
        sources = [(topic, queue_id, from_end) for queue_id in queue_ids]
        if retry_topics and not orderly:
            retried = [(retry, 0, False) for retry in retry_topics]
            for retry in retry_topics:
                self._aliases[retry] = topic
            first = random.randrange(100) < RETRY_FIRST_PERCENT
            sources = retried + sources if first else sources + retried
        out: list[Delivery] = []
        for source, queue_id, source_from_end in sources:
            room = max_count - len(out)
            if room <= 0:
                break
            key = (group, source, queue_id)
            q = self._queue(key, source_from_end)
            if orderly and q.in_flight():
                continue  # a FIFO queue waits for its messages out to come back
            retry = retry_flag(source) if source != topic else NORMAL_TOPIC
            found: list[tuple[MessageExt | StoredRecord, int]] = []
            for offset in sorted(q.due)[:room]:
                msg = self._read_stored(source, queue_id, offset) if raw else self._read_one(
                    source, queue_id, offset
                )
                lease = q.leases[offset]
                if msg is None:  # gone with retention meanwhile
                    del q.leases[offset]
                    q.due.discard(offset)
                    self.leased -= 1
                    continue
                found.append((msg, lease.attempt + 1))
            room -= len(found)
            if room > 0 and self.leased < self.max_in_flight:  # due ones count: they wait for an ack
                found.extend((msg, msg.reconsume_times + 1)
                             for msg in self._read_new(key, q, room, tag_set, record_filter, raw))
            for msg, attempt in found:
                if retry != NORMAL_TOPIC and isinstance(msg, MessageExt):
                    msg.topic = topic  # as RocketMQ answers it: the topic the consumer popped
                out.append(self._lend(key, q, msg, attempt, now, invisible_ms, renew_for, gen, retry))
            self._commit(key, q)
        self._arm()
        return out

    def _queue(self, key: Key, from_end: bool = False) -> _Queue:
        """The group's state on a queue; started again from the offset table when an admin
        command moved the group's offset there (resetOffsetByTime)."""
        group, topic, queue_id = key
        committed = self.offsets.query(group, topic, queue_id)
        q = self._queues.get(key)
        if q is None or (committed is not None and committed != q.saved):
            if q is not None:
                self.in_flight -= q.in_flight()
                self.leased -= len(q.leases)
            start = committed if committed is not None else self._first_offset(topic, queue_id, from_end)
            if len(self._queues) >= MAX_IDLE_QUEUES:
                self._drop_idle()
            q = self._queues[key] = _Queue(start, self.clock())
        else:
            q.used = self.clock()
        return q

    def _first_offset(self, topic: str, queue_id: int, from_end: bool) -> int:
        low = self.store.get_min_offset_in_queue(topic, queue_id)
        if not from_end or low == 0:
            return low
        return max(low, self.store.get_max_offset_in_queue(topic, queue_id) - 1)

    def _drop_idle(self) -> None:
        """Forget the queues with nothing out (every group and queue ever received from would
        stay otherwise): their offsets are committed, so their state starts again from there."""
        for key in [k for k, q in self._queues.items() if not q.leases]:
            del self._queues[key]

    def _read_new(
        self,
        key: Key,
        q: _Queue,
        count: int,
        tags: frozenset[str] | None,
        record_filter: RecordFilter | None,
        raw: bool,
    ) -> Sequence[MessageExt | StoredRecord]:
        group, topic, queue_id = key
        result = self.store.get_message(
            group, topic, queue_id, q.next, count, tags, record_filter=record_filter
        )
        try:
            if result.status is GetStatus.OFFSET_OVERFLOW_ONE:
                return []
            q.next = max(result.next_begin_offset, result.min_offset)  # past filtered and removed ones
            if result.status is not GetStatus.FOUND:
                return []
            return [StoredRecord.of(buf) for buf in result.buffers] if raw else result.messages
        finally:
            result.release()

    def _read_one(self, topic: str, queue_id: int, offset: int) -> MessageExt | None:
        result = self.store.get_message("", topic, queue_id, offset, 1)
        try:
            found = result.messages if result.status is GetStatus.FOUND else []
            return found[0] if found and found[0].queue_offset == offset else None
        finally:
            result.release()

    def _read_stored(self, topic: str, queue_id: int, offset: int) -> StoredRecord | None:
        result = self.store.get_message("", topic, queue_id, offset, 1)
        try:
            found = result.buffers if result.status is GetStatus.FOUND else []
            record = StoredRecord.of(found[0]) if found else None
            return record if record is not None and record.queue_offset == offset else None
        finally:
            result.release()

    def _lend(
        self,
        key: Key,
        q: _Queue,
        msg: MessageExt | StoredRecord,
        attempt: int,
        now: float,
        invisible_ms: int,
        renew_for: str | None,
        gen: int,
        retry: str = NORMAL_TOPIC,
    ) -> Delivery:
        offset = msg.queue_offset
        deadline = now + invisible_ms / 1000
        if offset not in q.leases:
            heapq.heappush(q.low, offset)
            self.in_flight += 1
            self.leased += 1
        elif offset in q.due:
            q.due.discard(offset)
            self.in_flight += 1
        q.leases[offset] = _Lease(
            gen, deadline, attempt, renew_for=renew_for, renew_until=now + RENEW_LIMIT_MS / 1000
        )
        heapq.heappush(self._timeline, (deadline, gen, key, offset))
        return Delivery(msg, attempt, make_handle(key[2], offset, gen, retry), invisible_ms, gen,
                        key[1] if retry != NORMAL_TOPIC else "")

    # -- taking back ----------------------------------------------------------------------
    def _leased(self, group: str, topic: str, handle: str) -> tuple[Key, _Queue, int, _Lease | None]:
        """The lease a handle names; None when the message was acknowledged already. Raises
        ReceiptHandleError when it was handed out again since (another handle is valid now)."""
        queue_id, offset, gen, retry = parse_handle(handle)
        if retry != NORMAL_TOPIC and retry_flag(topic) == NORMAL_TOPIC:
            topic = real_topic(retry, topic, group)  # a handle of a message of a pop retry topic
        key = (group, topic, queue_id)
        q = self._queues.get(key)
        lease = q.leases.get(offset) if q is not None else None
        if q is not None:
            q.used = self.clock()
        if q is None or (lease is None and offset >= q.next):
            raise ReceiptHandleError(
                f"receipt handle {handle!r} names no message of {topic} "
                f"handed out to {group}: receive the message again"
            )
        if lease is not None and lease.gen != gen:
            raise ReceiptHandleError(
                f"receipt handle {handle!r} expired: the message was handed "
                "out again or its invisible time changed since"
            )
        return key, q, offset, lease

    def ack(self, group: str, topic: str, handle: str) -> None:
        """Acknowledge the message a handle names (again: no effect). Raises ReceiptHandleError."""
        key, q, offset, lease = self._leased(group, topic, handle)
        if lease is None:
            return
        self._drop(key, q, offset)
        self._commit(key, q)

    def change_invisible(self, group: str, topic: str, handle: str, invisible_ms: int) -> str:
        """Hide the message for ``invisible_ms`` from now on (0: hand it out again now); its
        new handle (the old one no longer works). Raises ReceiptHandleError."""
        key, q, offset, lease = self._leased(group, topic, handle)
        if lease is None:
            raise ReceiptHandleError(f"receipt handle {handle!r}: the message was acknowledged")
        if offset in q.due:
            q.due.discard(offset)
            self.in_flight += 1
        now = self.clock()
        lease.gen, lease.deadline, lease.renew_for = self._new_gen(), now + invisible_ms / 1000, None
        heapq.heappush(self._timeline, (lease.deadline, lease.gen, key, offset))
        if invisible_ms <= 0:
            self._expire(now)
        self._arm()
        return make_handle(key[2], offset, lease.gen, parse_handle(handle)[3])

    def dead_letter_now(self, group: str, topic: str, handle: str) -> bool:
        """Move the message a handle names to the group's dead letter queue and acknowledge
        it; False when the DLQ could not take it (the message stays out)."""
        key, q, offset, lease = self._leased(group, topic, handle)
        if lease is None:
            return True
        msg = self._read_one(key[1], key[2], offset)  # a pop retry topic's, for a handle of one
        if msg is not None:
            msg.reconsume_times = max(msg.reconsume_times, lease.attempt - 1)
            if not self.dead_letter(group, msg):
                return False
            self.dead_lettered += 1
        self._drop(key, q, offset)
        self._commit(key, q)
        return True

    # -- leases of another broker ---------------------------------------------------------
    def adopt(self, group: str, topic: str, queue_id: int, offset: int, gen: int, visible_in_ms: int) -> bool:
        """Take over a message another broker handed out before this one took over its store
        (a RocketMQ 5 pop left without its ack): out under generation ``gen`` (what that
        broker's handles carry) for ``visible_in_ms`` more, then handed out again. The group's
        committed offset moves back to it, so a restart hands it out again. False when it needs
        no lease (at or past the group's offset: handed out as a new message) or is gone."""
        key = (group, topic, queue_id)
        q = self._queue(key)
        if offset >= q.next or offset in q.leases:
            return False
        msg = self._read_stored(topic, queue_id, offset)
        if msg is None:
            return False
        now = self.clock()
        deadline = now + max(0, visible_in_ms) / 1000
        heapq.heappush(q.low, offset)
        self.in_flight += 1
        self.leased += 1
        q.leases[offset] = _Lease(gen, deadline, msg.reconsume_times + 1)
        heapq.heappush(self._timeline, (deadline, gen, key, offset))
        self._commit(key, q)
        self._arm()
        return True

    def _drop(self, key: Key, q: _Queue, offset: int) -> None:
        del q.leases[offset]
        self.leased -= 1
        if offset in q.due:
            q.due.discard(offset)
        else:
            self.in_flight -= 1
            if not q.in_flight() and self._waiters:
                self._wake({key[1]})  # a FIFO queue may be open again

    def _commit(self, key: Key, q: _Queue) -> None:
        committed = q.committed()
        if committed != q.saved:
            self.offsets.commit(key[0], key[1], key[2], committed)
            q.saved = committed

    # -- expiry ---------------------------------------------------------------------------
    def _expire(self, now: float) -> None:
        """Hand back the messages whose invisible time is over (renewing those of connected
        clients that asked for it); dead-letter those out of attempts."""
        timeline, woken = self._timeline, set()
        while timeline and timeline[0][0] <= now:
            _, gen, key, offset = heapq.heappop(timeline)
            q = self._queues.get(key)
            lease = q.leases.get(offset) if q is not None else None
            if q is None or lease is None or lease.gen != gen or offset in q.due:
                continue
            if lease.renew_for is not None and now < lease.renew_until and self.client_alive(lease.renew_for):
                lease.deadline = now + AUTO_RENEW_MS / 1000
                heapq.heappush(timeline, (lease.deadline, gen, key, offset))
                continue
            group, topic, queue_id = key
            if lease.attempt >= self.max_attempts(group):
                msg = self._read_one(topic, queue_id, offset)
                if msg is not None:
                    msg.reconsume_times = max(msg.reconsume_times, lease.attempt)
                    if not self.dead_letter(group, msg):  # try again a bit later
                        lease.deadline = now + 1.0
                        heapq.heappush(timeline, (lease.deadline, gen, key, offset))
                        continue
                    self.dead_lettered += 1
                self._drop(key, q, offset)
                self._commit(key, q)
                continue
            q.due.add(offset)
            self.in_flight -= 1
            woken.add(topic)
        if len(timeline) > 4 * (self.in_flight + 1024):  # leases acknowledged long before their deadline
            self._timeline = [entry for entry in timeline if self._live(entry)]
            heapq.heapify(self._timeline)
        if woken and self._waiters:
            self._wake(woken)
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_S
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        """Forget the states of queues with nothing out that no receive, acknowledgement or
        change used for ``idle_queue_s`` (a group gone for good would keep them forever, with
        the messages it never acknowledged): their committed offset, the first of those
        messages, is in the offset table, so a group that comes back gets them again from
        there, as after a restart (at least once)."""
        idle_since = now - self.idle_queue_s
        for key, q in list(self._queues.items()):
            if q.used < idle_since and not q.in_flight():
                committed = q.committed()
                if self.offsets.query(*key) != committed:  # none yet: a start from the end would skip
                    self.offsets.commit(*key, committed)
                self.leased -= len(q.leases)
                del self._queues[key]
        if self._aliases:
            live = {key[1] for key in self._queues}
            self._aliases = {retry: topic for retry, topic in self._aliases.items() if retry in live}

    def _live(self, entry: tuple[float, int, Key, int]) -> bool:
        _, gen, key, offset = entry
        q = self._queues.get(key)
        if q is None or offset in q.due:
            return False
        lease = q.leases.get(offset)
        return lease is not None and lease.gen == gen

    def _arm(self) -> None:
        """Run the expiry when the earliest invisible time ends (messages due again wake the
        receives waiting for them)."""
        loop = self.loop
        if loop is None or not self._timeline:
            return
        at = self._timeline[0][0]
        if at >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_later(max(0.0, at - self.clock()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        self._expire(self.clock())
        self._arm()

    # -- waiting for messages -------------------------------------------------------------
    def watch(self, topic: str) -> asyncio.Future[None] | None:
        """A future done when ``topic`` may have something to hand out (a message dispatched,
        one due again, a FIFO queue open again); None when too many receives wait. Take it
        before popping, so nothing that arrives in between is missed; :meth:`unwatch` after."""
        if self._waiting >= self.max_waiters:
            return None
        self.loop = self.loop or asyncio.get_running_loop()
        fut = self.loop.create_future()
        self._waiters.setdefault(topic, []).append(fut)
        self._waiting += 1
        return fut

    def unwatch(self, topic: str, fut: asyncio.Future[None]) -> None:
        waiters = self._waiters.get(topic)
        if waiters is not None and fut in waiters:
            waiters.remove(fut)
            self._waiting -= 1
            if not waiters:
                del self._waiters[topic]
        fut.cancel()

    def on_dispatch(self, keys: Iterable[tuple[str, int]]) -> None:
        """Store dispatch listener (dispatch thread): wake the receives waiting on the topics."""
        waiters, loop = self._waiters, self.loop
        if not waiters or loop is None:
            return
        aliases = self._aliases
        topics = {t for t in (aliases.get(topic, topic) for topic, _ in keys) if t in waiters}
        if topics:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(self._wake, topics)

    def _wake(self, topics: Iterable[str]) -> None:
        for topic in topics:
            for fut in self._waiters.pop(topic, ()):
                self._waiting -= 1
                if not fut.done():
                    fut.set_result(None)

    def sizes(self) -> dict[str, int]:
        """The sizes of its tables (GET_BROKER_RUNTIME_INFO's ``bolideTable*`` keys): queue
        states, leases, expiry entries (acknowledged ones included until swept), receives
        waiting, pop retry topic aliases."""
        return {"PopQueues": len(self._queues), "PopLeases": self.leased,
                "PopTimeline": len(self._timeline), "PopWaiters": self._waiting,
                "PopRetryAliases": len(self._aliases)}

    def close(self) -> None:
        """Wake every waiting receive and stop the expiry timer (broker shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
        self._wake(list(self._waiters))
