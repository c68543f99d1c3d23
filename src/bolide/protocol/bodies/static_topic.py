"""Static topics (RocketMQ 5's RIP-21 logic queues): a topic whose queue count stays fixed while
its queues move between brokers. Each logic queue (its "global id") is a list of
LogicQueueMappingItem, one per broker that held it, the last one the current leader.

Bodies as fastjson writes RocketMQ's beans (properties alphabetical, integer map keys bare):
LogicQueueMappingItem, TopicQueueMappingInfo (what a broker registers with the NameServer and
GET_ROUTEINFO_BY_TOPIC returns in ``topicQueueMappingByBroker``) and TopicQueueMappingDetail (the
broker's own record: adds ``hostedQueues``). The wrappers holding them (``topicQueueMapping.json``,
GET_TOPIC_CONFIG's TopicConfigAndQueueMapping, REGISTER_BROKER's mapping map) are in
:mod:`bolide.protocol.bodies.broker`.

The offset functions translate between a logic queue's offsets and one item's physical queue
offsets as RocketMQ's LogicQueueMappingItem does: an item covers the physical offsets
``[startOffset, endOffset)`` (``endOffset`` -1 while it is the leader) from logic offset
``logicOffset`` on.
"""

from __future__ import annotations

from bolide.protocol.bodies.bean import Bean, bean, jfield

SCOPE_GLOBAL = "__global__"
MOCK_BROKER_PREFIX = "__syslo__"
MOCK_BROKER_NAME_NOT_EXIST = "__syslo__none__"


def mock_broker_name(scope: str = SCOPE_GLOBAL) -> str:
    """The broker name clients give a static topic's queues (``__syslo__global__``)."""
    return MOCK_BROKER_PREFIX + (scope[2:] if scope == SCOPE_GLOBAL else scope)


@bean
class LogicQueueMappingItem(Bean):
    """One broker's stretch of a logic queue: its physical queue and offsets."""

    gen: int = 0
    queue_id: int = 0
    bname: str = ""
    logic_offset: int = 0
    start_offset: int = 0
    end_offset: int = -1
    time_of_start: int = -1
    time_of_end: int = -1

    # -- offset translation (pure; RocketMQ's LogicQueueMappingItem methods) -----------------
    def static_offset_loosely(self, physical: int) -> int:
        """The logic offset of a physical one, clamped into the item (send and min offset)."""
        if self.logic_offset < 0:
            return -1
        if physical < self.start_offset:
            return self.logic_offset
        if self.start_offset <= self.end_offset < physical:
            return self.logic_offset + self.end_offset - self.start_offset
        return self.logic_offset + physical - self.start_offset

    def static_offset_strictly(self, physical: int) -> int:
        """The logic offset of a physical one (clamped below the item's start only)."""
        if physical < self.start_offset:
            return self.logic_offset
        return self.logic_offset + physical - self.start_offset

    def physical_offset(self, static: int) -> int:
        """The physical queue offset of a logic one."""
        return static - self.logic_offset + self.start_offset

    def max_static_offset(self) -> int:
        """The logic offset after the item's last message (its start while it is open)."""
        if self.end_offset >= self.start_offset:
            return self.logic_offset + self.end_offset - self.start_offset
        return self.logic_offset

    def end_decided(self) -> bool:
        return self.end_offset > self.start_offset

    def logic_offset_decided(self) -> bool:
        return self.logic_offset >= 0


@bean
class TopicQueueMappingInfo(Bean):
    """A broker's part of a static topic: ``currIdMap`` maps the logic queues it leads to its
    physical queue ids."""

    topic: str | None = None
    scope: str = SCOPE_GLOBAL
    total_queues: int = 0
    bname: str | None = None
    epoch: int = 0
    dirty: bool = False
    curr_id_map: dict[int, int] = jfield(factory=dict)


@bean
class TopicQueueMappingDetail(TopicQueueMappingInfo):
    """The broker's record of a static topic: every logic queue it hosts, with its items."""

    hosted_queues: dict[int, list[LogicQueueMappingItem]] = jfield(factory=dict)

    def leader_ids(self) -> dict[int, int]:
        """Logic queue -> physical queue of the queues this broker leads (RocketMQ buildIdMap)."""
        return {gid: items[-1].queue_id for gid, items in sorted(self.hosted_queues.items())
                if items and items[-1].bname == self.bname}

    def as_info(self) -> TopicQueueMappingInfo:
        """What the broker registers (RocketMQ cloneAsMappingInfo)."""
        return TopicQueueMappingInfo(topic=self.topic, scope=self.scope, total_queues=self.total_queues,
                                     bname=self.bname, epoch=self.epoch, dirty=self.dirty,
                                     curr_id_map=self.leader_ids())

    def leader_item(self, global_id: int) -> LogicQueueMappingItem | None:
        items = self.hosted_queues.get(global_id)
        return items[-1] if items else None

    def max_static_offset(self, global_id: int) -> int:
        """RocketMQ computeMaxOffsetFromMapping: -1 for a queue not hosted here."""
        item = self.leader_item(global_id)
        return -1 if item is None else item.max_static_offset()

    def as_physical(self, global_id: int) -> bool:
        """True when the logic queue is its one physical queue (a single item from offset 0)."""
        items = self.hosted_queues.get(global_id)
        return items is None or (len(items) == 1 and items[0].logic_offset == 0)


def check_item_offsets(items: list[LogicQueueMappingItem]) -> str | None:
    """Why a logic queue's items are out of order (RocketMQ checkLogicQueueMappingItemOffset),
    or None: generations and logic offsets rise from item to item."""
    last_gen = last_offset = -1
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if item.start_offset < 0 or item.gen < 0 or item.queue_id < 0:
            return f"negative gen, queue id or start offset in {item}"
        if i < len(items) - 1 and item.logic_offset < 0:
            return f"an item before the leader has a negative logic offset: {item}"
        if last_gen != -1 and item.gen >= last_gen:
            return "the items' gen does not increase"
        if item.end_offset != -1 and item.end_offset < item.start_offset:
            return f"end offset below start offset in {item}"
        if last_offset != -1 and item.logic_offset != -1 and (
                item.logic_offset >= last_offset or item.max_static_offset() >= last_offset):
            return "the items' logic offsets do not increase"
        last_gen, last_offset = item.gen, item.logic_offset
    return None


def find_item(items: list[LogicQueueMappingItem], static_offset: int,
              ignore_negative: bool = False) -> LogicQueueMappingItem | None:
    """The item holding logic offset ``static_offset`` (RocketMQ findLogicQueueMappingItem):
    the last item whose logic offset is at or below it, else the first one."""
    for item in reversed(items):
        if ignore_negative and item.logic_offset < 0:
            continue
        if static_offset >= item.logic_offset:
            return item
    for item in items:  # out of range: the first one
        if not (ignore_negative and item.logic_offset < 0):
            return item
    return None


def find_next(items: list[LogicQueueMappingItem], current: LogicQueueMappingItem,
              ignore_negative: bool = False) -> LogicQueueMappingItem | None:
    """The item after ``current`` (same gen), None at the leader (RocketMQ findNext)."""
    for i, item in enumerate(items):
        if ignore_negative and item.logic_offset < 0:
            continue
        if item.gen == current.gen:
            if i == len(items) - 1:
                return None
            after = items[i + 1]
            return None if ignore_negative and after.logic_offset < 0 else after
    return None
