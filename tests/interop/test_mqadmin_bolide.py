"""The real Apache RocketMQ ``mqadmin`` (4.9.7 and 5.3.3, from Maven Central) against Bolide's
in-process NameServer + Broker: cluster and broker status, topics (list, route, status, update,
delete), subscription groups, consumer progress and connections, the three message queries,
resetOffsetByTime (relayed to an online consumer, or committed by mqadmin for an offline group)
consumerStatus / consumerProgress -s (GET_CONSUMER_RUNNING_INFO relayed to a Python push
consumer, whose report mqadmin parses), queryMsgById -g -d (CONSUME_MESSAGE_DIRECTLY),
brokerConsumeStats, producer, queryCq, sendMsgStatus, the three exports, statsAll,
checkMsgSendRT, the config getters and setters (updateBrokerConfig written into the broker's
config file), KV config, cloneGroupOffset, write permissions,
updateTopicPerm, deleteExpiredCommitLog, cleanExpiredCQ, cleanUnusedTopic, updateOrderConf,
allocateMQ, printMsgByQueue, queryMsgTraceById (of a trace Bolide encoded) and 5.x's cold data
flow control commands.

The servers run on this process's event loop while mqadmin is a JVM subprocess, so each batch
runs in a thread (``asyncio.to_thread``). A raw RemotingClient heartbeats as consumer group
``cg`` / producer group ``pg`` and keeps its connection open while mqadmin looks. Needs java,
javac and mvn: without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest
from client_roundtrip import unavailable

from bolide.broker.cold_data import ColdDataFlowControl
from bolide.client import ClientConfig, ConsumeFrom, PushConsumer
from bolide.common.fastjson import loads
from bolide.common.message import MessageExt
from bolide.protocol import RemotingCommand
from bolide.protocol.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from bolide.protocol.bodies.admin import ResetOffsetBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers import (
    CreateTopicRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.protocol.trace import PUB, TRACE_TOPIC, TraceBean, TraceContext, encode_trace_context
from bolide.remoting import RemotingClient
from bolide.testing.rocketmq import RocketMQ, RocketMQUnavailable, parse_query_by_key, parse_topic_status
from bolide.testing.servers import Servers, running_servers
from conftest import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

TOPIC = "MqadminTopic"
NEW_TOPIC = "MqadminNewTopic"
CLIENT_ID = "10.9.8.7@4242"
UNIQ = "0A0908070000ABCDEF0123456789{:04X}"
COUNT = 4  # messages, alternating between queues 0 and 1
PY_IP = "10.9.9.9"  # the Python consumer's client id is PY_IP@py


async def _invoke(client: RemotingClient, addr: str, code: int, header: object = None,
                  body: bytes = b"") -> RemotingCommand:
    r = await client.invoke(addr, RemotingCommand.request(code, header, body))  # type: ignore[arg-type]
    assert r.code == ResponseCode.SUCCESS, r
    return r


async def _prepare(s: Servers, client: RemotingClient) -> str:
    """Topic with COUNT messages, a heartbeat of cg/pg, offsets 1 and 2 committed; returns the
    client's local address as the broker sees it."""
    await _invoke(client, s.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(
        topic=TOPIC, default_topic="TBW102", read_queue_nums=2, write_queue_nums=2, perm=6))
    for i in range(COUNT):
        props = f"KEYS\x01key-{i} common\x02UNIQ_KEY\x01{UNIQ.format(i)}\x02"
        header = SendMessageRequestHeader(producer_group="pg", topic=TOPIC, default_topic="TBW102",
                                          default_topic_queue_nums=4, queue_id=i % 2, sys_flag=0,
                                          born_timestamp=int(time.time() * 1000), flag=0,
                                          properties=props)
        await _invoke(client, s.broker_addr, RequestCode.SEND_MESSAGE_V2, header.to_v2(), b"body-%d" % i)
    consumer = ConsumerData(group_name="cg", consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
                            consume_from_where="CONSUME_FROM_LAST_OFFSET",
                            subscription_data_set=[SubscriptionData.of(TOPIC, "*")])
    beat = HeartbeatData(client_id=CLIENT_ID, producer_data_set=[ProducerData(group_name="pg")],
                         consumer_data_set=[consumer])
    await _invoke(client, s.broker_addr, RequestCode.HEART_BEAT, body=beat.encode())
    for qid, offset in ((0, 1), (1, 2)):
        await _invoke(client, s.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                      UpdateConsumerOffsetRequestHeader(consumer_group="cg", topic=TOPIC, queue_id=qid,
                                                        commit_offset=offset))
    # a trace of message 0 as Bolide encodes it, for mqadmin queryMsgTraceById to decode
    await _invoke(client, s.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(
        topic=TRACE_TOPIC, default_topic="TBW102", read_queue_nums=1, write_queue_nums=1, perm=6))
    trace, keys = encode_trace_context(TraceContext(
        PUB, int(time.time() * 1000), "DefaultRegion", "pg", cost_ms=3,
        beans=[TraceBean(UNIQ.format(0), TOPIC, "", "key-0 common", s.broker_addr, 6)]))
    header = SendMessageRequestHeader(producer_group="trace_pg", topic=TRACE_TOPIC, default_topic="TBW102",
                                      default_topic_queue_nums=1, queue_id=0, sys_flag=0,
                                      born_timestamp=int(time.time() * 1000), flag=0,
                                      properties=f"KEYS\x01{' '.join(keys)}\x02")
    await _invoke(client, s.broker_addr, RequestCode.SEND_MESSAGE_V2, header.to_v2(), trace.encode())
    assert await asyncio.to_thread(s.broker.store.wait_dispatched, 10.0)
    return (await client.get_channel(s.broker_addr)).local_address


def _fields(text: str) -> dict[str, str]:
    """``Name:   value`` / ``name : value`` lines (queryMsgBy*, brokerStatus)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z][\w ]*?)\s*:\s+(.*?)\s*$", line)
        if m:
            out[m[1]] = m[2]
    return out


def _rows(text: str, first: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.split()[:1] == [first]]


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_mqadmin_against_bolide(tmp_path: Path, version: str) -> None:
    try:
        rmq = RocketMQ(version, tmp_path / "mqadmin")
    except RocketMQUnavailable as exc:
        unavailable(f"real RocketMQ unavailable: {exc}")
    major5 = version.startswith("5")

    async def main() -> tuple[str, str, list[list[str]], list[str], dict[str, object]]:
        async with running_servers(tmp_path / "store") as s, RemotingClient() as client:
            resets: list[RemotingCommand] = []

            async def on_reset(ctx: object, request: RemotingCommand) -> None:
                resets.append(request)  # RESET_CONSUMER_CLIENT_OFFSET relayed by the broker

            client.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
            local = await _prepare(s, client)
            seen: list[MessageExt] = []

            async def on_messages(msgs: list[MessageExt], ctx: object) -> None:
                seen.extend(msgs)

            py = PushConsumer(ClientConfig(s.namesrv_addr, client_ip=PY_IP, instance_name="py"), "cg_py",
                              listener=on_messages, consume_from=ConsumeFrom.FIRST_OFFSET,
                              persist_offset_interval_ms=100)
            py.subscribe(TOPIC, "*")
            await py.start()
            await wait_until(lambda: len(seen) == COUNT, 30)
            await wait_until(lambda: [s.broker.offsets.query("cg_py", TOPIC, q) for q in (0, 1)] == [2, 2],
                             30)
            for qid in (0, 1):  # a group with offsets and no consumer online
                await _invoke(client, s.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                              UpdateConsumerOffsetRequestHeader(consumer_group="cg_offline", topic=TOPIC,
                                                                queue_id=qid, commit_offset=0))
            rmq.namesrv_port = s.namesrv.port  # mqadmin asks Bolide's NameServer
            first = s.broker.store.get_message("g", TOPIC, 0, 0, 1).messages[0]
            by_id = ["queryMsgById", "-i", first.offset_msg_id] + (["-t", TOPIC] if major5 else [])
            topic_list, group_list = tmp_path / "topics.json", tmp_path / "groups.json"  # 5.x files
            topic_list.write_text('[{"topicName":"MqadminListA","readQueueNums":2,"writeQueueNums":2,"perm":6},'
                                  '{"topicName":"MqadminListB","readQueueNums":1,"writeQueueNums":1,"perm":4}]')
            group_list.write_text('[{"groupName":"list_g1","retryMaxTimes":7},{"groupName":"list_g2"}]')
            commands = [
                ["clusterList"], ["clusterList", "-m"], ["brokerStatus", "-b", s.broker_addr],
                ["topicList"], ["topicList", "-c"], ["topicRoute", "-t", TOPIC], ["topicStatus", "-t", TOPIC],
                ["updateTopic", "-b", s.broker_addr, "-t", NEW_TOPIC, "-r", "3", "-w", "3"],
                ["topicStatus", "-t", NEW_TOPIC],
                ["deleteTopic", "-c", "DefaultCluster", "-t", NEW_TOPIC],
                ["updateSubGroup", "-b", s.broker_addr, "-g", "admin_group", "-r", "5"],
                ["consumerProgress", "-g", "cg"], ["consumerProgress"],
                ["consumerConnection", "-g", "cg"],
                ["producerConnection", "-g", "pg", "-t", TOPIC],
                by_id, ["queryMsgByKey", "-t", TOPIC, "-k", "common"],
                ["queryMsgByKey", "-t", TOPIC, "-k", "no-such-key"],
                ["queryMsgByUniqueKey", "-t", TOPIC, "-i", UNIQ.format(2)],
                ["resetOffsetByTime", "-g", "cg", "-t", TOPIC, "-s", "-1"],
                ["resetOffsetByTime", "-g", "cg_offline", "-t", TOPIC, "-s", "-1"],
                ["consumerStatus", "-g", "cg_py", "-i", py.client_id],
                ["consumerProgress", "-g", "cg_py", "-s", "true"],
                [*by_id, "-g", "cg_py", "-d", py.client_id],  # CONSUME_MESSAGE_DIRECTLY
                ["brokerConsumeStats", "-b", s.broker_addr],  # GET_BROKER_CONSUME_STATS
                ["producer", "-b", s.broker_addr],  # GET_ALL_PRODUCER_INFO
                ["queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "5"],  # QUERY_CONSUME_QUEUE
                ["sendMsgStatus", "-b", "broker-a", "-c", "2"],  # sends to the broker's own topic
                ["exportMetadata", "-c", "DefaultCluster", "-f", str(tmp_path / "export")],
                ["exportConfigs", "-c", "DefaultCluster", "-f", str(tmp_path / "export")],
                ["exportMetrics", "-c", "DefaultCluster", "-f", str(tmp_path / "export")],  # 305, 28
                ["statsAll"], ["checkMsgSendRT", "-t", TOPIC, "-a", "2", "-s", "64"],
                ["getBrokerConfig", "-b", s.broker_addr], ["getConsumerConfig", "-g", "cg"],
                ["getNamesrvConfig"],
                ["updateBrokerConfig", "-b", s.broker_addr, "-k", "fileReservedTime", "-v", "48"],
                ["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"],
                ["updateKvConfig", "-s", "ns", "-k", "k", "-v", "v"],
                ["deleteKvConfig", "-s", "ns", "-k", "k"],
                ["cloneGroupOffset", "-s", "cg", "-d", "cg_clone", "-t", TOPIC],
                ["wipeWritePerm", "-b", "broker-a"], ["addWritePerm", "-b", "broker-a"],
                ["updateTopicPerm", "-b", s.broker_addr, "-t", TOPIC, "-p", "4"],
                ["deleteExpiredCommitLog", "-b", s.broker_addr],  # DELETE_EXPIRED_COMMITLOG
                ["cleanExpiredCQ", "-b", s.broker_addr],  # CLEAN_EXPIRED_CONSUMEQUEUE
                ["cleanUnusedTopic", "-c", "DefaultCluster"],  # CLEAN_UNUSED_TOPIC
                ["updateOrderConf", "-t", TOPIC, "-m", "put", "-v", "broker-a:2"],
                ["updateOrderConf", "-t", TOPIC, "-m", "get"],
                ["allocateMQ", "-t", TOPIC, "-i", "a,b"],
                ["printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true"],
                ["queryMsgTraceById", "-i", UNIQ.format(0)],
            ] + ([["haStatus", "-b", s.broker_addr],  # GET_BROKER_HA_STATUS
                  ["setConsumeMode", "-b", s.broker_addr, "-t", TOPIC, "-g", "admin_group", "-m", "POP",
                   "-q", "1"],  # SET_MESSAGE_REQUEST_MODE
                  ["updateTopicList", "-b", s.broker_addr, "-f", str(topic_list)],  # 18
                  ["updateSubGroupList", "-b", s.broker_addr, "-f", str(group_list)],  # 225
                  ["checkRocksdbCqWriteProgress", "-c", "DefaultCluster", "-t", TOPIC],  # 354
                  ["rocksDBConfigToJson", "-c", "DefaultCluster"],  # 355
                  ] if major5 else [])
            if major5:  # cold data flow control (2001 to 2003), a group in the runtime table
                now = int(time.time() * 1000)  # the accounting's clock stands still: the entry stays
                s.broker.cold_data = ColdDataFlowControl(lambda: s.broker.config, clock=lambda: now)
                s.broker.cold_data.cold_acc("cold_reader", 4096)
                commands += [["updateColdDataFlowCtrGroupConfig", "-b", s.broker_addr, "-g", "cold_cg", "-v",
                              "2048"], ["getColdDataFlowCtrInfo", "-b", s.broker_addr],
                             ["removeColdDataFlowCtrGroupConfig", "-c", "DefaultCluster", "-g", "cold_cg"]]
            before, max_phy = len(seen), s.broker.store.max_phy_offset
            outputs = await asyncio.to_thread(rmq.mqadmin_batch, commands)
            await py.close()
            pushed = [m.body for m in seen[before:]]
            group = s.broker.subscription_groups.get("admin_group")
            state = {"new_topic": s.broker.topics.get(NEW_TOPIC),
                     "retry_max": group.retry_max_times if group is not None else None,
                     "max_phy": max_phy, "max_phy_end": s.broker.store.max_phy_offset,
                     "offset_id": first.offset_msg_id, "offset_0": first.commit_log_offset,
                     "offline": [s.broker.offsets.query("cg_offline", TOPIC, q) for q in (0, 1)],
                     "resets": [ResetOffsetBody.decode(r.body_bytes()).offset_table for r in resets],
                     "pushed": pushed,
                     "clone": [s.broker.offsets.query("cg_clone", TOPIC, q) for q in (0, 1)],
                     "perm": s.broker.topics.get(TOPIC).perm,  # type: ignore[union-attr]
                     "reserved": s.broker.store.config.file_reserved_time_hours,
                     "saved": (tmp_path / "store" / "config" / "broker.properties").read_text(),
                     "ordered": s.namesrv.processor.config.order_message_enable,
                     "order_conf": s.namesrv.processor.kv.get("ORDER_TOPIC_CONFIG", TOPIC),
                     "mode": s.broker.request_modes.get(TOPIC, "admin_group"),
                     "listed": [s.broker.topics.get(t) for t in ("MqadminListA", "MqadminListB")],
                     "list_groups": [s.broker.subscription_groups.get(g) for g in ("list_g1", "list_g2")]}
            state["cold_config"] = dict(s.broker.cold_data.config_table)
            return s.broker_addr, local, commands, outputs, state

    broker_addr, local, commands, outputs, state = asyncio.run(main())
    log = "\n".join(f"===== {' '.join(c)}\n{o}" for c, o in zip(commands, outputs, strict=True))
    (tmp_path / "mqadmin.log").write_text(log)

    # clusterList / brokerStatus (GET_BROKER_RUNTIME_INFO)
    (row,) = _rows(outputs[0], "DefaultCluster")
    assert row[1:5] == ["broker-a", "0", broker_addr, "V4_9_8"], log
    (row,) = _rows(outputs[1], "DefaultCluster")
    assert int(row[2]) + int(row[4]) == COUNT + 1, log  # puts yesterday + today; +1: the trace
    status = _fields(outputs[2])
    assert status["brokerVersionDesc"] == "V4_9_8" and status["msgPutTotalTodayNow"] == str(COUNT + 1), log
    assert status["commitLogMaxOffset"] == str(state["max_phy"]), log

    # topics
    assert {TOPIC, "%RETRY%cg", "TBW102"} <= set(outputs[3].split()), log
    consumed_by = [r for r in _rows(outputs[4], "DefaultCluster") if r[1] == TOPIC]
    assert sorted(consumed_by) == [["DefaultCluster", TOPIC, "cg"],  # QUERY_TOPIC_CONSUME_BY_WHO
                                   ["DefaultCluster", TOPIC, "cg_offline"],
                                   ["DefaultCluster", TOPIC, "cg_py"]], log
    route = loads(outputs[5])
    assert route["queueDatas"][0]["readQueueNums"] == 2
    assert route["brokerDatas"][0]["brokerName"] == "broker-a"
    queues = parse_topic_status(outputs[6])
    assert {q: (v.broker, v.min_offset, v.max_offset) for q, v in queues.items()} == {
        0: ("broker-a", 0, 2), 1: ("broker-a", 0, 2)}, log
    assert "success" in outputs[7], log
    assert set(parse_topic_status(outputs[8])) == {0, 1, 2}, log
    assert "delete topic [MqadminNewTopic] from cluster [DefaultCluster] success" in outputs[9], log
    assert state["new_topic"] is None

    # subscription groups
    assert "create subscription group" in outputs[10] and "success" in outputs[10], log
    assert state["retry_max"] == 5

    # consumer progress (GET_CONSUME_STATS) and connections
    progress = {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in _rows(outputs[11], TOPIC)}
    assert progress == {0: (2, 1, 1), 1: (2, 2, 0)}, log
    assert re.search(r"Diff Total: 1\b", outputs[11]), log
    (row,) = _rows(outputs[12], "cg")
    assert row[1] == "1" and row[3:] == ["PUSH", "CLUSTERING", "0", "1"], log
    (row,) = _rows(outputs[13], CLIENT_ID)
    assert row[1:3] == [local, "JAVA"], log
    assert _rows(outputs[13], TOPIC) == [[TOPIC, "*"]], log
    assert "ConsumeType: CONSUME_PASSIVELY" in outputs[13] and "MessageModel: CLUSTERING" in outputs[13]
    (row,) = [r for r in outputs[14].split("\n") if CLIENT_ID in r]
    assert row.split()[1:4] == [CLIENT_ID, local, "JAVA"], log

    # message queries: VIEW_MESSAGE_BY_ID and QUERY_MESSAGE by key and by unique key
    viewed = _fields(outputs[15])
    assert viewed["OffsetID"] == state["offset_id"] and viewed["Topic"] == TOPIC, log
    assert (viewed["Keys"], viewed["Queue ID"], viewed["Queue Offset"]) == ("[key-0 common]", "0", "0"), log
    assert "MessageTrack [consumerGroup=cg, trackType=CONSUMED" in outputs[15], log
    expected = [(UNIQ.format(i), i % 2, i // 2) for i in range(COUNT)]
    assert sorted(parse_query_by_key(outputs[16])) == expected, log
    assert parse_query_by_key(outputs[17]) == [], log  # QUERY_NOT_FOUND: mqadmin prints no rows
    unique = _fields(outputs[18])
    assert (unique["Keys"], unique["Queue ID"], unique["Queue Offset"]) == ("[key-2 common]", "0", "1"), log
    assert "trackType=NOT_CONSUME_YET" in outputs[18], log

    # resetOffsetByTime: relayed to the online consumer (INVOKE_BROKER_TO_RESET_OFFSET, then
    # RESET_CONSUMER_CLIENT_OFFSET); committed by mqadmin itself for a group with none online
    [relayed] = state["resets"]
    assert {mq.queue_id: offset for mq, offset in relayed.items()} == {0: 2, 1: 2}, log
    assert state["offline"] == [2, 2], log

    # consumerStatus -i (GET_CONSUMER_RUNNING_INFO relayed to the Python consumer): mqadmin
    # parses its report and prints its properties, subscriptions and committed offsets
    report = outputs[21]
    assert re.search(r"^PROP_CONSUME_TYPE\s*: CONSUME_PASSIVELY$", report, re.M), log
    assert re.search(r"^consumerGroup\s*: cg_py$", report, re.M), log
    assert re.search(r"^001 Topic: %RETRY%cg_py\s.*SubExpression: \*$", report, re.M), log
    assert re.search(rf"^002 Topic: {TOPIC}\s.*SubExpression: \*$", report, re.M), log
    offsets = {int(r[2]): int(r[3]) for r in _rows(report.split("#Consumer MQ Detail#")[0], TOPIC)}
    assert offsets == {0: 2, 1: 2}, log
    # consumerProgress -s: each queue's owner, from the consumers' reports
    owners = {int(r[2]): r[5] for r in _rows(outputs[22], TOPIC)}
    assert owners == {0: PY_IP, 1: PY_IP}, log
    # queryMsgById -g -d: the message pushed to the Python consumer's listener, its verdict back
    assert "consumeResult=CR_SUCCESS" in outputs[23] and "order=false" in outputs[23], log
    assert [b for b in state["pushed"] if b.startswith(b"body-")] == [b"body-0"], log  # type: ignore[union-attr]

    # brokerConsumeStats: every group's progress on the broker (cg committed 1 and 2 of 2 and 2)
    stats = {int(r[3]): (int(r[4]), int(r[5])) for r in _rows(outputs[24], TOPIC) if r[1] == "cg"}
    assert stats == {0: (2, 1), 1: (2, 2)}, log
    # producer: the producer connections by group
    assert f"producer group (pg) instance : clientId={CLIENT_ID},remoteIP=/{local}, language=JAVA" \
        in outputs[25], log
    # queryCq: ConsumeQueue entries of queue 0 (messages 0 and 2)
    assert "max: 2, min: 0" in outputs[26] and outputs[26].count("idx: ") == 2, log
    assert f"physicOffset={state['offset_0']}, physicSize=" in outputs[26], log
    # sendMsgStatus sends to the topic named after the broker
    assert outputs[27].count("sendStatus=SEND_OK") == 2, log
    # exportMetadata / exportConfigs / exportMetrics write their files
    export = tmp_path / "export"
    metadata = loads((export / "metadata.json").read_text())
    assert TOPIC in metadata["topicConfigTable"] and "cg" in metadata["subscriptionGroupTable"], log
    configs = loads((export / "configs.json").read_text())
    assert configs["brokerConfigs"]["broker-a"]["brokerName"] == "broker-a", log
    metrics = loads((export / "metrics.json").read_text())  # 5.x also reports its clients
    report = metrics["evaluateReport"]["broker-a"]
    assert report["runtimeQuota"]["topicSize"] >= 1, log
    # the machine's processors and the average size of the messages stored
    assert int(report["runtimeEnv"]["cpuNum"]) >= 1, log
    assert float(report["runtimeQuota"]["messageAverageSize"]) > 0, log

    # statsAll, checkMsgSendRT, the config getters and setters, KV config, cloneGroupOffset, write perms
    def output(*command: str) -> str:
        return outputs[commands.index(list(command))]

    if major5:  # RocketMQ 5.3's RocksDB migration commands
        assert "broker-a check doing" in output("checkRocksdbCqWriteProgress", "-c", "DefaultCluster",
                                                "-t", TOPIC), log
        assert "broker export done" in output("rocksDBConfigToJson", "-c", "DefaultCluster"), log

    stats = {r[1]: r for r in _rows(output("statsAll"), TOPIC)}
    assert sorted(stats) == ["cg", "cg_offline", "cg_py"], log  # before cloneGroupOffset
    # #InMsg24Hour and #OutMsg24Hour from VIEW_BROKER_STATS_DATA: cg_py took the 4 messages
    assert stats["cg_py"][5:] == ["4", "4"] and stats["cg"][5:] == ["4", "0"], log
    assert output("checkMsgSendRT", "-t", TOPIC, "-a", "2", "-s", "64").count(" true ") == 2, log
    assert re.search(r"^brokerName\s+=\s+broker-a$", output("getBrokerConfig", "-b", broker_addr), re.M), log
    assert re.search(r"^groupName\s+=\s+cg$", output("getConsumerConfig", "-g", "cg"), re.M), log
    assert re.search(r"^enableTopicList\s+=\s+true$", output("getNamesrvConfig"), re.M), log
    updated = output("updateBrokerConfig", "-b", broker_addr, "-k", "fileReservedTime", "-v", "48")
    assert "success" in updated, log
    assert state["reserved"] == 48 and state["saved"] == "fileReservedTime=48\n", log  # applied and kept
    assert "success" in output("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"), log
    assert state["ordered"] is True, log
    assert "success" in output("updateKvConfig", "-s", "ns", "-k", "k", "-v", "v"), log
    assert "success" in output("deleteKvConfig", "-s", "ns", "-k", "k"), log
    assert "clone group offset success" in output("cloneGroupOffset", "-s", "cg", "-d", "cg_clone", "-t",
                                                  TOPIC), log
    assert state["clone"] == [1, 2], log  # cg's offsets before its reset
    assert "OK" in output("wipeWritePerm", "-b", "broker-a"), log
    assert "OK" in output("addWritePerm", "-b", "broker-a"), log
    assert "success" in output("updateTopicPerm", "-b", broker_addr, "-t", TOPIC, "-p", "4"), log
    assert state["perm"] == 4, log
    assert output("deleteExpiredCommitLog", "-b", broker_addr).strip() == "success", log
    assert output("cleanExpiredCQ", "-b", broker_addr).strip() == "success", log
    assert output("cleanUnusedTopic", "-c", "DefaultCluster").strip() == "success", log
    # updateOrderConf (the NameServer's KV config), allocateMQ, printMsgByQueue (pulls of one queue)
    assert "orderConf=[broker-a:2]" in output("updateOrderConf", "-t", TOPIC, "-m", "get"), log
    assert state["order_conf"] == "broker-a:2", log
    assert '"result":{' in output("allocateMQ", "-t", TOPIC, "-i", "a,b"), log
    printed = output("printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true")
    assert re.findall(r"BODY: (body-\d)", printed) == ["body-0", "body-2"], log
    # queryMsgTraceById decodes the trace Bolide encoded (bolide.protocol.trace)
    [pub] = [line.split() for line in output("queryMsgTraceById", "-i", UNIQ.format(0)).splitlines()
             if line.startswith("Pub")]
    assert (pub[1], pub[-2], pub[-1]) == ("pg", "3ms", "success"), log

    # haStatus (GET_BROKER_HA_STATUS, 5.x): a master without slaves
    if version.startswith("5"):
        ha = dict(line.split("\t", 1) for line in output("haStatus", "-b", broker_addr).splitlines()
                  if "\t" in line)
        assert ha == {"#MasterAddr": broker_addr, "#MasterCommitLogMaxOffset": str(state["max_phy_end"]),
                      "#SlaveNum": "0", "#InSyncSlaveNum": "0"}, log
        assert "set consume mode to" in output("setConsumeMode", "-b", broker_addr, "-t", TOPIC, "-g",
                                               "admin_group", "-m", "POP", "-q", "1"), log
        mode = state["mode"]
        assert mode is not None and (mode.mode, mode.pop_share_queue_num) == ("POP", 1), log
        # updateTopicList / updateSubGroupList -f (5.x): one request each, every entry created
        listed = output("updateTopicList", "-b", broker_addr, "-f", str(tmp_path / "topics.json"))
        assert f"submit batch of topic config to {broker_addr} success" in listed, log
        a, b = state["listed"]  # type: ignore[misc]
        assert (a.read_queue_nums, a.write_queue_nums, a.perm) == (2, 2, 6), log
        assert (b.read_queue_nums, b.write_queue_nums, b.perm) == (1, 1, 4), log
        listed = output("updateSubGroupList", "-b", broker_addr, "-f", str(tmp_path / "groups.json"))
        assert f"to {broker_addr} success" in listed, log
        g1, g2 = state["list_groups"]  # type: ignore[misc]
        assert g1.retry_max_times == 7 and g2.retry_max_times == 16, log
        # updateColdDataFlowCtrGroupConfig / getColdDataFlowCtrInfo / removeColdDataFlowCtrGroupConfig
        assert f"updateColdDataFlowCtrGroupConfig success, {broker_addr}" in output(
            "updateColdDataFlowCtrGroupConfig", "-b", broker_addr, "-g", "cold_cg", "-v", "2048"), log
        info = output("getColdDataFlowCtrInfo", "-b", broker_addr)
        assert re.search(r'"cold_cg"\s*:\s*2048', info) and re.search(r'"coldAcc"\s*:\s*4096', info), log
        assert '"lastColdReadTimeFormat"' in info and re.search(r'"globalAcc"\s*:\s*4096', info), log
        assert f"remove broker cold read threshold success, {broker_addr}" in output(
            "removeColdDataFlowCtrGroupConfig", "-c", "DefaultCluster", "-g", "cold_cg"), log
        assert state["cold_config"] == {}, log
