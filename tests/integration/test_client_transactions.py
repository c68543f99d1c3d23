"""TransactionProducer against an in-process NameServer + Broker: commit and rollback through
END_TRANSACTION, executors that answer UNKNOWN or raise, the broker's CHECK_TRANSACTION_STATE
answered by the check listener (also by a producer of the group that sent nothing itself),
and the blocking API."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bolide.client import (
    ConsumeFrom,
    LocalTransactionState,
    Message,
    MessageExt,
    PullConsumer,
    SendStatus,
    TransactionProducer,
    blocking,
)
from bolide.common.topic import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from bolide.testing.servers import Servers, running_servers

TIMEOUT = 30.0
FAST_CHECKS = {"transaction_timeout_ms": 300, "transaction_check_interval_ms": 200}
COMMIT, ROLLBACK, UNKNOWN = (LocalTransactionState.COMMIT, LocalTransactionState.ROLLBACK,
                             LocalTransactionState.UNKNOWN)


def run_with_servers(tmp_path: Path, test: Callable[[Servers], Awaitable[None]], **broker: Any) -> None:
    async def main() -> None:
        async with running_servers(tmp_path / "store", **broker) as servers:
            await asyncio.wait_for(test(servers), TIMEOUT)

    asyncio.run(main())


async def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def visible(s: Servers, topic: str) -> int:
    return sum(s.broker.store.get_max_offset_in_queue(topic, q) for q in range(8))


def ended(s: Servers) -> int:
    """Transactions the broker closed (one op message each, commit or rollback)."""
    return sum(s.broker.store.get_max_offset_in_queue(TRANS_OP_HALF_TOPIC, q) for q in range(8))


async def bodies(namesrv: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = PullConsumer(namesrv, group, consume_from=ConsumeFrom.FIRST_OFFSET,
                            suspend_ms=500, pull_timeout_ms=3000)
    consumer.subscribe(topic)
    got: list[MessageExt] = []
    async with consumer:
        while len(got) < count:
            got += await consumer.poll(3000)
        got += await consumer.poll(300)  # nothing else
    return sorted(m.body for m in got)


def by_body(decisions: dict[bytes, LocalTransactionState]) -> Callable[[Message, Any], LocalTransactionState]:
    return lambda msg, arg: decisions[msg.body]


def test_commit_and_rollback(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with TransactionProducer(s.namesrv_addr, "tx-pg") as producer:
            committed = await producer.send_message_in_transaction(
                Message("TxTopic", b"commit-me", keys="o-1"), by_body({b"commit-me": COMMIT}))
            rolled = await producer.send_message_in_transaction(
                Message("TxTopic", b"roll-me-back"), by_body({b"roll-me-back": ROLLBACK}))
        assert committed.status is SendStatus.SEND_OK and committed.local_state is COMMIT
        assert rolled.local_state is ROLLBACK
        assert committed.transaction_id == committed.msg_id
        assert committed.queue.topic == "TxTopic"
        await wait_until(lambda: ended(s) == 2)
        assert visible(s, TRANS_HALF_TOPIC) == 2  # both were half messages first
        assert await bodies(s.namesrv_addr, "TxTopic", "tx-cg", 1) == [b"commit-me"]

    run_with_servers(tmp_path, test)


def test_unknown_outcomes_are_settled_by_the_check_listener(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        checked: list[MessageExt] = []

        async def check(msg: MessageExt) -> LocalTransactionState:
            checked.append(msg)
            return COMMIT if msg.body.startswith(b"yes") else ROLLBACK

        async def executor(msg: Message, arg: Any) -> LocalTransactionState | None:
            if arg == "raise":
                raise RuntimeError("the database went away")
            return None if arg == "none" else UNKNOWN

        async with TransactionProducer(s.namesrv_addr, "tx-check-pg", check_listener=check) as producer:
            results = [await producer.send_message_in_transaction(Message("TxChecked", body, keys=k),
                                                                  executor, arg)
                       for body, k, arg in ((b"yes-1", "a", "unknown"), (b"no-1", "b", "raise"),
                                            (b"yes-2", "c", "none"))]
            assert [r.local_state for r in results] == [UNKNOWN] * 3
            await wait_until(lambda: ended(s) == 3)
            assert producer.checks_answered >= 3
        assert {m.msg_id for m in checked} >= {r.msg_id for r in results}
        first = next(m for m in checked if m.body == b"yes-1")
        assert first.topic == "TxChecked" and first.keys == ["a"]  # the real topic, not the half one
        assert await bodies(s.namesrv_addr, "TxChecked", "tx-check-cg", 2) == [b"yes-1", b"yes-2"]

    run_with_servers(tmp_path, test, **FAST_CHECKS)


def test_another_producer_of_the_group_answers_checks(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with TransactionProducer(s.namesrv_addr, "tx-restart-pg") as first:
            sent = await first.send_message_in_transaction(Message("TxRestart", b"pending"),
                                                           lambda m, a: UNKNOWN)
        # the first producer is gone; a new one that has sent nothing is asked instead
        second = TransactionProducer(s.namesrv_addr, "tx-restart-pg", check_listener=lambda m: COMMIT)
        async with second:
            await wait_until(lambda: visible(s, "TxRestart") == 1)
            assert second.checks_answered >= 1
        assert sent.local_state is UNKNOWN
        assert await bodies(s.namesrv_addr, "TxRestart", "tx-restart-cg", 1) == [b"pending"]

    run_with_servers(tmp_path, test, **FAST_CHECKS)


def test_blocking_transaction_producer(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        def produce() -> list[tuple[LocalTransactionState, bool]]:
            out = []
            me = threading.current_thread()
            with blocking.TransactionProducer(s.namesrv_addr, "tx-blocking-pg",
                                              check_listener=lambda m: COMMIT) as producer:
                for body, state in ((b"b-commit", COMMIT), (b"b-rollback", ROLLBACK), (b"b-check", UNKNOWN)):
                    seen: list[threading.Thread] = []

                    def executor(msg: Message, arg: Any, state: LocalTransactionState = state,
                                 seen: list[threading.Thread] = seen) -> LocalTransactionState:
                        seen.append(threading.current_thread())
                        return state

                    result = producer.send_message_in_transaction(Message("TxBlocking", body), executor)
                    out.append((result.local_state, seen == [me]))
                end = time.monotonic() + 15
                while producer.checks_answered < 1 and time.monotonic() < end:
                    time.sleep(0.02)  # the check comes from the broker's timer
                assert producer.checks_answered >= 1
            return out

        caller_results = await asyncio.to_thread(produce)
        assert [state for state, _ in caller_results] == [COMMIT, ROLLBACK, UNKNOWN]
        assert all(in_caller for _, in_caller in caller_results)  # executors ran in the calling thread
        await wait_until(lambda: ended(s) == 3)
        assert await bodies(s.namesrv_addr, "TxBlocking", "tx-blocking-cg", 2) == [b"b-check", b"b-commit"]

    run_with_servers(tmp_path, test, **FAST_CHECKS)
