"""The plans of updateStaticTopic and remappingStaticTopic against RocketMQ 5.3.3's
TopicQueueMappingUtils: the same assignments (worked out from its MappingAllocator, ties broken by
Java's HashMap order), the same checks, and the wrapper JSON byte for byte (the golden files are
what RocketMQ's createTopicConfigMapping / remappingStaticTopic wrote for these inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.protocol.bodies.broker import TopicConfigAndQueueMapping
from bolide.protocol.bodies.static_topic import LogicQueueMappingItem, TopicQueueMappingDetail
from bolide.protocol.java_order import hash_order, put_all_capacity, string_hash
from bolide.protocol.static_topic_checks import (
    block_seq_round_up,
    build_mapping_items,
    check_name_epoch_num,
    check_targets_complete,
    details,
)
from bolide.protocol.static_topic_plan import (
    MappingAllocator,
    create_plan,
    decide_logic_offsets,
    remapping_plan,
)
from bolide.protocol.static_topic_wrapper import RemappingDetail, StaticTopicError

GOLDEN = Path(__file__).parent / "golden"
EPOCH = 9_000_000_000_000  # far ahead of the clock: the new epoch is EPOCH + 1000


def held(*brokers: tuple[str, int], topic: str = "T",
         epoch: int = EPOCH) -> dict[str, TopicConfigAndQueueMapping]:
    """Brokers holding fresh logic queues (ids in the order given), as updateStaticTopic made them."""
    total = sum(n for _, n in brokers)
    configs, global_id = {}, 0
    for name, n in brokers:
        detail = TopicQueueMappingDetail(topic=topic, total_queues=total, bname=name, epoch=epoch)
        for q in range(n):
            detail.hosted_queues[global_id] = [LogicQueueMappingItem(gen=0, queue_id=q, bname=name,
                                                                     logic_offset=0, start_offset=0)]
            global_id += 1
        configs[name] = TopicConfigAndQueueMapping(topic_name=topic, read_queue_nums=n, write_queue_nums=n,
                                                   mapping_detail=detail)
    return configs


def leaders(plan: RemappingDetail) -> list[tuple[int, str, int]]:
    ones = build_mapping_items(details(plan.broker_config_map))
    return [(g, one.bname, one.items[-1].queue_id) for g, one in ones.items()]


def test_java_hash_order() -> None:
    assert string_hash("ab") == 97 * 31 + 98 and string_hash("") == 0
    assert put_all_capacity(2) == 4 and put_all_capacity(3) == 8 and put_all_capacity(13) == 32
    assert hash_order(["b", "a", "c"]) == ["a", "b", "c"]  # one-letter keys: buckets 97, 98, 99
    assert hash_order([3, 1, 2]) == [1, 2, 3]


def test_block_seq_round_up() -> None:
    assert [block_seq_round_up(o) for o in (0, 3, 4999, 5000, 12345, 15000)] == [
        10000, 10000, 10000, 20000, 20000, 30000]


# (queues held before, targets) -> (global id, leader, physical queue), as RocketMQ 5.3.3 gives
REMAPS = [
    ([("A", 3)], ["broker-b", "broker-c"], [(0, "broker-b", 0), (1, "broker-c", 0), (2, "broker-c", 1)]),
    ([("A", 4)], ["A", "B"], [(0, "A", 0), (1, "A", 1), (2, "B", 0), (3, "B", 1)]),
    ([("broker-a", 5), ("broker-b", 3)], ["broker-a", "broker-b", "broker-c"],
     [(0, "broker-a", 0), (1, "broker-a", 1), (2, "broker-a", 2), (3, "broker-c", 0), (4, "broker-c", 1),
      (5, "broker-b", 0), (6, "broker-b", 1), (7, "broker-c", 2)]),
    ([("b1", 2), ("b2", 2), ("b3", 2)], ["b1", "b4"],
     [(0, "b1", 0), (1, "b1", 1), (2, "b4", 0), (3, "b4", 1), (4, "b4", 2), (5, "b1", 2)]),
    ([("broker-a", 4)], ["broker-b", "broker-a", "broker-z", "broker-y"],
     [(0, "broker-a", 0), (1, "broker-z", 0), (2, "broker-b", 0), (3, "broker-y", 0)]),
]


@pytest.mark.parametrize(("before", "targets", "expected"), REMAPS)
def test_remapping_assigns_as_rocketmq(before: list[tuple[str, int]], targets: list[str],
                                       expected: list[tuple[int, str, int]]) -> None:
    configs = held(*before)
    plan = remapping_plan("T", configs, targets)
    assert leaders(plan) == expected
    assert plan.epoch == EPOCH + 1000 and plan.type == "REMAPPING"
    moved = {b for g, b, _ in expected if b != leaders(RemappingDetail("T", "", 0, held(*before)))[g][1]}
    assert set(plan.broker_to_map_in) == moved
    assert configs == held(*before)  # the input is left alone


def test_remapping_wrapper_json_is_rocketmq_s() -> None:
    plan = remapping_plan("T", held(("A", 3)), ["broker-b", "broker-c"])
    golden = (GOLDEN / "static_remapping_A3_to_b_c.json").read_bytes().strip()
    assert plan.to_json() == golden  # the moved items written once, then as {"$ref": ...}
    back = RemappingDetail.from_json(golden)
    assert back.to_json() != golden  # read back the references are copies ...
    assert leaders(back) == leaders(plan)  # ... of the same items
    assert back.broker_to_map_in == ["broker-b", "broker-c"] and back.broker_to_map_out == ["A"]


def test_update_plan_and_json_are_rocketmq_s() -> None:
    plan = create_plan("T", 4, ["A", "B"], held(("A", 2)))
    assert leaders(plan) == [(0, "A", 0), (1, "A", 1), (2, "B", 0), (3, "B", 1)]
    assert plan.to_json() == (GOLDEN / "static_update_A2_to_4.json").read_bytes().strip()


def test_create_spreads_evenly_in_a_random_order() -> None:
    order: list[list[str]] = []

    def shuffle(names: list[str]) -> None:
        order.append(list(names))
        names.reverse()

    plan = create_plan("T", 5, ["x", "y", "z"], {}, now_ms=1000, shuffle=shuffle)
    counts = {b: sum(1 for _, lead, _ in leaders(plan) if lead == b) for b in "xyz"}
    assert sorted(counts.values()) == [1, 2, 2] and len(order) == 2
    assert plan.epoch == 2000 and all(c.mapping_detail and c.mapping_detail.total_queues == 5
                                      for c in plan.broker_config_map.values())
    # RocketMQ's picks from the shuffled list: the last, then from the front
    first = order[0][::-1]
    assert [lead for _, lead, _ in leaders(plan)[:3]] == [first[-1], first[0], first[1]]


def test_allocator_picks_from_the_fewest() -> None:
    allocator = MappingAllocator({0: "a", 1: "a"}, {"a": 2, "b": 0, "c": 1}, {"a": 5})
    assert allocator.up_to(5) == {0: "a", 1: "a", 2: "b", 3: "c", 4: "b"}


def test_update_refusals_name_the_fix() -> None:
    with pytest.raises(StaticTopicError, match="give -qn above 2"):
        create_plan("T", 2, ["A"], held(("A", 2)))
    with pytest.raises(StaticTopicError, match="give -qn 2 or more"):
        create_plan("T", 1, ["A"], held(("A", 2)))
    plain = {"A": TopicConfigAndQueueMapping(topic_name="T", read_queue_nums=2, write_queue_nums=2)}
    with pytest.raises(StaticTopicError, match="normal topic"):
        create_plan("T", 4, ["A"], plain)


def test_checks_of_the_brokers_mappings() -> None:
    configs = held(("A", 2), ("B", 2))
    assert check_name_epoch_num("T", configs) == (EPOCH, 4)
    bad = held(("A", 2), ("B", 2))
    assert bad["B"].mapping_detail is not None
    bad["B"].mapping_detail.epoch += 1
    with pytest.raises(StaticTopicError, match="epoch does not match"):
        remapping_plan("T", bad, ["A"])
    missing = held(("A", 2), ("B", 2))
    del missing["B"]
    with pytest.raises(StaticTopicError, match=r"does not match the real hosted queues 4 != 2"):
        remapping_plan("T", missing, ["A"])
    shared = held(("A", 2))
    assert shared["A"].mapping_detail is not None
    shared["A"].mapping_detail.hosted_queues[1][0].queue_id = 0
    with pytest.raises(StaticTopicError, match="shared the same physical queue A-0"):
        remapping_plan("T", shared, ["A"])
    overflow = held(("A", 2))
    overflow["A"].write_queue_nums = overflow["A"].read_queue_nums = 1
    with pytest.raises(StaticTopicError, match="overflow the write queues"):
        remapping_plan("T", overflow, ["A"])
    with pytest.raises(StaticTopicError, match="The existed broker B does not in target brokers"):
        check_targets_complete({"A"}, configs)


def test_decide_logic_offsets_from_the_old_leaders_end() -> None:
    plan = remapping_plan("T", held(("A", 2)), ["B"])
    decide_logic_offsets(plan, "A", {("A", 0): 3, ("A", 1): 7000})
    detail = plan.broker_config_map["B"].mapping_detail
    assert detail is not None
    got = {g: items[-1].logic_offset for g, items in detail.hosted_queues.items()}
    assert got == {0: 10000, 1: 20000}
    plan = remapping_plan("T", held(("A", 1)), ["B"])
    with pytest.raises(StaticTopicError, match="Cannot get the max offset for old leader"):
        decide_logic_offsets(plan, "A", {})


def test_wrapper_file_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(StaticTopicError, match="no TopicRemappingDetailWrapper"):
        RemappingDetail.from_json(b"[1")
    plan = create_plan("T", 2, ["A"], {}, now_ms=5)
    path = plan.write_to(tmp_path, after=True)
    assert path.name == "T-1005.after"
    assert RemappingDetail.from_json(path.read_bytes()).to_json() == plan.to_json()
