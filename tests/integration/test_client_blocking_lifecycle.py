"""The two promises of the blocking client API (bolide.client.blocking): close() leaves no
thread running, checked by thread identity for every class (listener pool threads included);
and objects survive os.fork(): a child works with a fresh object and with an inherited one
(a consumer started again there), closing an inherited object in a child returns at once,
and the parent goes on with its own objects."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from bolide.client import (
    ClientStateError,
    ConsumeContext,
    ConsumeFrom,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    SendResult,
    SendStatus,
    blocking,
)
from bolide.testing.servers import Servers, running_servers

TIMEOUT = 30.0  # one test, servers included
WAIT_S = 10.0  # one condition (messages consumed, a check answered)
JOIN_S = 5.0  # a thread that appeared to end after close()
CHILD_S = 15.0  # a forked child to exit
FAST = {"rebalance_interval_ms": 200, "suspend_ms": 1000, "pull_timeout_ms": 3000}
FAST_CHECKS = {"transaction_timeout_ms": 300, "transaction_check_interval_ms": 200}

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
# forking a process that has threads is what Spark executors and multiprocessing do (3.12+ warns)
forks_with_threads = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


def run_with_servers(tmp_path: Path, test: Callable[[Servers], Awaitable[None]], **broker: Any) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", **broker) as servers:
            await asyncio.wait_for(test(servers), TIMEOUT)

    asyncio.run(main())


async def send(namesrv: str, topic: str, bodies: Iterable[bytes]) -> None:
    async with Producer(namesrv, "lifecycle-pg") as producer:
        for body in bodies:
            assert (await producer.send(Message(topic, body))).status is SendStatus.SEND_OK


def bodies(prefix: str, n: int) -> set[bytes]:
    return {f"{prefix}{i}".encode() for i in range(n)}


# -- threads ------------------------------------------------------------------------------------
Threads = dict[int | None, threading.Thread]


def live_threads() -> Threads:
    """The live threads by identity (ident, and the Thread object: idents are reused)."""
    return {t.ident: t for t in threading.enumerate()}


def is_new(thread: threading.Thread, before: Threads) -> bool:
    return before.get(thread.ident) is not thread


def assert_threads_back(before: Threads) -> None:
    """The threads that appeared since ``before`` end (each joined, bounded), and every live
    thread is one of ``before``. (Not "all of before": a server thread may end on its own,
    such as the store's preallocation of the next CommitLog segment after a first send.)"""
    for thread in threading.enumerate():
        if is_new(thread, before):
            thread.join(JOIN_S)
    left = [t.name for t in threading.enumerate() if is_new(t, before)]
    assert not left, f"threads left running: {left}"


Client = blocking.Producer | blocking.PushConsumer | blocking.PullConsumer | blocking.Admin


def close_and_check(clients: Iterable[Client], before: Threads,
                    pool_threads: Iterable[threading.Thread] = ()) -> None:
    """Close ``clients``: when close() returns, the client's loop thread and the pool threads
    its listeners ran in have ended (close joins them); then no other thread is left."""
    for client in clients:
        loop = client.loop_thread
        assert loop is not None and is_new(loop, before)
        client.close()
        assert not loop.is_alive(), f"{type(client).__name__}.close() returned before its thread ended"
        assert client.loop_thread is None
    assert not [t.name for t in pool_threads if t.is_alive()], "listener pool threads left running"
    assert_threads_back(before)


class Received:
    """A plain-function push listener (run in the consumer's thread pool): records the bodies
    and the threads it ran in; :meth:`wait_for` waits for bodies."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.bodies: set[bytes] = set()
        self.threads: set[threading.Thread] = set()

    def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        with self.changed:
            self.bodies |= {m.body for m in msgs}
            self.threads.add(threading.current_thread())
            self.changed.notify_all()

    def wait_for(self, wanted: set[bytes], timeout: float = WAIT_S) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: wanted <= self.bodies, timeout)


class Relay:
    """The listener registered with a consumer that crosses a fork: it passes each batch to
    ``target``, which a child points at a fresh :class:`Received` (the parent's lock may have
    been held by a pool thread at the fork)."""

    def __init__(self, target: Received) -> None:
        self.target = target

    def __call__(self, msgs: list[MessageExt], ctx: ConsumeContext) -> None:
        self.target(msgs, ctx)


def poll_until(pull: blocking.PullConsumer, wanted: set[bytes], timeout: float = WAIT_S) -> set[bytes]:
    """Bodies polled until every one of ``wanted`` came or ``timeout`` passed."""
    got: set[bytes] = set()
    deadline = time.monotonic() + timeout
    while not wanted <= got and time.monotonic() < deadline:
        got |= {m.body for m in pull.poll(500)}
    return got


# -- the leak checks, one class each ------------------------------------------------------------
def test_blocking_producer_leaves_no_thread(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        def work() -> None:
            before = live_threads()
            producer = blocking.Producer(s.namesrv_addr, "leak-pg")
            assert producer.send(Message("LeakProduce", b"sync")).status is SendStatus.SEND_OK
            pending = producer.send_async(Message("LeakProduce", b"async"))
            assert pending.result(WAIT_S).status is SendStatus.SEND_OK
            producer.send_oneway(Message("LeakProduce", b"oneway"))
            batch = producer.send_batch([Message("LeakProduce", b"b1"), Message("LeakProduce", b"b2")])
            assert batch.status is SendStatus.SEND_OK
            close_and_check([producer], before)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)


def test_blocking_transaction_producer_leaves_no_thread(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        def work() -> None:
            before = live_threads()
            checked = threading.Event()
            check_threads: list[threading.Thread] = []

            def check(msg: MessageExt) -> LocalTransactionState:  # in the client's thread pool
                check_threads.append(threading.current_thread())
                checked.set()
                return LocalTransactionState.COMMIT

            producer = blocking.TransactionProducer(s.namesrv_addr, "leak-tx-pg")
            producer.register_check_listener(check)
            states = [LocalTransactionState.COMMIT, LocalTransactionState.UNKNOWN]
            got = [producer.send_message_in_transaction(Message("LeakTx", b"tx"), lambda m, a, st=state: st)
                   for state in states]
            assert [result.local_state for result in got] == states
            assert checked.wait(WAIT_S), "the broker did not check the UNKNOWN transaction"
            assert is_new(check_threads[0], before) and check_threads[0] is not producer.loop_thread
            close_and_check([producer], before, check_threads)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test, **FAST_CHECKS)


def test_blocking_push_consumer_leaves_no_thread(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "LeakPush", bodies("m", 8))

        def work() -> None:
            before = live_threads()
            received = Received()
            push = blocking.PushConsumer(s.namesrv_addr, "leak-push", consume_from=ConsumeFrom.FIRST_OFFSET,
                                         consume_concurrency=4, **FAST)
            push.subscribe("LeakPush")
            push.register_listener(received)
            push.start()
            assert received.wait_for(bodies("m", 8)), f"consumed only {sorted(received.bodies)}"
            assert received.threads and all(is_new(t, before) for t in received.threads)  # pool threads
            close_and_check([push], before, received.threads)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)


def test_blocking_pull_consumer_leaves_no_thread(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "LeakPull", bodies("m", 8))

        def work() -> None:
            before = live_threads()
            pull = blocking.PullConsumer(s.namesrv_addr, "leak-pull", consume_from=ConsumeFrom.FIRST_OFFSET,
                                         auto_commit=False, suspend_ms=1000, pull_timeout_ms=3000)
            pull.subscribe("LeakPull")
            pull.start()
            first = {m.body for m in pull.poll(int(WAIT_S * 1000))}  # one queue's batch
            assert first
            pull.commit()
            rest = bodies("m", 8) - first
            assert poll_until(pull, rest) == rest
            pull.commit()
            committed = [pull.committed(mq) for mq in pull.assignment() if mq.topic == "LeakPull"]
            assert sum(c or 0 for c in committed) == 8
            close_and_check([pull], before)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)


def test_blocking_admin_leaves_no_thread(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "LeakAdmin", [b"x"])

        def work() -> None:
            before = live_threads()
            admin = blocking.Admin(s.namesrv_addr)
            assert "LeakAdmin" in admin.topic_list()
            assert s.broker_addr in admin.master_addrs()
            assert sum(o.max_offset for o in admin.topic_stats("LeakAdmin").values()) == 1
            assert admin.create_topic("LeakAdminCreated", write_queue_nums=2) == [s.broker_addr]
            close_and_check([admin], before)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)


# -- fork ---------------------------------------------------------------------------------------
Step = tuple[str, Callable[[], object]]


def fork_child(steps: list[Step]) -> int:
    """Fork; the child runs ``steps`` in order and exits with 0, or with 1 + the index of the
    first step that raised or returned False. Returns the child's pid."""
    pid = os.fork()
    if pid == 0:  # only Bolide objects and os._exit here
        code = 255
        try:
            for index, (_, step) in enumerate(steps):
                code = index + 1
                if step() is False:
                    break
            else:
                code = 0
        finally:
            os._exit(code)
    return pid


def wait_child(pid: int, steps: list[Step], timeout: float = CHILD_S) -> None:
    """Wait (bounded) for the child to exit and fail with the step it failed at; a child still
    running after ``timeout`` is killed (and the test fails: it hangs)."""
    deadline = time.monotonic() + timeout
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"the forked child was still running after {timeout} s (killed): it hangs")
            if pidfd is not None:
                select.select([pidfd], [], [], remaining)  # readable when the child exits
            else:
                time.sleep(min(remaining, 0.01))  # no pidfd on this platform: poll
    finally:
        if pidfd is not None:
            os.close(pidfd)
    code = os.waitstatus_to_exitcode(status)
    failed = steps[code - 1][0] if 0 < code <= len(steps) else f"exit code {code}"
    assert code == 0, f"the forked child failed at: {failed}"


def only_this_thread() -> bool:
    """In a child, after its clients closed: no thread but the one that forked."""
    return [t.ident for t in threading.enumerate()] == [threading.get_ident()]


ALONE: Step = ("no thread is left in the child", only_this_thread)


@needs_fork
@forks_with_threads
def test_blocking_pull_consumer_across_fork(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "ForkPull", bodies("p", 4))

        def work() -> None:
            before = live_threads()
            pull = blocking.PullConsumer(s.namesrv_addr, "fork-pull", consume_from=ConsumeFrom.FIRST_OFFSET,
                                         auto_commit=False, suspend_ms=1000, pull_timeout_ms=3000)
            queues = pull.fetch_message_queues("ForkPull")
            pull.assign(queues)
            pull.start()
            assert poll_until(pull, bodies("p", 4)) == bodies("p", 4)
            pull.commit()
            producer = blocking.Producer(s.namesrv_addr, "fork-pg")
            for body in sorted(bodies("c", 4)):  # after the commit: left for the child
                producer.send(Message("ForkPull", body))
            left = bodies("c", 4) | bodies("k", 2)

            def child_sends() -> None:
                with blocking.Producer(s.namesrv_addr, "fork-child-pg") as fresh:
                    for body in sorted(bodies("k", 2)):
                        assert fresh.send(Message("ForkPull", body)).status is SendStatus.SEND_OK

            steps: list[Step] = [
                ("a fresh Producer sends", child_sends),
                ("the inherited PullConsumer starts again", pull.start),
                ("it polls from the parent's committed offsets", lambda: poll_until(pull, left) == left),
                ("it commits", pull.commit),
                ("the commit is stored", lambda: sum(pull.committed(mq) or 0 for mq in queues) == 10),
                ("it closes", pull.close),
                ALONE,
            ]
            wait_child(fork_child(steps), steps)
            # the parent's consumer, never stopped, got the same messages
            assert poll_until(pull, left) == left
            producer.send(Message("ForkPull", b"after"))
            assert poll_until(pull, {b"after"}) == {b"after"}
            pull.commit()
            assert sum(pull.committed(mq) or 0 for mq in queues) == 11
            close_and_check([pull, producer], before)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)


@needs_fork
@forks_with_threads
def test_blocking_push_consumer_across_fork(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "ForkPush", bodies("p", 4))

        def work() -> None:
            before = live_threads()
            parent = Received()
            relay = Relay(parent)
            push = blocking.PushConsumer(s.namesrv_addr, "fork-push", consume_from=ConsumeFrom.FIRST_OFFSET,
                                         persist_offset_interval_ms=200, **FAST)
            push.subscribe("ForkPush")
            push.register_listener(relay)
            push.start()
            assert parent.wait_for(bodies("p", 4))
            sent: set[bytes] = set()

            def child_starts() -> None:
                relay.target = Received()
                push.start()

            def child_sends_to_its_queues() -> bool:  # the queues the group gave this member
                own = sorted(mq for mq in push.assignment() if mq.topic == "ForkPush")
                with blocking.Producer(s.namesrv_addr, "fork-child-pg") as fresh:
                    for i, mq in enumerate(own):
                        fresh.send(Message("ForkPush", b"k%d" % i), queue=mq)
                        sent.add(b"k%d" % i)
                return bool(own)

            steps: list[Step] = [
                ("the inherited PushConsumer starts again", child_starts),
                ("it owns queues, and a fresh Producer sends to them", child_sends_to_its_queues),
                ("its listener gets those messages", lambda: relay.target.wait_for(sent)),
                ("it closes", push.close),
                ALONE,
            ]
            wait_child(fork_child(steps), steps)
            # the child left the group: the parent's consumer takes every queue back
            with blocking.Producer(s.namesrv_addr, "fork-pg") as producer:
                for body in sorted(bodies("a", 8)):
                    producer.send(Message("ForkPush", body))
            assert parent.wait_for(bodies("a", 8)), f"the parent consumed {sorted(parent.bodies)}"
            close_and_check([push], before, parent.threads)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)


@needs_fork
@forks_with_threads
def test_blocking_admin_across_fork(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "ForkAdmin", [b"x"])

        def work() -> None:
            before = live_threads()
            admin = blocking.Admin(s.namesrv_addr)
            assert "ForkAdmin" in admin.topic_list()

            def stored(topic: str) -> int:
                return sum(o.max_offset for o in admin.topic_stats(topic).values())

            def fresh_admin_reads() -> bool:
                with blocking.Admin(s.namesrv_addr) as fresh:
                    return s.broker_addr in fresh.master_addrs() and "ForkAdmin" in fresh.topic_list()

            steps: list[Step] = [
                ("the inherited Admin lists topics", lambda: "ForkAdmin" in admin.topic_list()),
                ("it reads topic stats", lambda: stored("ForkAdmin") == 1),
                ("it creates a topic", lambda: admin.create_topic("ForkChild") == [s.broker_addr]),
                ("a fresh Admin reads", fresh_admin_reads),
                ("the inherited Admin closes", admin.close),
                ALONE,
            ]
            wait_child(fork_child(steps), steps)
            assert s.broker.topics.get("ForkChild") is not None  # the child's request reached the broker
            assert "ForkAdmin" in admin.topic_list()
            assert stored("ForkAdmin") == 1
            close_and_check([admin], before)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)


@needs_fork
@forks_with_threads
def test_closing_inherited_clients_in_a_child_returns_at_once(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        await send(s.namesrv_addr, "ForkClose", bodies("p", 4))

        def work() -> None:
            before = live_threads()
            producer = blocking.Producer(s.namesrv_addr, "close-pg")
            producer.send(Message("ForkClose", b"sent"))
            tx = blocking.TransactionProducer(s.namesrv_addr, "close-tx-pg")

            def committed_in_tx(body: bytes) -> bool:
                result = tx.send_message_in_transaction(Message("ForkCloseTx", body),
                                                        lambda m, a: LocalTransactionState.COMMIT)
                return result.status is SendStatus.SEND_OK

            assert committed_in_tx(b"t1")
            received = Received()
            push = blocking.PushConsumer(s.namesrv_addr, "close-push", consume_from=ConsumeFrom.FIRST_OFFSET,
                                         **FAST)
            push.subscribe("ForkClose")
            push.register_listener(received)
            push.start()
            assert received.wait_for(bodies("p", 4) | {b"sent"})
            pull = blocking.PullConsumer(s.namesrv_addr, "close-pull", consume_from=ConsumeFrom.FIRST_OFFSET,
                                         suspend_ms=1000, pull_timeout_ms=3000)
            pull.subscribe("ForkClose")
            pull.start()
            assert poll_until(pull, bodies("p", 4) | {b"sent"}) == bodies("p", 4) | {b"sent"}
            pull.commit()
            admin = blocking.Admin(s.namesrv_addr)
            assert "ForkClose" in admin.topic_list()
            clients: list[Client] = [producer, tx, push, pull, admin]

            def closed_refuse_use() -> None:
                for client in clients:
                    try:
                        client.client_id  # noqa: B018 - any use of a closed client raises
                    except ClientStateError:
                        continue
                    raise AssertionError(f"{type(client).__name__} usable after close")

            steps: list[Step] = [(f"close the inherited {type(c).__name__}", c.close) for c in clients]
            steps += [("closed clients refuse use", closed_refuse_use), ALONE]
            wait_child(fork_child(steps), steps, timeout=5.0)  # no wait for the parent's threads
            # nothing of the parent's clients was stopped by the child
            assert producer.send(Message("ForkClose", b"after")).status is SendStatus.SEND_OK
            assert received.wait_for({b"after"})
            assert poll_until(pull, {b"after"}) == {b"after"}
            assert "ForkClose" in admin.topic_list()
            assert committed_in_tx(b"t2")
            close_and_check(clients, before, received.threads)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)


@needs_fork
@forks_with_threads
def test_fork_while_another_thread_starts_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark and multiprocessing fork whenever they like: here while another thread of the
    parent is inside the producer's first call, starting its loop (held there until the fork)."""
    async def test(s: Servers) -> None:
        def work() -> None:
            before = live_threads()
            producer = blocking.Producer(s.namesrv_addr, "race-pg")
            inside, forked = threading.Event(), threading.Event()
            new_event_loop = asyncio.new_event_loop

            def new_event_loop_after_the_fork() -> asyncio.AbstractEventLoop:
                if threading.current_thread() is starter:
                    inside.set()
                    forked.wait(WAIT_S)
                return new_event_loop()

            sent: list[SendResult] = []

            def first_send() -> None:
                sent.append(producer.send(Message("ForkRace", b"parent")))

            starter = threading.Thread(target=first_send, name="starter")
            monkeypatch.setattr(asyncio, "new_event_loop", new_event_loop_after_the_fork)
            starter.start()
            assert inside.wait(WAIT_S)
            steps: list[Step] = [
                ("the inherited Producer sends",
                 lambda: producer.send(Message("ForkRace", b"child")).status is SendStatus.SEND_OK),
                ("it closes", producer.close),
                ALONE,
            ]
            pid = fork_child(steps)
            forked.set()
            starter.join(WAIT_S)
            monkeypatch.undo()
            wait_child(pid, steps, timeout=5.0)
            assert [r.status for r in sent] == [SendStatus.SEND_OK]
            assert producer.send(Message("ForkRace", b"parent again")).status is SendStatus.SEND_OK
            close_and_check([producer], before)

        await asyncio.to_thread(work)

    run_with_servers(tmp_path, test)
