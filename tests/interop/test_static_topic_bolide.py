"""Static topics (RocketMQ 5's logic queues) created on Bolide by the real mqadmin 5.3.3:
``updateStaticTopic`` stores the mapping in ``config/topicQueueMapping.json``, the broker
registers it, and ``topicRoute``/``topicStatus`` show it as against a RocketMQ broker; a
second ``updateStaticTopic -b`` adds queues, and a restarted broker loads and registers it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from client_roundtrip import unavailable

from bolide.broker.static_topics import StaticTopicMappings
from bolide.common.fastjson import loads
from bolide.testing.rocketmq import RocketMQ, RocketMQUnavailable
from bolide.testing.servers import running_servers
from conftest import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

TOPIC = "StaticTopicT"
QUEUES = 4
MORE = 6  # the queue count of the second updateStaticTopic


def s_topic_config_queues(route_text: str) -> int:
    """The totalQueues of the one broker in a ``topicRoute`` output."""
    route = loads(route_text[route_text.index("{"):])
    (info,) = route["topicQueueMappingByBroker"].values()
    return int(info["totalQueues"])


def _rmq(tmp_path: Path) -> RocketMQ:
    try:
        return RocketMQ("5.3.3", tmp_path / "mqadmin")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
        raise


def test_update_static_topic_on_bolide(tmp_path: Path) -> None:
    rmq = _rmq(tmp_path)

    async def main() -> tuple[list[str], bytes, dict[str, object]]:
        async with running_servers(tmp_path / "store") as s:
            rmq.namesrv_port = s.namesrv.port
            broker = s.broker.config.broker_name
            first = await asyncio.to_thread(rmq.mqadmin_batch, [
                ["updateStaticTopic", "-t", TOPIC, "-qn", str(QUEUES), "-c", "DefaultCluster"]])
            path = tmp_path / "store" / "config" / "topicQueueMapping.json"
            await wait_until(lambda: path.exists() and TOPIC.encode() in path.read_bytes(), 10)
            await s.broker.registration.wait_pending()
            route = s.namesrv.processor.routes.pick_topic_route_data(TOPIC)
            assert route is not None and route.topic_queue_mapping_by_broker is not None
            rest = await asyncio.to_thread(rmq.mqadmin_batch, [
                ["topicRoute", "-t", TOPIC], ["topicStatus", "-t", TOPIC],
                ["updateStaticTopic", "-t", TOPIC, "-qn", str(MORE), "-b", broker],
                ["topicRoute", "-t", TOPIC]])
            await wait_until(lambda: b'"totalQueues":%d' % MORE in path.read_bytes(), 10)
            return first + rest, path.read_bytes(), {"broker": broker}

    async def restart() -> tuple[int | None, bool]:
        async with running_servers(tmp_path / "store") as s:  # the mapping is loaded and registered
            detail = s.broker.static_topics.get(TOPIC)
            route = s.namesrv.processor.routes.pick_topic_route_data(TOPIC)
            return (detail.total_queues if detail else None,
                    route is not None and bool(route.topic_queue_mapping_by_broker))

    outputs, stored, info = asyncio.run(main())
    assert asyncio.run(restart()) == (MORE, True)
    log = "\n=====\n".join(outputs)
    broker = info["broker"]
    assert "command failed" not in log and "Exception" not in log, log
    # the file: the wrapper of RocketMQ's TopicQueueMappingManager, re-encoded byte for byte
    mappings = StaticTopicMappings(str(broker), tmp_path / "again.json")
    mappings.path.write_bytes(stored)
    assert mappings.load()
    assert mappings.encode() == stored
    detail = mappings.get(TOPIC)
    assert detail is not None and detail.bname == broker and detail.total_queues == MORE
    assert sorted(detail.hosted_queues) == list(range(MORE))
    for items in detail.hosted_queues.values():
        assert len(items) == 1 and items[0].bname == broker and items[0].logic_offset == 0, items
    assert sorted(i[0].queue_id for i in detail.hosted_queues.values()) == list(range(MORE))
    assert s_topic_config_queues(outputs[4]) == MORE
    # topicRoute prints the route's JSON: the mapping by broker, every logic queue led here
    route = loads(outputs[1][outputs[1].index("{"):])
    by_broker = route["topicQueueMappingByBroker"]
    assert list(by_broker) == [broker], route
    assert by_broker[broker]["totalQueues"] == QUEUES
    assert {int(k) for k in by_broker[broker]["currIdMap"]} == set(range(QUEUES))
    # topicStatus lists the logic queues under the mock broker name
    rows = [line.split() for line in outputs[2].splitlines() if "__syslo__global__" in line]
    assert sorted(int(r[1]) for r in rows) == list(range(QUEUES)), outputs[2]
