"""The gRPC endpoint's pure parts: v5 messages to stored properties and back, the settings
answered on Telemetry, topic types, peers."""

from __future__ import annotations

import gzip

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from bolide.broker.proxy.call import peer_address
from bolide.broker.proxy.clients import settings_reply
from bolide.broker.proxy.convert import Refused, accepted_types, delivered, message_type, stored_form
from bolide.common.message import MessageExt
from bolide.protocol.v5 import messaging_pb2 as pb

MAX = 4 * 1024 * 1024


def v5(body: bytes = b"x", user: dict[str, str] | None = None, **system: object) -> pb.Message:
    system.setdefault("message_id", "ID")
    return pb.Message(
        topic=pb.Resource(name="T"),
        body=body,
        user_properties=user or {},
        system_properties=pb.SystemProperties(**system),
    )


def test_system_properties_are_stored_as_rocketmqs_proxy_stores_them() -> None:
    body, props = stored_form(
        v5(
            b"hi",
            {"color": "red"},
            tag="A",
            keys=["k1", "k2"],
            message_group="g",
            delivery_timestamp=Timestamp(seconds=1700000000),
            trace_context="tc",
            born_host="10.0.0.1",
            born_timestamp=Timestamp(seconds=5),
        ),
        MAX,
    )
    assert body == b"hi"
    assert props == {
        "color": "red",
        "TAGS": "A",
        "KEYS": "k1 k2",
        "UNIQ_KEY": "ID",
        "__SHARDINGKEY": "g",
        "TIMER_DELIVER_MS": "1700000000000",
        "TRACE_CONTEXT": "tc",
        "__BORNHOST": "10.0.0.1",
        "BORN_TIMESTAMP": "5000",
    }
    _, tx = stored_form(v5(message_type=pb.TRANSACTION), MAX)
    assert tx["TRAN_MSG"] == "true" and tx["PGROUP"] == "T"
    gz, _ = stored_form(v5(gzip.compress(b"packed"), body_encoding=pb.GZIP), MAX)
    assert gz == b"packed"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        (v5(b""), pb.MESSAGE_BODY_EMPTY),
        (v5(b"x" * (MAX + 1)), pb.MESSAGE_BODY_TOO_LARGE),
        (v5(message_id=""), pb.ILLEGAL_MESSAGE_ID),
        (v5(tag="a|b"), pb.ILLEGAL_MESSAGE_TAG),
        (v5(tag=" "), pb.ILLEGAL_MESSAGE_TAG),
        (v5(keys=[""]), pb.ILLEGAL_MESSAGE_KEY),
        (v5(message_group="g" * 65), pb.ILLEGAL_MESSAGE_GROUP),
        (v5(user={"UNIQ_KEY": "mine"}), pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
        (v5(user={f"k{i}": "v" for i in range(129)}), pb.MESSAGE_PROPERTIES_TOO_LARGE),
        (v5(user={"big": "v" * 17000}), pb.MESSAGE_PROPERTIES_TOO_LARGE),
        (v5(b"not gzip", body_encoding=pb.GZIP), pb.MESSAGE_CORRUPTED),
    ],
)
def test_what_rocketmqs_proxy_refuses_is_refused_with_its_code(message: pb.Message, code: int) -> None:
    with pytest.raises(Refused) as refused:
        stored_form(message, MAX)
    assert refused.value.code == code and refused.value.message


def test_message_types_and_topic_types() -> None:
    assert message_type({}) == pb.NORMAL
    assert message_type({"__SHARDINGKEY": "g"}) == pb.FIFO
    assert message_type({"TIMER_DELIVER_MS": "1"}) == pb.DELAY and message_type({"DELAY": "3"}) == pb.DELAY
    assert message_type({"TRAN_MSG": "true", "__SHARDINGKEY": "g"}) == pb.TRANSACTION
    assert accepted_types(None) == (pb.NORMAL,)
    assert accepted_types({"message.type": "fifo"}) == (pb.FIFO,)
    assert set(accepted_types({"message.type": "MIXED"})) == {pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION}


def test_a_stored_message_is_handed_out_with_its_system_fields() -> None:
    stored = MessageExt(
        "T",
        b"hello",
        properties={
            "TAGS": "A",
            "KEYS": "k1 k2",
            "UNIQ_KEY": "ID-1",
            "color": "red",
            "__SHARDINGKEY": "g",
            "CLUSTER": "c",
            "TIMER_OUT_MS": "9000",
        },
        queue_id=3,
        queue_offset=7,
        born_timestamp=1500,
        store_timestamp=2500,
        born_host="10.0.0.9:555",
        store_host="127.0.0.1:10911",
    )
    out = delivered(stored, handle="3:7:ab", attempt=2, invisible_ms=30_500)
    sp = out.system_properties
    assert dict(out.user_properties) == {"color": "red"} and out.body == b"hello"
    assert (sp.tag, list(sp.keys), sp.message_id, sp.message_group) == ("A", ["k1", "k2"], "ID-1", "g")
    assert (sp.queue_id, sp.queue_offset, sp.receipt_handle, sp.delivery_attempt) == (3, 7, "3:7:ab", 2)
    assert sp.body_digest.type == pb.MD5 and sp.body_digest.checksum == "5D41402ABC4B2A76B9719D911017C592"
    assert sp.born_host == "10.0.0.9" and sp.born_timestamp.ToMilliseconds() == 1500
    assert sp.delivery_timestamp.ToMilliseconds() == 9000 and sp.message_type == pb.DELAY
    assert sp.invisible_duration == Duration(seconds=30, nanos=500_000_000)


def test_settings_carry_what_each_client_needs() -> None:
    producer = settings_reply(
        pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")])),
        max_body=MAX,
        fifo=False,
        max_attempts=17,
    )
    assert producer.publishing.max_body_size == MAX and producer.publishing.validate_message_type
    assert producer.backoff_policy.HasField("exponential_backoff") and not producer.metric.on
    consumer = settings_reply(
        pb.Settings(client_type=pb.PUSH_CONSUMER, subscription=pb.Subscription(group=pb.Resource(name="g"))),
        max_body=MAX,
        fifo=True,
        max_attempts=4,
    )
    sub = consumer.subscription
    assert (sub.receive_batch_size, sub.long_polling_timeout.seconds, sub.fifo) == (32, 20, True)
    assert consumer.backoff_policy.max_attempts == 4
    assert [d.seconds for d in consumer.backoff_policy.customized_backoff.next] == [1, 5, 10]


def test_peer_addresses() -> None:
    assert peer_address("ipv4:127.0.0.1:5555") == "127.0.0.1:5555"
    assert peer_address("ipv6:[::1]:5555") == "::1:5555"
    assert peer_address("unix:/tmp/s") == "unix:/tmp/s"
