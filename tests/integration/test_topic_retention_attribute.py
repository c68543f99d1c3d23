"""Per-topic retention set on the broker: the ``retention.hours`` topic attribute (RocketMQ 5
attribute syntax, ``bolide admin updateTopic --retention-hours``) becomes the store's floor
for that topic, survives a restart through topics.json, and goes away with ``-retention.hours``."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from bolide.broker.topic_attributes import TopicAttributeError, apply_changes, retention_hours
from bolide.cli.main import cli
from bolide.client import Admin, Message, MQClientError, Producer
from bolide.testing.servers import running_servers

HOUR_MS = 3600 * 1000


def test_attribute_changes_follow_rocketmq_syntax() -> None:
    assert apply_changes(None, None) is None
    assert apply_changes({"a": "1"}, "") == {"a": "1"}
    assert apply_changes({"a": "1"}, "+b=2, -a") == {"b": "2"}
    assert apply_changes(None, "+retention.hours=1.5") == {"retention.hours": "1.5"}
    assert retention_hours({"retention.hours": "1.5"}) == 1.5 and retention_hours({}) is None
    for bad in ("retention.hours=1", "+retention.hours", "+retention.hours=0", "+retention.hours=x",
                "-a=1", "+=1"):
        with pytest.raises(TopicAttributeError):
            apply_changes(None, bad)


def test_retention_attribute_sets_the_topic_floor(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"

    async def first_run() -> None:
        async with running_servers(store_dir) as s:
            ns = s.namesrv_addr
            async with Admin(ns) as admin:
                await admin.create_topic("Short", read_queue_nums=1, write_queue_nums=1,
                                         attributes="+retention.hours=1")
                assert s.broker.store.topic_retention() == {"Short": 1.0}
                with pytest.raises(MQClientError, match="positive number of hours"):
                    await admin.create_topic("Short", read_queue_nums=1, write_queue_nums=1,
                                             attributes="+retention.hours=soon")
                assert s.broker.store.topic_retention() == {"Short": 1.0}  # unchanged
            async with Producer(ns, "pg") as producer:
                for i in range(3):
                    await producer.send(Message("Short", b"%d" % i))
            store = s.broker.store
            assert store.wait_dispatched()
            assert store.get_min_offset_in_queue("Short", 0) == 0
            # two hours later the floor has moved past all three messages
            store.run_retention(now_ms=int(time.time() * 1000) + 2 * HOUR_MS)
            assert store.get_min_offset_in_queue("Short", 0) == 3

    async def second_run() -> None:
        async with running_servers(store_dir) as s:
            assert s.broker.store.topic_retention() == {"Short": 1.0}  # from topics.json
            result = await asyncio.to_thread(CliRunner().invoke, cli, [
                "admin", "updateTopic", "-n", s.namesrv_addr, "-t", "Short", "-r", "1", "-w", "1",
                "--retention-hours", "0", "--wait", "0", "-O", "json"])
            assert result.exit_code == 0, result.output
            assert json.loads(result.output)["attributes"] == "-retention.hours"
            assert s.broker.store.topic_retention() == {}

    asyncio.run(asyncio.wait_for(first_run(), 30))
    topics = json.loads((store_dir / "config" / "topics.json").read_text())
    assert topics["topicConfigTable"]["Short"]["attributes"] == {"retention.hours": "1"}
    asyncio.run(asyncio.wait_for(second_run(), 30))
