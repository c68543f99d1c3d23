"""The static topic commands' helpers that need no server: target brokers from ``-b``/``-c``,
the brokers completed with an empty mapping, and a failed write naming the file to send again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.client.admin_static import (
    StaticTopicChange,
    _complete_no_target_brokers,
    _resumable,
    _targets,
)
from bolide.client.errors import MQBrokerError
from bolide.protocol.bodies.route import BrokerData, ClusterInfo
from bolide.protocol.static_topic_plan import create_plan
from bolide.protocol.static_topic_wrapper import RemappingDetail, StaticTopicError

INFO = ClusterInfo(
    broker_addr_table={n: BrokerData(cluster=c, broker_name=n, broker_addrs={0: f"h:{i}"})
                       for i, (c, n) in enumerate([("c1", "a"), ("c1", "b"), ("c2", "x")])},
    cluster_addr_table={"c1": {"a", "b"}, "c2": {"x"}})


def test_targets_from_brokers_or_clusters() -> None:
    assert _targets(INFO, [" a, b ,"], []) == ["a", "b"]
    assert _targets(INFO, [], ["c2,c1"]) == ["x", "a", "b"]
    with pytest.raises(StaticTopicError, match=r"Find none brokers.*known: c1, c2"):
        _targets(INFO, [""], ["nope"])
    with pytest.raises(StaticTopicError, match="Cluster info is empty"):
        _targets(ClusterInfo(), ["a"], [])


def test_other_brokers_of_the_clusters_get_an_empty_mapping() -> None:
    plan = create_plan("T", 2, ["a"], {}, now_ms=10)
    _complete_no_target_brokers(plan, INFO)
    assert sorted(plan.broker_config_map) == ["a", "b"]  # not x: another cluster
    b = plan.broker_config_map["b"]
    assert (b.read_queue_nums, b.write_queue_nums, b.perm) == (0, 0, 6)
    assert b.mapping_detail is not None and b.mapping_detail.hosted_queues == {}
    assert (b.mapping_detail.epoch, b.mapping_detail.total_queues) == (plan.epoch, 2)


def test_a_failed_write_names_the_file_to_send_again() -> None:
    change = StaticTopicChange(RemappingDetail("T", "REMAPPING", 7), new_file=Path("/tmp/T-7.after"),
                               writes=[("map-in", "b", "h:1")])

    async def fail() -> None:
        async with _resumable(change, "remappingStaticTopic"):
            raise MQBrokerError("broker a refused: Can't accept data with small epoch", 1)

    with pytest.raises(StaticTopicError) as caught:
        asyncio.run(fail())
    text = str(caught.value)
    assert "small epoch" in text and "mappings sent: map-in b" in text
    assert text.endswith("remappingStaticTopic -t T -mf /tmp/T-7.after")
