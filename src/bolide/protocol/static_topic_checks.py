"""RocketMQ's checks of a static topic's mappings across its brokers (TopicQueueMappingUtils),
raising :class:`~bolide.protocol.static_topic_wrapper.StaticTopicError` with RocketMQ's text and
the fix: one epoch, queue count and scope everywhere, each logic queue led by one broker with its
items in order, no physical queue shared, every item's queue among its broker's write queues."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bolide.protocol.bodies.broker import TopicConfigAndQueueMapping
from bolide.protocol.bodies.static_topic import (
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    check_item_offsets,
)
from bolide.protocol.static_topic_wrapper import ConfigMap, StaticTopicError

BLOCK_SEQ_SIZE = 10000  # mqadmin's step between an old leader's end and the new one's start


@dataclass
class MappingOne:
    """A logic queue and its items as its leader broker holds them (TopicQueueMappingOne)."""

    global_id: int
    bname: str
    items: list[LogicQueueMappingItem]
    detail: TopicQueueMappingDetail


def detail_of(broker: str, config: TopicConfigAndQueueMapping) -> TopicQueueMappingDetail:
    if config.mapping_detail is None:
        raise StaticTopicError(f"Mapping info should not be null in broker {broker}: topic "
                               f"{config.topic_name!r} is a normal topic there; give a static topic "
                               "a name no broker uses, or delete the topic first")
    return config.mapping_detail


def check_name_epoch_num(topic: str | None, configs: Mapping[str, TopicConfigAndQueueMapping]
                         ) -> tuple[int, int] | None:
    """The brokers' common (epoch, total queues) (checkNameEpochNumConsistence); None for no
    broker."""
    if not configs:
        return None
    epoch = num = -1
    scope: str | None = None
    for broker, config in configs.items():
        detail = detail_of(broker, config)
        fix = "; repair it with updateStaticTopic -mf <a corrected mapping file> -fr true"
        if broker != detail.bname:
            raise StaticTopicError(f"The broker name is not equal {broker} != {detail.bname}{fix}")
        if detail.dirty:
            raise StaticTopicError(f"The mapping info is dirty in broker {broker}{fix}")
        if config.topic_name != detail.topic:
            raise StaticTopicError(f"The topic name is inconsistent in broker {broker}{fix}")
        if topic is not None and topic != detail.topic:
            raise StaticTopicError(f"The topic name is not match for broker {broker}: the mapping is "
                                   f"of {detail.topic!r}, not {topic!r}")
        if scope is not None and scope != detail.scope:
            raise StaticTopicError(f"scope does not match {detail.scope} != {scope} in {broker}{fix}")
        scope = detail.scope
        if epoch != -1 and epoch != detail.epoch:
            raise StaticTopicError(f"epoch does not match {epoch} != {detail.epoch} in {detail.bname}: "
                                   "an earlier change stopped half way; finish it with "
                                   "remappingStaticTopic -mf <its .after file>, or repair it"
                                   f"{fix[1:]}")
        epoch = detail.epoch
        if num != -1 and num != detail.total_queues:
            raise StaticTopicError(f"total queue number does not match {num} != {detail.total_queues} "
                                   f"in {detail.bname}{fix}")
        num = detail.total_queues
    return epoch, num


def build_mapping_items(details: Iterable[TopicQueueMappingDetail], replace: bool = False,
                        check_consistence: bool = True) -> dict[int, MappingOne]:
    """Every logic queue with its leader's items (checkAndBuildMappingItems): each queue led by
    exactly one broker, its items in order, queues 0..total-1 all there."""
    ordered = sorted(details, key=lambda d: -d.epoch)  # a stable sort, newest epoch first
    max_num = 0
    found: dict[int, MappingOne] = {}
    for detail in ordered:
        max_num = max(max_num, detail.total_queues)
        for global_id, items in detail.hosted_queues.items():
            problem = check_item_offsets(items)
            if problem is not None:
                raise StaticTopicError(f"logic queue {global_id} on broker {detail.bname}: {problem}")
            if not items or items[-1].bname != detail.bname:
                continue  # not the leader
            if global_id in found:
                if not replace:
                    raise StaticTopicError(
                        f"The queue id is duplicated in broker {found[global_id].bname} {detail.bname}: "
                        f"both lead logic queue {global_id}; repair one with updateStaticTopic -mf "
                        "<a corrected mapping file> -fr true")
            else:
                found[global_id] = MappingOne(global_id, detail.bname, items, detail)
    if check_consistence:
        if max_num != len(found):
            raise StaticTopicError(f"The total queue number in config does not match the real hosted "
                                   f"queues {max_num} != {len(found)}: a broker holding some is missing "
                                   "(start it, or check that it registers with this NameServer)")
        for i in range(max_num):
            if i not in found:
                raise StaticTopicError(f"The queue number {i} is not in globalIdMap")
    check_reuse_physical_queue(found.values())
    return dict(sorted(found.items()))


def check_reuse_physical_queue(ones: Iterable[MappingOne]) -> None:
    """No physical queue serves two logic queues (checkIfReusePhysicalQueue)."""
    seen: dict[str, MappingOne] = {}
    for one in ones:
        for item in one.items:
            key = f"{item.bname}-{item.queue_id}"
            if key in seen:
                raise StaticTopicError(f"Topic {one.detail.topic} global queue id {one.global_id} and "
                                       f"{seen[key].global_id} shared the same physical queue {key}")
            seen[key] = one


def check_physical_queues(configs: Mapping[str, TopicConfigAndQueueMapping]) -> None:
    """Every item's physical queue is among its broker's write queues, and starts at 0
    (checkPhysicalQueueConsistence)."""
    for broker, config in configs.items():
        if config.read_queue_nums < config.write_queue_nums:
            raise StaticTopicError(f"Read queues is smaller than write queues on broker {broker}: "
                                   "set them equal with updateTopic -r/-w")
        for items in detail_of(broker, config).hosted_queues.values():
            for item in items:
                if item.start_offset != 0:
                    raise StaticTopicError(f"The start offset does not begin from 0: {item}")
                owner = configs.get(item.bname)
                if owner is None:
                    raise StaticTopicError(f"The broker of item does not exist: {item.bname} (of {item}) "
                                           "has no config of the topic; start it, or check its name")
                if item.queue_id >= owner.write_queue_nums:
                    raise StaticTopicError(f"The physical queue id is overflow the write queues: {item} "
                                           f"on {item.bname}, which has {owner.write_queue_nums}")


def check_leaders_in_targets(ones: Iterable[MappingOne], targets: set[str]) -> None:
    for one in ones:
        if one.bname not in targets:
            raise StaticTopicError(f"The leader broker does not in target broker: {one.bname} leads "
                                   f"logic queue {one.global_id}")


def check_targets_complete(targets: set[str], configs: Mapping[str, TopicConfigAndQueueMapping]) -> None:
    for broker, config in configs.items():
        if not detail_of(broker, config).hosted_queues:
            continue
        if broker not in targets:
            raise StaticTopicError(f"The existed broker {broker} does not in target brokers: add it "
                                   "to -b, or move its queues away with remappingStaticTopic first")


def block_seq_round_up(offset: int, block: int = BLOCK_SEQ_SIZE) -> int:
    """The next block boundary past ``offset``, a whole block more when past half a block
    (blockSeqRoundUp): a new leader's first logic offset."""
    num, left = divmod(offset, block)
    return (num + 1) * block if left < block // 2 else (num + 2) * block


def recheck(topic: str, configs: ConfigMap) -> dict[int, MappingOne]:
    check_name_epoch_num(topic, configs)
    ones = build_mapping_items(details(configs))
    check_physical_queues(configs)
    return ones


def details(configs: Mapping[str, TopicConfigAndQueueMapping]) -> list[TopicQueueMappingDetail]:
    return [c.mapping_detail for c in configs.values() if c.mapping_detail is not None]
