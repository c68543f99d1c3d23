"""JSON bodies as Java writes them (the spec's examples byte for byte), what Go and ali-ons
send, and the batch message body."""

from __future__ import annotations

import struct
import zlib

import pytest

from bolide.common.hashing import java_string_hash
from bolide.common.message import Message
from bolide.common.properties import decode_properties
from bolide.errors import ProtocolError
from bolide.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    Connection,
    ConsumerConnection,
    ConsumerListBody,
    ConsumeStats,
    DataVersion,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    OffsetWrapper,
    QueueData,
    RegisterBrokerBody,
    SubscriptionData,
    TopicConfig,
    TopicList,
    TopicRouteData,
    batch_members,
    decode_batch_body,
    encode_batch_body,
    iter_batch_body,
)
from bolide.protocol.bodies.admin import ConsumerRunningInfo, ProcessQueueInfo, TopicConsumeStatus
from bolide.protocol.codes import V3_4_9, V4_5_2, V4_9_4, V4_9_8

ROUTE_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
    b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
ROUTE_FASTJSON = ROUTE_STANDARD.replace(b'{"0":', b"{0:")

CLUSTER_INFO = (
    b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)

HEARTBEAT = (
    b'{"clientID":"10.0.0.5@4711#998877","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING",'
    b'"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG",'
    b'"subString":"*","subVersion":1700000000000,"tagsSet":[],"topic":"TopicTest"},'
    b'{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
    b'"subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%cg"}],"unitMode":false}],'
    b'"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}'
)

REGISTER = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,'
    b'"timestamp":1700000000000},"topicConfigTable":{"TBW102":{"order":false,"perm":7,'
    b'"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TBW102","topicSysFlag":0,'
    b'"writeQueueNums":8},"TopicTest":{"order":false,"perm":6,"readQueueNums":4,'
    b'"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}'
)

CONSUMER_CONNECTION = (
    b'{"connectionSet":[{"clientAddr":"10.0.0.5:53412","clientId":"c1","language":"JAVA","version":409}],'
    b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
    b'"messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],'
    b'"expressionType":"TAG","subString":"*","subVersion":0,"tagsSet":[],"topic":"T"}}}'
)


def route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(broker_name="broker-a", read_queue_nums=4, write_queue_nums=4, perm=6)],
        broker_datas=[BrokerData(cluster="DefaultCluster", broker_name="broker-a",
                                 broker_addrs={0: "10.0.0.1:10911"})],
    )


def test_route_json_style_follows_the_request_version() -> None:
    assert route().encode_for(V4_9_8) == ROUTE_STANDARD
    assert route().encode_for(V4_9_4) == ROUTE_STANDARD
    assert route().encode_for(V4_5_2) == ROUTE_FASTJSON  # Go
    assert route().encode_for(V3_4_9) == ROUTE_FASTJSON  # ali-ons
    assert route().encode_for(V3_4_9, accept_standard_json_only=True) == ROUTE_STANDARD


def test_route_parses_both_key_styles_and_the_old_field_name() -> None:
    assert TopicRouteData.decode(ROUTE_STANDARD) == route() == TopicRouteData.decode(ROUTE_FASTJSON)
    assert TopicRouteData.decode(ROUTE_FASTJSON).broker_datas[0].master_addr == "10.0.0.1:10911"
    old = TopicRouteData.decode(b'{"queueDatas":[{"brokerName":"b","topicSynFlag":3}]}')
    assert old.queue_datas[0].topic_sys_flag == 3 and old.broker_datas == []


def test_route_keeps_empty_arrays_and_drops_unset_optionals() -> None:
    assert TopicRouteData().encode() == b'{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}'
    five = TopicRouteData.decode(b'{"brokerDatas":[{"brokerAddrs":{"0":"a:1"},"brokerName":"b",'
                                 b'"cluster":"c","enableActingMaster":false,"zoneName":"z"}],'
                                 b'"queueDatas":[],"topicQueueMappingByBroker":{}}')
    assert five.broker_datas[0].enable_acting_master is False and five.broker_datas[0].zone_name == "z"


def test_cluster_info_golden() -> None:
    info = ClusterInfo.decode(CLUSTER_INFO)
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.1:10911"}
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert info.encode() == CLUSTER_INFO


def test_java_heartbeat_parses_and_reencodes_byte_for_byte() -> None:
    heartbeat = HeartbeatData.decode(HEARTBEAT)
    assert heartbeat.client_id == "10.0.0.5@4711#998877"
    consumer = heartbeat.consumer_data_set[0]
    assert consumer.consume_type == "CONSUME_PASSIVELY" and consumer.message_model == "CLUSTERING"
    assert [s.topic for s in consumer.subscription_data_set] == ["TopicTest", "%RETRY%cg"]
    assert consumer.subscription_data_set[0].matches_all
    assert heartbeat.encode() == HEARTBEAT


def test_go_and_ali_ons_heartbeats() -> None:
    go = HeartbeatData.decode(
        b'{"clientID":"go@1","producerDataSet":[],"consumerDataSet":[{"groupName":"g",'
        b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":'
        b'"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"T",'
        b'"subString":"TagA||TagB","tagsSet":["TagA","TagB"],"codeSet":["2598919","2598920"],'
        b'"subVersion":0,"expressionType":"TAG"}],"unitMode":false}]}'
    )
    sub = go.consumer_data_set[0].subscription_data_set[0]
    assert sub.code_set == [2598919, 2598920]
    ons = HeartbeatData.decode(
        b'{"clientID":"ons@1","producerDataSet":[],"consumerDataSet":[{"groupName":"g",'
        b'"subscriptionDataSet":[{"topic":"T","subString":"*","tagsSet":null,"subVersion":1}]}]}'
    )
    sub = ons.consumer_data_set[0].subscription_data_set[0]
    assert sub.expression_type == "TAG" and sub.tags_set == [] and sub.sub_version == 1
    five = HeartbeatData.decode(b'{"clientID":"x","heartbeatFingerprint":0,"withoutSub":false}')
    assert five.heartbeat_fingerprint == 0 and five.without_sub is False


def test_subscription_rebuilt_from_its_expression() -> None:
    sub = SubscriptionData.of("T", " TagA || TagB||", 5)
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [java_string_hash("TagA"), java_string_hash("TagB")]
    assert SubscriptionData.of("T", None).sub_string == "*"
    assert SubscriptionData.of("T", "a > 1", expression_type="SQL92").tags_set == []


def test_bad_bodies_name_the_field() -> None:
    with pytest.raises(ProtocolError, match=r"TopicRouteData.queueDatas\[0\].perm: expected an integer"):
        TopicRouteData.decode(b'{"queueDatas":[{"perm":"rw"}]}')
    with pytest.raises(ProtocolError, match="expected a HeartbeatData object"):
        HeartbeatData.decode(b"[]")
    with pytest.raises(ProtocolError, match="expected an array"):
        HeartbeatData.decode(b'{"consumerDataSet":{}}')


def test_register_broker_body_golden_and_compressed_form() -> None:
    body = RegisterBrokerBody.decode(REGISTER)
    table = body.topic_config_serialize_wrapper.topic_config_table
    assert table["TBW102"].perm == 7 and table["TopicTest"].write_queue_nums == 4
    assert body.topic_config_serialize_wrapper.data_version == DataVersion(timestamp=1700000000000, counter=3)
    assert body.encode() == REGISTER
    packed = body.encode_compressed()
    raw = zlib.decompress(packed)
    version = b'{"counter":3,"timestamp":1700000000000}'
    assert raw.startswith(struct.pack(">i", len(version)) + version + struct.pack(">i", 2))
    assert b"TopicTest 4 4 6 SINGLE_TAG" in raw
    assert RegisterBrokerBody.decode_body(packed, compressed=True) == body
    with pytest.raises(ProtocolError):
        RegisterBrokerBody.decode_body(packed[:-3], compressed=True)
    with pytest.raises(ProtocolError, match="cut short"):
        RegisterBrokerBody.decode_compressed(zlib.compress(raw[:-3]))


def test_topic_config_5x_attributes() -> None:
    config = TopicConfig.decode(b'{"topicName":"T","attributes":{"+message.type":"NORMAL"}}')
    assert config.attributes == {"+message.type": "NORMAL"} and config.read_queue_nums == 16


def test_message_queue_keyed_stats_in_both_styles() -> None:
    mq = MessageQueue("T", "b", 1)
    stats = ConsumeStats(offset_table={mq: OffsetWrapper(broker_offset=10, consumer_offset=7,
                                                         last_timestamp=99)})
    bare = stats.encode()
    assert bare == (b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:'
                    b'{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":99}}}')
    assert ConsumeStats.decode(bare) == stats == ConsumeStats.decode(stats.encode(standard=True))
    assert stats.total_diff == 3


def test_lock_bodies_and_small_lists() -> None:
    request = LockBatchRequestBody.decode(
        b'{"clientId":"c","consumerGroup":"cg","mqSet":[{"brokerName":"b","queueId":1,"topic":"T"},'
        b'{"brokerName":"b","queueId":0,"topic":"T"}]}')
    assert request.mq_set == {MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)}
    reply = LockBatchResponseBody(lock_ok_mq_set=request.mq_set)
    assert reply.encode() == (b'{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"T"},'
                              b'{"brokerName":"b","queueId":1,"topic":"T"}]}')
    assert ConsumerListBody(consumer_id_list=["a", "b"]).encode() == b'{"consumerIdList":["a","b"]}'
    assert TopicList(topic_list=["TBW102"]).encode() == b'{"topicList":["TBW102"]}'
    assert KVTable.decode(b'{"table":{"k":"v","n":1}}').table == {"k": "v", "n": "1"}


def test_consumer_connection_golden() -> None:
    body = ConsumerConnection.decode(CONSUMER_CONNECTION)
    assert body.connection_set == [Connection(client_id="c1", client_addr="10.0.0.5:53412")]
    assert body.subscription_table["T"].sub_version == 0
    assert body.encode() == CONSUMER_CONNECTION


def batch_block(flag: int, body: bytes, props: bytes) -> bytes:
    return (struct.pack(">iiiii", 22 + len(body) + len(props), 0, 0, flag, len(body)) + body
            + struct.pack(">h", len(props)) + props)


def test_batch_body_decodes_java_layout() -> None:
    data = (batch_block(0, b"hello", b"UNIQ_KEY\x01A1\x02TAGS\x01x")
            + batch_block(7, b"", b"")
            + batch_block(1, b"\x00\x01", b"KEYS\x01k1 k2\x02"))
    entries = list(iter_batch_body(data))
    assert [(e.flag, e.body) for e in entries] == [(0, b"hello"), (7, b""), (1, b"\x00\x01")]
    messages = decode_batch_body(data, "TopicTest", {"CLUSTER": "c"})
    assert [m.topic for m in messages] == ["TopicTest"] * 3
    assert messages[0].properties == {"UNIQ_KEY": "A1", "TAGS": "x", "CLUSTER": "c"}
    assert messages[1].properties == {"CLUSTER": "c"} and messages[1].flag == 7
    assert messages[2].keys == ["k1", "k2"]


def test_batch_members_append_the_batch_properties_raw() -> None:
    data = (batch_block(0, b"hello", b"UNIQ_KEY\x01A1\x02TAGS\x01x")  # no trailing separator
            + batch_block(7, b"", b"")
            + batch_block(1, b"b", b"CLUSTER\x01mine\x02"))
    members = batch_members(data, b"CLUSTER\x01c\x02")
    assert members == [(b"hello", b"UNIQ_KEY\x01A1\x02TAGS\x01x\x02CLUSTER\x01c\x02", 0),
                       (b"", b"CLUSTER\x01c\x02", 7),
                       (b"b", b"CLUSTER\x01mine\x02CLUSTER\x01c\x02", 1)]
    # decoders keep a key's last value: the batch's, as decode_batch_body gives it
    as_messages = decode_batch_body(data, "T", {"CLUSTER": "c"})
    assert [decode_properties(p) for _, p, _ in members] == [m.properties for m in as_messages]
    assert batch_members(data) == [(b"hello", b"UNIQ_KEY\x01A1\x02TAGS\x01x", 0), (b"", b"", 7),
                                   (b"b", b"CLUSTER\x01mine\x02", 1)]


def test_batch_body_encoder_matches_java() -> None:
    msgs = [Message("T", b"a", tags="t", flag=3), Message("T", b"bc")]
    data = encode_batch_body(msgs)
    assert data == batch_block(3, b"a", b"TAGS\x01t\x02") + batch_block(0, b"bc", b"")
    assert [(m.body, m.flag, m.tags) for m in decode_batch_body(data, "T")] == [
        (b"a", 3, "t"), (b"bc", 0, None)]


@pytest.mark.parametrize("cut", [1, 5, 21, 24, 30])
def test_truncated_batch_body_is_a_protocol_error(cut: int) -> None:
    data = batch_block(0, b"hello", b"TAGS\x01x") + batch_block(0, b"x", b"")
    with pytest.raises(ProtocolError, match="batch member"):
        list(iter_batch_body(data[:len(data) - cut]))


def test_negative_lengths_in_a_batch_are_rejected() -> None:
    bad = struct.pack(">iiiii", 22, 0, 0, 0, -1) + struct.pack(">h", 0)
    with pytest.raises(ProtocolError, match="BODYLEN -1"):
        list(iter_batch_body(bad))
    bad = struct.pack(">iiiii", 22, 0, 0, 0, 0) + struct.pack(">h", -2)
    with pytest.raises(ProtocolError, match="PROPSLEN -2"):
        list(iter_batch_body(bad))


def test_consumer_running_info_from_java_and_go() -> None:
    mq = MessageQueue("T", "b", 0)
    java = (b'{"jstack":"\\"main\\" #1\\n","mqPopTable":{},"mqTable":{{"brokerName":"b","queueId":0,'
            b'"topic":"T"}:{"cachedMsgCount":2,"cachedMsgMaxOffset":9,"cachedMsgMinOffset":8,'
            b'"cachedMsgSizeInMiB":0,"commitOffset":8,"droped":false,"lastConsumeTimestamp":5,'
            b'"lastLockTimestamp":0,"lastPullTimestamp":4,"locked":true,"transactionMsgCount":0,'
            b'"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,"tryUnlockTimes":0}},'
            b'"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","consumeThreadMin":20},'
            b'"statusTable":{"T":{"consumeFailedMsgs":3,"consumeFailedTPS":0.5,"consumeOKTPS":12.25,'
            b'"consumeRT":1.0,"pullRT":2.0,"pullTPS":12.25}},"subscriptionSet":[{"classFilterMode":false,'
            b'"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":7,"tagsSet":[],"topic":"T"}],'
            b'"userConsumerInfo":{}}')
    info = ConsumerRunningInfo.decode(java)
    assert info.properties == {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "consumeThreadMin": "20"}
    assert info.mq_table == {mq: ProcessQueueInfo(commit_offset=8, cached_msg_min_offset=8,
                                                  cached_msg_max_offset=9, cached_msg_count=2, locked=True,
                                                  last_pull_timestamp=4, last_consume_timestamp=5)}
    assert info.status_table == {"T": TopicConsumeStatus(pull_rt=2.0, pull_tps=12.25, consume_rt=1.0,
                                                         consume_ok_tps=12.25, consume_failed_tps=0.5,
                                                         consume_failed_msgs=3)}
    assert [s.sub_version for s in info.subscription_set] == [7] and info.jstack == '"main" #1\n'
    assert ConsumerRunningInfo.decode(info.encode()) == info
    assert b'"droped":false' in info.encode() and b'"pullRT":2.0' in info.encode()
    # Go: its own field order, "dropped", and the stacks written unescaped
    go = (b'{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"statusTable":{},"subscriptionSet":[],'
          b'"mqTable":{{"topic":"T","brokerName":"b","queueId":0}:{"commitOffset":3,"dropped":true}}, '
          b'"jstack":"goroutine 1 [running]:\n\tmain.main()\n" }')
    info = ConsumerRunningInfo.decode(go)
    assert info.mq_table[mq].droped and info.mq_table[mq].commit_offset == 3
    assert info.jstack == "goroutine 1 [running]:\n\tmain.main()\n"
