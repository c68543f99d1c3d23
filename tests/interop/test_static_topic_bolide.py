"""Static topics (RocketMQ 5's logic queues) created on Bolide by the real mqadmin 5.3.3:
``updateStaticTopic`` stores the mapping in ``config/topicQueueMapping.json``, the broker
registers it, and ``topicRoute``/``topicStatus`` show it as against a RocketMQ broker; a
second ``updateStaticTopic -b`` adds queues, and a restarted broker loads and registers it."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from client_roundtrip import run_driver, stored, unavailable

from bolide.broker.static_topics import StaticTopicMappings
from bolide.client import ConsumeFrom, ConsumeStatus, MessageExt, Producer, PushConsumer
from bolide.common import Message
from bolide.common.fastjson import loads
from bolide.protocol.bodies.static_topic import TopicQueueMappingDetail
from bolide.testing.rocketmq import JAVA_SCENARIOS_MAIN, RocketMQ, RocketMQUnavailable, java_client_command
from bolide.testing.servers import another_broker, running_servers
from conftest import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

TOPIC = "StaticTopicT"
QUEUES = 4
MORE = 6  # the queue count of the second updateStaticTopic


def s_topic_config_queues(route_text: str) -> int:
    """The totalQueues of the one broker in a ``topicRoute`` output."""
    route = loads(route_text[route_text.index("{"):])
    (info,) = route["topicQueueMappingByBroker"].values()
    return int(info["totalQueues"])


def _rmq(tmp_path: Path) -> RocketMQ:
    try:
        return RocketMQ("5.3.3", tmp_path / "mqadmin")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
        raise


def test_update_static_topic_on_bolide(tmp_path: Path) -> None:
    rmq = _rmq(tmp_path)

    async def main() -> tuple[list[str], bytes, dict[str, object]]:
        async with running_servers(tmp_path / "store") as s:
            rmq.namesrv_port = s.namesrv.port
            broker = s.broker.config.broker_name
            first = await asyncio.to_thread(rmq.mqadmin_batch, [
                ["updateStaticTopic", "-t", TOPIC, "-qn", str(QUEUES), "-c", "DefaultCluster"]])
            path = tmp_path / "store" / "config" / "topicQueueMapping.json"
            await wait_until(lambda: path.exists() and TOPIC.encode() in path.read_bytes(), 10)
            await s.broker.registration.wait_pending()
            route = s.namesrv.processor.routes.pick_topic_route_data(TOPIC)
            assert route is not None and route.topic_queue_mapping_by_broker is not None
            rest = await asyncio.to_thread(rmq.mqadmin_batch, [
                ["topicRoute", "-t", TOPIC], ["topicStatus", "-t", TOPIC],
                ["updateStaticTopic", "-t", TOPIC, "-qn", str(MORE), "-b", broker],
                ["topicRoute", "-t", TOPIC]])
            await wait_until(lambda: b'"totalQueues":%d' % MORE in path.read_bytes(), 10)
            return first + rest, path.read_bytes(), {"broker": broker}

    async def restart() -> tuple[int | None, bool]:
        async with running_servers(tmp_path / "store") as s:  # the mapping is loaded and registered
            detail = s.broker.static_topics.get(TOPIC)
            route = s.namesrv.processor.routes.pick_topic_route_data(TOPIC)
            return (detail.total_queues if detail else None,
                    route is not None and bool(route.topic_queue_mapping_by_broker))

    outputs, stored, info = asyncio.run(main())
    assert asyncio.run(restart()) == (MORE, True)
    log = "\n=====\n".join(outputs)
    broker = info["broker"]
    assert "command failed" not in log and "Exception" not in log, log
    # the file: the wrapper of RocketMQ's TopicQueueMappingManager, re-encoded byte for byte
    mappings = StaticTopicMappings(str(broker), tmp_path / "again.json")
    mappings.path.write_bytes(stored)
    assert mappings.load()
    assert mappings.encode() == stored
    detail = mappings.get(TOPIC)
    assert detail is not None and detail.bname == broker and detail.total_queues == MORE
    assert sorted(detail.hosted_queues) == list(range(MORE))
    for items in detail.hosted_queues.values():
        assert len(items) == 1 and items[0].bname == broker and items[0].logic_offset == 0, items
    assert sorted(i[0].queue_id for i in detail.hosted_queues.values()) == list(range(MORE))
    assert s_topic_config_queues(outputs[4]) == MORE
    # topicRoute prints the route's JSON: the mapping by broker, every logic queue led here
    route = loads(outputs[1][outputs[1].index("{"):])
    by_broker = route["topicQueueMappingByBroker"]
    assert list(by_broker) == [broker], route
    assert by_broker[broker]["totalQueues"] == QUEUES
    assert {int(k) for k in by_broker[broker]["currIdMap"]} == set(range(QUEUES))
    # topicStatus lists the logic queues under the mock broker name
    rows = [line.split() for line in outputs[2].splitlines() if "__syslo__global__" in line]
    assert sorted(int(r[1]) for r in rows) == list(range(QUEUES)), outputs[2]



BASE = 100  # the logic offset the shifted mapping's items start at


def shift_mapping(mappings: StaticTopicMappings, topic: str) -> None:
    """Make the logic queues differ from the physical ones: logic queue g on physical queue
    g+1 (mod QUEUES), logic offset BASE + physical offset."""
    detail = mappings.get(topic)
    assert detail is not None
    shifted = TopicQueueMappingDetail.decode(detail.encode())
    for global_id, items in shifted.hosted_queues.items():
        (item,) = items
        item.queue_id, item.logic_offset = (global_id + 1) % QUEUES, BASE
    shifted.epoch += 1
    mappings.update(shifted, force=True)


def test_java_client_sends_and_consumes_a_static_topic(tmp_path: Path) -> None:
    """The Java 5.3.3 client addresses the logic queues (broker ``__syslo__global__``) of a
    static topic made by updateStaticTopic: sync, async, oneway and batch sends land on the
    physical queues and answer logic offsets; push consumers of a new group start at the
    queues' ends (GET_MAX_OFFSET), receive every message sent then, commit their offsets
    (UPDATE_CONSUMER_OFFSET) and, started again, resume from them (QUERY_CONSUMER_OFFSET)."""
    rmq = _rmq(tmp_path)
    try:
        java = java_client_command("5.3.3", home=tmp_path / "jhome", main=JAVA_SCENARIOS_MAIN)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
        raise
    topic, group, n = "StaticJava", "static_java_cg", 4

    async def main() -> tuple[list[list[str]], ...]:
        async with running_servers(tmp_path / "store") as s:
            rmq.namesrv_port = s.namesrv.port
            await asyncio.to_thread(rmq.mqadmin_batch, [
                ["updateStaticTopic", "-t", topic, "-qn", str(QUEUES), "-c", "DefaultCluster"]])
            await wait_until(lambda: s.broker.static_topics.get(topic) is not None, 10)
            shift_mapping(s.broker.static_topics, topic)
            await s.broker.registration.wait_pending()
            sent = await run_driver([*java, "send-modes", s.namesrv_addr, topic, str(n)],
                                    tmp_path / "send.log")

            def ends() -> list[int]:
                return [s.broker.store.get_max_offset_in_queue(topic, q) for q in range(QUEUES)]

            await wait_until(lambda: sum(ends()) == 4 * n, 10)
            first = await run_driver([*java, "group", s.namesrv_addr, topic, group, "CLUSTERING",
                                      str(n), "60"], tmp_path / "group1.log")
            await wait_until(lambda: [s.broker.offsets.query(group, topic, q)
                                      for q in range(QUEUES)] == ends(), 10)
            committed = [[str(s.broker.offsets.query(group, topic, q)) for q in range(QUEUES)],
                         [str(end) for end in ends()]]
            async with Producer(s.namesrv_addr, "static_py_pg") as producer:
                for i in range(n):  # sent while no consumer runs
                    await producer.send(Message(topic, f"py-{i}".encode()))
            second = await run_driver([*java, "group", s.namesrv_addr, topic, group, "CLUSTERING",
                                       str(2 * n), "60"], tmp_path / "group2.log")
            stores = [[m.properties["UNIQ_KEY"], str(m.queue_id), str(m.queue_offset)]
                      for m in stored(s, topic)]
            return sent, first, committed, second, stores

    sent, first, committed, second, stores = asyncio.run(main())
    # sends: every mode SEND_OK on a logic queue, each queue's offsets counting from 0
    assert [f[2] for f in sent] == ["SEND_OK"] * (2 * n + 1), sent
    offsets: dict[int, list[int]] = {}
    for f in sent:
        offsets.setdefault(int(f[4]), []).append(int(f[5]))
    assert set(offsets) <= set(range(QUEUES)) and all(min(o) >= BASE for o in offsets.values())
    where = {uniq: (int(q), int(o)) for uniq, q, o in stores}
    for f in sent:  # logic queue g, offset o: stored in physical queue g+1, offset o - BASE
        if f[1] != "batch":
            assert where[f[3]] == ((int(f[4]) + 1) % QUEUES, int(f[5]) - BASE), (f, where[f[3]])
    # the new group started at the ends (not the 4n sent before) and got what came after
    got = [f for f in first if f[0] == "MSG"]
    assert {f[2] for f in got} == {f"g-{i}" for i in range(n)}, first
    # its offsets were committed on the physical queues: every queue read to its end
    assert committed[0] == committed[1], committed
    # started again, the group resumed there: it got what was sent while it was away
    again = [f for f in second if f[0] == "MSG"]
    assert {f"py-{i}" for i in range(n)} <= {f[2] for f in again}, second
    assert not {f[3] for f in got} & {f[3] for f in again}, (first, second)


def test_remapped_static_topic_is_read_across_brokers(tmp_path: Path) -> None:
    """mqadmin 5.3.3's ``remappingStaticTopic`` moves a static topic's logic queues from
    broker-a to broker-b: later sends (Java 5.3.3 and Python clients) land on broker-b, and
    push consumers reading from the first offset (Java 5.3.3 and Python) get every message,
    the old ones read by broker-b on broker-a (forwarded physical pulls)."""
    rmq = _rmq(tmp_path)
    try:
        java = java_client_command("5.3.3", home=tmp_path / "jhome", main=JAVA_SCENARIOS_MAIN)
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
        raise
    topic, group, before, after = "StaticMoved", "static_moved_cg", 6, 4 + 3  # send-modes 1, 3 py

    async def main() -> tuple[list[str], list[list[str]], dict[str, int]]:
        async with running_servers(tmp_path / "store") as s, \
                another_broker(s, tmp_path / "store-b") as b:
            rmq.namesrv_port = s.namesrv.port
            a_name, b_name = s.broker.config.broker_name, b.config.broker_name
            outputs = await asyncio.to_thread(rmq.mqadmin_batch, [
                ["updateStaticTopic", "-t", topic, "-qn", "2", "-b", a_name]])
            await wait_until(lambda: s.broker.static_topics.get(topic) is not None, 10)
            await s.broker.registration.wait_pending()
            async with Producer(s.namesrv_addr, "static_moved_pg") as producer:
                for i in range(before):
                    await producer.send(Message(topic, f"old{i}:x".encode()))
            s.broker.store.wait_dispatched()
            outputs += await asyncio.to_thread(rmq.mqadmin_batch, [
                ["remappingStaticTopic", "-t", topic, "-b", b_name]])
            await wait_until(lambda: b.static_topics.get(topic) is not None, 10)
            await s.broker.registration.wait_pending()
            await b.registration.wait_pending()
            # the Java client sends to the logic queues' new leader (one of each send mode)
            sent = await run_driver([*java, "send-modes", s.namesrv_addr, topic, "1"],
                                    tmp_path / "send.log")
            assert [f[2] for f in sent] == ["SEND_OK"] * 3, sent
            async with Producer(s.namesrv_addr, "static_moved_pg2") as producer:
                for i in range(3):  # the Python client's route: the logic queues' leaders
                    result = await producer.send(Message(topic, f"new{i}:x".encode()))
                    assert result.queue.broker_name == "__syslo__global__", result
            await wait_until(lambda: sum(b.store.get_max_offset_in_queue(topic, q)
                                         for q in range(2)) == after, 10)
            stored_on = {"a": sum(s.broker.store.get_max_offset_in_queue(topic, q) for q in range(2)),
                         "b": sum(b.store.get_max_offset_in_queue(topic, q) for q in range(2))}
            got = await run_driver([*java, "digests", s.namesrv_addr, topic, group,
                                    str(before + after), "60"], tmp_path / "digests.log")
            py_got: list[bytes] = []

            def listener(msgs: list[MessageExt], ctx: object) -> ConsumeStatus:
                py_got.extend(m.body for m in msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            consumer = PushConsumer(s.namesrv_addr, "static_moved_py_cg", listener=listener,
                                    consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval_ms=200,
                                    suspend_ms=1000, pull_timeout_ms=3000)
            consumer.subscribe(topic)
            async with consumer:
                await wait_until(lambda: len(set(py_got)) == before + after, 30)
            got.append(["PY", *sorted(b.decode() for b in py_got)])
            return outputs, got, stored_on

    outputs, got, stored_on = asyncio.run(main())
    log = "\n=====\n".join(outputs)
    assert "command failed" not in log and "Exception" not in log, log
    assert stored_on == {"a": before, "b": after}, stored_on
    digests = sorted(f[3] for f in got if f[0] == "MSG")
    bodies = ([f"old{i}:x" for i in range(before)] + [f"new{i}:x" for i in range(3)]
              + [f"{m}-0" for m in ("sync", "async", "oneway", "batch")])
    assert digests == sorted(hashlib.md5(body.encode()).hexdigest() for body in bodies), got
    assert got[-1] == ["PY", *sorted(bodies)], got[-1]
