"""The broker keeps its topic configs and consumer offsets in ``<store>/config/`` across a
clean restart, in the files RocketMQ writes, and reads the files a RocketMQ broker wrote."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from bolide.broker import BrokerConfig
from bolide.broker.persistence import ConfigPersister
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import TopicConfigSerializeWrapper, TopicRouteData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    GetRouteInfoRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.testing.servers import Servers, running_servers

TIMEOUT = 10.0

JAVA_TOPICS = (
    '{\n\t"dataVersion":{\n\t\t"counter":2,\n\t\t"timestamp":1583919392097\n\t},\n'
    '\t"topicConfigTable":{\n'
    '\t\t"TopicTest":{\n\t\t\t"order":false,\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":4,\n'
    '\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"TopicTest",\n'
    '\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n\t\t}\n\t}\n}'
)
JAVA_OFFSETS = ('{\n\t"offsetTable":{\n'
                '\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:249\n\t\t}\n\t}\n}')


async def commit(client: RemotingClient, s: Servers, topic: str, group: str, queue_id: int,
                 offset: int) -> None:
    header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                               commit_offset=offset)
    r = await client.invoke(s.broker_addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                                   header))
    assert r.code == ResponseCode.SUCCESS, r


async def query(client: RemotingClient, s: Servers, topic: str, group: str, queue_id: int) -> RemotingCommand:
    header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id)
    return await client.invoke(s.broker_addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET,
                                                                      header))


async def all_topics(client: RemotingClient, s: Servers) -> TopicConfigSerializeWrapper:
    r = await client.invoke(s.broker_addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert r.code == ResponseCode.SUCCESS, r
    return TopicConfigSerializeWrapper.decode(r.body_bytes())


def test_topics_and_offsets_survive_a_clean_restart(tmp_path: Path) -> None:
    store = tmp_path / "store"

    async def first_run() -> None:
        async with running_servers(store) as s, RemotingClient() as client:
            header = CreateTopicRequestHeader(topic="Kept", default_topic="TBW102", read_queue_nums=3,
                                              write_queue_nums=3, perm=6)
            r = await client.invoke(s.broker_addr, RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, header))
            assert r.code == ResponseCode.SUCCESS, r
            await commit(client, s, "Kept", "cg", 0, 7)
            await commit(client, s, "Kept", "cg", 2, 11)
            await commit(client, s, "Kept", "other", 1, 3)

    async def second_run() -> None:
        async with running_servers(store) as s, RemotingClient() as client:
            r = await query(client, s, "Kept", "cg", 0)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "7"
            r = await query(client, s, "Kept", "cg", 2)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "11"
            r = await query(client, s, "Kept", "other", 1)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "3"
            assert (await query(client, s, "Kept", "cg", 1)).code == ResponseCode.QUERY_NOT_FOUND
            wrapper = await all_topics(client, s)
            kept = wrapper.topic_config_table["Kept"]
            assert (kept.read_queue_nums, kept.write_queue_nums, kept.perm) == (3, 3, 6)
            assert "TBW102" in wrapper.topic_config_table and "SELF_TEST_TOPIC" in wrapper.topic_config_table
            route = await client.invoke(s.namesrv_addr, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="Kept")))
            assert route.code == ResponseCode.SUCCESS, route
            assert TopicRouteData.decode(route.body_bytes()).queue_datas[0].write_queue_nums == 3

    asyncio.run(asyncio.wait_for(first_run(), TIMEOUT))
    offsets = (store / "config" / "consumerOffset.json").read_text()
    assert offsets.startswith('{\n\t"offsetTable":{\n')
    assert '\t\t"Kept@cg":{0:7,2:11\n\t\t}' in offsets and '"Kept@other":{1:3\n' in offsets
    topics = (store / "config" / "topics.json").read_text()
    assert topics.startswith('{\n\t"dataVersion":{\n\t\t"counter":')
    assert ('\t\t"Kept":{\n\t\t\t"order":false,\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":3,\n'
            '\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"Kept",\n'
            '\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":3\n\t\t}') in topics
    asyncio.run(asyncio.wait_for(second_run(), TIMEOUT))


def test_loads_the_files_a_rocketmq_broker_wrote(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    (store / "config" / "topics.json").write_text(JAVA_TOPICS)
    (store / "config" / "consumerOffset.json").write_text(JAVA_OFFSETS)

    async def main() -> None:
        async with running_servers(store) as s, RemotingClient() as client:
            wrapper = await all_topics(client, s)
            assert wrapper.topic_config_table["TopicTest"].write_queue_nums == 4
            assert "TBW102" in wrapper.topic_config_table  # built-in topics are added
            assert wrapper.data_version.counter == 2  # the file's version, as RocketMQ keeps it
            r = await query(client, s, "TopicTest", "please_rename_unique_group_name_4", 1)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "249"
            route = await client.invoke(s.namesrv_addr, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="TopicTest")))
            assert route.code == ResponseCode.SUCCESS, route

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    offsets = (store / "config" / "consumerOffset.json").read_text()
    assert '"TopicTest@please_rename_unique_group_name_4":{0:250,1:249\n' in offsets
    assert (store / "config" / "consumerOffset.json.bak").read_text() == JAVA_OFFSETS


def test_flush_consumer_offset_interval_is_a_broker_conf_key(tmp_path: Path) -> None:
    assert BrokerConfig().flush_consumer_offset_interval_ms == 5000
    conf = tmp_path / "broker.conf"
    conf.write_text("flushConsumerOffsetInterval=1000\n")
    assert BrokerConfig.from_properties(conf).flush_consumer_offset_interval_ms == 1000


def test_persister_writes_periodically_on_request_and_at_stop() -> None:
    calls: list[str] = []
    written = threading.Event()

    def persist() -> None:
        calls.append("persist")
        written.set()

    periodic = ConfigPersister("test-periodic", persist, interval_s=0.001)
    periodic.start()
    try:
        assert written.wait(TIMEOUT)  # without any request
    finally:
        periodic.stop()
    assert not periodic._thread.is_alive()

    calls.clear()
    written.clear()
    on_request = ConfigPersister("test-on-request", persist)
    on_request.start()
    on_request.request()
    assert written.wait(TIMEOUT)
    before_stop = len(calls)
    on_request.stop()
    assert len(calls) == before_stop + 1  # one last write at stop
