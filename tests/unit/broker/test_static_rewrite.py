"""The static topic request rewriting (bolide.broker.static_rewrite) over multi-item mappings,
through the offset translation of bolide.protocol.bodies.static_topic."""

from __future__ import annotations

import asyncio

from bolide.broker import static_rewrite as sr
from bolide.protocol.bodies.static_topic import LogicQueueMappingItem, TopicQueueMappingDetail
from bolide.protocol.codes import ResponseCode

HERE, OTHER, TOPIC = "broker-a", "broker-b", "ST"
# logic queue 0: physical queue 0 [0, 10) held logic offsets 0..9, physical queue 1 from 5 on
# holds logic offsets 10.. (the leader)
OLD = LogicQueueMappingItem(gen=0, queue_id=0, bname=HERE, logic_offset=0, start_offset=0, end_offset=10)
LEADER = LogicQueueMappingItem(gen=1, queue_id=1, bname=HERE, logic_offset=10, start_offset=5)


def detail(**queues: list[LogicQueueMappingItem]) -> TopicQueueMappingDetail:
    return TopicQueueMappingDetail(topic=TOPIC, total_queues=len(queues), bname=HERE,
                                   hosted_queues={int(k[1:]): v for k, v in queues.items()})


def queue(items: list[LogicQueueMappingItem]) -> sr.LogicQueue:
    lq = sr.logic_queue({TOPIC: detail(q0=items)}, TOPIC, 0, {})
    assert lq is not None
    return lq


def test_which_requests_are_rewritten() -> None:
    table = {TOPIC: detail(q0=[OLD, LEADER], q3=[LEADER])}
    assert sr.logic_queue({}, TOPIC, 0, {}) is None
    assert sr.logic_queue(table, "Plain", 0, {}) is None
    assert sr.logic_queue(table, TOPIC, 0, {"lo": "false"}) is None  # a forwarded request
    lq = sr.logic_queue(table, TOPIC, 0, {"lo": "true", "bname": "__syslo__global__"})
    assert lq is not None and lq.global_id == 0 and lq.leader == LEADER
    assert sr.logic_queue(table, TOPIC, -1, {}, select_one=True).global_id == 0  # type: ignore[union-attr]
    unknown = sr.logic_queue(table, TOPIC, 7, {})
    assert unknown is not None and sr.send_queue(unknown) == (
        ResponseCode.NOT_LEADER_FOR_QUEUE,
        f"{TOPIC}-7 does not exit in request process of current broker {HERE}")


def test_sends_go_to_the_leader_and_answer_logic_offsets() -> None:
    lq = queue([OLD, LEADER])
    assert sr.send_queue(lq) == 1
    assert sr.send_offset(lq, 7) == 12
    assert sr.send_offset(lq, 2) == 10  # below the item's start: clamped


def test_pull_requests_read_the_item_holding_the_offset() -> None:
    lq = queue([OLD, LEADER])
    assert sr.pull_request(lq, 3, 32) == sr.PullPlan(OLD, 0, 3, 10)  # no more than the item holds
    assert sr.pull_request(lq, 12, 32) == sr.PullPlan(LEADER, 1, 7, 32)


def test_pull_responses_translate_back() -> None:
    lq = queue([OLD, LEADER])
    ok = ResponseCode.SUCCESS
    # the old item: offsets as logic ones, the max the whole queue's
    assert sr.pull_response(lq, OLD, 3, ok, 8, 0, 10) == (ok, 8, 0, 10, 0)
    # read to its end: move on to the leader's start (logic 10), offset delta 10 - 5
    assert sr.pull_response(lq, OLD, 10, ResponseCode.PULL_NOT_FOUND, 10, 0, 10) == (
        ResponseCode.PULL_RETRY_IMMEDIATELY, 10, 10, 10, 5)
    # the leader: physical 7..9 are logic 12..14
    assert sr.pull_response(lq, LEADER, 7, ok, 9, 0, 9) == (ok, 14, 10, 14, 5)
    # below the leader's physical min: retry from it
    assert sr.pull_response(lq, LEADER, 3, ResponseCode.PULL_OFFSET_MOVED, 3, 5, 9) == (
        ResponseCode.PULL_RETRY_IMMEDIATELY, 10, 10, 14, 5)
    # past the end of a single item queue: RocketMQ answers PULL_NOT_FOUND at the max
    single = queue([LogicQueueMappingItem(gen=0, queue_id=2, bname=HERE, logic_offset=100)])
    assert sr.pull_response(single, single.items[0], 9, ResponseCode.PULL_OFFSET_MOVED, 4, 0, 4) == (
        ResponseCode.PULL_NOT_FOUND, 104, 100, 104, 100)


def asks(table: dict[int, int]) -> sr.Ask:
    """An item reader answering from ``table`` by the item's queue id."""
    async def ask(item: LogicQueueMappingItem) -> int | None:
        return table.get(item.queue_id)
    return ask


def test_consumer_offsets() -> None:
    lq = queue([OLD, LEADER])
    assert sr.commit_offset(lq, 12) == (LEADER, 7)
    assert sr.commit_offset(lq, 4) == (OLD, 4)
    assert asyncio.run(sr.query_offset(lq, asks({1: 7, 0: 4}))) == 12  # the leader's first
    assert asyncio.run(sr.query_offset(lq, asks({0: 4}))) == 4
    assert asyncio.run(sr.query_offset(lq, asks({}))) is None
    single = queue([LogicQueueMappingItem(gen=0, queue_id=3, bname=HERE, logic_offset=0)])
    assert asyncio.run(sr.query_offset(single, asks({3: 6}))) == 6
    assert sr.commit_offset(single, 6) == (single.items[0], 6)


def test_queue_offsets_and_times() -> None:
    lq = queue([OLD, LEADER])
    assert sr.last_item(lq) == LEADER and LEADER.static_offset_strictly(9) == 14
    assert sr.first_item(lq) == OLD
    assert asyncio.run(sr.search_offset(lq, asks({0: 4, 1: 7}))) == 4
    # nothing past the old item's start: the leader's
    assert asyncio.run(sr.search_offset(lq, asks({0: 0, 1: 7}))) == 12
    # found at or past the old item's decided end: not in it, the leader's
    assert asyncio.run(sr.search_offset(lq, asks({0: 10, 1: 8}))) == 13


def test_another_leader_is_refused_naming_it() -> None:
    moved = LogicQueueMappingItem(gen=1, queue_id=0, bname=OTHER, logic_offset=10)
    lq = queue([OLD, moved])
    for answer in (sr.send_queue(lq), sr.pull_request(lq, 12, 32), sr.commit_offset(lq, 3),
                   asyncio.run(sr.query_offset(lq, asks({}))), sr.last_item(lq), sr.first_item(lq),
                   asyncio.run(sr.search_offset(lq, asks({})))):
        assert isinstance(answer, sr.Refusal), answer
        assert answer.code == ResponseCode.NOT_LEADER_FOR_QUEUE and OTHER in answer.remark


def test_offsets_on_another_broker_name_its_item() -> None:
    """An item on another broker (a queue remapped from there) is named for the processors to
    forward to; the queue's own leader item is read here."""
    gone = LogicQueueMappingItem(gen=0, queue_id=4, bname=OTHER, logic_offset=0, start_offset=0,
                                 end_offset=10)
    lq = queue([gone, LEADER])
    plan = sr.pull_request(lq, 3, 32)
    assert plan == sr.PullPlan(gone, 4, 3, 10) and not lq.is_local(gone)
    assert sr.pull_request(lq, 12, 32) == sr.PullPlan(LEADER, 1, 7, 32) and lq.is_local(LEADER)
    assert sr.first_item(lq) == gone and sr.last_item(lq) == LEADER
    assert sr.commit_offset(lq, 3) == (gone, 3)
    asked: list[str] = []

    async def ask(item: LogicQueueMappingItem) -> int | None:
        asked.append(item.bname)
        return {OTHER: 5}.get(item.bname)

    assert asyncio.run(sr.query_offset(lq, ask)) == 5 and asked == [HERE, OTHER]
