"""The official RocketMQ 5 Python client (rocketmq-python-client, gRPC) against a broker's gRPC
endpoint, as a command-line driver for the interop tests. Prints one JSON document.

    python driver.py descriptors [MODULE...]
        the v5 message and service descriptors of the client (or of the protobuf MODULEs, such
        as bolide.protocol.v5.messaging_pb2 run with Bolide's python), to compare them
    python driver.py scenario HOST:PORT
        a producer sends to the topics N5 (NORMAL), F5 (FIFO), D5 (MIXED: delay and normal) and
        X5 (TRANSACTION)
        (the broker has them, and FIFO group fifo_g) and recalls a delay message sent to D5;
        then:
        - simple consumer simple_g receives N5 (tags, keys, properties), changes the invisible
          time of one message to 0 and gets it again with attempt 2, acknowledges all;
        - simple consumer fifo_g receives F5 and acknowledges in the order it gets them;
        - push consumer push_g consumes D5 and X5 (failing "retry-me" once): the delay message
          at its time, the committed and the checked transactions, never the rolled back one.
    python driver.py cluster HOST:PORT TOPIC COUNT
        a producer sends COUNT messages to TOPIC (served by several brokers; the client is given
        one broker's endpoint), then simple consumer cluster_g receives and acknowledges them
        all: {"sent": [...], "received": [...]} (the bodies).
"""

from __future__ import annotations

import json
import sys
import threading
import time


def descriptors(modules: list[str]) -> dict:
    """Every message, enum and service of the protobuf ``modules`` (import names; default: the
    client's), each field as [number, name, type, repeated, type name, oneof, presence]."""
    import importlib

    if not modules:
        modules = ["rocketmq.grpc_protocol.definition_pb2", "rocketmq.grpc_protocol.service_pb2"]
    out: dict = {}

    def fields(md):
        return [
            [
                f.number,
                f.name,
                f.type,
                f.is_repeated,
                f.message_type.full_name
                if f.message_type
                else (f.enum_type.full_name if f.enum_type else ""),
                f.containing_oneof.name if f.containing_oneof else "",
                f.has_presence,
            ]
            for f in md.fields
        ]

    for module in map(importlib.import_module, modules):
        fd = module.DESCRIPTOR
        for md in fd.message_types_by_name.values():
            out[md.full_name] = fields(md)
            for nested in md.nested_types:
                out[nested.full_name] = fields(nested)
            for ed in md.enum_types:
                out[ed.full_name] = [[v.name, v.number] for v in ed.values]
        for ed in fd.enum_types_by_name.values():
            out[ed.full_name] = [[v.name, v.number] for v in ed.values]
        for sd in fd.services_by_name.values():
            out[sd.full_name] = [
                [
                    m.name,
                    m.input_type.full_name,
                    m.output_type.full_name,
                    m.client_streaming,
                    m.server_streaming,
                ]
                for m in sd.methods
            ]
    return out


def scenario(endpoint: str) -> dict:
    from rocketmq import (
        ClientConfiguration,
        ConsumeResult,
        Credentials,
        FilterExpression,
        Message,
        MessageListener,
        Producer,
        PushConsumer,
        SimpleConsumer,
        TransactionChecker,
        TransactionResolution,
    )

    config = ClientConfiguration(endpoint, Credentials(), request_timeout=5)
    result: dict = {}

    class Checker(TransactionChecker):
        def check(self, message):
            result.setdefault("checked", []).append(message.body.decode())
            return TransactionResolution.COMMIT

    def msg(topic: str, body: str, **attrs: object) -> Message:
        m = Message()
        m.topic, m.body = topic, body.encode()
        for key, value in attrs.items():
            setattr(m, key, value)
        return m

    producer = Producer(config, ("N5", "F5", "D5", "X5"), checker=Checker())
    producer.startup()
    try:
        ids = []
        for i in range(4):
            m = msg("N5", f"n{i}", tag="TagA")
            m.keys = f"key{i}"
            m.add_property("seq", str(i))
            ids.append(producer.send(m).message_id)
        result["sent_ids"] = ids
        for i in range(3):
            for group in ("ga", "gb"):
                producer.send(msg("F5", f"{group}-{i}", message_group=group))
        due = int(time.time()) + 2
        producer.send(msg("D5", "later", delivery_timestamp=due))
        result["due_ms"] = due * 1000
        producer.send(msg("D5", "retry-me"))
        recalled = producer.send(msg("D5", "recalled", delivery_timestamp=due))
        producer.recall_message("D5", recalled.recall_handle)
        for body, end in (("tx-commit", "commit"), ("tx-rollback", "rollback"), ("tx-check", None)):
            tx = producer.begin_transaction()
            producer.send(msg("X5", body), tx)
            if end is not None:
                getattr(tx, end)()

        simple = SimpleConsumer(config, "simple_g", {"N5": FilterExpression("TagA")}, await_duration=5)
        simple.startup()
        try:
            got, deadline = [], time.time() + 20
            while len(got) < 4 and time.time() < deadline:
                got += simple.receive(16, 30)
            result["simple"] = sorted(
                [
                    m.body.decode(),
                    m.tag,
                    sorted(m.keys),
                    m.properties.get("seq"),
                    m.delivery_attempt,
                    m.message_id,
                ]
                for m in got
            )
            first = got[0]
            simple.change_invisible_duration(first, 0)
            again, deadline = [], time.time() + 20
            while not again and time.time() < deadline:
                again = simple.receive(16, 30)
            result["again"] = [[m.body.decode(), m.delivery_attempt] for m in again]
            for m in got[1:] + again:
                simple.ack(m)
        finally:
            simple.shutdown()

        fifo = SimpleConsumer(config, "fifo_g", {"F5": FilterExpression()}, await_duration=5)
        fifo.startup()
        try:
            order, deadline = [], time.time() + 30
            while len(order) < 6 and time.time() < deadline:
                for m in fifo.receive(16, 30):
                    order.append(m.body.decode())
                    fifo.ack(m)
            result["fifo"] = order
        finally:
            fifo.shutdown()

        pushed: list = []
        done = threading.Event()

        class Listener(MessageListener):
            def consume(self, message):
                body = message.body.decode()
                pushed.append([body, message.delivery_attempt, int(time.time() * 1000)])
                if {"later", "retry-me", "tx-commit", "tx-check"} <= {
                    p[0] for p in pushed if p[1] >= 1
                } and any(p[0] == "retry-me" and p[1] == 2 for p in pushed):
                    done.set()
                if body == "retry-me" and message.delivery_attempt == 1:
                    return ConsumeResult.FAILURE
                return ConsumeResult.SUCCESS

        push = PushConsumer(
            config, "push_g", Listener(), {"D5": FilterExpression(), "X5": FilterExpression()}
        )
        push.startup()
        try:
            done.wait(40)
        finally:
            push.shutdown()
        result["pushed"] = pushed
    finally:
        producer.shutdown()
    return result


def cluster(endpoint: str, topic: str, count: int) -> dict:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    config = ClientConfiguration(endpoint, Credentials(), request_timeout=5)
    sent = []
    producer = Producer(config, (topic,))
    producer.startup()
    try:
        for i in range(count):
            m = Message()
            m.topic, m.body = topic, f"c{i}".encode()
            producer.send(m)
            sent.append(m.body.decode())
    finally:
        producer.shutdown()
    received: list[str] = []
    consumer = SimpleConsumer(config, "cluster_g", {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    try:
        deadline = time.monotonic() + 60
        while len(set(received)) < count and time.monotonic() < deadline:
            for m in consumer.receive(32, 30) or []:
                received.append(m.body.decode())
                consumer.ack(m)
    finally:
        consumer.shutdown()
    return {"sent": sent, "received": received}


def main() -> int:
    if sys.argv[1:2] == ["descriptors"]:
        print(json.dumps(descriptors(sys.argv[2:])))
        return 0
    if sys.argv[1:2] == ["scenario"] and len(sys.argv) == 3:
        print(json.dumps(scenario(sys.argv[2])))
        return 0
    if sys.argv[1:2] == ["cluster"] and len(sys.argv) == 5:
        print(json.dumps(cluster(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
