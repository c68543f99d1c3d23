"""CLEAN_EXPIRED_CONSUMEQUEUE (306) and CLEAN_UNUSED_TOPIC (316) on a broker: the ConsumeQueues
whose messages retention removed go, of every topic or only of topics the broker no longer has;
queues that still have messages stay."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bolide.client import Admin
from bolide.common import Message
from bolide.testing.servers import Servers
from conftest import expire_all_but_the_last_segment, run_with_servers


def put(s: Servers, topic: str, count: int) -> None:
    for i in range(count):
        assert s.broker.store.put_message(Message(topic, b"%d|" % i + b"." * 400), 0).ok


def test_clean_expired_and_unused_consume_queues(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            for topic in ("Deleted", "Quiet", "Live"):
                await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
            await asyncio.to_thread(put, s, "Deleted", 10)
            await asyncio.to_thread(put, s, "Quiet", 10)
            await asyncio.to_thread(put, s, "Live", 6000)  # over 2 MiB: three 1 MiB segments
            await asyncio.to_thread(put, s, "DeletedRecently", 5)
            await admin.delete_topic("Deleted")
            await asyncio.to_thread(expire_all_but_the_last_segment, s.broker.store)
            store = s.broker.store
            assert {"Deleted", "Quiet", "DeletedRecently"} <= set(store.topics())

            [answer] = (await admin.clean_expired_cq(unused_topics_only=True)).values()
            assert answer.startswith("deleted 1 ConsumeQueues of unused topics"), answer
            assert "1 queues of unused topics still have messages" in answer  # DeletedRecently
            assert "Deleted" not in store.topics() and "Quiet" in store.topics()

            [answer] = (await admin.clean_expired_cq()).values()
            assert answer.startswith("deleted 1 ConsumeQueues of topics"), answer
            assert set(store.topics()) == {"Live", "DeletedRecently"}
            assert not (Path(store.config.consume_queue_dir) / "Quiet").exists()

            # the topic lives on: its next message starts the queue again at offset 0
            await asyncio.to_thread(put, s, "Quiet", 1)
            assert store.wait_dispatched(10)
            assert store.get_max_offset_in_queue("Quiet", 0) == 1

    run_with_servers(tmp_path, test, store_options={"clean_resource_interval_ms": 3_600_000,
                                                    "delete_when": "04",
                                                    "delete_commit_log_files_interval_ms": 0})
