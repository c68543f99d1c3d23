"""A compacted topic end to end: created with ``+cleanup.policy=COMPACTION`` (kept in topics.json,
fixed afterwards), several values sent per key with Bolide's producer, compacted, the CommitLog
segments holding them deleted by retention, then read from offset 0 with the pull consumer:
the newest value of each key, at its original offset."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bolide.client import Admin, Message, MessageQueue, MQClientError, Producer
from bolide.client.pull_consumer import PullConsumer
from bolide.testing.servers import Servers
from conftest import expire_all_but_the_last_segment, run_with_servers

TOPIC = "CompactedPrices"
KEYS = 4
ROUNDS = 8


async def read_from_start(ns: str, broker_name: str, end: int) -> list[tuple[int, str, bytes]]:
    mq = MessageQueue(TOPIC, broker_name, 0)
    out: list[tuple[int, str, bytes]] = []
    consumer = PullConsumer(ns, "compacted-readers", auto_commit=False, poll_timeout_ms=500)
    consumer.assign([mq])
    async with consumer:
        await consumer.seek(mq, 0)
        async with asyncio.timeout(20):
            while not out or out[-1][0] < end - 1:
                for msg in await consumer.poll():
                    out.append((msg.queue_offset, msg.keys[0] if msg.keys else "", msg.body))
    return out


def test_compacted_topic_serves_the_newest_value_per_key(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        ns = s.namesrv_addr
        store = s.broker.store
        async with Admin(ns) as admin:
            with pytest.raises(MQClientError, match="DELETE or COMPACTION"):
                await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1,
                                         attributes="+cleanup.policy=compact")
            await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1,
                                     attributes="+cleanup.policy=COMPACTION")
            assert TOPIC in store.compacted_topics()
            with pytest.raises(MQClientError, match="cannot change once the topic exists"):
                await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1,
                                         attributes="+cleanup.policy=DELETE")
        sent: dict[str, tuple[int, bytes]] = {}
        async with Producer(ns, "compacted-writers") as producer:
            for r in range(ROUNDS):
                for k in range(KEYS):
                    body = b"price-%d-%d" % (k, r) + b"." * 200
                    result = await producer.send(Message(TOPIC, body, keys=f"sku{k}"))
                    sent[f"sku{k}"] = (result.queue_offset, body)
        end = ROUNDS * KEYS
        passes = await asyncio.to_thread(store.compact_now)
        assert passes >= 1
        await asyncio.to_thread(expire_all_but_the_last_segment, store)
        cq_min = store.get_min_offset_in_queue(TOPIC, 0)
        assert cq_min > 0  # the ConsumeQueue's head is gone
        got = await read_from_start(ns, s.broker.config.broker_name, end)
        assert got[0][0] < cq_min  # served from the compaction log
        assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})  # original offsets, in order
        assert len(got) < end
        newest = {k: b for _, k, b in got}
        assert newest == {k: body for k, (_, body) in sent.items()}
        for key, (offset, body) in sent.items():
            assert (offset, key, body) in got  # each newest value at the offset its send got

    run_with_servers(tmp_path, test, timeout=60,
                     store_options={"mapped_file_size_commit_log": 4096,
                                    "compaction_cq_mapped_file_size": 46 * 8,
                                    "compaction_mapped_file_size": 64 * 1024})
    topics = json.loads((tmp_path / "store" / "config" / "topics.json").read_text())
    assert topics["topicConfigTable"][TOPIC]["attributes"] == {"cleanup.policy": "COMPACTION"}
    assert (tmp_path / "store" / "compaction" / "compactionLog" / TOPIC / "0").is_dir()
