"""``bolide admin`` checks and lookups against an in-process NameServer + Broker: clusterRT,
sendMsgStatus and checkMsgSendRT (timed sends), allocateMQ, updateOrderConf (the NameServer's
ORDER_TOPIC_CONFIG), queryMsgByUniqueKey, printMsgByQueue and setCommitLogReadAheadMode."""

from __future__ import annotations

import json
import os

import pytest
from test_cli_admin import ServerThread, admin_json, admin_table, bolide, servers_fixture

from bolide.client import Message
from bolide.client.blocking import Admin, Producer
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.protocol.headers.admin import ExportRocksDBConfigToJsonRequestHeader

TOPIC = "ChecksTopic"


servers = servers_fixture("checks")


@pytest.fixture
def ns(servers: ServerThread) -> str:
    assert servers.servers is not None
    return servers.servers.namesrv_addr


def test_timed_sends(ns: str, servers: ServerThread) -> None:
    assert servers.servers is not None
    broker = servers.servers.broker.config.broker_name
    cluster = servers.servers.broker.config.broker_cluster_name
    admin_json(ns, "updateTopic", "-t", TOPIC, "-r", "4", "-w", "4")

    rows = admin_json(ns, "clusterRT", "-a", "3", "-s", "16")
    assert [(r["cluster"], r["brokerName"], r["successCount"], r["failCount"]) for r in rows] == [
        (cluster, broker, 3, 0)]
    assert rows[0]["rtMs"] > 0
    assert broker in admin_table(ns, "clusterRT", "-c", cluster, "-a", "2")
    unknown = bolide("admin", "clusterRT", "-n", ns, "-c", "NoSuchCluster", ok=False)
    assert unknown.exit_code != 0 and "NoSuchCluster" in unknown.output and cluster in unknown.output

    sends = admin_json(ns, "sendMsgStatus", "-b", broker, "-c", "3", "-s", "32")
    assert len(sends) == 3 and all(s["ok"] and s["status"] == "SEND_OK" for s in sends)
    assert "mean round trip" in admin_table(ns, "sendMsgStatus", "-b", broker, "-c", "1")

    check = admin_json(ns, "checkMsgSendRT", "-t", TOPIC, "-a", "8", "-s", "64")
    assert [s["queueId"] for s in check["sends"]] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert all(s["ok"] for s in check["sends"]) and check["averageRtMs"] > 0
    assert "Avg RT" in admin_table(ns, "checkMsgSendRT", "-t", TOPIC, "-a", "2")
    with Admin(ns) as admin:  # the sends were stored: 8 + 2 in the topic's queues
        assert sum(o.max_offset for o in admin.topic_stats(TOPIC).values()) == 10


def test_allocate_mq_and_order_conf(ns: str) -> None:
    admin_json(ns, "updateTopic", "-t", "ChecksAlloc", "-r", "4", "-w", "4")
    shares = admin_json(ns, "allocateMQ", "-t", "ChecksAlloc", "-i", "c3,c1,c2")["result"]
    assert {cid: [q["queueId"] for q in queues] for cid, queues in shares.items()} == {
        "c1": [0, 1], "c2": [2], "c3": [3]}
    assert "c1" in admin_table(ns, "allocateMQ", "-t", "ChecksAlloc", "-i", "c1")

    assert admin_json(ns, "updateOrderConf", "-t", "ChecksAlloc", "-m", "get")["orderConf"] is None
    put = admin_json(ns, "updateOrderConf", "-t", "ChecksAlloc", "-m", "put", "-v", "broker-a:4")
    assert put["namesrvs"] == [ns]
    assert admin_json(ns, "updateOrderConf", "-t", "ChecksAlloc", "-m", "get")["orderConf"] == "broker-a:4"
    with Admin(ns) as admin:
        assert admin.kv_config("ORDER_TOPIC_CONFIG", "ChecksAlloc") == "broker-a:4"
    admin_json(ns, "updateOrderConf", "-t", "ChecksAlloc", "-m", "delete")
    assert "has no orderConf" in bolide("admin", "updateOrderConf", "-n", ns, "-t", "ChecksAlloc", "-m",
                                        "get").stdout
    missing = bolide("admin", "updateOrderConf", "-n", ns, "-t", "ChecksAlloc", "-m", "put", ok=False)
    assert missing.exit_code != 0 and "-v" in missing.output


def test_query_by_unique_key_and_print_by_queue(ns: str, servers: ServerThread) -> None:
    assert servers.servers is not None
    broker = servers.servers.broker.config.broker_name
    admin_json(ns, "updateTopic", "-t", "ChecksMsgs", "-r", "2", "-w", "2")
    with Producer(ns, group="checks-pg") as producer:
        queues = producer.publish_queues("ChecksMsgs")
        sent = [producer.send(Message("ChecksMsgs", b"m%d" % i, tags="A" if i % 3 else "B"), queue=queues[0])
                for i in range(6)]
        client_ip = producer.client_id.split("@")[0]
    assert servers.servers.broker.store.wait_dispatched(10.0)  # the index is built as messages dispatch
    found = admin_json(ns, "queryMsgByUniqueKey", "-i", sent[2].msg_id, "-t", "ChecksMsgs")
    assert found["body"] == "m2" and found["msgId"] == sent[2].msg_id
    usage = bolide("admin", "queryMsgByUniqueKey", "-n", ns, "-i", sent[2].msg_id, ok=False)
    assert usage.exit_code != 0 and "--topic" in usage.output
    # decodeMessageId: this process made the id, a moment ago (no server asked)
    decoded = json.loads(bolide("admin", "decodeMessageId", "-i", sent[2].msg_id, "--output", "json").stdout)
    assert (decoded["ip"], decoded["pid"]) == (client_ip, os.getpid() & 0x7FFF)
    assert abs(decoded["timestamp"] - found["bornTimestamp"]) < 1000

    printed = admin_json(ns, "printMsgByQueue", "-t", "ChecksMsgs", "-a", broker, "-i", "0")
    assert [m["queueOffset"] for m in printed["messages"]] == list(range(6))
    only_b = admin_json(ns, "printMsgByQueue", "-t", "ChecksMsgs", "-a", broker, "-i", "0", "-s", "B")
    assert only_b["count"] == 2
    assert admin_json(ns, "printMsgByQueue", "-t", "ChecksMsgs", "-a", broker, "-i", "0", "-f")["tags"] == {
        "A": 4, "B": 2}
    assert admin_json(ns, "printMsgByQueue", "-t", "ChecksMsgs", "-a", broker, "-i", "1")["count"] == 0
    wrong = bolide("admin", "printMsgByQueue", "-n", ns, "-t", "ChecksMsgs", "-a", broker, "-i", "7",
                   ok=False)
    assert wrong.exit_code != 0 and "no readable queue 7" in wrong.output


def test_set_commit_log_read_ahead_mode(ns: str, servers: ServerThread) -> None:
    assert servers.servers is not None
    addr, store = servers.servers.broker_addr, servers.servers.broker.store
    doc = admin_json(ns, "setCommitLogReadAheadMode", "-b", addr, "-m", "1")
    assert doc["mode"] == 1 and "success" in doc["brokers"][addr]
    assert store.commit_log_read_ahead is False
    admin_json(ns, "setCommitLogReadAheadMode", "-m", "0")  # every master
    assert store.commit_log_read_ahead is True
    wrong = bolide("admin", "setCommitLogReadAheadMode", "-n", ns, "-m", "2", ok=False)
    assert wrong.exit_code != 0 and "'2' is not one of '0', '1'" in wrong.output


def test_rocksdb_migration_commands_say_there_is_no_rocksdb(ns: str, servers: ServerThread) -> None:
    """checkRocksdbCqWriteProgress and rocksDBConfigToJson (RocketMQ 5.3's move to RocksDB):
    Bolide's ConsumeQueues and configs are files, and its brokers answer so; a bad header or
    config type gets a named error."""
    assert servers.servers is not None
    addr = servers.servers.broker_addr
    doc = admin_json(ns, "checkRocksdbCqWriteProgress", "-t", "ChecksMsgs")
    assert doc[addr]["checkStatus"] == 1 and "no RocksDB ConsumeQueue" in doc[addr]["checkResult"]
    assert "CHECK_NOT_OK" in admin_table(ns, "checkRocksdbCqWriteProgress", "-b", addr)
    written = admin_json(ns, "rocksDBConfigToJson", "-b", addr, "-t", "topics;consumerOffsets")
    assert written == {"brokers": [addr], "configTypes": ["topics", "consumerOffsets"]}
    wrong = bolide("admin", "rocksDBConfigToJson", "-n", ns, "-t", "queues", ok=False)
    assert wrong.exit_code != 0 and "topics, subscriptionGroups, consumerOffsets" in wrong.output
    with Admin(ns) as admin:
        assert admin.export_rocksdb_config_to_json(broker_addr=addr) == [addr]
    bad = servers.ask(addr, RemotingCommand.request(
        RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON, ExportRocksDBConfigToJsonRequestHeader(config_type="x")))
    assert bad.code == ResponseCode.SYSTEM_ERROR and "Unknown config type: x" in (bad.remark or "")
    no_topic = servers.ask(addr, RemotingCommand.request(RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS))
    assert no_topic.code != ResponseCode.SUCCESS and "topic" in (no_topic.remark or "")
