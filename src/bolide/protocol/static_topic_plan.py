"""Plans of static topic changes (RocketMQ 5.3.3's TopicQueueMappingUtils, pure: no network):
the mapping every broker gets when ``updateStaticTopic`` creates or grows a static topic, or
when ``remappingStaticTopic`` moves its logic queues onto other brokers, with RocketMQ's checks
of the mappings the brokers hold.

A plan works on the brokers' TopicConfigAndQueueMapping by broker name (what GET_TOPIC_CONFIG
answers) and returns a :class:`RemappingDetail`: RocketMQ's TopicRemappingDetailWrapper, the
JSON mqadmin writes to ``<tmpdir>/<topic>-<epoch>.before|.after`` and reads back with ``-mf``.

The queues are allocated as RocketMQ's MappingAllocator does: each next queue goes to one of
the brokers holding the fewest, picked at random for a new topic, and for a remapping the one
that led the most queues before (ties in the order Java's HashMap walks the broker names), so
the same inputs give the same assignment as mqadmin's.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping

from bolide.protocol.bodies.broker import TopicConfigAndQueueMapping
from bolide.protocol.bodies.static_topic import LogicQueueMappingItem
from bolide.protocol.java_order import hash_order, put_all_capacity
from bolide.protocol.static_topic_checks import (
    BLOCK_SEQ_SIZE,
    MappingOne,
    block_seq_round_up,
    build_mapping_items,
    check_leaders_in_targets,
    check_name_epoch_num,
    check_physical_queues,
    check_targets_complete,
    detail_of,
    details,
    recheck,
)
from bolide.protocol.static_topic_wrapper import (
    TYPE_CREATE_OR_UPDATE,
    TYPE_REMAPPING,
    RemappingDetail,
    StaticTopicError,
    copy_configs,
    new_config,
)

Shuffle = Callable[[list[str]], None]


# -- the allocator --------------------------------------------------------------------------------
class MappingAllocator:
    """RocketMQ's MappingAllocator: queue ids past the assigned ones go, one at a time, to a
    broker with the fewest queues. Among those, a remapping (``before``: each broker's queue
    count before it) takes them in the order of that count (stable over Java's HashMap order),
    first the last, then from the front; a new topic in a random order (``shuffle``)."""

    def __init__(self, id_to_broker: Mapping[int, str], broker_num: Mapping[str, int],
                 before: Mapping[str, int] | None = None, shuffle: Shuffle = random.shuffle) -> None:
        order = hash_order(list(broker_num), put_all_capacity(len(broker_num)))  # its own HashMap
        self.broker_num: dict[str, int] = {b: broker_num[b] for b in order}
        self.id_to_broker: dict[int, str] = dict(id_to_broker)
        self.before = before
        self.shuffle = shuffle
        self.least: list[str] = []
        self.current = 0

    def _fresh(self) -> None:
        low = min(self.broker_num.values())
        self.least = [b for b, n in self.broker_num.items() if n == low]
        if self.before:
            before = self.before
            self.least.sort(key=lambda b: before.get(b, 0))
        else:
            self.shuffle(self.least)
        self.current = len(self.least) - 1

    def _next(self) -> str:
        if not self.least:
            self._fresh()
        return self.least.pop(self.current % len(self.least))

    def up_to(self, total: int) -> dict[int, str]:
        """Assign queue ids up to ``total``; every queue id's broker."""
        for queue_id in range(len(self.id_to_broker), total):
            broker = self._next()
            self.broker_num[broker] = self.broker_num.get(broker, 0) + 1
            self.id_to_broker[queue_id] = broker
        return self.id_to_broker


def _target_counts(targets: Iterable[str]) -> dict[str, int]:
    """``new HashMap`` of the targets (a HashSet's order) with 0 queues each."""
    return {b: 0 for b in hash_order(list(targets))}


# -- the plans ------------------------------------------------------------------------------------
def create_plan(topic: str, queue_num: int, targets: Iterable[str],
                configs: Mapping[str, TopicConfigAndQueueMapping], *, now_ms: int | None = None,
                shuffle: Shuffle = random.shuffle) -> RemappingDetail:
    """The mappings after creating ``topic`` with ``queue_num`` logic queues, or growing it to
    that many, on ``targets`` (createTopicConfigMapping); ``configs`` are the brokers' current
    ones (empty for a new topic) and are not changed."""
    if queue_num <= 0:
        raise StaticTopicError(f"the total queue num must be positive, not {queue_num}: give -qn N")
    configs = copy_configs(configs)
    target_list = list(dict.fromkeys([*targets, *configs]))  # -b's order, then the holders
    now = int(time.time() * 1000) if now_ms is None else now_ms
    check_targets_complete(set(target_list), configs)
    max_epoch = now
    ones: dict[int, MappingOne] = {}
    if configs:
        checked = check_name_epoch_num(topic, configs)
        assert checked is not None
        max_epoch = checked[0]
        ones = build_mapping_items(details(configs))
        check_physical_queues(configs)
    if queue_num < len(ones):
        raise StaticTopicError(f"Cannot decrease the queue num for static topic {queue_num} < {len(ones)}: "
                               f"give -qn {len(ones)} or more")
    if queue_num == len(ones):
        raise StaticTopicError("The topic queue num is equal the existed queue num, do nothing: give "
                               f"-qn above {queue_num} to add queues, or move them with remappingStaticTopic")
    counts = _target_counts(target_list)
    old_ids: dict[int, str] = {}
    for global_id, one in ones.items():
        old_ids[global_id] = one.bname
        counts[one.bname] = counts.get(one.bname, 0) + 1
    assigned = MappingAllocator(old_ids, counts, None, shuffle).up_to(queue_num)
    epoch = max(max_epoch + 1000, now)
    for global_id in sorted(assigned):
        broker = assigned[global_id]
        if global_id in ones:
            continue
        config = configs.get(broker)
        if config is None:
            config = configs[broker] = new_config(topic, broker, 0, now)
        config.write_queue_nums += 1
        config.read_queue_nums += 1
        detail = detail_of(broker, config)
        detail.hosted_queues[global_id] = [LogicQueueMappingItem(
            gen=0, queue_id=config.write_queue_nums - 1, bname=broker, logic_offset=0, start_offset=0)]
    for broker, config in configs.items():
        detail = detail_of(broker, config)
        detail.epoch, detail.total_queues = epoch, queue_num
    recheck(topic, configs)
    return RemappingDetail(topic, TYPE_CREATE_OR_UPDATE, epoch, configs)


def remapping_plan(topic: str, configs: Mapping[str, TopicConfigAndQueueMapping], targets: Iterable[str],
                   *, now_ms: int | None = None) -> RemappingDetail:
    """The mappings after moving ``topic``'s logic queues onto ``targets``, as evenly as can be
    with the fewest moves (remappingStaticTopic): a moved queue gets a new item on its new
    broker (the next physical queue there, logic offset -1 until the old leader's end is known,
    see :func:`decide_logic_offsets`). ``configs`` are not changed."""
    configs = copy_configs(configs)
    target_list = list(dict.fromkeys(targets))
    if not target_list:
        raise StaticTopicError("Find none brokers, do nothing: give -b brokers or -c clusters")
    checked = check_name_epoch_num(topic, configs)
    if checked is None:
        raise StaticTopicError(f"No topic route to do the remapping: no broker holds static topic {topic!r}; "
                               "create it with updateStaticTopic")
    max_epoch, max_num = checked
    ones = build_mapping_items(details(configs))
    check_physical_queues(configs)
    before: dict[str, int] = {}
    for one in ones.values():
        before[one.bname] = before.get(one.bname, 0) + 1
    allocator = MappingAllocator({}, _target_counts(target_list), before)
    allocator.up_to(max_num)
    expected = allocator.broker_num
    waiting: list[int] = []
    expected_ids: dict[int, str] = {}
    for global_id, one in ones.items():  # a broker either keeps/gets queues or gives them away
        if one.bname in expected:
            if expected[one.bname] > 0:
                expected_ids[global_id] = one.bname
                expected[one.bname] -= 1
            else:
                waiting.append(global_id)
                del expected[one.bname]
        else:
            waiting.append(global_id)
    for broker, num in expected.items():
        for _ in range(num):
            expected_ids[waiting.pop(0)] = broker
    epoch = max(max_epoch + 1000, int(time.time() * 1000) if now_ms is None else now_ms)
    map_in: list[str] = []
    map_out: list[str] = []
    for global_id in sorted(expected_ids):
        broker, one = expected_ids[global_id], ones[global_id]
        if one.bname == broker:
            continue
        map_in.append(broker)
        map_out.append(one.bname)
        into = configs.get(broker)
        if into is None:
            into = configs[broker] = new_config(topic, broker, max_num, epoch)
        into.write_queue_nums += 1
        into.read_queue_nums += 1
        moved = LogicQueueMappingItem(gen=one.items[-1].gen + 1, queue_id=into.write_queue_nums - 1,
                                      bname=broker, logic_offset=-1, start_offset=0)
        items = [*one.items, moved]
        detail_of(broker, into).hosted_queues[global_id] = items  # one list for both, as RocketMQ
        detail_of(one.bname, configs[one.bname]).hosted_queues[global_id] = items
    for broker, config in configs.items():
        detail = detail_of(broker, config)
        detail.epoch, detail.total_queues = epoch, max_num
    check_leaders_in_targets(recheck(topic, configs).values(), set(target_list))
    return RemappingDetail(topic, TYPE_REMAPPING, epoch, configs, list(dict.fromkeys(map_in)),
                           list(dict.fromkeys(map_out)))


def decide_logic_offsets(plan: RemappingDetail, broker: str, max_offsets: Mapping[tuple[str, int], int],
                         block: int = BLOCK_SEQ_SIZE) -> None:
    """Set the logic offset of each queue ``broker`` gives away (mqadmin remapping's step 3): the
    old leader's end (``max_offsets`` by (broker name, physical queue id), from
    GET_TOPIC_STATS_INFO) as a logic offset, rounded up to a block."""
    config = plan.broker_config_map[broker]
    for global_id, items in detail_of(broker, config).hosted_queues.items():
        if len(items) < 2:
            continue
        new_leader, old_leader = items[-1], items[-2]
        if new_leader.logic_offset > 0:
            continue
        end = max_offsets.get((old_leader.bname, old_leader.queue_id))
        if end is None:
            raise StaticTopicError(f"Cannot get the max offset for old leader {old_leader}: broker "
                                   f"{old_leader.bname} has no queue {old_leader.queue_id} of {plan.topic}")
        if end < old_leader.start_offset:
            raise StaticTopicError(f"The max offset is smaller then the start offset {old_leader} {end}")
        new_leader.logic_offset = block_seq_round_up(old_leader.static_offset_strictly(end), block)
        leader_config = plan.broker_config_map.get(new_leader.bname)
        if leader_config is not None:  # the new leader holds the very same items
            detail_of(new_leader.bname, leader_config).hosted_queues[global_id] = items


def write_order(brokers: Iterable[str]) -> list[str]:
    """Brokers in the order RocketMQ's HashMap/HashSet of them is walked (its write order)."""
    return hash_order(list(brokers))
