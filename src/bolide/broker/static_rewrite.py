"""Serving a static topic's logic queues (RIP-21) on the broker that leads them, as RocketMQ 5's
TopicQueueMappingManager.buildTopicQueueMappingContext and the processors'
rewriteRequestForStaticTopic / rewriteResponseForStaticTopic do.

A client addresses a static topic's queue by its global id (MessageQueue broker
``__syslo__global__``) and logic offsets; the broker maps them onto the physical queue and
offsets of the mapping item that holds them and back. A request is rewritten when its topic is
static here and it does not say ``lo=false`` (a forwarded, physical request). Requests for a
logic queue led by another broker are refused with RocketMQ's answer (NOT_LEADER_FOR_QUEUE).
Offsets held by an item on another broker (a queue remapped from there) are read there: these
functions name the item, and the processors read it locally or forward the physical request
(:mod:`bolide.broker.static_forward`).

Pure functions over the mapping; the processors read and write the store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from bolide.protocol.bodies.static_topic import (
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    find_item,
    find_next,
)
from bolide.protocol.codes import ResponseCode

_MAX_LONG = 2**63 - 1


class Refusal(NamedTuple):
    """A rewritten request's answer instead of serving it."""

    code: int
    remark: str


@dataclass(slots=True)
class LogicQueue:
    """A request's logic queue (RocketMQ TopicQueueMappingContext)."""

    topic: str
    global_id: int
    detail: TopicQueueMappingDetail
    items: list[LogicQueueMappingItem]

    @property
    def leader(self) -> LogicQueueMappingItem | None:
        return self.items[-1] if self.items else None

    def not_leader(self, what: str = "does not exit in") -> Refusal | None:
        """RocketMQ's refusal when this broker does not lead the queue, naming the leader."""
        leader = self.leader
        if leader is not None and leader.bname == self.detail.bname:
            return None
        where = f"; its leader is broker {leader.bname}" if leader is not None else ""
        return Refusal(ResponseCode.NOT_LEADER_FOR_QUEUE,
                       f"{self.topic}-{self.global_id} {what} request process of current broker "
                       f"{self.detail.bname}{where}")

    def is_local(self, item: LogicQueueMappingItem) -> bool:
        """Whether ``item``'s physical queue is on this broker (else it is read over there)."""
        return item.bname == self.detail.bname


def logic_queue(table: Mapping[str, TopicQueueMappingDetail], topic: str, queue_id: int,
                ext_fields: Mapping[str, str], *, select_one: bool = False) -> LogicQueue | None:
    """The logic queue a request addresses, or None to serve it as it is (the topic is not
    static here, or the request says ``lo=false``). With ``select_one`` (sends), a negative
    queue id picks the first hosted logic queue, as RocketMQ does."""
    detail = table.get(topic)
    if detail is None:
        return None
    lo = ext_fields.get("lo")
    if lo is not None and lo.lower() != "true":
        return None
    if queue_id < 0 and select_one and detail.hosted_queues:
        queue_id = next(iter(detail.hosted_queues))
    items = detail.hosted_queues.get(queue_id) if queue_id >= 0 else None
    return LogicQueue(topic, queue_id, detail, items or [])


# -- sends ------------------------------------------------------------------------------------
def _item(lq: LogicQueue, logic_offset: int,
          what: str = "does not exit in") -> LogicQueueMappingItem | Refusal:
    """The item holding ``logic_offset`` when this broker leads the queue."""
    refused = lq.not_leader(what)
    if refused is not None:
        return refused
    item = find_item(lq.items, logic_offset, ignore_negative=True)
    if item is None:
        return Refusal(ResponseCode.SYSTEM_ERROR,
                       f"{lq.topic}-{lq.global_id} has no mapping item with a logic offset")
    return item


def send_queue(lq: LogicQueue) -> int | Refusal:
    """The physical queue a send to the logic queue is stored in."""
    refused = lq.not_leader()
    if refused is not None:
        return refused
    assert lq.leader is not None
    return lq.leader.queue_id


def send_offset(lq: LogicQueue, physical_offset: int) -> int:
    """The logic queue offset a send answers for the physical one it was stored at."""
    assert lq.leader is not None
    return lq.leader.static_offset_loosely(physical_offset)


# -- pulls ------------------------------------------------------------------------------------
class PullPlan(NamedTuple):
    """Where a pull of a logic queue reads: the item, its physical queue and offset, the
    message count (no more than the item holds)."""

    item: LogicQueueMappingItem
    queue_id: int
    queue_offset: int
    max_msg_nums: int


def pull_request(lq: LogicQueue, logic_offset: int, max_msg_nums: int) -> PullPlan | Refusal:
    """The physical read of a pull from ``logic_offset`` (on another broker when the item is)."""
    item = _item(lq, logic_offset, "cannot find mapping item in")
    if isinstance(item, Refusal):
        return item
    if item.end_decided():
        max_msg_nums = min(item.end_offset - item.start_offset, max_msg_nums)
    return PullPlan(item, item.queue_id, item.physical_offset(logic_offset), max_msg_nums)


class PullOffsets(NamedTuple):
    """A pull response's code and offsets, in logic offsets."""

    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    offset_delta: int


def pull_response(lq: LogicQueue, current: LogicQueueMappingItem, request_offset: int, code: int,
                  next_begin: int, min_offset: int, max_offset: int) -> PullOffsets:
    """The pull response for the physical read of ``current`` from ``request_offset``:
    the code (moving on to the next item when this one is read to its end) and the offsets
    as logic offsets (RocketMQ PullMessageProcessor.rewriteResponseForStaticTopic)."""
    leader = lq.leader
    assert leader is not None
    earliest = find_item(lq.items, 0, ignore_negative=True)
    new_code = code
    if code != ResponseCode.SUCCESS:
        revised = False
        if leader.gen == current.gen:
            if request_offset > max_offset:
                if code == ResponseCode.PULL_OFFSET_MOVED:
                    next_begin = max_offset
            elif request_offset < min_offset:
                next_begin, new_code = min_offset, ResponseCode.PULL_RETRY_IMMEDIATELY
        if earliest is not None and earliest.gen == current.gen:
            if request_offset < min_offset:
                next_begin, new_code = min_offset, ResponseCode.PULL_OFFSET_MOVED
            elif request_offset >= max_offset:
                read = current
                current, next_begin, min_offset, max_offset, new_code = _after_item(
                    lq, current, next_begin, min_offset, max_offset)
                revised = current is not read
            else:
                new_code = code
        if (not revised and leader.gen != current.gen
                and (earliest is None or earliest.gen != current.gen)):
            if request_offset < min_offset:
                next_begin, new_code = min_offset, ResponseCode.PULL_RETRY_IMMEDIATELY
            elif request_offset >= max_offset:
                current, next_begin, min_offset, max_offset, new_code = _after_item(
                    lq, current, next_begin, min_offset, max_offset)
            else:
                new_code = code
    if current.end_decided() and next_begin >= current.end_offset:
        next_begin = current.end_offset
    return PullOffsets(
        new_code,
        current.static_offset_strictly(next_begin),
        current.static_offset_strictly(max(current.start_offset, min_offset)),
        max(current.static_offset_strictly(max_offset), lq.detail.max_static_offset(lq.global_id)),
        current.logic_offset - current.start_offset)


def _after_item(lq: LogicQueue, current: LogicQueueMappingItem, next_begin: int, min_offset: int,
                max_offset: int) -> tuple[LogicQueueMappingItem, int, int, int, int]:
    """A pull past ``current``'s end: the next item, its start as next/min/max offset and
    PULL_RETRY_IMMEDIATELY; or ``current`` and the offsets as they were with PULL_NOT_FOUND."""
    after = find_next(lq.items, current, ignore_negative=True)
    if after is None:
        return current, next_begin, min_offset, max_offset, ResponseCode.PULL_NOT_FOUND
    start = after.start_offset
    return after, start, start, start, ResponseCode.PULL_RETRY_IMMEDIATELY


# -- consumer offsets -------------------------------------------------------------------------
Ask = Callable[[LogicQueueMappingItem], Awaitable[int | None]]


async def query_offset(lq: LogicQueue, stored: Ask) -> int | Refusal | None:
    """A group's logic offset from the offsets it committed on the items' physical queues
    (``stored(item)``, None when none), the leader's first; None when there is none."""
    refused = lq.not_leader()
    if refused is not None:
        return refused
    items = lq.items
    if len(items) == 1 and items[0].logic_offset == 0:  # as physical
        offset = await stored(items[0])
        return None if offset is None else items[0].static_offset_strictly(offset)
    for item in reversed(items):
        offset = await stored(item)
        if offset is not None and offset >= 0:
            return item.static_offset_strictly(offset)
    return None


def commit_offset(lq: LogicQueue, logic_offset: int) -> tuple[LogicQueueMappingItem, int] | Refusal:
    """The item and physical offset a group's logic offset is committed as."""
    item = _item(lq, logic_offset)
    if isinstance(item, Refusal):
        return item
    return item, item.physical_offset(logic_offset)


# -- queue offsets and times ------------------------------------------------------------------
def last_item(lq: LogicQueue) -> LogicQueueMappingItem | Refusal:
    """GET_MAX_OFFSET's item: its physical max offset, strictly converted, is the answer."""
    return _item(lq, _MAX_LONG)


def first_item(lq: LogicQueue) -> LogicQueueMappingItem | Refusal:
    """GET_MIN_OFFSET's and GET_EARLIEST_MSG_STORETIME's item: the oldest one (its physical min
    offset, loosely converted, is the min offset)."""
    return _item(lq, 0)


async def search_offset(lq: LogicQueue, search: Ask) -> int | Refusal:
    """SEARCH_OFFSET_BY_TIMESTAMP: the first item (oldest first) whose physical queue finds a
    message past its start for the time (``search(item)``), as a logic offset."""
    refused = lq.not_leader()
    if refused is not None:
        return refused
    offset = -1
    for item in lq.items:
        if not item.logic_offset_decided():
            continue
        found = await search(item)
        offset = -1 if found is None else found
        if offset > 0 and not (item.end_decided() and offset >= item.end_offset):
            return item.static_offset_strictly(offset)
    return offset
