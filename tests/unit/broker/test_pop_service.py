"""PopService over a real store with a hand-moved clock: hand out, hide, acknowledge, expire,
renew, dead-letter, FIFO blocking, and the committed offset that follows the acknowledgements."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bolide.broker.pop import PopService, ReceiptHandleError
from bolide.common import Message
from bolide.common.message import MessageExt
from bolide.store import MessageStore, StoreConfig
from bolide.store.config_files import ConsumerOffsetManager

T, G = "PopTopic", "pop_group"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    config = StoreConfig(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=1 << 20)
    with MessageStore(config) as s:
        yield s


def fill(store: MessageStore, bodies_per_queue: dict[int, list[bytes]], tags: str | None = None) -> None:
    for queue_id, bodies in bodies_per_queue.items():
        for body in bodies:
            assert store.put_message(Message(T, body, tags=tags), queue_id).ok
    assert store.wait_dispatched(10)


class Harness:
    def __init__(
        self,
        store: MessageStore,
        tmp_path: Path,
        *,
        attempts: int = 3,
        orderly: bool = False,
        max_in_flight: int = 1000,
    ) -> None:
        self.clock = Clock()
        self.offsets = ConsumerOffsetManager(tmp_path / "offsets.json")
        self.dead: list[tuple[str, MessageExt]] = []
        self.alive: set[str] = set()
        self.pop = PopService(
            store,
            self.offsets,
            max_attempts=lambda g: attempts,
            orderly=lambda g: orderly,
            dead_letter=lambda g, m: self.dead.append((g, m)) is None,
            client_alive=self.alive.__contains__,
            max_in_flight=max_in_flight,
            clock=self.clock,
        )

    def take(self, count: int = 32, queues: tuple[int, ...] = (0,), invisible_ms: int = 10_000, **kw):
        # the count of messages out agrees with the queues' leases before and after
        self.agree()
        got = self.pop.pop(G, T, queues, count, invisible_ms, **kw)
        self.agree()
        return got

    def agree(self) -> None:
        queues = self.pop._queues.values()
        assert self.pop.in_flight == sum(q.in_flight() for q in queues)
        assert self.pop.leased == sum(len(q.leases) for q in queues)


def test_handed_out_messages_are_hidden_until_acknowledged_and_the_offset_follows(store, tmp_path) -> None:
    fill(store, {0: [b"a", b"b", b"c"]})
    h = Harness(store, tmp_path)
    first = h.take(2)
    assert [d.message.body for d in first] == [b"a", b"b"] and [d.attempt for d in first] == [1, 1]
    assert [d.message.body for d in h.take()] == [b"c"]
    assert h.take() == []  # everything is out
    assert h.pop.in_flight == 3
    h.pop.ack(G, T, first[1].handle)  # b: the offset waits for a
    assert h.offsets.query(G, T, 0) is None
    h.pop.ack(G, T, first[0].handle)
    assert h.offsets.query(G, T, 0) == 2  # c is still out
    h.pop.ack(G, T, first[1].handle)  # again: no effect
    assert h.pop.in_flight == 1


def test_an_expired_message_comes_back_with_one_more_attempt_and_its_old_handle_dies(store, tmp_path) -> None:
    fill(store, {0: [b"a", b"b"]})
    h = Harness(store, tmp_path)
    a, b = h.take()
    h.pop.ack(G, T, b.handle)
    h.clock.now += 9.9
    assert h.take() == []
    h.clock.now += 0.2
    again = h.take()
    assert [(d.message.body, d.attempt) for d in again] == [(b"a", 2)]
    with pytest.raises(ReceiptHandleError):
        h.pop.ack(G, T, a.handle)
    h.pop.ack(G, T, again[0].handle)
    assert h.offsets.query(G, T, 0) == 2 and h.pop.in_flight == 0


def test_changing_the_invisible_time_gives_a_new_handle(store, tmp_path) -> None:
    fill(store, {0: [b"a"]})
    h = Harness(store, tmp_path)
    (a,) = h.take()
    handle = h.pop.change_invisible(G, T, a.handle, 60_000)
    assert handle != a.handle
    with pytest.raises(ReceiptHandleError):
        h.pop.change_invisible(G, T, a.handle, 1000)
    h.clock.now += 30
    assert h.take() == []  # hidden for 60 s now
    nack = h.pop.change_invisible(G, T, handle, 0)  # a nack: due again at once
    (back,) = h.take()
    assert back.attempt == 2
    with pytest.raises(ReceiptHandleError):
        h.pop.ack(G, T, nack)


def test_out_of_attempts_goes_to_the_dead_letter_queue(store, tmp_path) -> None:
    fill(store, {0: [b"poison", b"fine"]})
    h = Harness(store, tmp_path, attempts=2)
    _, fine = h.take()
    h.pop.ack(G, T, fine.handle)
    h.clock.now += 11
    (second,) = h.take()
    assert second.attempt == 2
    h.clock.now += 11
    assert h.take() == []
    assert [(g, m.body, m.reconsume_times) for g, m in h.dead] == [(G, b"poison", 2)]
    assert h.offsets.query(G, T, 0) == 2 and h.pop.dead_lettered == 1


def test_forwarding_to_the_dead_letter_queue_acknowledges(store, tmp_path) -> None:
    fill(store, {0: [b"a"]})
    h = Harness(store, tmp_path)
    (a,) = h.take()
    assert h.pop.dead_letter_now(G, T, a.handle)
    assert [m.body for _, m in h.dead] == [b"a"] and h.offsets.query(G, T, 0) == 1


def test_a_fifo_queue_gives_nothing_while_a_message_is_out_then_the_same_messages_in_order(
    store, tmp_path
) -> None:
    fill(store, {0: [b"a", b"b", b"c"], 1: [b"x"]})
    h = Harness(store, tmp_path, orderly=True)
    got = h.take(2, queues=(0, 1))
    assert [d.message.body for d in got] == [b"a", b"b"]
    assert [d.message.body for d in h.take(queues=(0, 1))] == [b"x"]  # queue 0 is blocked
    h.pop.ack(G, T, got[1].handle)  # b done, a still out: still blocked
    assert h.take(queues=(0,)) == []
    h.clock.now += 11
    again = h.take(queues=(0,))
    assert [(d.message.body, d.attempt) for d in again] == [(b"a", 2), (b"c", 1)]


def test_tags_filter_and_what_is_skipped_counts_as_consumed(store, tmp_path) -> None:
    fill(store, {0: [b"a1", b"a2"]}, tags="A")
    fill(store, {0: [b"b1"]}, tags="B")
    h = Harness(store, tmp_path)
    got = h.take(tags=["B"])
    assert [d.message.body for d in got] == [b"b1"]
    h.pop.ack(G, T, got[0].handle)
    assert h.offsets.query(G, T, 0) == 3


def test_renewed_while_the_client_is_connected(store, tmp_path) -> None:
    fill(store, {0: [b"a"]})
    h = Harness(store, tmp_path)
    h.alive.add("c1")
    (a,) = h.take(invisible_ms=60_000, renew_for="c1")
    h.clock.now += 61
    assert h.take() == []  # renewed: the client is still there
    h.pop.ack(G, T, a.handle)  # the first handle still works
    fill(store, {0: [b"b"]})
    h.take(invisible_ms=60_000, renew_for="c1")
    h.alive.clear()
    h.clock.now += 121
    assert [d.message.body for d in h.take()] == [b"b"]


def test_a_reset_offset_starts_the_group_over(store, tmp_path) -> None:
    fill(store, {0: [b"a", b"b"]})
    h = Harness(store, tmp_path)
    for d in h.take():
        h.pop.ack(G, T, d.handle)
    h.offsets.commit(G, T, 0, 0)  # resetOffsetByTime
    assert [d.message.body for d in h.take()] == [b"a", b"b"]
    assert h.pop.in_flight == 2


def test_in_flight_messages_are_bounded(store, tmp_path) -> None:
    fill(store, {0: [bytes([i]) for i in range(10)]})
    h = Harness(store, tmp_path, max_in_flight=4)
    assert len(h.take(3)) == 3
    assert len(h.take(3)) == 3  # checked before each read: may pass the bound by one batch
    assert h.take(3) == []


def test_messages_come_due_and_not_received_again_count_in_the_bound(store, tmp_path) -> None:
    """A group that lets its messages come due and goes away still holds their leases: they
    count until handed out again, acknowledged or swept, so the leases stay bounded."""
    fill(store, {0: [bytes([i]) for i in range(10)], 1: [bytes([i]) for i in range(10)]})
    h = Harness(store, tmp_path, max_in_flight=4)
    assert len(h.take(4, queues=(0,), invisible_ms=1000)) == 4
    h.clock.now += 2
    # the expiry runs: the four are due, none out, and nothing new goes out past the bound
    assert h.pop.pop("other", T, (1,), 4, 1000) == []
    assert h.pop.in_flight == 0 and h.pop.leased == 4
    again = h.take(4, queues=(0,))  # the due ones still go out
    assert [d.attempt for d in again] == [2, 2, 2, 2]
    h.agree()


def test_handles_of_another_broker_run_or_garbage_are_refused(store, tmp_path) -> None:
    fill(store, {0: [b"a"]})
    h = Harness(store, tmp_path)
    (a,) = h.take()
    other = Harness(store, tmp_path)  # a restarted broker: same offsets, new generations
    other.take()
    for bad in (a.handle, "nonsense", "0:0:zz"):
        with pytest.raises(ReceiptHandleError):
            other.pop.ack(G, T, bad)


def test_queues_with_nothing_out_are_forgotten_past_the_bound(store, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("bolide.broker.pop.MAX_IDLE_QUEUES", 2)
    fill(store, {0: [b"a"], 1: [b"b"], 2: [b"c"]})
    h = Harness(store, tmp_path)
    (a,) = h.take(queues=(0,))
    (b,) = h.take(queues=(1,))
    h.pop.ack(G, T, b.handle)
    (c,) = h.take(queues=(2,))  # queue 1 has nothing out: forgotten
    assert len(h.pop._queues) == 2
    assert h.take(queues=(1,)) == []  # from the committed offset: b stays consumed
    h.pop.ack(G, T, a.handle)
    h.pop.ack(G, T, c.handle)
    assert [h.offsets.query(G, T, q) for q in range(3)] == [1, 1, 1]


def test_a_group_gone_for_good_leaves_no_state_and_one_back_gets_its_messages_again(store, tmp_path) -> None:
    """Queue states with nothing out (leases all due again) that no call used for the idle
    time are swept: a group that never comes back does not keep them, nor its leases."""
    fill(store, {0: [b"a", b"b", b"c"], 1: [b"d"]})
    h = Harness(store, tmp_path)
    got = h.take(3, queues=(0,), invisible_ms=1000)
    h.pop.ack(G, T, got[1].handle)  # b acknowledged; a and c never: they come due again
    (d,) = h.take(queues=(1,), invisible_ms=1_000_000)  # d is out on queue 1 all along
    h.clock.now += 2
    h.pop.pop("other", T, (0,), 1, 1000)  # runs the expiry: a and c are due, nothing out on queue 0
    assert h.pop.sizes()["PopLeases"] == 4 and len(h.pop._queues) == 3
    h.clock.now += h.pop.idle_queue_s + 60  # past the idle time and the next sweep
    h.pop.pop("other", T, (1,), 1, 1000)  # the sweep runs
    assert set(h.pop._queues) == {(G, T, 1), ("other", T, 1)}  # the one with d out stays
    assert h.pop.sizes()["PopLeases"] == 2 and h.pop.in_flight == 2
    h.agree()
    assert h.offsets.query(G, T, 0) == 0  # a, the first not acknowledged
    again = h.take(3, queues=(0,))  # back: from the committed offset, at least once
    assert [m.message.body for m in again] == [b"a", b"b", b"c"]
    h.pop.ack(G, T, d.handle)


def test_a_queue_state_in_use_is_not_swept(store, tmp_path) -> None:
    fill(store, {0: [b"a", b"b"]})
    h = Harness(store, tmp_path, attempts=100)
    h.take(1, invisible_ms=1000)
    for _ in range(20):  # the group keeps receiving, within the idle time each time
        h.clock.now += h.pop.idle_queue_s / 10
        h.take(1, invisible_ms=1000)
    assert (G, T, 0) in h.pop._queues
    assert h.pop.sizes()["PopLeases"] == 1  # a, handed out again and again


R1, R2 = f"%RETRY%{G}_{T}", f"%RETRY%{G}+{T}"  # the group's pop retry topics (V1, V2)


def test_a_receive_takes_the_pop_retry_topics_too(store, tmp_path, monkeypatch) -> None:
    fill(store, {0: [b"a"]})
    assert store.put_message(Message(R1, b"revived", properties={"REAL_TOPIC": "x"}), 0, reconsume_times=1).ok
    assert store.wait_dispatched(10)  # R2 (RocketMQ's enableRetryTopicV2) has no queue here
    h = Harness(store, tmp_path)
    monkeypatch.setattr("bolide.broker.pop.random.randrange", lambda n: 99)  # the topic first
    got = h.take(queues=(0,), retry_topics=(R1, R2))
    assert [(d.message.body, d.message.topic, d.attempt, d.stored_topic) for d in got] == [
        (b"a", T, 1, ""), (b"revived", T, 2, R1)]
    assert [d.handle.count(":") for d in got] == [2, 3]  # the retry topic's mark
    for d in got:  # acknowledged naming the topic, as the gRPC clients do
        h.pop.ack(G, T, d.handle)
    assert (h.offsets.query(G, T, 0), h.offsets.query(G, R1, 0)) == (1, 1)
    assert h.pop.in_flight == 0
    monkeypatch.setattr("bolide.broker.pop.random.randrange", lambda n: 0)  # the retry topics first
    assert store.put_message(Message(R1, b"again"), 0).ok and store.put_message(Message(T, b"b"), 0).ok
    assert store.wait_dispatched(10)
    assert [d.message.body for d in h.take(1, retry_topics=(R1,))] == [b"again"]
    assert [d.message.body for d in h.take(1, retry_topics=(R1,), orderly=True)] == [b"b"]  # FIFO: not


def test_a_retry_topic_message_changed_keeps_its_mark(store, tmp_path) -> None:
    assert store.put_message(Message(R1, b"r"), 0).ok
    assert store.wait_dispatched(10)
    h = Harness(store, tmp_path)
    (r,) = h.take(retry_topics=(R1,))
    changed = h.pop.change_invisible(G, R1, r.handle, 0)  # named by the retry topic, as remoting does
    assert changed.endswith(":1")
    (back,) = h.take(retry_topics=(R1,))
    h.pop.ack(G, T, back.handle)
    assert h.offsets.query(G, R1, 0) == 1
    fill(store, {0: [b"t0"]})  # offset 0 of the topic too: the DLQ must get the retry topic's
    assert store.put_message(Message(R1, b"r2"), 0).ok and store.wait_dispatched(10)
    h.take(1)
    (r2,) = h.take(retry_topics=(R1,))
    assert h.pop.dead_letter_now(G, T, r2.handle)
    assert [m.body for _, m in h.dead] == [b"r2"] and h.offsets.query(G, R1, 0) == 2


def test_an_adopted_lease_is_out_until_its_time_and_acknowledges_with_its_generation(store, tmp_path) -> None:
    fill(store, {0: [b"a", b"b", b"c", b"d"]})
    h = Harness(store, tmp_path)
    h.offsets.commit(G, T, 0, 4)  # another broker handed out all four
    gen_b, gen_c = 1_700_000_000_000_003, 1_700_000_000_500_003
    assert h.pop.adopt(G, T, 0, 1, gen_b, 5_000) and h.pop.adopt(G, T, 0, 2, gen_c, 20_000)
    assert not h.pop.adopt(G, T, 0, 2, gen_c, 20_000)  # once
    assert not h.pop.adopt(G, T, 0, 4, gen_c, 20_000)  # at the group's offset: handed out as new
    assert h.offsets.query(G, T, 0) == 1 and h.pop.in_flight == 2  # a restart hands b out again
    assert h.take() == []
    h.pop.ack(G, T, f"0:2:{gen_c:x}")  # the other broker's consumer acknowledges c
    h.clock.now += 5.1
    (b,) = h.take()
    assert (b.message.body, b.attempt) == (b"b", 2)
    h.pop.ack(G, T, b.handle)
    assert h.offsets.query(G, T, 0) == 4 and h.pop.in_flight == 0
    assert not h.pop.adopt(G, "Gone", 0, 0, gen_b, 1000)  # no such message
