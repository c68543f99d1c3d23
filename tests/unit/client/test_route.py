"""Client routes (bolide.client.route): a static topic's logic queues and their leaders."""

from __future__ import annotations

import pytest

from bolide.client.route import build_route, static_endpoints
from bolide.errors import ProtocolError
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from bolide.protocol.bodies.static_topic import TopicQueueMappingInfo

T, GLOBAL = "ST", "__syslo__global__"


def route(*infos: TopicQueueMappingInfo) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(broker_name=b, read_queue_nums=2, write_queue_nums=2) for b in "ab"],
        broker_datas=[BrokerData(broker_name=b, broker_addrs={0: f"10.0.0.{i}:10911"})
                      for i, b in enumerate("ab")],
        topic_queue_mapping_by_broker={i.bname or "": i for i in infos})


def test_plain_topics_keep_their_physical_queues() -> None:
    r = build_route(T, route())
    assert r.publish_queues == tuple(MessageQueue(T, b, q) for b in "ab" for q in range(2))
    assert r.broker_of(r.publish_queues[0]) == "a" and not r.endpoints


def test_logic_queues_are_led_by_the_newest_epoch() -> None:
    """Queue 0 moved from a (epoch 1) to b (epoch 2); queue 1 stays on a; queue 2 of the
    3 has no leader: consumers still count it, producers leave it out."""
    r = build_route(T, route(
        TopicQueueMappingInfo(topic=T, bname="a", epoch=1, total_queues=3, curr_id_map={0: 0, 1: 1}),
        TopicQueueMappingInfo(topic=T, bname="b", epoch=2, total_queues=3, curr_id_map={0: 5})))
    logic = [MessageQueue(T, GLOBAL, q) for q in range(3)]
    assert r.subscribe_queues == tuple(logic) and r.publish_queues == tuple(logic[:2])
    assert [r.broker_of(mq) for mq in logic] == ["b", "a", "__syslo__none__"]
    assert r.master_addr(r.broker_of(logic[0])) == "10.0.0.1:10911"
    assert r.broker_of(MessageQueue(T, "a", 1)) == "a"  # a physical queue stays as it is


def test_a_logic_queue_count_no_broker_serves_is_malformed() -> None:
    with pytest.raises(ProtocolError, match="logic"):
        static_endpoints(T, route(TopicQueueMappingInfo(topic=T, bname="a", total_queues=2**31 - 1)))
