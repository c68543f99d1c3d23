"""The broker's static topic mappings: RocketMQ's update rules and ``topicQueueMapping.json``."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.broker.static_topics import MappingRefused, StaticTopicMappings
from bolide.protocol.bodies.static_topic import LogicQueueMappingItem, TopicQueueMappingDetail


def _detail(epoch: int, queues: dict[int, list[LogicQueueMappingItem]],
            bname: str = "b") -> TopicQueueMappingDetail:
    return TopicQueueMappingDetail(topic="T", total_queues=len(queues), bname=bname, epoch=epoch,
                                   hosted_queues=queues)


def _item(queue: int, gen: int = 0, bname: str = "b", **kw: int) -> LogicQueueMappingItem:
    return LogicQueueMappingItem(gen=gen, queue_id=queue, bname=bname, **kw)


def test_update_persist_and_load(tmp_path: Path) -> None:
    m = StaticTopicMappings("b", tmp_path / "topicQueueMapping.json")
    changed: list[str] = []
    m.on_change.append(changed.append)
    m.update(_detail(5, {0: [_item(0)], 1: [_item(1)]}))
    m.update(_detail(6, {0: [_item(0)], 1: [_item(1)], 2: [_item(2)]}))  # a queue added
    assert changed == ["T", "T"] and m.data_version.counter == 2
    assert m.infos()["T"].curr_id_map == {0: 0, 1: 1, 2: 2}
    m.persist()
    again = StaticTopicMappings("b", m.path)
    assert again.load() and again.table == m.table and again.encode() == m.path.read_bytes()
    assert again.delete("T") and not again.delete("T") and again.get("T") is None


def test_update_rules(tmp_path: Path) -> None:
    m = StaticTopicMappings("b", tmp_path / "topicQueueMapping.json")
    m.update(_detail(5, {0: [_item(0)], 1: [_item(1)]}))
    with pytest.raises(MappingRefused, match="small epoch"):
        m.update(_detail(4, {0: [_item(0)]}))
    with pytest.raises(MappingRefused, match="equal epoch with null data"):
        m.update(_detail(5, {0: [_item(0)]}))
    with pytest.raises(MappingRefused, match="leader is different"):
        m.update(_detail(5, {0: [_item(0)], 1: [_item(1, end_offset=4), _item(3, gen=1, logic_offset=9)]}))
    with pytest.raises(MappingRefused, match="changes the item"):
        m.update(_detail(6, {0: [_item(2)], 1: [_item(1)]}))
    with pytest.raises(MappingRefused, match="broker 'x'"):
        m.update(_detail(6, {0: [_item(0)]}, bname="x"))
    with pytest.raises(MappingRefused, match="gen"):
        m.update(_detail(6, {0: [_item(0, end_offset=3), _item(0, logic_offset=9)]}))
    m.update(_detail(6, {0: [_item(0)]}))  # a higher epoch keeps the queues it leaves out
    assert sorted(m.table["T"].hosted_queues) == [0, 1]
    m.update(_detail(1, {2: [_item(2)]}), force=True)  # force: any epoch, old queues kept
    assert sorted(m.table["T"].hosted_queues) == [0, 1, 2] and m.table["T"].epoch == 1


def test_bad_file_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "topicQueueMapping.json"
    path.write_text('{"topicQueueMappingInfoMap":{"T":{"hostedQueues":[1]}}}')
    with pytest.raises(Exception, match="move it away"):
        StaticTopicMappings("b", path).load()
    assert not StaticTopicMappings("b", tmp_path / "none.json").load()
