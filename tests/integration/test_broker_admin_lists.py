"""The broker's RocketMQ 5 batch creation and consumer-group admin codes through the remoting
client and the Admin against an in-process NameServer + Broker: UPDATE_AND_CREATE_TOPIC_LIST,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, QUERY_TOPICS_BY_CONSUMER,
QUERY_SUBSCRIPTION_BY_CONSUMER, QUERY_CONSUME_TIME_SPAN, GET_SUBSCRIPTIONGROUP_CONFIG,
CLONE_GROUP_OFFSET, INVOKE_BROKER_TO_GET_CONSUMER_STATUS (answered by Bolide's consumers) and
SET_COMMITLOG_READ_MODE, with their error answers."""

from __future__ import annotations

import asyncio
import json
import mmap
import time
from pathlib import Path

from click.testing import CliRunner
from test_broker_admin_codes import TOPIC, call, create_topic, dispatched, heartbeat, run, send

from bolide.cli.main import cli
from bolide.client import ConsumeFrom, MessageExt, PushConsumer
from bolide.client.admin import Admin
from bolide.client.errors import MQBrokerError
from bolide.protocol import RemotingCommand, fastjson
from bolide.protocol.bodies.admin import (
    GetConsumerStatusBody,
    QueryConsumeTimeSpanBody,
    QuerySubscriptionResponseBody,
    TopicList,
)
from bolide.protocol.bodies.broker import SubscriptionGroupConfig, TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers.admin import (
    CloneGroupOffsetRequestHeader,
    GetConsumerStatusRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QuerySubscriptionByConsumerRequestHeader,
    QueryTopicsByConsumerRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.store.topic_config import TopicConfigManager as TopicFile
from bolide.testing.servers import Servers
from conftest import run_with_servers, wait_until

TOPIC_LIST = RequestCode.UPDATE_AND_CREATE_TOPIC_LIST
GROUP_LIST = RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST


def topics_body(*entries: object) -> bytes:
    return json.dumps({"topicConfigList": list(entries)}).encode()


def groups_body(*entries: object) -> bytes:
    return json.dumps({"groupConfigList": list(entries)}).encode()


def test_topic_list_creates_registers_and_persists_every_topic_or_none(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        addr, routes = s.broker_addr, s.namesrv.processor.routes
        r = await call(client, addr, TOPIC_LIST, body=topics_body(
            {"topicName": "ListA", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6},
            {"topicName": "ListB", "readQueueNums": 2, "writeQueueNums": 1, "perm": 4, "order": True,
             "attributes": {"+message.type": "FIFO", "+retention.hours": "12"}}))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None), r
        a, b = s.broker.topics.get("ListA"), s.broker.topics.get("ListB")
        assert a is not None and (a.read_queue_nums, a.write_queue_nums, a.perm) == (3, 3, 6)
        assert b is not None and (b.read_queue_nums, b.write_queue_nums, b.perm, b.order) == (2, 1, 4, True)
        assert b.attributes == {"message.type": "FIFO", "retention.hours": "12"}
        assert s.broker.store.topic_retention() == {"ListB": 12.0}  # as updateTopic -a applies it
        await wait_until(lambda: all(routes.pick_topic_route_data(t) is not None for t in ("ListA", "ListB")))
        route = routes.pick_topic_route_data("ListA")
        assert route is not None and route.queue_datas[0].write_queue_nums == 3

        # an unchanged topic keeps the data version; "-key" removes an attribute
        version = s.broker.topics.data_version.counter
        r = await call(client, addr, TOPIC_LIST, body=topics_body(
            {"topicName": "ListA", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6}))
        assert r.code == ResponseCode.SUCCESS and s.broker.topics.data_version.counter == version
        r = await call(client, addr, TOPIC_LIST, body=topics_body(
            {"topicName": "ListB", "readQueueNums": 2, "writeQueueNums": 1, "perm": 4, "order": True,
             "attributes": {"-retention.hours": ""}}))
        assert r.code == ResponseCode.SUCCESS
        assert s.broker.topics.get("ListB").attributes == {"message.type": "FIFO"}  # type: ignore[union-attr]
        assert s.broker.store.topic_retention() == {}

        # a bad entry: nothing of the list changes, the remark names the entry
        bad_lists = [
            ([{"topicName": "ListC"}, {"topicName": "bad topic!"}], "topicConfigList[1] (bad topic!)"),
            ([{"topicName": "ListC"}, {"topicName": "SCHEDULE_TOPIC_XXXX"}], "conflict with system topic"),
            ([{"topicName": "ListC", "readQueueNums": "many"}], "topicConfigList[0] (ListC).readQueueNums"),
            ([{"topicName": "ListC", "writeQueueNums": 100000}], "writeQueueNums is 100000"),
            ([{"topicName": "ListC", "attributes": {"message.type": "FIFO"}}], "'message.type'"),
            ([{"topicName": "ListC", "attributes": {"+message.type": "ODD"}}], "message.type='ODD'"),
            ([{"readQueueNums": 1}], "topicConfigList[0]: the topic is empty"),
            (["ListC"], "expected a TopicConfig object"),
        ]
        for entries, named in bad_lists:
            r = await call(client, addr, TOPIC_LIST, body=topics_body(*entries))
            assert r.code == ResponseCode.INVALID_PARAMETER and named in (r.remark or ""), (entries, r)
        assert s.broker.topics.get("ListC") is None
        for body in (b"not json", b"[]", b'{"topicConfigList": 5}'):
            r = await call(client, addr, TOPIC_LIST, body=body)
            assert r.code == ResponseCode.SYSTEM_ERROR and "topicConfigList" in (r.remark or ""), (body, r)

    run(tmp_path, test)
    saved = TopicFile(tmp_path / "store" / "config" / "topics.json")
    assert saved.load() and saved.get("ListA") is not None and saved.get("ListB") is not None


def test_group_list_creates_every_group_or_none(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        addr, groups = s.broker_addr, s.broker.subscription_groups
        r = await call(client, addr, GROUP_LIST, body=groups_body(
            {"groupName": "lg1", "retryMaxTimes": 3, "consumeEnable": False},
            {"groupName": "lg2", "consumeTimeoutMinute": 20, "consumeMessageOrderly": True}))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None), r
        lg1, lg2 = groups.get("lg1"), groups.get("lg2")
        assert lg1 is not None and (lg1.retry_max_times, lg1.consume_enable) == (3, False)
        assert lg2 is not None and lg2.extra["consumeTimeoutMinute"] == 20  # 5.x fields kept

        bad_lists = [([{"groupName": "lg3"}, {"retryMaxTimes": 1}], "groupConfigList[1] has no groupName"),
                     ([{"groupName": "lg3", "retryMaxTimes": "x"}], "groupConfigList[0].retryMaxTimes"),
                     ([{"groupName": "lg3"}, 7], "groupConfigList[1] is not a JSON object")]
        for entries, named in bad_lists:
            r = await call(client, addr, GROUP_LIST, body=groups_body(*entries))
            assert r.code == ResponseCode.SYSTEM_ERROR and named in (r.remark or ""), (entries, r)
        assert groups.get("lg3") is None
        r = await call(client, addr, GROUP_LIST, body=b'{"groupConfigList": {}}')
        assert r.code == ResponseCode.SYSTEM_ERROR and "not an array" in (r.remark or ""), r

        # the Admin: one request per broker, the groups' unknown fields passed on
        async with Admin(s.namesrv_addr) as admin:
            assert await admin.create_subscription_group_list(
                [SubscriptionGroupConfig(group_name="lg4", retry_max_times=2),
                 {"groupName": "lg5", "groupSysFlag": 1}]) == [addr]
            one = TopicConfig(topic_name="ListD", read_queue_nums=1, write_queue_nums=1)
            assert await admin.create_topic_list([one], broker_addr=addr) == [addr]
            try:
                await admin.create_topic_list([TopicConfig(topic_name="bad topic!")])
                raise AssertionError("a bad topic name was accepted")
            except MQBrokerError as exc:
                assert exc.code == ResponseCode.INVALID_PARAMETER and "bad topic!" in str(exc)
        assert groups.get("lg4").retry_max_times == 2  # type: ignore[union-attr]
        assert groups.get("lg5").extra["groupSysFlag"] == 1  # type: ignore[union-attr]
        assert s.broker.topics.get("ListD") is not None

    run(tmp_path, test)


def test_group_lookups_time_span_and_clone(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        addr, offsets = s.broker_addr, s.broker.offsets
        await create_topic(client, addr, TOPIC, queues=2)
        await create_topic(client, addr, "OtherTopic", queues=1)
        before = int(time.time() * 1000)
        for i in range(4):
            await send(client, addr, i, queue_id=i % 2)
        await dispatched(s)
        offsets.commit("cg", TOPIC, 0, 1)  # consumed 1 of 2 on queue 0, both on queue 1
        offsets.commit("cg", TOPIC, 1, 2)
        offsets.commit("cg", "OtherTopic", 0, 0)

        # QUERY_TOPICS_BY_CONSUMER: the topics with offsets of the group
        by_consumer = RequestCode.QUERY_TOPICS_BY_CONSUMER
        r = await call(client, addr, by_consumer, QueryTopicsByConsumerRequestHeader(group="cg"))
        listed = TopicList.decode(r.body_bytes())
        assert r.code == ResponseCode.SUCCESS and sorted(listed.topic_list) == sorted(["OtherTopic", TOPIC])
        assert listed.broker_addr == addr
        r = await call(client, addr, by_consumer, QueryTopicsByConsumerRequestHeader(group="nope"))
        assert TopicList.decode(r.body_bytes()).topic_list == []

        # QUERY_SUBSCRIPTION_BY_CONSUMER: the online subscription, none for an unknown group
        r = await call(client, addr, RequestCode.HEART_BEAT, body=heartbeat("c@1", "cg", TOPIC).encode())
        assert r.code == ResponseCode.SUCCESS
        for group, topic, expected in (("cg", TOPIC, TOPIC), ("cg", "OtherTopic", None),
                                       ("nope", TOPIC, None)):
            r = await call(client, addr, RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER,
                           QuerySubscriptionByConsumerRequestHeader(group=group, topic=topic))
            sub = QuerySubscriptionResponseBody.decode(r.body_bytes())
            assert r.code == ResponseCode.SUCCESS and (sub.group, sub.topic) == (group, topic)
            assert (sub.subscription_data.topic if sub.subscription_data else None) == expected

        # QUERY_CONSUME_TIME_SPAN: store times per write queue, the wait of the next message
        r = await call(client, addr, RequestCode.QUERY_CONSUME_TIME_SPAN,
                       QueryConsumeTimeSpanRequestHeader(topic=TOPIC, group="cg"))
        assert r.code == ResponseCode.SUCCESS, r
        spans = {t.message_queue.queue_id: t  # type: ignore[union-attr]
                 for t in QueryConsumeTimeSpanBody.decode(r.body_bytes()).consume_time_span_set}
        store = s.broker.store
        assert sorted(spans) == [0, 1]
        q0, q1 = spans[0], spans[1]
        assert q0.min_time_stamp == store.get_message_store_timestamp(TOPIC, 0, 0) >= before
        assert q0.max_time_stamp == store.get_message_store_timestamp(TOPIC, 0, 1)
        assert q0.consume_time_stamp == q0.min_time_stamp and q0.delay_time >= 0
        assert q1.consume_time_stamp == q1.max_time_stamp and q1.delay_time == 0  # all consumed
        assert q0.min_time_stamp_str and q0.min_time_stamp_str[10] == "#"
        assert b'"consumeTimeSpanSet":[' in r.body_bytes() and b'"minTimeStampStr"' in r.body_bytes()
        r = await call(client, addr, RequestCode.QUERY_CONSUME_TIME_SPAN,
                       QueryConsumeTimeSpanRequestHeader(topic="Nope", group="cg"))
        assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")

        # GET_SUBSCRIPTIONGROUP_CONFIG: the group's settings, SUBSCRIPTION_GROUP_NOT_EXIST when unknown
        r = await call(client, addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                       GetSubscriptionGroupConfigRequestHeader(group="cg"))
        assert r.code == ResponseCode.SUCCESS and fastjson.loads(r.body_bytes())["groupName"] == "cg"
        r = await call(client, addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                       GetSubscriptionGroupConfigRequestHeader(group="nope"))
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "nope" in (r.remark or "")

        # CLONE_GROUP_OFFSET: one topic; not a topic cg's online consumer leaves out unless offline
        async def clone(dest: str, topic: str | None, offline: bool = False) -> str | None:
            header = CloneGroupOffsetRequestHeader(src_group="cg", dest_group=dest, topic=topic,
                                                   offline=offline)
            r = await call(client, addr, RequestCode.CLONE_GROUP_OFFSET, header)
            assert r.code == ResponseCode.SUCCESS, r
            return r.remark

        assert await clone("cg2", TOPIC) is None
        assert offsets.query_all("cg2", TOPIC) == {0: 1, 1: 2}
        assert "not subscribed by cg's online consumers" in (await clone("cg2", "OtherTopic") or "")
        assert offsets.query_all("cg2", "OtherTopic") == {}
        assert await clone("cg2", "OtherTopic", offline=True) is None
        assert offsets.query_all("cg2", "OtherTopic") == {0: 0}
        assert await clone("cg3", None, offline=True) is None  # every topic of cg
        assert offsets.topics_of_group("cg3") == {TOPIC, "OtherTopic"}
        assert "not on this broker" in (await clone("cg4", "Nope", offline=True) or "")
        r = await call(client, addr, RequestCode.CLONE_GROUP_OFFSET,
                       CloneGroupOffsetRequestHeader(src_group="nope", dest_group="cg5", topic=TOPIC))
        assert r.code == ResponseCode.SUCCESS and "nope has no offsets" in (r.remark or "")
        assert offsets.topics_of_group("cg4") == offsets.topics_of_group("cg5") == set()

    run(tmp_path, test)


def test_consumer_status_gathers_the_online_consumers_offsets(tmp_path: Path) -> None:
    async def test(s: Servers) -> None:
        async with RemotingClient() as client:
            addr = s.broker_addr
            await create_topic(client, addr, TOPIC, queues=2)
            for i in range(6):
                await send(client, addr, i, queue_id=i % 2)
            seen: list[MessageExt] = []

            async def listener(msgs: list[MessageExt], ctx: object) -> None:
                seen.extend(msgs)

            consumer = PushConsumer(s.namesrv_addr, "status-cg", listener=listener,
                                    consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval_ms=200)
            consumer.subscribe(TOPIC)
            async with consumer:
                def mine() -> list[int]:
                    return sorted(o for mq, o in consumer.offsets.table.items() if mq.topic == TOPIC)

                await wait_until(lambda: len(seen) == 6 and mine() == [3, 3])
                header = GetConsumerStatusRequestHeader(topic=TOPIC, group="status-cg")
                r = await call(client, addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, header)
                assert r.code == ResponseCode.SUCCESS, r
                table = GetConsumerStatusBody.decode(r.body_bytes()).consumer_table
                assert list(table) == [consumer.client_id]
                assert {mq.queue_id: o for mq, o in table[consumer.client_id].items()} == {0: 3, 1: 3}
                assert all(mq.topic == TOPIC and mq.broker_name == "broker-a"
                           for mq in table[consumer.client_id])

                # the Admin's and the CLI's getConsumerStatus
                async with Admin(s.namesrv_addr) as admin:
                    by_client = await admin.consumer_offsets_by_client(TOPIC, "status-cg")
                    assert by_client == table
                    assert await admin.consumer_offsets_by_client(TOPIC, "status-cg", "10.0.0.9@x") == {}
                result = await asyncio.to_thread(CliRunner().invoke, cli, [
                    "admin", "getConsumerStatus", "-n", s.namesrv_addr, "-g", "status-cg", "-t", TOPIC,
                    "-O", "json"])
                assert result.exit_code == 0, result.output
                assert [(r["clientId"], r["queueId"], r["offset"]) for r in json.loads(result.stdout)] == [
                    (consumer.client_id, 0, 3), (consumer.client_id, 1, 3)]

                for client_addr, expected in ((consumer.client_id, [consumer.client_id]), ("10.0.0.9@x", [])):
                    one = GetConsumerStatusRequestHeader(topic=TOPIC, group="status-cg",
                                                         client_addr=client_addr)
                    r = await call(client, addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, one)
                    assert r.code == ResponseCode.SUCCESS
                    assert list(GetConsumerStatusBody.decode(r.body_bytes()).consumer_table) == expected

            await wait_until(lambda: not s.broker.clients.consumer_ids("status-cg"))
            r = await call(client, addr, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                           GetConsumerStatusRequestHeader(topic=TOPIC, group="status-cg"))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                          "No Any Consumer online in the consumer group: [status-cg]")
            offline = await asyncio.to_thread(CliRunner().invoke, cli, [
                "admin", "getConsumerStatus", "-n", s.namesrv_addr, "-g", "status-cg", "-t", TOPIC])
            assert offline.exit_code != 0 and "No Any Consumer online" in offline.output
            assert "consumerConnection -g status-cg" in offline.output

    run_with_servers(tmp_path, test)


def test_commit_log_read_mode(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        addr, store = s.broker_addr, s.broker.store

        async def set_mode(ext: dict[str, str]) -> tuple[int, str | None]:
            r = await client.invoke(addr, RemotingCommand.request(RequestCode.SET_COMMITLOG_READ_MODE,
                                                                  ext_fields=ext))
            return r.code, r.remark

        assert store.commit_log_read_ahead
        await create_topic(client, addr, TOPIC)
        await send(client, addr, 0)  # a CommitLog segment exists
        assert await set_mode({"READ_AHEAD_MODE": "1"}) == (ResponseCode.SUCCESS,
                                                            "set commitlog readahead mode success, mode: 1")
        assert not store.commit_log_read_ahead
        assert store.commit_log.files.read_advice == mmap.MADV_RANDOM
        assert await set_mode({"READ_AHEAD_MODE": "0"}) == (ResponseCode.SUCCESS,
                                                            "set commitlog readahead mode success, mode: 0")
        assert store.commit_log_read_ahead
        code, remark = await set_mode({"READ_AHEAD_MODE": "3"})
        assert code == ResponseCode.INVALID_PARAMETER and "param value error" in (remark or "")
        code, remark = await set_mode({"READ_AHEAD_MODE": "fast"})
        assert code == ResponseCode.SYSTEM_ERROR and "'fast' is not a number" in (remark or "")
        assert await set_mode({}) == (ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode param error")
        assert store.commit_log_read_ahead

    run(tmp_path, test)

