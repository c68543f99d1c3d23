"""The settings commands of ``bolide admin`` (getBrokerConfig, updateBrokerConfig,
getNamesrvConfig, updateNamesrvConfig, wipeWritePerm, addWritePerm; also updateKvConfig,
deleteKvConfig, updateTopicPerm, cloneGroupOffset, deleteExpiredCommitLog) against an in-process
NameServer + Broker: a broker's changes apply at once (the store's retention settings too) and
are written into its config file, comments and other lines kept, so the next start has them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_admin import ServerThread, admin_json, admin_table, bolide

from bolide.broker import BrokerConfig
from bolide.cli.server import _broker_configs
from bolide.client.admin import Admin
from bolide.client.errors import MQBrokerError
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.processors import NamesrvProcessor
from bolide.protocol import RemotingCommand, RequestCode, ResponseCode
from bolide.store import StoreConfig

CONF = """# written by hand
brokerClusterName = DefaultCluster
fileReservedTime=72
! retention
deleteWhen=04
"""


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "broker.conf"
    path.write_text(CONF)
    return path


@pytest.fixture
def servers(tmp_path: Path, conf: Path) -> Iterator[ServerThread]:
    st = ServerThread(tmp_path / "store", broker_config_path=str(conf))
    st.thread.start()
    assert st.ready.wait(30) and st.error is None, st.error
    yield st
    st.stop()


def test_update_broker_config_applies_and_writes_the_config_file(servers: ServerThread, conf: Path) -> None:
    assert servers.servers is not None
    s = servers.servers
    ns, addr = s.namesrv_addr, s.broker_addr
    assert admin_json(ns, "getBrokerConfig", "-b", addr)[addr]["fileReservedTime"] == "72"
    assert "fileReservedTime" in admin_table(ns, "getBrokerConfig")

    doc = admin_json(ns, "updateBrokerConfig", "-b", addr, "-k", "fileReservedTime", "-v", "24")
    assert doc == {"key": "fileReservedTime", "value": "24", "brokers": [addr]}
    admin_json(ns, "updateBrokerConfig", "-k", "brokerPermission", "-v", "4")  # every master
    assert s.broker.store.config.file_reserved_time_hours == 24
    assert s.broker.config.broker_permission == 4
    clean = s.broker.store._clean_service
    assert clean is not None and clean.config.file_reserved_time_hours == 24
    assert admin_json(ns, "getBrokerConfig")[addr]["fileReservedTime"] == "24"
    changed = CONF.replace("fileReservedTime=72", "fileReservedTime=24")
    assert conf.read_text() == changed + "brokerPermission=4\n"
    assert (conf.parent / "broker.conf.bak").read_text() == changed  # the text before the last write

    # a later start from the file has the changes
    broker_config, store_config = _broker_configs(str(conf), str(conf.parent / "store"), 0, None)
    assert broker_config.broker_permission == 4 and store_config.file_reserved_time_hours == 24
    assert broker_config.broker_config_path == str(conf.resolve())

    refusals = {("listenPort", "1"): "restart", ("noSuchKey", "1"): "no setting noSuchKey",
                ("brokerConfigPath", "/tmp/x"): "black list", ("deleteWhen", "25"): "deleteWhen",
                ("flushDiskType", "SYNC_FLUSH"): "restart", ("defaultTopicQueueNums", "0"): ""}
    for (key, value), why in refusals.items():
        result = bolide("admin", "updateBrokerConfig", "-n", ns, "-k", key, "-v", value, ok=False)
        assert result.exit_code != 0 and why in result.output, (key, result.output)
    assert s.broker.store.config.delete_when == "04" and clean.delete_hours == frozenset({4})
    assert s.broker.config.default_topic_queue_nums == 8
    assert "listenPort" not in conf.read_text() and "deleteWhen=04" in conf.read_text()


def test_wipe_and_add_write_perm(servers: ServerThread) -> None:
    assert servers.servers is not None
    ns = servers.servers.namesrv_addr
    admin_json(ns, "updateTopic", "-t", "PermTopic", "-r", "2", "-w", "2")

    def perm() -> int:
        return int(admin_json(ns, "topicRoute", "-t", "PermTopic")["queueDatas"][0]["perm"])

    assert perm() == 6
    doc = admin_json(ns, "wipeWritePerm", "-b", "broker-a")
    assert doc["brokerName"] == "broker-a" and doc["topics"][ns] >= 1
    assert perm() == 4
    assert "topics" in admin_table(ns, "addWritePerm", "-b", "broker-a")
    assert perm() == 6
    assert admin_json(ns, "wipeWritePerm", "-b", "no-such-broker")["topics"] == {ns: 0}


def test_namesrv_config_commands(servers: ServerThread) -> None:
    assert servers.servers is not None
    ns = servers.servers.namesrv_addr
    assert admin_json(ns, "getNamesrvConfig")[ns]["orderMessageEnable"] == "false"
    admin_json(ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert admin_json(ns, "getNamesrvConfig")[ns]["orderMessageEnable"] == "true"
    result = bolide("admin", "updateNamesrvConfig", "-n", ns, "-k", "configStorePath", "-v", "/x", ok=False)
    assert result.exit_code != 0 and "black list" in result.output


def test_a_broker_without_a_config_file_writes_the_store_config_dir(tmp_path: Path) -> None:
    """Without brokerConfigPath the changes go to <store>/config/broker.properties, which a start
    on that store without -c reads."""
    store = tmp_path / "store"
    st = ServerThread(store)
    st.thread.start()
    assert st.ready.wait(30) and st.error is None, st.error
    try:
        assert st.servers is not None
        admin_json(st.servers.namesrv_addr, "updateBrokerConfig", "-k", "diskMaxUsedSpaceRatio", "-v", "60")
        assert st.servers.broker.store.config.disk_max_used_space_ratio == 60
    finally:
        st.stop()
    assert (store / "config" / "broker.properties").read_text() == "diskMaxUsedSpaceRatio=60\n"
    broker_config, store_config = _broker_configs(None, str(store), 0, None)
    assert store_config.disk_max_used_space_ratio == 60 and store_config.store_path_root_dir == str(store)
    assert broker_config.config_file(store) == store / "config" / "broker.properties"


def test_a_config_file_the_broker_cannot_write_is_named(tmp_path: Path) -> None:
    (tmp_path / "conf-dir").mkdir()  # a directory where the file should be
    st = ServerThread(tmp_path / "store", broker_config_path=str(tmp_path / "conf-dir"))
    st.thread.start()
    assert st.ready.wait(30) and st.error is None, st.error
    try:
        assert st.servers is not None

        async def update() -> None:
            async with Admin(st.servers.namesrv_addr) as admin:  # type: ignore[union-attr]
                await admin.update_broker_config({"longPollingEnable": False})

        with pytest.raises(MQBrokerError, match=r"not written to .*conf-dir"):
            asyncio.run(update())
        assert st.servers.broker.config.long_polling_enable is False  # applied all the same
    finally:
        st.stop()


def test_conf_store_path_wins_over_the_default(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'elsewhere'}\n"
                    f"brokerConfigPath={tmp_path / 'saved.conf'}\n")
    broker_config, store_config = _broker_configs(str(conf), None, None, None)
    assert store_config.store_path_root_dir == str(tmp_path / "elsewhere")
    assert broker_config.config_file(Path(store_config.store_path_root_dir)) == tmp_path / "saved.conf"
    assert BrokerConfig().config_file(tmp_path) == tmp_path / "config" / "broker.properties"
    assert StoreConfig.from_properties(conf).store_path_root_dir == str(tmp_path / "elsewhere")


def test_a_namesrv_with_a_config_file_writes_its_changes(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.conf"
    path.write_text("listenPort=9876\n")
    processor = NamesrvProcessor(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")), config_file=path)
    request = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG,
                                      body=b"orderMessageEnable=true\nnotAKey=1\n")
    response = processor.process(request)
    assert response is not None and response.code == ResponseCode.SUCCESS, response
    assert processor.config.order_message_enable is True
    assert path.read_text() == "listenPort=9876\norderMessageEnable=true\n"


def test_topic_perm_kv_config_clone_and_expired_commit_log_commands(servers: ServerThread) -> None:
    assert servers.servers is not None
    s = servers.servers
    ns, addr = s.namesrv_addr, s.broker_addr
    admin_json(ns, "updateTopic", "-t", "PermT", "-r", "2", "-w", "3")
    doc = admin_json(ns, "updateTopicPerm", "-t", "PermT", "-p", "4")
    assert doc == {"topic": "PermT", "perm": 4, "brokers": [addr]}
    topic = s.broker.topics.get("PermT")
    assert topic is not None and (topic.perm, topic.read_queue_nums, topic.write_queue_nums) == (4, 2, 3)
    result = bolide("admin", "updateTopicPerm", "-n", ns, "-t", "PermT", "-p", "6", "-b", "127.0.0.1:1",
                    ok=False)
    assert result.exit_code != 0 and "does not serve topic 'PermT'" in result.output

    admin_json(ns, "updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "PermT", "-v", "broker-a:2")
    assert s.namesrv.processor.kv.get("ORDER_TOPIC_CONFIG", "PermT") == "broker-a:2"
    admin_json(ns, "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "PermT")
    assert s.namesrv.processor.kv.get("ORDER_TOPIC_CONFIG", "PermT") is None

    async def commit() -> None:  # on the broker's loop, as its processors commit
        for q, offset in ((0, 5), (1, 7)):
            s.broker.offsets.commit("old-g", "PermT", q, offset)

    servers.run(commit())
    doc = admin_json(ns, "cloneGroupOffset", "-s", "old-g", "-d", "new-g", "-t", "PermT")
    assert [(o["queueId"], o["offset"]) for o in doc["offsets"]] == [(0, 5), (1, 7)]
    assert [s.broker.offsets.query("new-g", "PermT", q) for q in (0, 1)] == [5, 7]
    none = admin_table(ns, "cloneGroupOffset", "-s", "none-g", "-d", "x", "-t", "PermT")
    assert "nothing was copied" in none

    assert admin_json(ns, "deleteExpiredCommitLog")["brokers"] == [addr]


def test_get_consumer_config_and_topic_cluster_list(servers: ServerThread) -> None:
    assert servers.servers is not None
    ns, addr = servers.servers.namesrv_addr, servers.servers.broker_addr
    admin_json(ns, "updateSubGroup", "-g", "cfg-g", "-r", "5")
    doc = admin_json(ns, "getConsumerConfig", "-g", "cfg-g")
    assert doc[addr]["groupName"] == "cfg-g" and doc[addr]["retryMaxTimes"] == 5
    assert "retryMaxTimes" in admin_table(ns, "getConsumerConfig", "-g", "cfg-g", "-b", addr)
    assert admin_json(ns, "getConsumerConfig", "-g", "no-such-g") == {addr: None}
    assert "no group 'no-such-g'" in bolide("admin", "getConsumerConfig", "-n", ns, "-g", "no-such-g").output

    admin_json(ns, "updateTopic", "-t", "ClusterT", "-r", "1", "-w", "1")
    assert admin_json(ns, "topicClusterList", "-t", "ClusterT") == {"topic": "ClusterT",
                                                                   "clusters": ["DefaultCluster"]}
    assert "DefaultCluster" in admin_table(ns, "topicClusterList", "-t", "ClusterT")


def test_update_topic_list_and_sub_group_list_from_files(servers: ServerThread, tmp_path: Path) -> None:
    assert servers.servers is not None
    s = servers.servers
    ns, addr = s.namesrv_addr, s.broker_addr
    topics = tmp_path / "topics.json"
    topics.write_text('[{"topicName": "FileT1", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},'
                      ' {"topicName": "FileT2", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,'
                      '  "attributes": {"+message.type": "FIFO"}}]')
    doc = admin_json(ns, "updateTopicList", "-f", str(topics))
    assert doc["brokers"] == [addr] and [t["topicName"] for t in doc["topics"]] == ["FileT1", "FileT2"]
    t1, t2 = s.broker.topics.get("FileT1"), s.broker.topics.get("FileT2")
    assert t1 is not None and (t1.read_queue_nums, t1.write_queue_nums) == (2, 2)
    assert t2 is not None and t2.attributes == {"message.type": "FIFO"}
    assert "FileT1" in admin_table(ns, "updateTopicList", "-f", str(topics), "-b", addr)

    groups = tmp_path / "groups.json"
    groups.write_text('[{"groupName": "file-g1", "retryMaxTimes": 4}, {"groupName": "file-g2",'
                      ' "consumeBroadcastEnable": false, "consumeTimeoutMinute": 30}]')
    doc = admin_json(ns, "updateSubGroupList", "-f", str(groups), "-c", "DefaultCluster")
    assert doc["brokers"] == [addr] and [g["groupName"] for g in doc["groups"]] == ["file-g1", "file-g2"]
    g1, g2 = s.broker.subscription_groups.get("file-g1"), s.broker.subscription_groups.get("file-g2")
    assert g1 is not None and g1.retry_max_times == 4
    assert g2 is not None and g2.consume_broadcast_enable is False and g2.extra["consumeTimeoutMinute"] == 30

    # bad files: the entry is named, nothing is sent; a broker's refusal names the topic
    bad = tmp_path / "bad.json"
    for text, named in (('{"topicName": "X"}', "no JSON array"), ('[{"topicName": "X"}, {"perm": 6}]',
                                                                  "bad.json[1] has no topicName"),
                        ('[{"topicName": "X", "readQueueNums": "two"}]', "bad.json[0].readQueueNums"),
                        ("[{", "is not JSON")):
        bad.write_text(text)
        result = bolide("admin", "updateTopicList", "-n", ns, "-f", str(bad), ok=False)
        assert result.exit_code != 0 and named in result.output, (text, result.output)
    bad.write_text('[{"groupName": "ok-g"}, {"retryMaxTimes": 1}]')
    result = bolide("admin", "updateSubGroupList", "-n", ns, "-f", str(bad), ok=False)
    assert result.exit_code != 0 and "bad.json[1] has no groupName" in result.output
    bad.write_text('[{"topicName": "bad topic!"}]')
    result = bolide("admin", "updateTopicList", "-n", ns, "-f", str(bad), ok=False)
    assert result.exit_code != 0 and "topicConfigList[0] (bad topic!)" in result.output
    assert s.broker.topics.get("X") is None and s.broker.subscription_groups.get("ok-g") is None


def test_export_metadata(servers: ServerThread, tmp_path: Path) -> None:
    """exportMetadata writes the topics and groups of applications as mqadmin does (no system
    topics or predefined groups; retry and dead letter topics with -s)."""
    assert servers.servers is not None
    s = servers.servers
    ns, addr = s.namesrv_addr, s.broker_addr
    admin_json(ns, "updateTopic", "-t", "ExportT", "-r", "3", "-w", "2")
    admin_json(ns, "updateSubGroup", "-g", "export-g", "-r", "7")
    admin_json(ns, "updateTopic", "-t", "%RETRY%export-g", "-r", "1", "-w", "1")
    out = tmp_path / "export"
    doc = admin_json(ns, "exportMetadata", "-c", "DefaultCluster", "-f", str(out))
    assert doc["file"] == str(out / "metadata.json") and doc["topics"] >= 1 and doc["groups"] >= 1
    written = json.loads((out / "metadata.json").read_text())
    topic = written["topicConfigTable"]["ExportT"]
    assert (topic["readQueueNums"], topic["writeQueueNums"], topic["perm"]) == (3, 2, 6)
    assert written["subscriptionGroupTable"]["export-g"]["retryMaxTimes"] == 7
    assert written["exportTime"] > 0
    assert not {"TBW102", "SCHEDULE_TOPIC_XXXX", "%RETRY%export-g"} & set(written["topicConfigTable"])
    assert not {"TOOLS_CONSUMER", "CID_SYS_RMQ_TRANS"} & set(written["subscriptionGroupTable"])

    admin_json(ns, "exportMetadata", "-b", addr, "-f", str(out), "-t", "-s")
    topics_only = json.loads((out / "topic.json").read_text())
    assert set(topics_only) == {"topicConfigTable", "exportTime"}
    assert "%RETRY%export-g" in topics_only["topicConfigTable"]
    admin_json(ns, "exportMetadata", "-f", str(out), "-g")
    assert "export-g" in json.loads((out / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    both = bolide("admin", "exportMetadata", "-n", ns, "-t", "-g", "-f", str(out), ok=False)
    assert both.exit_code != 0 and "not both" in both.output


def test_export_configs(servers: ServerThread, tmp_path: Path) -> None:
    assert servers.servers is not None
    ns = servers.servers.namesrv_addr
    doc = admin_json(ns, "exportConfigs", "-c", "DefaultCluster", "-f", str(tmp_path))
    assert (doc["namesrvSize"], doc["masterBrokerSize"], doc["slaveBrokerSize"]) == (1, 1, 0)
    written = json.loads((tmp_path / "configs.json").read_text())
    broker = written["brokerConfigs"]["broker-a"]
    assert broker["brokerClusterName"] == "DefaultCluster" and broker["fileReservedTime"] == "72"
    assert "listenPort" not in broker  # only the keys mqadmin exports
    unknown = bolide("admin", "exportConfigs", "-n", ns, "-c", "Nope", "-f", str(tmp_path), ok=False)
    assert unknown.exit_code != 0 and "DefaultCluster" in unknown.output
