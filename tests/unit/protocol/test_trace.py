"""Trace data as RocketMQ's clients write it (TraceDataEncoder): each context type decoded from
the text a Java 5.3.3 client writes, the older layouts, encode -> decode round trips, the keys a
trace message is indexed by, malformed contexts left out; and the views the Admin builds."""

from __future__ import annotations

import pytest

from bolide.client.admin_trace import trace_views
from bolide.common.message import MessageExt
from bolide.protocol.trace import (
    PUB,
    SUB_AFTER,
    SUB_BEFORE,
    TraceBean,
    TraceContext,
    decode_trace_data,
    encode_trace_context,
)

S, F = "\x01", "\x02"
ID = "C0A8000100002A9F0000000000000004"
# as a Java 5.3.3 producer and push consumer write them (one trace message may hold several)
PUB_TEXT = S.join(["Pub", "1795885680466", "DefaultRegion", "pg", "T", ID, "tag1", "key-1 k1",
                   "127.0.0.1:10911", "6", "3", "0", "7F00000100002A9F0000000000000000", "true"]) + F
SUB_BEFORE_TEXT = S.join(["SubBefore", "1795885680500", "DefaultRegion", "cg", "req-1", ID, "0",
                          "key-1 k1"]) + F
SUB_AFTER_TEXT = S.join(["SubAfter", "req-1", ID, "12", "true", "key-1 k1", "0", "1795885680512",
                         "cg"]) + F


def test_each_context_of_a_java_clients_trace_decodes() -> None:
    pub, before, after = decode_trace_data(PUB_TEXT + SUB_BEFORE_TEXT + SUB_AFTER_TEXT)
    assert (pub.type, pub.timestamp, pub.group, pub.cost_ms, pub.success) == (
        PUB, 1795885680466, "pg", 3, True)
    bean = pub.beans[0]
    assert (bean.topic, bean.msg_id, bean.tags, bean.keys, bean.store_host, bean.body_length) == (
        "T", ID, "tag1", "key-1 k1", "127.0.0.1:10911", 6)
    assert bean.offset_msg_id == "7F00000100002A9F0000000000000000"
    assert (before.type, before.group, before.request_id, before.beans[0].retry_times) == (
        SUB_BEFORE, "cg", "req-1", 0)
    assert (after.type, after.group, after.cost_ms, after.success, after.timestamp) == (
        SUB_AFTER, "cg", 12, True, 1795885680512)


def test_older_layouts() -> None:
    old_pub = S.join(["Pub", "1", "r", "pg", "T", ID, "t", "k", "h", "6", "3", "0", "false"]) + F
    [pub] = decode_trace_data(old_pub)
    assert pub.success is False and pub.beans[0].offset_msg_id == ""
    old_after = S.join(["SubAfter", "req", ID, "5", "false", "k"]) + F  # no context code, time, group
    [after] = decode_trace_data(old_after)
    assert (after.success, after.context_code, after.group, after.timestamp) == (False, 0, "", 0)


@pytest.mark.parametrize("ctx", [
    TraceContext(PUB, 17, "DefaultRegion", "pg", cost_ms=4,
                 beans=[TraceBean(ID, "T", "tag", "a b", "h:1", 10, 0, "OFF")]),
    TraceContext(SUB_BEFORE, 18, "DefaultRegion", "cg", request_id="r",
                 beans=[TraceBean(ID, keys="a", retry_times=2), TraceBean("OTHER", keys="")]),
    TraceContext(SUB_AFTER, 19, "", "cg", request_id="r", cost_ms=7, success=False, context_code=2,
                 beans=[TraceBean(ID, keys="a")]),
    TraceContext("EndTransaction", 20, "DefaultRegion", "pg",
                 beans=[TraceBean(ID, "T", "tag", "a", "h:1", msg_type=1, transaction_id="tx",
                                  transaction_state="COMMIT_MESSAGE", from_transaction_check=True)]),
    TraceContext("Recall", 21, "DefaultRegion", "pg", success=True, beans=[TraceBean(ID, "T")]),
])
def test_encode_then_decode(ctx: TraceContext) -> None:
    text, keys = encode_trace_context(ctx)
    decoded = decode_trace_data(text)
    if ctx.type == SUB_BEFORE:  # one context per bean
        assert [d.beans[0].msg_id for d in decoded] == [ID, "OTHER"]
        assert decoded[0].beans[0].retry_times == 2 and decoded[0].request_id == "r"
    else:
        [back] = decoded
        if ctx.type == SUB_AFTER:  # what a SubAfter carries
            assert (back.request_id, back.cost_ms, back.success, back.context_code, back.group) == (
                "r", 7, False, 2, "cg")
        else:
            assert back == ctx
    assert keys[0] == ID and set(keys) >= {b.msg_id for b in ctx.beans}
    if ctx.type == PUB:
        assert keys == [ID, "a", "b"]


def test_unknown_and_malformed_contexts_are_left_out() -> None:
    bad_number = PUB_TEXT.replace("1795885680466", "soon")
    assert decode_trace_data("Nope" + S + "1" + F + bad_number + SUB_BEFORE_TEXT + "Pub" + S + "1" + F) == [
        decode_trace_data(SUB_BEFORE_TEXT)[0]]
    assert decode_trace_data("") == []
    with pytest.raises(ValueError, match="unknown trace context type"):
        encode_trace_context(TraceContext("Other", beans=[TraceBean(ID)]))


def test_views_keep_the_message_and_leave_out_sub_before() -> None:
    trace = MessageExt(topic="RMQ_SYS_TRACE_TOPIC", body=(SUB_AFTER_TEXT + PUB_TEXT + SUB_BEFORE_TEXT
                                                          + PUB_TEXT.replace(ID, "ANOTHER")).encode())
    trace.born_host = "10.0.0.7:51812"
    views = trace_views(ID, [trace])
    assert [(v.type, v.group, v.status, v.client_host) for v in views] == [
        ("Pub", "pg", "success", "10.0.0.7:51812"), ("SubAfter", "cg", "success", "10.0.0.7:51812")]
    assert views[0].msg_type == "Normal_Msg" and views[0].to_dict()["topic"] == "T"
