"""The pure parts of an acting master's escaped writes: which queues take them, and a half
message turned back into the prepared message its producer sent."""

from __future__ import annotations

from bolide.broker.escape import writable_queues
from bolide.broker.transaction import PREPARED_QUEUE_OFFSET, prepared_flag, prepared_message
from bolide.common import properties as P
from bolide.common import sysflag
from bolide.common.message import MessageExt
from bolide.protocol.bodies.route import BrokerData, QueueData, TopicRouteData


def test_writable_queues_of_other_masters_only() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData(broker_name="a", write_queue_nums=2, perm=4),   # acting: read-only
                     QueueData(broker_name="b", write_queue_nums=2, perm=6),
                     QueueData(broker_name="c", write_queue_nums=1, perm=6),   # no master
                     QueueData(broker_name="self", write_queue_nums=1, perm=6)],
        broker_datas=[BrokerData(broker_name="a", broker_addrs={0: "a:1"}),
                      BrokerData(broker_name="b", broker_addrs={0: "b:1", 1: "b:2"}),
                      BrokerData(broker_name="c", broker_addrs={1: "c:2"}),
                      BrokerData(broker_name="self", broker_addrs={0: "s:1"})])
    assert writable_queues(route, "self") == [("b", "b:1", 0), ("b", "b:1", 1)]


def test_half_message_becomes_the_prepared_message() -> None:
    half = MessageExt(topic="RMQ_SYS_TRANS_HALF_TOPIC", body=b"x", flag=3, properties={
        P.REAL_TOPIC: "Orders", P.REAL_QUEUE_ID: "2", PREPARED_QUEUE_OFFSET: "7",
        P.PRODUCER_GROUP: "pg", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1"}, sys_flag=0)
    msg = prepared_message(half)
    assert msg.topic == "Orders" and msg.body == b"x" and msg.flag == 3
    assert msg.properties == {P.PRODUCER_GROUP: "pg", P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U1",
                              P.TRANSACTION_PREPARED: "true"}
    assert prepared_flag(half) & sysflag.TRANSACTION_MASK == sysflag.TRANSACTION_PREPARED_TYPE
