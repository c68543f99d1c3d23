"""The static topic request rewriting (bolide.broker.static_rewrite) over multi-item mappings,
through the offset translation of bolide.protocol.bodies.static_topic."""

from __future__ import annotations

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


def test_consumer_offsets() -> None:
    lq = queue([OLD, LEADER])
    assert sr.commit_offset(lq, 12) == (1, 7)
    assert sr.commit_offset(lq, 4) == (0, 4)
    assert sr.query_offset(lq, {1: 7, 0: 4}.get) == 12  # the leader's first
    assert sr.query_offset(lq, {0: 4}.get) == 4
    assert sr.query_offset(lq, {}.get) is None
    single = queue([LogicQueueMappingItem(gen=0, queue_id=3, bname=HERE, logic_offset=0)])
    assert sr.query_offset(single, {3: 6}.get) == 6 and sr.commit_offset(single, 6) == (3, 6)


def test_queue_offsets_and_times() -> None:
    lq = queue([OLD, LEADER])
    assert sr.max_offset(lq, {1: 9}.__getitem__) == 14
    assert sr.min_offset(lq, {0: 2}.__getitem__) == 2
    assert sr.search_offset(lq, {0: 4, 1: 7}.__getitem__) == 4
    assert sr.search_offset(lq, {0: 0, 1: 7}.__getitem__) == 12  # nothing past the old item's start
    assert sr.earliest_queue(lq) == 0


def test_another_leader_is_refused_naming_it() -> None:
    moved = LogicQueueMappingItem(gen=1, queue_id=0, bname=OTHER, logic_offset=10)
    lq = queue([OLD, moved])
    for answer in (sr.send_queue(lq), sr.pull_request(lq, 12, 32), sr.commit_offset(lq, 3),
                   sr.query_offset(lq, {}.get), sr.max_offset(lq, len), sr.min_offset(lq, len),
                   sr.search_offset(lq, len), sr.earliest_queue(lq)):
        assert isinstance(answer, sr.Refusal), answer
        assert answer.code == ResponseCode.NOT_LEADER_FOR_QUEUE and OTHER in answer.remark


def test_offsets_on_another_broker_are_not_forwarded() -> None:
    gone = LogicQueueMappingItem(gen=0, queue_id=4, bname=OTHER, logic_offset=0, start_offset=0,
                                 end_offset=10)
    lq = queue([gone, LEADER])
    refused = sr.pull_request(lq, 3, 32)
    assert isinstance(refused, sr.Refusal) and refused.code == ResponseCode.SYSTEM_ERROR
    assert OTHER in refused.remark and "forward" in refused.remark
    assert sr.pull_request(lq, 12, 32) == sr.PullPlan(LEADER, 1, 7, 32)
    assert isinstance(sr.min_offset(lq, len), sr.Refusal)
    assert sr.max_offset(lq, {1: 9}.__getitem__) == 14
