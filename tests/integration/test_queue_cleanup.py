"""Deleting topics and ConsumeQueues on a broker: DELETE_TOPIC_IN_BROKER (215) deletes the
topic's queues and consumer offsets with it, so a topic made again under its name starts empty;
CLEAN_UNUSED_TOPIC (316) deletes the queues of topics the broker has no config for;
CLEAN_EXPIRED_CONSUMEQUEUE (306) those whose messages retention removed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bolide.client import Admin
from bolide.common import Message
from bolide.testing.servers import Servers
from conftest import expire_all_but_the_last_segment, run_with_servers, send_then_push_consume


def put(s: Servers, topic: str, count: int) -> None:
    for i in range(count):
        assert s.broker.store.put_message(Message(topic, b"%d|" % i + b"." * 400), 0).ok


def test_a_deleted_topic_made_again_starts_empty(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        store = s.broker.store
        assert await send_then_push_consume(s.namesrv_addr, s.namesrv_addr, "Recycled", 6) == [
            b"m%d" % i for i in range(6)]
        assert s.broker.offsets.query_all("Recycled-cg", "Recycled")  # committed at shutdown
        async with Admin(s.namesrv_addr) as admin:
            assert await admin.delete_topic("Recycled") == [s.broker_addr]
        assert "Recycled" not in store.topics()
        assert s.broker.topics.get("Recycled") is None
        assert s.broker.offsets.query_all("Recycled-cg", "Recycled") == {}
        assert {k[0] for k in store.dropped.horizons} == {"Recycled"}

        # made again: only the new messages, from offset 0
        assert await send_then_push_consume(s.namesrv_addr, s.namesrv_addr, "Recycled", 2) == [
            b"m0", b"m1"]
        assert sum(store.get_max_offset_in_queue("Recycled", q) for q in (0, 1)) == 2

    run_with_servers(tmp_path, test)


def test_clean_expired_and_unused_consume_queues(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with Admin(s.namesrv_addr) as admin:
            for topic in ("Quiet", "Live"):
                await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
            await asyncio.to_thread(put, s, "Quiet", 10)
            await asyncio.to_thread(put, s, "Live", 6000)  # over 2 MiB: three 1 MiB segments
            await asyncio.to_thread(put, s, "NoConfig", 5)  # a topic the broker does not have
            await asyncio.to_thread(expire_all_but_the_last_segment, s.broker.store)
            store = s.broker.store
            assert {"Quiet", "NoConfig", "Live"} <= set(store.topics())

            [answer] = (await admin.clean_expired_cq(unused_topics_only=True)).values()
            assert answer == "deleted 1 ConsumeQueues of 1 unused topics: NoConfig", answer
            assert "NoConfig" not in store.topics() and "Quiet" in store.topics()

            [answer] = (await admin.clean_expired_cq()).values()
            assert answer == "deleted 1 ConsumeQueues whose messages are all gone", answer
            assert set(store.topics()) == {"Live"}
            assert not (Path(store.config.consume_queue_dir) / "Quiet").exists()

            # the topic lives on: its next message starts the queue again at offset 0
            await asyncio.to_thread(put, s, "Quiet", 1)
            assert store.wait_dispatched(10)
            assert store.get_max_offset_in_queue("Quiet", 0) == 1

    run_with_servers(tmp_path, test, store_options={"clean_resource_interval_ms": 3_600_000,
                                                    "delete_when": "04",
                                                    "delete_commit_log_files_interval_ms": 0})
