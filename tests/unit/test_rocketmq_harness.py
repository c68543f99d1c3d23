"""The pure parts of the real-RocketMQ test harness (bolide.testing.rocketmq): mqadmin output
parsers on text captured from RocketMQ 4.9.7 and 5.3.3, topics.json, ports. No Java needed."""

from __future__ import annotations

import json
import socket

from bolide.testing.rocketmq import (
    free_port,
    parse_print_msg,
    parse_query_by_key,
    parse_send_message,
    parse_topic_status,
    topics_json,
)

TOPIC_STATUS_5 = """\
#Broker Name                      #QID  #Min Offset           #Max Offset             #Last Updated
broker-a                          0     0                     25                      2026-11-22 03:13:12,141
broker-a                          1     0                     0

Topic Put TPS: 0.0
"""

SEND_RESULT = """\
#Broker Name                      #QID  #Send Result            #MsgId
broker-a                          2     SEND_OK                 C00002021D3460E53B936CD34B41000E
"""

PRINTED = (
    "MSGID: C00002021D3460E53B936CD347BC0003 MessageExt [brokerName=broker-a, queueId=3, "
    "storeSize=185, queueOffset=0, sysFlag=0, bornTimestamp=1795316985788, "
    "bornHost=/127.0.0.1:43152, storeTimestamp=1795316985806, storeHost=/127.0.0.1:30911, "
    "msgId=7F000001000078BF00000000000002E4, commitLogOffset=740, bodyCRC=715954513, "
    "reconsumeTimes=0, preparedTransactionOffset=0, toString()=Message{topic='TopicA', flag=0, "
    "properties={MIN_OFFSET=0, MAX_OFFSET=5, KEYS=k3 alt3, UNIQ_KEY=C00002021D3460E53B936CD347BC0003, "
    "CLUSTER=DefaultCluster, TAGS=TagB}, body=[98, 111, 100, 121, 32, 51], transactionId='null'}] "
    "BODY: body: 3 ✓"
)

QUERY_BY_KEY = """\
#Message ID                                        #QID                                  #Offset
C00002021D3460E53B936CD347BC0003                      3                                        0
"""


def test_topic_status_rows_by_queue() -> None:
    rows = parse_topic_status(TOPIC_STATUS_5)
    assert sorted(rows) == [0, 1]
    assert (rows[0].broker, rows[0].min_offset, rows[0].max_offset) == ("broker-a", 0, 25)
    assert rows[1].max_offset == 0


def test_send_result() -> None:
    r = parse_send_message(SEND_RESULT)
    assert r is not None
    assert (r.broker, r.queue_id, r.status, r.msg_id) == ("broker-a", 2, "SEND_OK",
                                                          "C00002021D3460E53B936CD34B41000E")
    assert parse_send_message("java.lang.RuntimeException: SendMessageCommand command failed") is None


def test_printed_message() -> None:
    [m] = parse_print_msg("minOffset=0, maxOffset=5, MessageQueue [...]\n" + PRINTED + "\n-----")
    assert (m.topic, m.queue_id, m.queue_offset, m.commit_log_offset) == ("TopicA", 3, 0, 740)
    assert m.msg_id == m.properties["UNIQ_KEY"] == "C00002021D3460E53B936CD347BC0003"
    assert (m.tags, m.keys, m.body) == ("TagB", ["k3", "alt3"], "body: 3 ✓")
    assert (m.store_host, m.sys_flag, m.body_crc) == ("127.0.0.1:30911", 0, 715954513)


def test_query_by_key_rows() -> None:
    assert parse_query_by_key(QUERY_BY_KEY) == [("C00002021D3460E53B936CD347BC0003", 3, 0)]
    assert parse_query_by_key("") == []


def test_topics_json_has_the_broker_shape() -> None:
    text = topics_json({"T": 4}, timestamp_ms=1)
    assert "\t" in text
    data = json.loads(text)
    assert data == {
        "dataVersion": {"counter": 1, "timestamp": 1},
        "topicConfigTable": {"T": {"order": False, "perm": 6, "readQueueNums": 4,
                                   "topicFilterType": "SINGLE_TAG", "topicName": "T",
                                   "topicSysFlag": 0, "writeQueueNums": 4}},
    }
    five = json.loads(topics_json({"T": 4}, rocketmq_5=True, timestamp_ms=1))
    assert five["dataVersion"]["stateVersion"] == 0
    assert five["topicConfigTable"]["T"]["attributes"] == {}


def test_free_broker_port_leaves_its_neighbours_free() -> None:
    port = free_port((-2, 0, 1))
    for p in (port - 2, port, port + 1):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))
