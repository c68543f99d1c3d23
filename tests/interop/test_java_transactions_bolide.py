"""The official Apache RocketMQ Java client's TransactionMQProducer (rocketmq-client 4.9.7 and
5.3.3, unmodified) against Bolide: the local transaction commits even-numbered messages, rolls back
odd ones, and leaves every fourth (I % 4 == 1) unknown, which the broker's
CHECK_TRANSACTION_STATE then resolves to commit. A push consumer must then receive exactly the
committed messages, and the topic must hold nothing else.

Driver: ``interop/java-client/BolideClient.java`` (``transaction`` and ``consume`` commands).
Needs java, javac and mvn: without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from client_roundtrip import COMMIT_LOG, CONSUME_QUEUE, run_driver, unavailable

from bolide.store import StoreConfig
from bolide.testing.rocketmq import VERSIONS, RocketMQUnavailable, java_client_command
from bolide.testing.servers import running_servers
from conftest import assert_consistent

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

COUNT = 20
TOPIC = "BolideJavaTxTopic"
GROUP = "bolide_java_tx_cg"


def committed(i: int) -> bool:
    """What the driver's local transaction (and its check) decides for message ``i``."""
    return i % 2 == 0 or i % 4 == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_java_transaction_producer_against_bolide(tmp_path: Path, version: str) -> None:
    try:
        java = java_client_command(version, home=tmp_path / "jclient")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    store_dir = tmp_path / "store"
    expected = {f"tx-{i}" for i in range(COUNT) if committed(i)}

    async def main() -> tuple[list[list[str]], list[list[str]], int]:
        # checks start 1 s after a send; the 2 s interval leaves the producer's answer to a
        # check time to arrive before the copy it is about could be checked again
        async with running_servers(store_dir, auto_create_topic_enable=True,
                                   transaction_timeout_ms=1000,
                                   transaction_check_interval_ms=2000) as servers:
            ns = servers.namesrv_addr
            sent = await run_driver([*java, "transaction", ns, TOPIC, str(COUNT), "60"],
                                    tmp_path / "transaction.log")
            received = await run_driver([*java, "consume", ns, TOPIC, GROUP, str(len(expected)), "60"],
                                        tmp_path / "consume.log")
            store = servers.broker.store
            assert await asyncio.to_thread(store.wait_dispatched, 10.0)
            stored = sum(store.get_max_offset_in_queue(TOPIC, q) for q in store.topics().get(TOPIC, []))
            return sent, received, stored

    sent, received, stored = asyncio.run(main())

    assert [(f[1], f[4]) for f in sent] == [("SEND_OK", str(i)) for i in range(COUNT)]
    states = {int(f[4]): f[3] for f in sent}
    assert {i for i, s in states.items() if s == "UNKNOW"} == {i for i in range(COUNT) if i % 4 == 1}
    assert {f[1] for f in received} == expected  # bodies of every message consumed
    assert stored == len(expected)  # nothing rolled back, nothing committed twice
    assert_consistent(StoreConfig(store_path_root_dir=str(store_dir), mapped_file_size_commit_log=COMMIT_LOG,
                                  mapped_file_size_consume_queue=CONSUME_QUEUE))
