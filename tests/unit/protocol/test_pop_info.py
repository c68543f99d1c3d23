"""RocketMQ 5's pop bookkeeping: POP_CK strings, the pop answer's offset lists, batch ack
bodies (Java's BitSet bytes), and the broker's allocation of queues to pop."""

from __future__ import annotations

import base64

import pytest

from bolide.broker.processors.assignment import allocate_for_pop
from bolide.broker.processors.pop import delivered_record, gen_of
from bolide.common.message import MessageExt
from bolide.common.records import decode_record
from bolide.errors import ProtocolError
from bolide.protocol.allocate import allocate_averagely
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.bodies.pop import BatchAckMessageRequestBody
from bolide.protocol.pop_info import (
    build_extra_info,
    msg_offset_info,
    parse_extra_info,
    pop_handles,
    real_topic,
    retry_flag,
    start_offset_info,
)
from bolide.store.record import encode_record


def test_extra_info_round_trip_in_the_java_layout() -> None:
    ck = build_extra_info(10, 1_700_000_000_123, 60_000, 456, "broker-a", 3, 12)
    assert ck == "10 1700000000123 60000 456 0 broker-a 3 12"  # ExtraInfoUtil.buildExtraInfo
    info = parse_extra_info(ck)
    assert (info.ck_queue_offset, info.pop_time, info.revive_qid, info.queue_id, info.queue_offset) == (
        10, 1_700_000_000_123, 456, 3, 12)
    assert parse_extra_info(ck.rsplit(" ", 1)[0]).queue_offset is None
    assert parse_extra_info(ck + " 4096").queue_offset == 12  # a proxy's handle: + CommitLog offset
    for bad in ("", "1 2 3", "a b c d 0 broker 1 2"):
        with pytest.raises(ProtocolError):
            parse_extra_info(bad)


def test_offset_infos_and_generations() -> None:
    assert start_offset_info([(0, 5), (3, 9)]) == "0 0 5;0 3 9"
    assert msg_offset_info([(0, [5, 6]), (3, [9])]) == "0 0 5,6;0 3 9"
    assert gen_of(1_700_000_000_123, 456) == 1_700_000_000_123_456
    assert gen_of(1, 999) is None and gen_of(1, -1) is None  # an orderly pop's, or not ours


def test_pop_handles_as_the_java_client_builds_them() -> None:
    msgs = [MessageExt("T", b"", queue_id=1, queue_offset=7),
            MessageExt("T", b"", queue_id=1, queue_offset=9),
            MessageExt("%RETRY%g_T", b"", queue_id=0, queue_offset=3)]  # revived into the retry topic
    handles = pop_handles(msgs, "0 1 7;1 0 3", "0 1 7,9;1 0 3", 1000, 60_000, 5, "broker-a")
    assert handles == ["7 1000 60000 5 0 broker-a 1 7", "7 1000 60000 5 0 broker-a 1 9",
                       "3 1000 60000 5 1 broker-a 0 3"]
    assert [retry_flag(t) for t in ("T", "%RETRY%g_T", "%RETRY%g+T")] == ["0", "1", "2"]
    assert [real_topic(r, "T", "g") for r in ("0", "1", "2")] == ["T", "%RETRY%g_T", "%RETRY%g+T"]


def test_batch_ack_bits_are_java_bitset_bytes() -> None:
    # BitSet {0, 2, 9}.toByteArray() = [0x05, 0x02], little-endian; fastjson writes base64
    body = BatchAckMessageRequestBody.decode(
        b'{"acks":[{"b":"BQI=","c":"g","it":60000,"pt":1,"q":2,"r":"0","rq":3,"so":100,"t":"T"}],'
        b'"brokerName":"broker-a"}')
    [ack] = body.acks
    assert (ack.consumer_group, ack.topic, ack.queue_id, ack.revive_queue_id) == ("g", "T", 2, 3)
    assert ack.offsets() == [100, 102, 109]
    for bad in ("not base64!", base64.b64encode(bytes(4097)).decode()):  # not base64, too wide
        ack.bit_set = bad
        with pytest.raises(ProtocolError):
            ack.offsets()


@pytest.mark.parametrize("v6", [False, True])
def test_a_delivered_record_carries_its_attempt(v6: bool) -> None:
    host = bytes(20) if v6 else bytes(8)
    record = bytearray(encode_record("T", 1, b"body", b"", born_timestamp=1, born_host=host,
                                     store_timestamp=2, store_host=host, reconsume_times=0))
    assert decode_record(delivered_record(record, 3)).reconsume_times == 2
    assert decode_record(delivered_record(record, 1)).reconsume_times == 2  # never lowered


def test_pop_allocation_shares_queues() -> None:
    queues = [MessageQueue("T", b, i) for b in ("a", "b") for i in range(2)]
    clients = ["c1", "c2", "c3"]
    everyone = allocate_for_pop(allocate_averagely, "g", "c1", queues, clients, -1)
    assert everyone == [MessageQueue("T", "a", -1), MessageQueue("T", "b", -1)]
    own = allocate_for_pop(allocate_averagely, "g", "c1", queues, clients, 1)
    shares = [allocate_averagely("g", c, queues, clients) for c in ("c1", "c2")]
    assert own == shares[0] + shares[1]
    crowd = [f"c{i}" for i in range(6)]  # more consumers than queues: one queue each
    assert allocate_for_pop(allocate_averagely, "g", "c5", queues, crowd, 1) == [queues[1]]
