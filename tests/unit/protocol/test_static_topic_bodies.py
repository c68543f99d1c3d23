"""Static topic bodies as RocketMQ 5.3.3's fastjson writes them, and the logic <-> physical
offset translation of LogicQueueMappingItem over one and several items."""

from __future__ import annotations

import pytest

from bolide.common.fastjson import dumps_pretty
from bolide.protocol.bodies.broker import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfigAndQueueMapping,
    TopicConfigSerializeWrapper,
    TopicQueueMappingSerializeWrapper,
)
from bolide.protocol.bodies.route import TopicRouteData
from bolide.protocol.bodies.static_topic import (
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    TopicQueueMappingInfo,
    check_item_offsets,
    find_item,
    find_next,
    mock_broker_name,
)

ITEM = ('{"bname":"b","endOffset":-1,"gen":0,"logicOffset":0,"queueId":1,"startOffset":0,'
        '"timeOfEnd":-1,"timeOfStart":-1}')


def _detail() -> TopicQueueMappingDetail:
    return TopicQueueMappingDetail(topic="T", total_queues=2, bname="b", epoch=7,
                                   hosted_queues={0: [LogicQueueMappingItem(queue_id=1, bname="b")]})


def test_detail_shape_and_round_trip() -> None:
    text = _detail().encode().decode()
    assert text == ('{"bname":"b","currIdMap":{},"dirty":false,"epoch":7,"hostedQueues":{0:[' + ITEM
                    + ']},"scope":"__global__","topic":"T","totalQueues":2}')
    assert TopicQueueMappingDetail.decode(text) == _detail()
    # quoted keys (standard JSON) parse too
    assert TopicQueueMappingDetail.decode(text.replace("{0:", '{"0":')) == _detail()


def test_info_keeps_the_queues_led_here() -> None:
    detail = _detail()
    detail.hosted_queues[1] = [LogicQueueMappingItem(gen=0, queue_id=0, bname="b", end_offset=5),
                               LogicQueueMappingItem(gen=1, queue_id=3, bname="other", logic_offset=5)]
    info = detail.as_info()
    assert info == TopicQueueMappingInfo(topic="T", total_queues=2, bname="b", epoch=7, curr_id_map={0: 1})
    assert info.encode() == (b'{"bname":"b","currIdMap":{0:1},"dirty":false,"epoch":7,'
                             b'"scope":"__global__","topic":"T","totalQueues":2}')
    assert detail.as_physical(0) and not detail.as_physical(1)
    assert detail.max_static_offset(1) == 5 and detail.max_static_offset(9) == -1


def test_file_wrapper_pretty_shape() -> None:
    wrapper = TopicQueueMappingSerializeWrapper(
        topic_queue_mapping_info_map={"T": _detail()},
        data_version=DataVersion(timestamp=1, counter=2, state_version=0))
    text = dumps_pretty(wrapper).decode()
    assert text.startswith('{\n\t"dataVersion":{\n\t\t"counter":2,\n\t\t"stateVersion":0,'
                           '\n\t\t"timestamp":1\n\t},\n\t"topicQueueMappingInfoMap":{\n\t\t"T":{\n\t\t\t"bname":"b",')
    assert TopicQueueMappingSerializeWrapper.decode(text) == wrapper


def test_topic_config_and_mapping() -> None:
    body = TopicConfigAndQueueMapping(topic_name="T", read_queue_nums=2, write_queue_nums=2)
    assert b"mappingDetail" not in body.encode()  # asked without lo: no mapping, as Java omits null
    body.mapping_detail = _detail()
    again = TopicConfigAndQueueMapping.decode(body.encode())
    assert again.mapping_detail == _detail() and again.topic_name == "T"


def test_route_and_registration_carry_the_mapping_infos() -> None:
    info = _detail().as_info()
    route = TopicRouteData(topic_queue_mapping_by_broker={"b": info})
    assert b'"topicQueueMappingByBroker":{"b":{"bname":"b","currIdMap":{0:1}' in route.encode()
    assert TopicRouteData.decode(route.encode(standard=True)).topic_queue_mapping_by_broker == {"b": info}
    assert b"topicQueueMappingByBroker" not in TopicRouteData().encode()
    wrapper = TopicConfigSerializeWrapper(topic_queue_mapping_info_map={"T": info})
    body = RegisterBrokerBody(topic_config_serialize_wrapper=wrapper)
    assert RegisterBrokerBody.decode(body.encode()).topic_config_serialize_wrapper == wrapper
    packed = RegisterBrokerBody.decode_compressed(body.encode_compressed())
    assert packed.topic_config_serialize_wrapper.topic_queue_mapping_info_map == {"T": info}
    assert b"topicQueueMappingInfoMap" not in TopicConfigSerializeWrapper().encode()


def test_mock_broker_name() -> None:
    assert mock_broker_name() == "__syslo__global__"
    assert mock_broker_name("zone1") == "__syslo__zone1"


# -- offsets ------------------------------------------------------------------------------------
def test_single_item_is_identity_plus_start() -> None:
    item = LogicQueueMappingItem(queue_id=0, bname="b", logic_offset=0, start_offset=0)
    assert [item.static_offset_strictly(p) for p in (0, 5)] == [0, 5]
    assert item.physical_offset(5) == 5
    moved = LogicQueueMappingItem(queue_id=0, bname="b", logic_offset=100, start_offset=20)
    assert moved.physical_offset(100) == 20 and moved.physical_offset(130) == 50
    assert moved.static_offset_strictly(50) == 130 and moved.static_offset_strictly(3) == 100
    assert moved.max_static_offset() == 100  # open: the end is not known


def test_loose_offsets_clamp_into_the_item() -> None:
    old = LogicQueueMappingItem(gen=0, bname="a", logic_offset=0, start_offset=10, end_offset=40)
    assert old.static_offset_loosely(5) == 0
    assert old.static_offset_loosely(25) == 15
    assert old.static_offset_loosely(99) == 30  # past its end: the item's last logic offset
    assert old.max_static_offset() == 30 and old.end_decided()
    undecided = LogicQueueMappingItem(gen=1, bname="b", logic_offset=-1)
    assert undecided.static_offset_loosely(3) == -1 and not undecided.logic_offset_decided()


def test_multi_item_lookup() -> None:
    item = LogicQueueMappingItem
    items = [item(gen=0, bname="a", queue_id=0, logic_offset=0, start_offset=0, end_offset=30),
             item(gen=1, bname="b", queue_id=2, logic_offset=40, start_offset=5, end_offset=25),
             item(gen=2, bname="c", queue_id=1, logic_offset=70, start_offset=0)]
    # RocketMQ leaves a gap: an item's logic offsets end below the next one's start
    assert check_item_offsets(items) is None
    assert find_item(items, 10) is items[0]
    assert find_item(items, 40) is items[1] and items[1].physical_offset(52) == 17
    assert find_item(items, 69) is items[1]
    assert find_item(items, 80) is items[2] and items[2].physical_offset(80) == 10
    assert find_item(items, -3) is items[0]  # below every item: the first one
    assert find_next(items, items[0]) is items[1] and find_next(items, items[2]) is None
    # a logic offset from broker b's physical 17, and back
    assert items[1].static_offset_strictly(items[1].physical_offset(52)) == 52
    pending = [*items[:2], LogicQueueMappingItem(gen=2, bname="c", logic_offset=-1)]
    assert find_item(pending, 80, ignore_negative=True) is items[1]
    assert find_next(pending, items[1], ignore_negative=True) is None


@pytest.mark.parametrize("items, why", [
    ([LogicQueueMappingItem(gen=1, logic_offset=0, end_offset=5),
      LogicQueueMappingItem(gen=1, logic_offset=5)], "gen"),
    ([LogicQueueMappingItem(gen=0, logic_offset=10, end_offset=5),
      LogicQueueMappingItem(gen=1, logic_offset=5)], "logic offsets"),
    ([LogicQueueMappingItem(gen=0, logic_offset=-1), LogicQueueMappingItem(gen=1, logic_offset=5)],
     "negative logic offset"),
    ([LogicQueueMappingItem(gen=0, start_offset=9, end_offset=3)], "end offset"),
])
def test_bad_item_lists(items: list[LogicQueueMappingItem], why: str) -> None:
    problem = check_item_offsets(items)
    assert problem is not None and why in problem
