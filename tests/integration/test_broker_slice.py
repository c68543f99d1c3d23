"""NameServer + Broker in-process on free ports: routes, send/pull, long polling, offsets,
auto-create, heartbeats and unknown codes, through the remoting client and protocol headers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from bolide.broker import BrokerConfig, BrokerController
from bolide.broker.topic_config import TopicConfigManager
from bolide.common.message import Message
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.controller import NamesrvController
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import (
    ConsumerData,
    ConsumerListBody,
    HeartbeatData,
    SubscriptionData,
    TopicConfigSerializeWrapper,
    TopicRouteData,
    encode_batch_body,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.remoting import RemotingClient
from bolide.store import FlushDiskType, StoreConfig
from bolide.store.record import decode_record, read_total_size
from bolide.testing.servers import Servers, running_servers

TIMEOUT = 10.0


def run_with_servers(tmp_path: Path, test: Callable[[Servers, RemotingClient], Awaitable[None]],
                     **store_options: object) -> None:
    async def main() -> None:
        async with (running_servers(tmp_path / "store", store_options=store_options) as servers,
                    RemotingClient() as client):
            await asyncio.wait_for(test(servers, client), TIMEOUT)

    asyncio.run(main())


JAVA_PROPS = "TAGS\x01TagA\x02WAIT\x01true\x02"  # the Java client always sends WAIT


def send_header(topic: str, queue_id: int = 0, props: str = JAVA_PROPS) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102",
                                    default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
                                    born_timestamp=1_700_000_000_000, flag=0, properties=props)


def pull_request(topic: str, offset: int, *, suspend_ms: int = 0, sys_flag: int = 4,
                 group: str = "cg", queue_id: int = 0) -> RemotingCommand:
    header = PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                      queue_offset=offset, max_msg_nums=32, sys_flag=sys_flag,
                                      commit_offset=0, suspend_timeout_millis=suspend_ms,
                                      subscription="*", sub_version=0)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header)


def records(body: bytes) -> list:
    out, pos = [], 0
    while pos < len(body):
        out.append(decode_record(body, pos))
        pos += read_total_size(body, pos)
    return out


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 4) -> None:
    header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=queues,
                                      write_queue_nums=queues, perm=6)
    r = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))
    assert r.code == ResponseCode.SUCCESS, r


def test_route_after_registration_and_unknown_code(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        route = await client.invoke(s.namesrv_addr, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="TBW102")))
        assert route.code == ResponseCode.SUCCESS
        data = TopicRouteData.decode(route.body_bytes())
        assert data.broker_datas[0].broker_addrs[0] == s.broker_addr
        assert data.queue_datas[0].perm == 7 and data.queue_datas[0].write_queue_nums == 8
        missing = await client.invoke(s.namesrv_addr, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="Nope")))
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        unknown = await client.invoke(s.broker_addr, RemotingCommand.request(9999))
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and unknown.remark

    run_with_servers(tmp_path, test)


def test_send_v1_v2_batch_then_pull(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, "Orders")
        sent = []
        for code, header in ((RequestCode.SEND_MESSAGE, send_header("Orders")),
                             (RequestCode.SEND_MESSAGE_V2, send_header("Orders").to_v2())):
            r = await client.invoke(s.broker_addr, RemotingCommand.request(code, header, b"body%d" % code))
            assert r.code == ResponseCode.SUCCESS, r
            assert len(r.ext_fields["msgId"]) == 32 and r.ext_fields["queueId"] == "0"
            sent.append(int(r.ext_fields["queueOffset"]))
        assert sent == [0, 1]
        batch = encode_batch_body([Message("Orders", b"b1"), Message("Orders", b"b2")])
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, send_header("Orders", props="").to_v2(), batch))
        assert r.code == ResponseCode.SUCCESS, r
        assert r.ext_fields["queueOffset"] == "2" and len(r.ext_fields["msgId"].split(",")) == 2
        flagged = send_header("Orders", props="").to_v2()  # a batch by its flag, as C++ sends one
        flagged.batch = True
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, flagged,
            encode_batch_body([Message("Orders", b"c1"), Message("Orders", b"c2")])))
        assert r.code == ResponseCode.SUCCESS, r
        assert r.ext_fields["queueOffset"] == "4" and len(r.ext_fields["msgId"].split(",")) == 2

        pulled: list = []
        offset = 0
        while len(pulled) < 6:  # dispatch is asynchronous: a long poll waits for it
            p = await client.invoke(s.broker_addr,
                                    pull_request("Orders", offset, suspend_ms=5000, sys_flag=6))
            assert p.code == ResponseCode.SUCCESS, p
            pulled += records(p.body_bytes())
            offset = int(p.ext_fields["nextBeginOffset"])
            assert {"minOffset", "maxOffset", "suggestWhichBrokerId"} <= p.ext_fields.keys()
        assert [m.body for m in pulled] == [b"body10", b"body310", b"b1", b"b2", b"c1", b"c2"]
        assert pulled[0].tags == "TagA" and pulled[0].properties["CLUSTER"] == "DefaultCluster"
        assert "WAIT" not in pulled[1].properties and pulled[2].properties["CLUSTER"] == "DefaultCluster"
        assert [m.queue_offset for m in pulled] == [0, 1, 2, 3, 4, 5]
        assert r.ext_fields["msgId"].split(",")[1] == pulled[5].offset_msg_id

        at_end = await client.invoke(s.broker_addr, pull_request("Orders", 6))
        assert at_end.code == ResponseCode.PULL_NOT_FOUND and at_end.ext_fields["nextBeginOffset"] == "6"
        beyond = await client.invoke(s.broker_addr, pull_request("Orders", 9))
        assert beyond.code == ResponseCode.PULL_OFFSET_MOVED and beyond.ext_fields["nextBeginOffset"] == "6"
        empty = await client.invoke(s.broker_addr, pull_request("Orders", 3, queue_id=1))
        assert empty.code == ResponseCode.PULL_OFFSET_MOVED
        unknown = await client.invoke(s.broker_addr, pull_request("NoSuchTopic", 0))
        assert unknown.code == ResponseCode.TOPIC_NOT_EXIST

    run_with_servers(tmp_path, test)


def test_long_poll_answered_by_a_send(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, "Waiting")
        pull = asyncio.ensure_future(client.invoke(
            s.broker_addr, pull_request("Waiting", 0, suspend_ms=8000, sys_flag=6), 9000))
        while s.broker.pull_holds.held == 0:  # yield to the loop until the broker holds it
            await asyncio.sleep(0)
        assert not pull.done()
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, send_header("Waiting").to_v2(), b"wake up"))
        assert r.code == ResponseCode.SUCCESS
        answer = await pull
        assert answer.code == ResponseCode.SUCCESS
        assert [m.body for m in records(answer.body_bytes())] == [b"wake up"]
        assert s.broker.pull_holds.held == 0

    run_with_servers(tmp_path, test)


def test_a_message_dispatched_just_before_a_pull_is_held_answers_it(tmp_path: Path) -> None:
    """The race of long polling: the pull read the queue empty, then the message is dispatched
    (its wake-up finds no pull held), then the pull is held. It must not wait for its timeout."""
    async def test(s: Servers, client: RemotingClient) -> None:
        await create_topic(client, s.broker_addr, "Racing")
        holds = s.broker.pull_holds
        real_hold = holds.hold

        def hold_after_a_dispatch(topic: str, queue_id: int) -> asyncio.Future[None] | None:
            # fault injection: a message stored and dispatched in the window before the hold
            put = s.broker.store.put_message(Message("Racing", b"raced"), queue_id)
            assert put.ok and s.broker.store.wait_dispatched(5)
            holds.hold = real_hold  # type: ignore[method-assign]
            return real_hold(topic, queue_id)

        holds.hold = hold_after_a_dispatch  # type: ignore[method-assign]
        # a missed wake-up would hold the pull past the client's timeout (an error here)
        answer = await client.invoke(
            s.broker_addr, pull_request("Racing", 0, suspend_ms=60000, sys_flag=6), 10000)
        assert answer.code == ResponseCode.SUCCESS
        assert [m.body for m in records(answer.body_bytes())] == [b"raced"]

    run_with_servers(tmp_path, test)


def test_consumer_offsets(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        query = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(
            consumer_group="cg", topic="T", queue_id=1))
        r = await client.invoke(s.broker_addr, query)
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        update = UpdateConsumerOffsetRequestHeader(consumer_group="cg", topic="T", queue_id=1,
                                                   commit_offset=42)
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET, update))
        assert r.code == ResponseCode.SUCCESS
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(
                consumer_group="cg", topic="T", queue_id=1)))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "42"
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic="T", queue_id=1)))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"

    run_with_servers(tmp_path, test)


def offset_of_new_group(topic: str, queue_id: int, set_zero: bool | None = None) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(
        consumer_group="new_cg", topic=topic, queue_id=queue_id, set_zero_if_not_found=set_zero))


def test_a_new_group_reads_a_young_queue_from_its_start(tmp_path: Path) -> None:
    """As RocketMQ: a group without an offset gets 0 when the queue starts at 0 and that message
    is still in memory (so it reads what was sent before it started, whatever its
    consume-from-where), unless the client asks not to (setZeroIfNotFound=false)."""
    async def test(s: Servers, client: RemotingClient) -> None:
        store = s.broker.store
        assert store.put_message(Message("Young", b"old"), 1).ok
        assert store.put_message(Message("Young", b"p" * 1000), 2).ok
        for body in (b"first", b"second"):
            assert store.put_message(Message("Young", body), 0).ok
        assert store.wait_dispatched(5)
        r = await client.invoke(s.broker_addr, offset_of_new_group("Young", 0))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0", r
        r = await client.invoke(s.broker_addr, offset_of_new_group("Young", 0, set_zero=False))
        assert r.code == ResponseCode.QUERY_NOT_FOUND, r
        r = await client.invoke(s.broker_addr, offset_of_new_group("Young", 3))  # no message yet
        assert r.code == ResponseCode.QUERY_NOT_FOUND, r
        # the memory the store counts with is 40 % of 1,500 bytes: queue 1's message lies further
        # back, behind queue 2's 1,000 bytes
        r = await client.invoke(s.broker_addr, offset_of_new_group("Young", 1))
        assert r.code == ResponseCode.QUERY_NOT_FOUND, r
        assert store.put_message(Message("Young", b"y"), 3).ok and store.wait_dispatched(5)
        r = await client.invoke(s.broker_addr, offset_of_new_group("Young", 3))
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0", r

    run_with_servers(tmp_path, test, total_physical_memory_bytes=1500)


def test_auto_create_topic_on_send(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, send_header("Fresh", queue_id=3).to_v2(), b"x"))
        assert r.code == ResponseCode.SUCCESS, r
        r = await client.invoke(s.broker_addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
        table = TopicConfigSerializeWrapper.decode(r.body_bytes()).topic_config_table
        assert table["Fresh"].write_queue_nums == 4 and table["Fresh"].perm == 6
        assert s.broker.registration is not None
        await s.broker.registration.wait_pending()  # the broker re-registers at once
        route = await client.invoke(s.namesrv_addr, RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="Fresh")))
        assert route.code == ResponseCode.SUCCESS
        assert TopicRouteData.decode(route.body_bytes()).queue_datas[0].write_queue_nums == 4
        bad = send_header("Fresh2")
        bad.default_topic = "NoTemplate"
        r = await client.invoke(s.broker_addr, RemotingCommand.request(RequestCode.SEND_MESSAGE, bad, b"x"))
        assert r.code == ResponseCode.TOPIC_NOT_EXIST

    run_with_servers(tmp_path, test)


def test_heartbeat_and_consumer_list(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        list_request = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                               GetConsumerListByGroupRequestHeader(consumer_group="cg"))
        r = await client.invoke(s.broker_addr, list_request)
        assert r.code == ResponseCode.SYSTEM_ERROR
        await create_topic(client, s.broker_addr, "Subscribed")
        # without a heartbeat, a pull that posts no subscription has none
        r = await client.invoke(s.broker_addr, pull_request("Subscribed", 0, sys_flag=0))
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        beat = HeartbeatData(client_id="10.0.0.5@4711", consumer_data_set=[ConsumerData(
            group_name="cg", consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            subscription_data_set=[SubscriptionData.of("Subscribed", "*")])])
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.HEART_BEAT, body=beat.encode()))
        assert r.code == ResponseCode.SUCCESS and r.version >= 232
        r = await client.invoke(s.broker_addr, RemotingCommand.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, GetConsumerListByGroupRequestHeader(consumer_group="cg")))
        assert r.code == ResponseCode.SUCCESS
        assert ConsumerListBody.decode(r.body_bytes()).consumer_id_list == ["10.0.0.5@4711"]
        assert s.broker.topics.get("%RETRY%cg") is not None
        r = await client.invoke(s.broker_addr, pull_request("Subscribed", 0, sys_flag=0))
        assert r.code == ResponseCode.PULL_NOT_FOUND

    run_with_servers(tmp_path, test)


def test_sync_flush_send_waits_for_the_flush(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        assert s.broker.store.config.sync_flush
        for i in range(5):
            r = await client.invoke(s.broker_addr, RemotingCommand.request(
                RequestCode.SEND_MESSAGE_V2, send_header("Durable", queue_id=i % 2).to_v2(), b"durable"))
            assert r.code == ResponseCode.SUCCESS, r
        assert s.broker.store.commit_log.flushed_offset >= s.broker.store.max_phy_offset

    run_with_servers(tmp_path, test, flush_disk_type=FlushDiskType.SYNC_FLUSH)


def test_broker_config_reads_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=C1\nbrokerName=b-1\nbrokerId=0\nnamesrvAddr=h1:9876;h2:9876\n"
                    "listenPort=10999\nbrokerIP1=10.1.2.3\nautoCreateTopicEnable=false\n"
                    "defaultTopicQueueNums=4\nflushDiskType=SYNC_FLUSH\n")
    config = BrokerConfig.from_properties(conf)
    assert (config.broker_cluster_name, config.broker_name, config.listen_port) == ("C1", "b-1", 10999)
    assert config.namesrv_addrs == ["h1:9876", "h2:9876"] and config.broker_ip1 == "10.1.2.3"
    assert not config.auto_create_topic_enable and config.default_topic_queue_nums == 4
    assert TopicConfigManager(config, tmp_path / "topics.json").get("TBW102") is None
    assert TopicConfigManager(config.replace(auto_create_topic_enable=True),
                              tmp_path / "topics.json").get("TBW102") is not None


def test_namesrv_drops_a_broker_whose_connection_closes(tmp_path: Path) -> None:
    async def main() -> None:
        namesrv = await NamesrvController(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")),
                                          host="127.0.0.1", port=0).start()
        try:
            config = BrokerConfig(namesrv_addr=f"127.0.0.1:{namesrv.port}", listen_port=0,
                                  bind_address="127.0.0.1")
            broker = await BrokerController(config, StoreConfig(store_path_root_dir=str(tmp_path))).start()
            await broker.close()
            assert not (tmp_path / "abort").exists()  # a clean shutdown
            async with RemotingClient() as client:
                route_request = RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="TBW102"))
                route = await client.invoke(f"127.0.0.1:{namesrv.port}", route_request)
                while route.code == ResponseCode.SUCCESS:  # until the close reaches the NameServer
                    route = await client.invoke(f"127.0.0.1:{namesrv.port}", RemotingCommand.request(
                        RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="TBW102")))
                assert route.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await namesrv.close()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_the_vip_port_serves_the_same_codes(tmp_path: Path) -> None:
    async def test(s: Servers, client: RemotingClient) -> None:
        fast = s.broker.fast_server  # listenPort - 2, the default of Java clients up to 4.4
        assert fast is not None and fast.port not in (0, s.broker.port)
        r = await client.invoke(f"127.0.0.1:{fast.port}", pull_request("TBW102", 0))
        assert r.code == ResponseCode.PULL_NOT_FOUND

    run_with_servers(tmp_path, test)
