"""The broker's admin, query and statistics codes through the remoting client against an
in-process NameServer + Broker: QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, runtime info, broker config, topic and consume stats, connection
lists, subscription groups and topic deletion, with their error answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bolide.broker import BrokerConfig
from bolide.broker.loop_lag import parse_distribution
from bolide.common.message import MessageExt
from bolide.common.topic import MAX_QUEUE_NUMS
from bolide.errors import ConfigError
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import (
    ConsumerConnection,
    ConsumerData,
    ConsumeStats,
    GroupList,
    HeartbeatData,
    KVTable,
    MessageQueue,
    ProducerConnection,
    ProducerData,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
    TopicStatsTable,
)
from bolide.protocol.bodies.admin import (
    ConsumeStatsList,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    TopicList,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.protocol.headers.admin import (
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ViewMessageRequestHeader,
)
from bolide.protocol.headers.consumer import (
    GetEarliestMsgStoretimeRequestHeader,
    SearchOffsetRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.store.record import decode_record, read_total_size
from bolide.store.topic_config import SubscriptionGroupManager as GroupFile
from bolide.testing.servers import Servers, running_servers
from conftest import wait_until

TIMEOUT = 20.0
TOPIC = "AdminTopic"
UNIQ = "0A0000010000ABCDEF0123456789{:04X}"


def run(tmp_path: Path, test: Callable[[Servers, RemotingClient], Awaitable[None]], *,
        timeout: float = TIMEOUT, **broker_options: object) -> None:
    """``test(servers, client)`` against servers on a fresh store, failed after ``timeout`` s."""
    async def main() -> None:
        async with (running_servers(tmp_path / "store", **broker_options) as servers,
                    RemotingClient() as client):
            await asyncio.wait_for(test(servers, client), timeout)

    asyncio.run(main())


async def call(client: RemotingClient, addr: str, code: int, header: object = None,
               body: bytes = b"") -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, header, body))  # type: ignore[arg-type]


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 2) -> None:
    header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=queues,
                                      write_queue_nums=queues, perm=6)
    r = await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
    assert r.code == ResponseCode.SUCCESS, r


async def send(client: RemotingClient, addr: str, i: int, queue_id: int = 0, topic: str = TOPIC,
               keys: str | None = None) -> None:
    props = f"KEYS\x01{keys or f'key-{i} common'}\x02UNIQ_KEY\x01{UNIQ.format(i)}\x02"
    header = SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102",
                                      default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                      born_timestamp=int(time.time() * 1000), flag=0, properties=props)
    r = await call(client, addr, RequestCode.SEND_MESSAGE_V2, header.to_v2(), b"body-%d" % i)
    assert r.code == ResponseCode.SUCCESS, r


def records(body: bytes) -> list[MessageExt]:
    out, pos = [], 0
    while pos < len(body):
        out.append(decode_record(body, pos))
        pos += read_total_size(body, pos)
    return out


async def dispatched(s: Servers) -> None:
    assert await asyncio.to_thread(s.broker.store.wait_dispatched, 10.0)


def heartbeat(client_id: str, group: str = "cg", topic: str = TOPIC) -> HeartbeatData:
    consumer = ConsumerData(group_name=group, consume_type="CONSUME_PASSIVELY",
                            message_model="CLUSTERING", consume_from_where="CONSUME_FROM_LAST_OFFSET",
                            subscription_data_set=[SubscriptionData.of(topic, "*")])
    return HeartbeatData(client_id=client_id, producer_data_set=[ProducerData(group_name="pg")],
                         consumer_data_set=[consumer])


def test_query_message_by_key_and_unique_key_and_view_by_offset(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, TOPIC)
        for i in range(4):
            await send(client, s.broker_addr, i, queue_id=i % 2)
        await dispatched(s)
        now = int(time.time() * 1000) + 1000

        def query(key: str, unique: bool | None = None, begin: int = 0, end: int = now,
                  topic: str = TOPIC) -> QueryMessageRequestHeader:
            return QueryMessageRequestHeader(topic=topic, key=key, max_num=32, begin_timestamp=begin,
                                             end_timestamp=end, unique_key_query=unique)

        r = await call(client, s.broker_addr, RequestCode.QUERY_MESSAGE, query("common"))
        assert r.code == ResponseCode.SUCCESS, r
        found = records(r.body_bytes())
        assert sorted(m.body for m in found) == [b"body-%d" % i for i in range(4)]
        assert {m.topic for m in found} == {TOPIC}
        assert int(r.ext_fields["indexLastUpdatePhyoffset"]) == max(m.commit_log_offset for m in found)
        assert int(r.ext_fields["indexLastUpdateTimestamp"]) == max(m.store_timestamp for m in found)

        r = await call(client, s.broker_addr, RequestCode.QUERY_MESSAGE, query("key-2"))
        assert [m.body for m in records(r.body_bytes())] == [b"body-2"]

        r = await call(client, s.broker_addr, RequestCode.QUERY_MESSAGE, query(UNIQ.format(3), True))
        assert r.code == ResponseCode.SUCCESS, r
        (msg,) = records(r.body_bytes())
        assert msg.body == b"body-3" and msg.msg_id == UNIQ.format(3)

        for missing in (query("nope"), query("common", begin=now, end=now + 1),
                        query("common", topic="OtherTopic"), query("key-1", True)):
            r = await call(client, s.broker_addr, RequestCode.QUERY_MESSAGE, missing)
            assert r.code == ResponseCode.QUERY_NOT_FOUND, (missing, r)
            assert "indexLastUpdateTimestamp" in r.ext_fields and "indexLastUpdatePhyoffset" in r.ext_fields

        r = await call(client, s.broker_addr, RequestCode.QUERY_MESSAGE, body=b"",
                       header=None)  # no ext fields at all
        assert r.code == ResponseCode.SYSTEM_ERROR and "topic" in (r.remark or "")

        offset = msg.commit_log_offset
        r = await call(client, s.broker_addr, RequestCode.VIEW_MESSAGE_BY_ID,
                       ViewMessageRequestHeader(offset=offset))
        assert r.code == ResponseCode.SUCCESS, r
        (viewed,) = records(r.body_bytes())
        assert (viewed.body, viewed.commit_log_offset, viewed.msg_id) == (b"body-3", offset, UNIQ.format(3))
        for bad in (offset + 1, s.broker.store.max_phy_offset, 1 << 40, -1):
            r = await call(client, s.broker_addr, RequestCode.VIEW_MESSAGE_BY_ID,
                           ViewMessageRequestHeader(offset=bad))
            assert r.code == ResponseCode.SYSTEM_ERROR and str(bad) in (r.remark or ""), (bad, r)

    run(tmp_path, test)


def test_search_offset_by_timestamp_and_earliest_store_time(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, TOPIC, queues=1)
        for i in range(6):
            await send(client, s.broker_addr, i)
            await asyncio.sleep(0.002)  # spread store times over several milliseconds
        await dispatched(s)
        result = s.broker.store.get_message("g", TOPIC, 0, 0, 32)
        times = [m.store_timestamp for m in result.messages]
        assert len(times) == 6

        async def search(ts: int, boundary: str | None = None, queue_id: int = 0) -> int:
            r = await call(client, s.broker_addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                           SearchOffsetRequestHeader(topic=TOPIC, queue_id=queue_id, timestamp=ts,
                                                     boundary_type=boundary))
            assert r.code == ResponseCode.SUCCESS, r
            return int(r.ext_fields["offset"])

        assert await search(0) == 0
        assert await search(times[-1] + 10_000) == 6
        for k, ts in enumerate(times):
            assert await search(ts) == times.index(ts), k  # the first one stored at that time
            later = [j for j, t in enumerate(times) if t <= ts][-1]
            assert await search(ts, "UPPER") == later, k
        assert await search(times[0], queue_id=7) == 0

        async def earliest(queue_id: int) -> int:
            r = await call(client, s.broker_addr, RequestCode.GET_EARLIEST_MSG_STORETIME,
                           GetEarliestMsgStoretimeRequestHeader(topic=TOPIC, queue_id=queue_id))
            assert r.code == ResponseCode.SUCCESS, r
            return int(r.ext_fields["timestamp"])

        assert await earliest(0) == times[0]
        assert await earliest(5) == -1

    run(tmp_path, test)


def test_runtime_info_counts_puts_and_gets_and_broker_config(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, TOPIC, queues=1)
        for i in range(5):
            await send(client, s.broker_addr, i)
        await dispatched(s)
        pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, _pull_header())
        r = await client.invoke(s.broker_addr, pull)
        assert r.code == ResponseCode.SUCCESS and len(records(r.body_bytes())) == 5

        r = await call(client, s.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert r.code == ResponseCode.SUCCESS, r
        table = KVTable.decode(r.body_bytes()).table
        assert table["brokerVersionDesc"] == "V4_9_8" and table["brokerVersion"] == "409"
        assert table["msgPutTotalTodayNow"] == "5" and table["msgGetTotalTodayNow"] == "5"
        assert int(table["msgPutTotalTodayMorning"]) <= 5
        assert float(table["putTps"].split(" ")[0]) > 0
        assert float(table["getTransferedTps"].split(" ")[0]) > 0
        assert table["getTransferredTps"] == table["getTransferedTps"]  # 5.x spelling
        assert len(table["putTps"].split(" ")) == 3
        assert int(table["commitLogMaxOffset"]) == s.broker.store.max_phy_offset
        assert int(table["commitLogMinOffset"]) == 0
        assert abs(int(table["earliestMessageTimeStamp"]) - time.time() * 1000) < 60_000
        assert 0 <= float(table["commitLogDiskRatio"]) <= 1
        # everything dispatched and indexed (wait_dispatched waited for both)
        assert table["dispatchBehindBytes"] == "0" and table["indexBehindBytes"] == "0"
        for key in ("sendThreadPoolQueueSize", "pullThreadPoolQueueSize", "pageCacheLockTimeMills",
                    "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills"):
            assert table[key] == "0", key

        r = await call(client, s.broker_addr, RequestCode.GET_BROKER_CONFIG)
        assert r.code == ResponseCode.SUCCESS, r
        props = dict(line.split("=", 1) for line in r.body_bytes().decode().splitlines())
        assert props["brokerName"] == "broker-a" and props["listenPort"] == str(s.broker.port)
        assert props["longPollingEnable"] == "true" and props["flushDiskType"] == "ASYNC_FLUSH"
        version = r.ext_fields["version"]
        assert '"counter":0' in version

        update = b"longPollingEnable=false\nbrokerPermission=4\n"
        r = await call(client, s.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=update)
        assert r.code == ResponseCode.SUCCESS, r
        assert s.broker.config.long_polling_enable is False and s.broker.config.broker_permission == 4
        r = await call(client, s.broker_addr, RequestCode.GET_BROKER_CONFIG)
        props = dict(line.split("=", 1) for line in r.body_bytes().decode().splitlines())
        assert props["longPollingEnable"] == "false" and '"counter":1' in r.ext_fields["version"]
        header = SendMessageRequestHeader(producer_group="pg", topic=TOPIC, default_topic="TBW102",
                                          default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                          born_timestamp=0, flag=0, properties="")
        r = await call(client, s.broker_addr, RequestCode.SEND_MESSAGE, header, b"x")
        assert r.code == ResponseCode.NO_PERMISSION  # the read-only permission is in force

        for refused in (b"brokerName=other\n", b"noSuchKey=1\n", b"defaultTopicQueueNums=0\n",
                        b"brokerTopicEnable=false\n"):
            r = await call(client, s.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=refused)
            assert r.code == ResponseCode.SYSTEM_ERROR, (refused, r)
        assert s.broker.config.broker_name == "broker-a"
        assert s.broker.config.default_topic_queue_nums == 8 and s.broker.config.broker_topic_enable

    run(tmp_path, test)


def test_runtime_info_reports_how_late_the_event_loop_ran(tmp_path: Path) -> None:
    """A call that blocks the broker's event loop for 120 ms (the broker runs in this test's
    loop) shows as a wake-up 100 to 500 ms late in bolideLoopLagDistribution and in
    bolideLoopLagMaxMs."""
    async def test(s: Servers, client: RemotingClient) -> None:
        monitor = s.broker.loop_lag

        await wait_until(lambda: sum(monitor.counts) > 0, 10)
        time.sleep(0.12)  # the fault injected: the loop is blocked, not waiting for anything
        await wait_until(lambda: monitor.max_ms >= 100, 10)
        r = await call(client, s.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        table = KVTable.decode(r.body_bytes()).table
        assert float(table["bolideLoopLagMaxMs"]) >= 100
        buckets = parse_distribution(table["bolideLoopLagDistribution"])
        assert list(buckets) == ["<=1ms", "1~5ms", "5~10ms", "10~50ms", "50~100ms", "100~500ms",
                                 "500ms~1s", "1s~"]
        assert sum(int(buckets[k]) for k in ("100~500ms", "500ms~1s", "1s~")) >= 1
        assert int(buckets["<=1ms"]) + int(buckets["1~5ms"]) >= 1

    run(tmp_path, test)


def test_runtime_info_reports_table_sizes(tmp_path: Path) -> None:
    """The bolideTable* keys: a pull held on an empty queue counts in HeldPulls, and its
    connection in Connections, until that connection closes."""
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, TOPIC, queues=1)

        async def tables() -> dict[str, int]:
            r = await call(client, s.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
            table = KVTable.decode(r.body_bytes()).table
            return {k.removeprefix("bolideTable"): int(v) for k, v in table.items()
                    if k.startswith("bolideTable")}

        before = await tables()
        assert before["HeldPulls"] == 0 and before["Connections"] >= 1
        assert before["Topics"] >= 1 and before["PopQueues"] == 0 and before["PopLeases"] == 0
        assert {"ClientChannels", "ProducerGroups", "ConsumerGroups", "StatsItems",
                "SubscriptionGroups", "ConsumerOffsets", "PopTimeline", "PopWaiters"} <= set(before)
        async with RemotingClient() as poller:
            header = _pull_header()
            header.sys_flag |= 0x2  # suspend: held until a message comes or 20 s pass
            header.suspend_timeout_millis = 20_000
            pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, header)
            held = asyncio.ensure_future(poller.invoke(s.broker_addr, pull, 30_000))
            await wait_until(lambda: s.broker.pull_holds.held == 1, 10)
            during = await tables()
            assert during["HeldPulls"] == 1 and during["Connections"] == before["Connections"] + 1
        held.cancel()
        await wait_until(lambda: len(s.broker.server.channels) == before["Connections"], 10)
        await wait_until(lambda: s.broker.pull_holds.held == 0, 10)  # not held for a gone client
        after = await tables()
        assert after["Connections"] == before["Connections"] and after["HeldPulls"] == 0

    run(tmp_path, test)


def _pull_header(topic: str = TOPIC, group: str = "cg") -> object:
    from bolide.protocol.headers import PullMessageRequestHeader

    return PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=0, queue_offset=0,
                                    max_msg_nums=32, sys_flag=4, commit_offset=0,
                                    suspend_timeout_millis=0, subscription="*", sub_version=0)


def test_topic_stats_consume_stats_connections_and_consumers_of_topic(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, TOPIC, queues=2)
        for i in range(5):
            await send(client, s.broker_addr, i, queue_id=0 if i < 3 else 1)
        await dispatched(s)
        name = s.broker.config.broker_name
        mq0, mq1 = (MessageQueue(topic=TOPIC, broker_name=name, queue_id=q) for q in (0, 1))

        r = await call(client, s.broker_addr, RequestCode.GET_TOPIC_STATS_INFO,
                       GetTopicStatsInfoRequestHeader(topic=TOPIC))
        assert r.code == ResponseCode.SUCCESS, r
        stats = TopicStatsTable.decode(r.body_bytes()).offset_table
        assert set(stats) == {mq0, mq1}
        assert (stats[mq0].min_offset, stats[mq0].max_offset) == (0, 3)
        assert stats[mq1].max_offset == 2
        last0 = s.broker.store.get_message("g", TOPIC, 0, 2, 1).messages[0].store_timestamp
        assert stats[mq0].last_update_timestamp == last0
        r = await call(client, s.broker_addr, RequestCode.GET_TOPIC_STATS_INFO,
                       GetTopicStatsInfoRequestHeader(topic="NoSuchTopic"))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST

        # connection lists: unknown groups first
        r = await call(client, s.broker_addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                       GetConsumerConnectionListRequestHeader(consumer_group="cg"))
        assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
        r = await call(client, s.broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                       GetProducerConnectionListRequestHeader(producer_group="pg"))
        assert r.code == ResponseCode.SYSTEM_ERROR

        # a client heartbeats on its own connection, then commits offsets
        async with RemotingClient() as member:
            r = await call(member, s.broker_addr, RequestCode.HEART_BEAT,
                           body=heartbeat("10.1.1.1@77").encode())
            assert r.code == ResponseCode.SUCCESS, r
            local = (await member.get_channel(s.broker_addr)).local_address
            for qid, offset in ((0, 2), (1, 0)):
                r = await call(member, s.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                               UpdateConsumerOffsetRequestHeader(consumer_group="cg", topic=TOPIC,
                                                                 queue_id=qid, commit_offset=offset))
                assert r.code == ResponseCode.SUCCESS

            r = await call(client, s.broker_addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                           GetConsumerConnectionListRequestHeader(consumer_group="cg"))
            assert r.code == ResponseCode.SUCCESS, r
            cc = ConsumerConnection.decode(r.body_bytes())
            (conn,) = cc.connection_set
            assert (conn.client_id, conn.client_addr, conn.language) == ("10.1.1.1@77", local, "JAVA")
            assert set(cc.subscription_table) == {TOPIC}
            assert (cc.consume_type, cc.message_model) == ("CONSUME_PASSIVELY", "CLUSTERING")
            assert cc.consume_from_where == "CONSUME_FROM_LAST_OFFSET"

            r = await call(client, s.broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                           GetProducerConnectionListRequestHeader(producer_group="pg"))
            assert r.code == ResponseCode.SUCCESS, r
            (pconn,) = ProducerConnection.decode(r.body_bytes()).connection_set
            assert (pconn.client_id, pconn.client_addr) == ("10.1.1.1@77", local)

            r = await call(client, s.broker_addr, RequestCode.GET_CONSUME_STATS,
                           GetConsumeStatsRequestHeader(consumer_group="cg"))
            assert r.code == ResponseCode.SUCCESS, r
            consume = ConsumeStats.decode(r.body_bytes())
            assert set(consume.offset_table) == {mq0, mq1}
            w0, w1 = consume.offset_table[mq0], consume.offset_table[mq1]
            assert (w0.broker_offset, w0.consumer_offset) == (3, 2)
            assert (w1.broker_offset, w1.consumer_offset) == (2, 0)
            stored1 = s.broker.store.get_message("g", TOPIC, 0, 1, 1).messages[0].store_timestamp
            assert (w0.last_timestamp, w1.last_timestamp) == (stored1, 0)
            assert consume.total_diff == 3

            # the group's topic filter and a group with no offsets
            r = await call(client, s.broker_addr, RequestCode.GET_CONSUME_STATS,
                           GetConsumeStatsRequestHeader(consumer_group="cg", topic="NoSuchTopic"))
            assert ConsumeStats.decode(r.body_bytes()).offset_table == {}
            r = await call(client, s.broker_addr, RequestCode.GET_CONSUME_STATS,
                           GetConsumeStatsRequestHeader(consumer_group="idle"))
            assert r.code == ResponseCode.SUCCESS and ConsumeStats.decode(r.body_bytes()).offset_table == {}

        # an offset-only group also counts as consuming the topic
        s.broker.offsets.commit("offline-group", TOPIC, 0, 1)
        r = await call(client, s.broker_addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                       QueryTopicConsumeByWhoRequestHeader(topic=TOPIC))
        assert r.code == ResponseCode.SUCCESS
        assert set(GroupList.decode(r.body_bytes()).group_list) == {"cg", "offline-group"}

        # the member's connection closed: its group is no longer online
        deadline = time.monotonic() + 5
        while s.broker.clients.consumers.get("cg") is not None:
            assert time.monotonic() < deadline, "the broker kept a closed connection's consumer"
            await asyncio.sleep(0.01)
        r = await call(client, s.broker_addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                       GetConsumerConnectionListRequestHeader(consumer_group="cg"))
        assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
        r = await call(client, s.broker_addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                       QueryTopicConsumeByWhoRequestHeader(topic="Unconsumed"))
        assert GroupList.decode(r.body_bytes()).group_list == []

    run(tmp_path, test)


def test_subscription_groups_are_created_listed_deleted_and_persisted(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        config = SubscriptionGroupConfig(group_name="orders", retry_max_times=3, consume_enable=False)
        r = await call(client, s.broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                       body=config.encode())
        assert r.code == ResponseCode.SUCCESS, r
        assert s.broker.subscription_groups.get("orders").retry_max_times == 3  # type: ignore[union-attr]
        # a 5.x body: unknown fields are kept
        r = await call(client, s.broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                       body=b'{"groupName":"g5","retryMaxTimes":5,"consumeMessageOrderly":true}')
        assert r.code == ResponseCode.SUCCESS, r
        for bad in (b"not json", b'{"retryMaxTimes":1}', b'{"groupName":"x","retryMaxTimes":"many"}'):
            r = await call(client, s.broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                           body=bad)
            assert r.code == ResponseCode.SYSTEM_ERROR, (bad, r)

        # a consumer heartbeat creates its group with the defaults
        r = await call(client, s.broker_addr, RequestCode.HEART_BEAT, body=heartbeat("c@1", "auto").encode())
        assert r.code == ResponseCode.SUCCESS
        auto = s.broker.subscription_groups.get("auto")
        assert auto is not None and auto.retry_max_times == 16

        r = await call(client, s.broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert r.code == ResponseCode.SUCCESS
        wrapper = SubscriptionGroupWrapper.decode(r.body_bytes())
        table = wrapper.subscription_group_table
        assert {"orders", "g5", "auto", "TOOLS_CONSUMER"} <= set(table)
        assert table["orders"].retry_max_times == 3 and table["orders"].consume_enable is False
        assert wrapper.data_version.counter >= 3
        assert b'"consumeMessageOrderly":true' in r.body_bytes()

        s.broker.offsets.commit("auto", TOPIC, 0, 4)
        for name, remove_offset in (("g5", False), ("auto", True), ("never-there", False)):
            r = await call(client, s.broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                           DeleteSubscriptionGroupRequestHeader(group_name=name, remove_offset=remove_offset))
            assert r.code == ResponseCode.SUCCESS, r
        assert s.broker.subscription_groups.get("g5") is None
        assert s.broker.offsets.query("auto", TOPIC, 0) is None

    run(tmp_path, test)
    saved = GroupFile(tmp_path / "store" / "config" / "subscriptionGroup.json")
    assert saved.load()
    assert saved.get("orders").retry_max_times == 3  # type: ignore[union-attr]
    assert saved.get("g5") is None and saved.get("auto") is None

    async def reopened(s: Servers, client: RemotingClient) -> None:
        assert s.broker.subscription_groups.get("orders").consume_enable is False  # type: ignore[union-attr]

    run(tmp_path, reopened)


def test_delete_topic_in_broker(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, "Doomed")
        await send(client, s.broker_addr, 1, topic="Doomed")
        r = await call(client, s.broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                       DeleteTopicRequestHeader(topic="Doomed"))
        assert r.code == ResponseCode.SUCCESS, r
        r = await call(client, s.broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert "Doomed" not in TopicConfigSerializeWrapper.decode(r.body_bytes()).topic_config_table
        r = await call(client, s.broker_addr, RequestCode.GET_TOPIC_STATS_INFO,
                       GetTopicStatsInfoRequestHeader(topic="Doomed"))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST
        r = await call(client, s.broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                       DeleteTopicRequestHeader(topic="Doomed"))
        assert r.code == ResponseCode.SUCCESS  # unknown topics too, as Java answers
        r = await call(client, s.broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                       DeleteTopicRequestHeader(topic="TBW102"))
        assert r.code == ResponseCode.SYSTEM_ERROR and "system topic" in (r.remark or "")
        assert s.broker.topics.get("TBW102") is not None

    run(tmp_path, test)
    text = (tmp_path / "store" / "config" / "topics.json").read_text()
    assert '"TBW102"' in text and '"Doomed"' not in text


def test_topic_queue_counts_outside_the_range_are_refused(tmp_path: Path) -> None:
    """A topic of 2**31 - 1 queues would make every stats answer and every client's route
    allocate one entry per queue: counts must be 0 to MAX_QUEUE_NUMS."""
    async def test(s: Servers, client: RemotingClient) -> None:
        for read, write in ((2**31 - 1, 4), (4, MAX_QUEUE_NUMS + 1), (-1, 4), (4, -1)):
            header = CreateTopicRequestHeader(topic="Huge", default_topic="TBW102", read_queue_nums=read,
                                              write_queue_nums=write, perm=6)
            r = await call(client, s.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
            assert r.code == ResponseCode.SYSTEM_ERROR, r
            assert f"0 to {MAX_QUEUE_NUMS}" in (r.remark or ""), r
            assert s.broker.topics.get("Huge") is None
        header = CreateTopicRequestHeader(topic="Huge", default_topic="TBW102", read_queue_nums=0,
                                          write_queue_nums=MAX_QUEUE_NUMS, perm=6)
        r = await call(client, s.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
        assert r.code == ResponseCode.SUCCESS, r
        created = s.broker.topics.get("Huge")
        assert created is not None and created.write_queue_nums == MAX_QUEUE_NUMS

    run(tmp_path, test)


def test_cluster_and_broker_topics_take_messages_unless_turned_off(tmp_path: Path) -> None:
    """As RocketMQ (clusterTopicEnable / brokerTopicEnable, on by default): the built-in topics
    named after the cluster and the broker take sends (mqadmin sendMsgStatus and clusterRT)."""
    async def sends(**options: object) -> list[int]:
        async with running_servers(tmp_path / str(len(options)), **options) as s, RemotingClient() as client:
            codes = []
            for topic in ("DefaultCluster", "broker-a"):
                header = SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102",
                                                  default_topic_queue_nums=4, queue_id=0, sys_flag=0,
                                                  born_timestamp=int(time.time() * 1000), flag=0,
                                                  properties="")
                r = await client.invoke(s.broker_addr, RemotingCommand.request(
                    RequestCode.SEND_MESSAGE_V2, header.to_v2(), b"rt"))
                codes.append(r.code)
            return codes

    assert asyncio.run(sends()) == [ResponseCode.SUCCESS, ResponseCode.SUCCESS]
    assert asyncio.run(sends(cluster_topic_enable=False, broker_topic_enable=False)) == [
        ResponseCode.NO_PERMISSION, ResponseCode.NO_PERMISSION]


def test_broker_consume_stats_producer_table_system_topics_and_consume_queue_entries(tmp_path: Path) -> None:
    """GET_BROKER_CONSUME_STATS (317), GET_ALL_PRODUCER_INFO (328),
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) and QUERY_CONSUME_QUEUE (321) with their error answers."""
    async def test(s: Servers, client: RemotingClient) -> None:
        addr = s.broker_addr
        await create_topic(client, addr, TOPIC)
        header = CreateTopicRequestHeader(topic="Ordered", default_topic="TBW102", read_queue_nums=1,
                                          write_queue_nums=1, perm=6, order=True)
        assert (await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)).code == 0
        for i in range(3):
            await send(client, addr, i)
        await send(client, addr, 9, topic="Ordered")
        await dispatched(s)
        for group, topic, offset in (("cg", TOPIC, 2), ("og", "Ordered", 0)):
            await call(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
                consumer_group=group, topic=topic, queue_id=0, commit_offset=offset))
        r = await call(client, addr, RequestCode.HEART_BEAT, body=heartbeat("10.0.0.9@p").encode())
        assert r.code == ResponseCode.SUCCESS

        r = await call(client, addr, RequestCode.GET_BROKER_CONSUME_STATS, GetConsumeStatsInBrokerHeader())
        body = ConsumeStatsList.decode(r.body_bytes())
        groups = {g: stats for entry in body.consume_stats_list for g, stats in entry.items()}
        assert body.broker_addr == addr and body.total_diff == 1 + 1  # cg: 3 - 2 on q0; og: 1 - 0
        [cg] = groups["cg"]
        assert {mq.queue_id: (w.broker_offset, w.consumer_offset) for mq, w in cg.offset_table.items()} == {
            0: (3, 2), 1: (0, 0)}
        assert "TOOLS_CONSUMER" in groups and groups["TOOLS_CONSUMER"] == []  # built-in, no offsets
        r = await call(client, addr, RequestCode.GET_BROKER_CONSUME_STATS,
                       GetConsumeStatsInBrokerHeader(is_order=True))
        ordered = {g: st for e in ConsumeStatsList.decode(r.body_bytes()).consume_stats_list
                   for g, st in e.items() if st}
        assert list(ordered) == ["og"] and ConsumeStatsList.decode(r.body_bytes()).total_diff == 1

        r = await call(client, addr, RequestCode.GET_ALL_PRODUCER_INFO)
        [producer] = ProducerTableInfo.decode(r.body_bytes()).data["pg"]
        local = (await client.get_channel(addr)).local_address
        assert (producer.client_id, producer.remote_ip) == ("10.0.0.9@p", f"/{local}")
        assert abs(producer.last_update_timestamp - time.time() * 1000) < 60_000

        r = await call(client, addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        system = set(TopicList.decode(r.body_bytes()).topic_list)
        assert {"SCHEDULE_TOPIC_XXXX", "TBW102", "DefaultCluster", "broker-a",
                "DefaultCluster_REPLY_TOPIC"} <= system
        assert TOPIC not in system and "RMQ_SYS_TRACE_TOPIC" not in system  # traceTopicEnable is off

        def query(index: int, count: int, queue_id: int = 0,
                  group: str | None = None) -> QueryConsumeQueueRequestHeader:
            return QueryConsumeQueueRequestHeader(topic=TOPIC, queue_id=queue_id, index=index, count=count,
                                                  consumer_group=group)

        r = await call(client, addr, RequestCode.QUERY_CONSUME_QUEUE, query(1, 5, group="cg"))
        cq = QueryConsumeQueueResponseBody.decode(r.body_bytes())
        stored = [m for m in s.broker.store.get_message("g", TOPIC, 0, 0, 10).messages]
        assert (cq.min_queue_index, cq.max_queue_index) == (0, 3) and r.remark is None
        assert [(d.physic_offset, d.physic_size) for d in cq.queue_data] == [
            (m.commit_log_offset, m.store_size) for m in stored[1:]]
        assert cq.subscription_data is not None and cq.subscription_data.topic == TOPIC
        r = await call(client, addr, RequestCode.QUERY_CONSUME_QUEUE, query(0, 1, group="nobody"))
        not_online = QueryConsumeQueueResponseBody.decode(r.body_bytes()).filter_data
        assert not_online == f"nobody@{TOPIC} is not online!"
        r = await call(client, addr, RequestCode.QUERY_CONSUME_QUEUE, query(7, 5))
        assert r.code == ResponseCode.SUCCESS and r.remark == f"Index 7 of 0@{TOPIC} is not exist!"
        assert QueryConsumeQueueResponseBody.decode(r.body_bytes()).queue_data == []
        r = await call(client, addr, RequestCode.QUERY_CONSUME_QUEUE, query(0, 5, queue_id=5))
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == f"5@{TOPIC} is not exist!"

    run(tmp_path, test)


def test_trace_topic_and_the_keys_that_are_not_offered(tmp_path: Path) -> None:
    async def topics() -> set[str]:
        async with running_servers(tmp_path / "store", trace_topic_enable=True,
                                   msg_trace_topic_name="MyTraces") as s:
            return set(s.broker.topics.table)

    assert "MyTraces" in asyncio.run(topics())
    for key, value in (("filterServerNums", "2"),):
        try:
            BrokerConfig.from_mapping({key: value})
        except ConfigError as exc:
            assert key in str(exc)
        else:
            raise AssertionError(f"{key}={value} was accepted")
