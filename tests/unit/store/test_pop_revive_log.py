"""RocketMQ 5's pop revive log decoded from the JSON bodies its brokers write (fastjson: the short
field names, keys sorted) and paired as its PopReviveService pairs them."""

from __future__ import annotations

import json

import pytest

from bolide.store.pop_revive_log import (
    Ack,
    Checkpoint,
    ReviveLedger,
    ReviveRecordError,
    Unacked,
    decode_ack,
    decode_checkpoint,
    decode_record,
    is_revive_topic,
    revive_topic,
)

PT = 1_716_000_000_123
# PopMessageProcessor.appendCheckPoint: three messages of queue 1 from offset 10 (12 and 15 were
# filtered out by tag), popped for 60 s
CK = (b'{"bm":0,"bn":"broker-a","c":"cg","d":[0,2,5],"it":60000,"n":3,"pt":1716000000123,'
      b'"q":1,"ro":0,"so":10,"t":"TopicA"}')
# AckMessageProcessor.appendAck: one of them acknowledged
ACK = b'{"ao":12,"bn":"broker-a","c":"cg","pt":1716000000123,"q":1,"so":10,"t":"TopicA"}'
# a BATCH_ACK_MESSAGE (its ackOffset stays -1)
BATCH_ACK = b'{"ao":-1,"aol":[10,15],"bn":"broker-a","c":"cg","pt":1716000000123,"q":1,"so":10,"t":"TopicA"}'


def test_a_checkpoint_lists_its_messages_by_their_distance_from_the_start() -> None:
    ck = decode_checkpoint(CK, "ignored")
    assert ck == Checkpoint("cg", "TopicA", 1, 10, PT, 60_000, (10, 12, 15), "broker-a")
    assert ck.revive_time == PT + 60_000


def test_an_old_checkpoint_without_distances_holds_consecutive_offsets_and_a_missing_broker_name() -> None:
    body = b'{"bm":2,"c":"cg","it":1000,"n":3,"pt":5,"q":0,"so":7,"t":"T"}'
    ck = decode_checkpoint(body, "broker-b")
    assert (ck.offsets, ck.broker_name, ck.acked_bits) == ((7, 8, 9), "broker-b", 2)


def test_acks_single_and_batch_and_with_long_field_names() -> None:
    assert decode_ack(ACK, "x", batch=False) == Ack("cg", "TopicA", 1, 10, PT, (12,), "broker-a")
    assert decode_ack(BATCH_ACK, "x", batch=True).offsets == (10, 15)
    long_names = json.dumps({"ackOffset": 3, "consumerGroup": "g", "topic": "t", "queueId": 0,
                             "startOffset": 3, "popTime": 9, "brokerName": " "}).encode()
    assert decode_ack(long_names, "broker-c", batch=False) == Ack("g", "t", 0, 3, 9, (3,), "broker-c")


@pytest.mark.parametrize("tag, body, why", [
    ("ck", b"0-17", "not JSON"),  # PopBufferMergeService's cancellation of a checkpoint
    ("ck", b"{nope", "not JSON"),
    ("ck", b"[1]", "not a JSON object"),
    ("ck", b'{"so":1,"pt":2,"it":3,"q":0,"t":"T"}', "'c'"),
    ("ck", b'{"so":true,"pt":2,"it":3,"q":0,"t":"T","c":"g"}', "'so'"),
    ("ck", b'{"so":1,"pt":2,"it":3,"q":0,"t":"T","c":"g","n":2,"d":[0,"x"]}', "'d'"),
    ("bAck", b'{"aol":"1,2","so":1,"pt":2,"q":0,"t":"T","c":"g"}', "'aol'"),
    ("ack", b'{"so":1,"pt":2,"q":0,"t":"T","c":"g"}', "'ao'"),
    # a damaged count would have the takeover list a trillion offsets
    ("ck", b'{"so":1,"pt":2,"it":3,"q":0,"t":"T","c":"g","n":1000000000000}', "holds 0 to 255 messages"),
    ("ck", b'{"so":1,"pt":2,"it":3,"q":0,"t":"T","c":"g","n":-1}', "holds 0 to 255 messages"),
    # a number too long for an int() of its text
    ("ack", b'{"so":"' + b"9" * 5000 + b'","ao":1,"pt":2,"q":0,"t":"T","c":"g"}', "'so'"),
])
def test_bodies_that_are_not_records_raise_naming_the_field(tag: str, body: bytes, why: str) -> None:
    with pytest.raises(ReviveRecordError, match=why):
        decode_record(tag, body, "b")


def test_other_tags_are_not_records() -> None:
    assert decode_record(None, CK, "b") is None
    assert decode_record("cancel", CK, "b") is None
    assert is_revive_topic(revive_topic("DefaultCluster")) and not is_revive_topic("TopicA")


def records(*pairs: tuple[str, bytes]) -> list[Checkpoint | Ack]:
    out = [decode_record(tag, body, "broker-a") for tag, body in pairs]
    assert all(r is not None for r in out)
    return out  # type: ignore[return-value]


def test_the_messages_of_a_checkpoint_without_their_ack_are_left_in_any_order() -> None:
    for order in (0, 1):
        ledger = ReviveLedger()
        items = records(("ck", CK), ("ack", ACK))
        for r in items if order == 0 else items[::-1]:  # an ack may come before its checkpoint
            ledger.add(r, 3)
        assert ledger.unacked() == [Unacked("cg", "TopicA", 1, 10, PT, 60_000, 3),
                                    Unacked("cg", "TopicA", 1, 15, PT, 60_000, 3)]
        assert ledger.acked_count() == 1
    ledger.add(records(("bAck", BATCH_ACK))[0], 3)
    assert ledger.unacked() == []


def test_an_ack_of_another_pop_or_broker_does_not_count() -> None:
    ledger = ReviveLedger()
    ledger.add(records(("ck", CK))[0], 0)
    other_pop = ACK.replace(b"1716000000123", b"1716000000999")
    other_broker = ACK.replace(b"broker-a", b"broker-b")
    for r in records(("ack", other_pop), ("ack", other_broker)):
        ledger.add(r, 0)
    assert [u.offset for u in ledger.unacked()] == [10, 12, 15]


def test_a_checkpoint_read_twice_counts_once() -> None:
    ledger = ReviveLedger()
    for _ in range(2):  # in the revive topic and still in the timer wheel
        ledger.add(records(("ck", CK))[0], 0)
    assert len(ledger.unacked()) == 3 and len(ledger.checkpoints) == 1


def test_an_invisible_time_change_the_latest_pop_of_a_message_says_where_it_stands() -> None:
    # ChangeInvisibleTimeProcessor: a new checkpoint of the one message (its own pop time), then
    # an ack of the old checkpoint
    later = PT + 5_000
    new_ck = json.dumps({"bm": 0, "bn": "broker-a", "c": "cg", "d": [0], "it": 30_000, "n": 1,
                         "pt": later, "q": 1, "ro": 0, "so": 15, "t": "TopicA"}).encode()
    ack_old = ACK.replace(b'"ao":12', b'"ao":15')
    ledger = ReviveLedger()
    for r in records(("ck", CK), ("ack", ACK), ("ck", new_ck)):
        ledger.add(r, 1)
    # the old pop's ack of 15 is missing (not written yet): the new pop wins anyway
    assert ledger.unacked() == [Unacked("cg", "TopicA", 1, 10, PT, 60_000, 1),
                                Unacked("cg", "TopicA", 1, 15, later, 30_000, 1)]
    ledger.add(records(("ack", ack_old))[0], 1)
    assert [u.offset for u in ledger.unacked()] == [10, 15]
    ack_new = json.dumps({"ao": 15, "bn": "broker-a", "c": "cg", "pt": later, "q": 1, "so": 15,
                          "t": "TopicA"}).encode()
    ledger.add(records(("ack", ack_new))[0], 1)
    assert [u.offset for u in ledger.unacked()] == [10]


def test_orderly_pops_and_a_checkpoints_own_bits_leave_nothing() -> None:
    ledger = ReviveLedger()
    ledger.add(records(("ck", CK))[0], 999)  # an orderly pop's queue: RocketMQ writes none
    ledger.add(records(("ck", CK.replace(b'"bm":0', b'"bm":7').replace(b'"so":10', b'"so":20')))[0], 0)
    assert ledger.unacked() == []
