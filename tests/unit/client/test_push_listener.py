"""A PushConsumer's listener must take ``(msgs, context)`` and a TransactionProducer's check
listener ``(msg)``: a wrong signature is refused before any connection (at start(), or when
the check listener is given), instead of failing on every batch (each then delivered again) or
every check of the broker's."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

from bolide.client import PushConsumer
from bolide.client.errors import ClientConfigError
from bolide.client.results import ConsumeStatus
from bolide.client.transaction import LocalTransactionState, TransactionProducer
from bolide.errors import RemotingConnectError


def one_argument(msgs: list[Any]) -> ConsumeStatus:
    return ConsumeStatus.CONSUME_SUCCESS


def two_arguments(msgs: list[Any], ctx: Any, extra: int = 0) -> ConsumeStatus:
    return ConsumeStatus.CONSUME_SUCCESS


async def coroutine_with_three(msgs: list[Any], ctx: Any, extra: int) -> ConsumeStatus:
    return ConsumeStatus.CONSUME_SUCCESS


def start(listener: Any) -> None:
    consumer = PushConsumer("127.0.0.1:1", "cg", listener=listener)  # nothing listens there
    consumer.subscribe("T")

    async def main() -> None:
        try:
            await consumer.start()
        finally:
            await consumer.close()

    asyncio.run(main())


@pytest.mark.parametrize("listener", [one_argument, coroutine_with_three, lambda: None],
                         ids=["one-argument", "coroutine-needing-three", "no-argument"])
def test_a_listener_that_cannot_take_msgs_and_context_is_refused_at_start(listener: Any) -> None:
    with pytest.raises(ClientConfigError, match="must take 2 arguments"):
        start(listener)


@pytest.mark.parametrize("listener", [two_arguments, functools.partial(coroutine_with_three, extra=1),
                                      lambda *args: None], ids=["defaults", "partial", "varargs"])
def test_listeners_taking_msgs_and_context_pass_the_check(listener: Any) -> None:
    with pytest.raises(RemotingConnectError):  # past the check: connecting to nothing fails
        start(listener)


def test_a_check_listener_that_cannot_take_the_message_is_refused() -> None:
    with pytest.raises(ClientConfigError, match="must take 1 argument: the half message"):
        TransactionProducer("127.0.0.1:1", "tx-pg", check_listener=lambda: None)
    producer = TransactionProducer("127.0.0.1:1", "tx-pg", check_listener=lambda msg: None)
    with pytest.raises(ClientConfigError, match="must take 1 argument"):
        producer.register_check_listener(lambda msg, extra: LocalTransactionState.COMMIT_MESSAGE)
    producer.register_check_listener(lambda msg, extra=None: LocalTransactionState.COMMIT_MESSAGE)
