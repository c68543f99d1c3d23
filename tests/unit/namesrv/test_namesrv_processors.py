"""NamesrvProcessor: each NameServer request code, fed commands as the transport decodes them
from the wire, answered with the bytes Java NameServers send."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.namesrv import KVConfigManager, NamesrvConfig, NamesrvProcessor
from bolide.namesrv.processors import body_crc32
from bolide.protocol import (
    CommandDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_command_bytes,
)
from bolide.protocol.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from bolide.protocol.codes import V3_4_9, V4_5_2, V4_9_4, V4_9_8, V5_3_3
from bolide.protocol.headers import namesrv as h

# The RegisterBrokerBody of spec section 3.3, as a Java 4.9.8 broker sends it.
SPEC_REGISTER_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,'
    b'"timestamp":1700000000000},"topicConfigTable":{"TBW102":{"order":false,"perm":7,'
    b'"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TBW102","topicSysFlag":0,'
    b'"writeQueueNums":8},"TopicTest":{"order":false,"perm":6,"readQueueNums":4,'
    b'"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}'
)
ROUTE_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
    b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
ROUTE_BARE = ROUTE_STANDARD.replace(b'{"0":', b"{0:")
CLUSTER_INFO = (
    b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)


class Clock:
    now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def wire(code: int, header: object | None = None, body: bytes = b"", *, version: int = V4_9_8,
         ext: dict[str, str] | None = None,
         serialize_type: SerializeType = SerializeType.JSON) -> RemotingCommand:
    """A request as the transport hands it over: encoded to a frame and decoded again."""
    cmd = RemotingCommand.request(code, header, body, ext_fields=ext,  # type: ignore[arg-type]
                                  serialize_type=serialize_type)
    cmd.version = version
    (decoded,) = CommandDecoder().feed(encode_command_bytes(cmd))
    return decoded


def register_request(addr: str = "10.0.0.1:10911", broker_id: int = 0,
                     body: bytes = SPEC_REGISTER_BODY, name: str = "broker-a",
                     cluster: str = "DefaultCluster", **kw: object) -> RemotingCommand:
    header = h.RegisterBrokerRequestHeader(broker_name=name, broker_addr=addr, cluster_name=cluster,
                                           ha_server_addr=addr.split(":")[0] + ":10912",
                                           broker_id=broker_id, **kw)  # type: ignore[arg-type]
    return wire(RequestCode.REGISTER_BROKER, header, body)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def processor(clock: Clock) -> NamesrvProcessor:
    return NamesrvProcessor(NamesrvConfig(), kv=KVConfigManager(None), clock=clock)


def answer(processor: NamesrvProcessor, request: RemotingCommand, channel: object = None) -> RemotingCommand:
    response = processor.process(request, channel)
    assert response is not None
    assert response.is_response and response.opaque == request.opaque
    return response


def route_request(topic: str, version: int = V4_9_8, **kw: object) -> RemotingCommand:
    return wire(RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic=topic, **kw),  # type: ignore[arg-type]
                version=version)


def test_register_master_then_route(processor: NamesrvProcessor) -> None:
    response = answer(processor, register_request(), "chan")
    assert response.code == ResponseCode.SUCCESS and response.ext_fields == {}
    assert response.body_bytes() == b""
    route = answer(processor, route_request("TopicTest"))
    assert route.code == ResponseCode.SUCCESS and route.body_bytes() == ROUTE_STANDARD
    tbw = TopicRouteData.decode(answer(processor, route_request("TBW102")).body_bytes())
    assert tbw.queue_datas[0].perm == 7 and tbw.queue_datas[0].write_queue_nums == 8


@pytest.mark.parametrize(("version", "accept", "expected"), [
    (V4_9_8, None, ROUTE_STANDARD), (V5_3_3, None, ROUTE_STANDARD), (V4_9_4, None, ROUTE_STANDARD),
    (V4_9_4 - 1, None, ROUTE_BARE), (V4_5_2, None, ROUTE_BARE), (V3_4_9, None, ROUTE_BARE),
    (V3_4_9, True, ROUTE_STANDARD), (V4_5_2, False, ROUTE_BARE),
])
def test_route_json_style_follows_the_request_version(processor: NamesrvProcessor, version: int,
                                                      accept: bool | None, expected: bytes) -> None:
    answer(processor, register_request())
    response = answer(processor, route_request("TopicTest", version, accept_standard_json_only=accept))
    assert response.body_bytes() == expected
    assert TopicRouteData.decode(response.body_bytes()).broker_datas[0].master_addr == "10.0.0.1:10911"


def test_unknown_topic_is_topic_not_exist(processor: NamesrvProcessor) -> None:
    response = answer(processor, route_request("Missing"))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST == 17
    assert response.remark is not None
    assert response.remark.startswith("No topic route info in name server for the topic: Missing")
    assert response.body_bytes() == b""


def test_slave_learns_its_master(processor: NamesrvProcessor) -> None:
    answer(processor, register_request())
    response = answer(processor, register_request("10.0.0.2:10911", broker_id=1))
    assert response.ext_fields == {"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911"}
    route = TopicRouteData.decode(answer(processor, route_request("TopicTest")).body_bytes())
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}


def test_compressed_body_with_crc(processor: NamesrvProcessor) -> None:
    body = RegisterBrokerBody.decode(SPEC_REGISTER_BODY).encode_compressed()
    response = answer(processor, register_request(body=body, compressed=True, body_crc32=body_crc32(body)))
    assert response.code == ResponseCode.SUCCESS
    assert answer(processor, route_request("TopicTest")).body_bytes() == ROUTE_STANDARD


def test_crc_mismatch_is_refused(processor: NamesrvProcessor) -> None:
    response = answer(processor, register_request(body_crc32=body_crc32(SPEC_REGISTER_BODY) ^ 1))
    assert response.code == ResponseCode.SYSTEM_ERROR and response.remark == "crc32 not match"
    assert answer(processor, route_request("TopicTest")).code == ResponseCode.TOPIC_NOT_EXIST


def test_old_brokers_send_a_bare_wrapper(processor: NamesrvProcessor) -> None:
    wrapper = TopicConfigSerializeWrapper(
        topic_config_table={"Old": TopicConfig(topic_name="Old", read_queue_nums=2, write_queue_nums=2)},
        data_version=DataVersion(timestamp=1, counter=1))
    header = h.RegisterBrokerRequestHeader(broker_name="broker-a", broker_addr="10.0.0.1:10911",
                                           cluster_name="DefaultCluster", ha_server_addr="", broker_id=0)
    request = wire(RequestCode.REGISTER_BROKER, header, wrapper.encode(), version=30)
    assert answer(processor, request).code == ResponseCode.SUCCESS
    assert answer(processor, route_request("Old")).code == ResponseCode.SUCCESS


def test_register_without_body_and_bad_body(processor: NamesrvProcessor) -> None:
    assert answer(processor, register_request(body=b"")).code == ResponseCode.SUCCESS
    info = ClusterInfo.decode(answer(processor, wire(RequestCode.GET_BROKER_CLUSTER_INFO)).body_bytes())
    assert set(info.broker_addr_table) == {"broker-a"}
    bad = answer(processor, register_request(body=b"\x00garbage", compressed=True))
    assert bad.code == ResponseCode.SYSTEM_ERROR and bad.remark


def test_missing_header_field_is_a_system_error(processor: NamesrvProcessor) -> None:
    request = wire(RequestCode.REGISTER_BROKER, ext={"brokerName": "broker-a"})
    response = answer(processor, request)
    assert response.code == ResponseCode.SYSTEM_ERROR and "brokerAddr" in (response.remark or "")


def test_cluster_info_bytes_as_java_writes_them(processor: NamesrvProcessor) -> None:
    answer(processor, register_request())
    response = answer(processor, wire(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert response.code == ResponseCode.SUCCESS and response.body_bytes() == CLUSTER_INFO


def test_topic_lists(processor: NamesrvProcessor) -> None:
    answer(processor, register_request())
    body = SPEC_REGISTER_BODY.replace(b"TopicTest", b"SecondTopic")
    answer(processor, register_request("10.0.1.1:10911", name="broker-x", cluster="Second", body=body))
    response = answer(processor, wire(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    assert response.body_bytes() == b'{"topicList":["SecondTopic","TBW102","TopicTest"]}'
    by_cluster = answer(processor, wire(RequestCode.GET_TOPICS_BY_CLUSTER,
                                        h.GetTopicsByClusterRequestHeader(cluster="Second")))
    assert TopicList.decode(by_cluster.body_bytes()).topic_list == ["SecondTopic", "TBW102"]
    system = TopicList.decode(answer(processor, wire(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body_bytes())
    assert system.topic_list == ["DefaultCluster", "Second", "broker-a", "broker-x"]
    assert system.broker_addr == "10.0.0.1:10911"
    unit = answer(processor, wire(RequestCode.GET_UNIT_TOPIC_LIST))
    assert unit.code == ResponseCode.SUCCESS and unit.body_bytes() == b'{"topicList":[]}'


def test_topic_lists_can_be_disabled(clock: Clock) -> None:
    config = NamesrvConfig(enable_all_topic_list=False, enable_topic_list=False)
    processor = NamesrvProcessor(config, kv=KVConfigManager(None), clock=clock)
    for code in (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS):
        response = answer(processor, wire(code))
        assert response.code == ResponseCode.SYSTEM_ERROR and response.remark == "disable"


def test_delete_topic_in_namesrv(processor: NamesrvProcessor) -> None:
    answer(processor, register_request())
    request = wire(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                   h.DeleteTopicFromNamesrvRequestHeader(topic="TopicTest"))
    assert answer(processor, request).code == ResponseCode.SUCCESS
    assert answer(processor, route_request("TopicTest")).code == ResponseCode.TOPIC_NOT_EXIST
    request = wire(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                   h.DeleteTopicFromNamesrvRequestHeader(topic="TBW102", cluster_name="DefaultCluster"))
    assert answer(processor, request).code == ResponseCode.SUCCESS
    assert answer(processor, route_request("TBW102")).code == ResponseCode.TOPIC_NOT_EXIST


def test_wipe_and_add_write_perm(processor: NamesrvProcessor) -> None:
    answer(processor, register_request())
    wipe = answer(processor, wire(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                  h.WipeWritePermOfBrokerRequestHeader(broker_name="broker-a")))
    assert wipe.ext_fields == {"wipeTopicCount": "2"}
    route = TopicRouteData.decode(answer(processor, route_request("TopicTest")).body_bytes())
    assert route.queue_datas[0].perm == 4
    add = answer(processor, wire(RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                 h.AddWritePermOfBrokerRequestHeader(broker_name="broker-a")))
    assert add.ext_fields == {"addTopicCount": "2"}


def test_unregister_and_channel_close(processor: NamesrvProcessor) -> None:
    answer(processor, register_request(), "c1")
    answer(processor, register_request("10.0.0.2:10911", broker_id=1), "c2")
    request = wire(RequestCode.UNREGISTER_BROKER, h.UnregisterBrokerRequestHeader(
        broker_name="broker-a", broker_addr="10.0.0.2:10911", cluster_name="DefaultCluster", broker_id=1))
    assert answer(processor, request).code == ResponseCode.SUCCESS
    assert processor.routes.on_channel_destroy("c2") == []
    assert processor.routes.on_channel_destroy("c1") == ["10.0.0.1:10911"]
    assert answer(processor, route_request("TopicTest")).code == ResponseCode.TOPIC_NOT_EXIST


def test_query_data_version(processor: NamesrvProcessor, clock: Clock) -> None:
    answer(processor, register_request())
    start = clock.now

    def query(counter: int) -> RemotingCommand:
        header = h.QueryDataVersionRequestHeader(broker_name="broker-a", broker_addr="10.0.0.1:10911",
                                                 cluster_name="DefaultCluster", broker_id=0)
        body = DataVersion(timestamp=1_700_000_000_000, counter=counter).encode()
        return answer(processor, wire(RequestCode.QUERY_DATA_VERSION, header, body))

    clock.now = start + 100_000
    assert query(3).ext_fields == {"changed": "false"}  # counts as a heartbeat
    assert processor.routes.scan_not_active_broker(start + 120_001) == []
    # a changed version (a slave that copied its master's topics, a topic deleted on the
    # broker: no registration follows) counts as a heartbeat too, as in RocketMQ 5
    clock.now += 100_000
    changed = query(4)
    assert changed.ext_fields == {"changed": "true"}
    assert DataVersion.decode(changed.body_bytes()) == DataVersion(timestamp=1_700_000_000_000, counter=3)
    assert processor.routes.scan_not_active_broker(clock.now + 100_000) == []
    assert processor.routes.scan_not_active_broker(clock.now + 120_001) != []  # then silent


def test_query_data_version_of_an_unknown_broker(processor: NamesrvProcessor) -> None:
    header = h.QueryDataVersionRequestHeader(broker_name="broker-a", broker_addr="10.0.0.9:10911",
                                             cluster_name="DefaultCluster", broker_id=0)
    body = DataVersion(timestamp=1_700_000_000_000, counter=1).encode()
    r = answer(processor, wire(RequestCode.QUERY_DATA_VERSION, header, body))
    assert r.ext_fields == {"changed": "true"} and not r.body_bytes()
    assert processor.routes.live_broker_addrs() == []  # a heartbeat registers nothing


def test_broker_heartbeat_refreshes(processor: NamesrvProcessor, clock: Clock) -> None:
    answer(processor, register_request())
    clock.now += 100_000
    request = wire(RequestCode.BROKER_HEARTBEAT, ext={"clusterName": "DefaultCluster",
                                                      "brokerAddr": "10.0.0.1:10911"})
    assert answer(processor, request).code == ResponseCode.SUCCESS
    assert processor.routes.scan_not_active_broker(clock.now + 100_000) == []


def test_kv_codes(processor: NamesrvProcessor) -> None:
    put = h.PutKVConfigRequestHeader(namespace="ORDER_TOPIC_CONFIG", key="TopicTest", value="broker-a:4")
    assert answer(processor, wire(RequestCode.PUT_KV_CONFIG, put)).code == ResponseCode.SUCCESS
    get = answer(processor, wire(RequestCode.GET_KV_CONFIG, h.GetKVConfigRequestHeader(
        namespace="ORDER_TOPIC_CONFIG", key="TopicTest")))
    assert get.code == ResponseCode.SUCCESS and get.ext_fields == {"value": "broker-a:4"}
    listed = answer(processor, wire(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                    h.GetKVListByNamespaceRequestHeader(namespace="ORDER_TOPIC_CONFIG")))
    assert listed.body_bytes() == b'{"table":{"TopicTest":"broker-a:4"}}'
    # REGISTER_BROKER answers the ORDER_TOPIC_CONFIG namespace as its body.
    registered = answer(processor, register_request())
    assert KVTable.decode(registered.body_bytes()).table == {"TopicTest": "broker-a:4"}
    delete = h.DeleteKVConfigRequestHeader(namespace="ORDER_TOPIC_CONFIG", key="TopicTest")
    assert answer(processor, wire(RequestCode.DELETE_KV_CONFIG, delete)).code == ResponseCode.SUCCESS
    missing = answer(processor, wire(RequestCode.GET_KV_CONFIG, h.GetKVConfigRequestHeader(
        namespace="ORDER_TOPIC_CONFIG", key="TopicTest")))
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert missing.remark == "No config item, Namespace: ORDER_TOPIC_CONFIG Key: TopicTest"
    empty = answer(processor, wire(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                   h.GetKVListByNamespaceRequestHeader(namespace="ORDER_TOPIC_CONFIG")))
    assert empty.code == ResponseCode.QUERY_NOT_FOUND
    assert empty.remark == "No config item, Namespace: ORDER_TOPIC_CONFIG"
    no_key = answer(processor, wire(RequestCode.PUT_KV_CONFIG, ext={"namespace": "ns", "value": "v"}))
    assert no_key.code == ResponseCode.SYSTEM_ERROR and no_key.remark == "namespace or key is null"


def test_order_topic_conf_only_when_enabled(clock: Clock) -> None:
    kv = KVConfigManager(None)
    kv.put("ORDER_TOPIC_CONFIG", "TopicTest", "broker-a:4")
    plain = NamesrvProcessor(NamesrvConfig(), kv=kv, clock=clock)
    answer(plain, register_request())
    assert answer(plain, route_request("TopicTest")).body_bytes() == ROUTE_STANDARD
    ordered = NamesrvProcessor(NamesrvConfig(order_message_enable=True), kv=kv, clock=clock)
    answer(ordered, register_request())
    route = TopicRouteData.decode(answer(ordered, route_request("TopicTest")).body_bytes())
    assert route.order_topic_conf == "broker-a:4"


def test_wait_for_service(clock: Clock) -> None:
    config = NamesrvConfig(need_wait_for_service=True, wait_seconds_for_service=45)
    processor = NamesrvProcessor(config, kv=KVConfigManager(None), clock=clock)
    answer(processor, register_request())
    early = answer(processor, route_request("TopicTest"))
    assert early.code == ResponseCode.SYSTEM_ERROR and early.remark == "name server not ready"
    clock.now += 45_000
    assert answer(processor, route_request("TopicTest")).code == ResponseCode.SUCCESS


def test_binary_header_requests_get_binary_answers(processor: NamesrvProcessor) -> None:
    answer(processor, register_request())
    request = wire(RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic="TopicTest"),
                   serialize_type=SerializeType.ROCKETMQ)
    response = answer(processor, request)
    assert response.serialize_type == SerializeType.ROCKETMQ and response.body_bytes() == ROUTE_STANDARD


def test_unknown_codes_are_left_to_the_transport(processor: NamesrvProcessor) -> None:
    assert processor.process(wire(RequestCode.SEND_MESSAGE)) is None
    assert RequestCode.REGISTER_BROKER in processor.codes
    assert RequestCode.PULL_MESSAGE not in processor.codes


def test_register_topic_in_namesrv(processor: NamesrvProcessor) -> None:
    answer(processor, register_request())
    body = TopicRouteData.decode(ROUTE_STANDARD).encode()
    request = wire(RequestCode.REGISTER_TOPIC_IN_NAMESRV, ext={"topic": "Fresh"}, body=body)
    assert answer(processor, request).code == ResponseCode.SUCCESS
    assert answer(processor, route_request("Fresh")).body_bytes() == ROUTE_STANDARD


def test_namesrv_config_commands(processor: NamesrvProcessor) -> None:
    got = answer(processor, wire(RequestCode.GET_NAMESRV_CONFIG))
    text = got.body_bytes().decode()
    assert "listenPort=9876\n" in text and "orderMessageEnable=false\n" in text
    update = wire(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
    assert answer(processor, update).code == ResponseCode.SUCCESS
    assert processor.config.order_message_enable is True
    refused = answer(processor, wire(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n"))
    assert refused.code == ResponseCode.NO_PERMISSION
    bad = answer(processor, wire(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"clusterTest=maybe\n"))
    assert bad.code == ResponseCode.SYSTEM_ERROR and "clusterTest" in (bad.remark or "")


NAMESRV_CONF = """\
# a RocketMQ namesrv.conf, unchanged
listenPort=19876
kvConfigPath={root}/kvConfig.json
orderMessageEnable = true
serverWorkerThreads=8
scanNotActiveBrokerInterval: 10000
"""


def test_namesrv_config_from_namesrv_conf(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.conf"
    path.write_text(NAMESRV_CONF.format(root=tmp_path), encoding="utf-8")
    config = NamesrvConfig.from_properties(path, cluster_test=True)
    assert config.listen_port == 19876
    assert config.kv_config_path == f"{tmp_path}/kvConfig.json"
    assert config.order_message_enable and config.cluster_test
    assert config.scan_not_active_broker_interval_ms == 10000
    assert config.broker_channel_expired_time_ms == 120_000
    assert NamesrvConfig().listen_port == 9876
    assert "kvConfigPath" in config.black_list and "rocketmqHome" in config.black_list


def test_namesrv_config_errors(tmp_path: Path) -> None:
    from bolide.errors import ConfigError

    with pytest.raises(ConfigError, match="listenPort"):
        NamesrvConfig.from_mapping({"listenPort": "many"})
    with pytest.raises(ConfigError, match="out of range"):
        NamesrvConfig(listen_port=70000)
    with pytest.raises(ConfigError, match="cannot read"):
        NamesrvConfig.from_properties(tmp_path / "missing.conf")
