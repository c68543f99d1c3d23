"""The compiled put path (bolide.store.fast_put): it writes the same records and returns the
same results as the general Python path, and hands everything unusual to that path."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bolide.common import sysflag
from bolide.common.message import Message
from bolide.common.properties import encode_properties
from bolide.protocol.bodies.batch import batch_members, encode_batch_body
from bolide.store import MessageStore, PutStatus, fast_put
from bolide.store.offline import iter_records, open_commit_log
from conftest import assert_consistent, small_config

compiled_only = pytest.mark.skipif(not fast_put.COMPILED, reason="the compiled put path")


def test_the_compiled_put_path_is_built() -> None:
    """CI installs with a C compiler: the compiled put must be there (unless pure is asked)."""
    if os.environ.get("BOLIDE_PURE_PYTHON") == "1":
        assert not fast_put.COMPILED
    else:
        assert fast_put.COMPILED, "bolide.store._append is not built: run `make venv` again"


def _records(store: MessageStore) -> list[bytes]:
    """Every record's bytes with the born and store timestamps zeroed."""
    out = []
    with open_commit_log(store.config) as log:
        for info in iter_records(store.config):
            start, m = log.find(info.commit_log_offset)  # type: ignore[misc]
            pos = info.commit_log_offset - start
            raw = bytearray(m[pos : pos + info.size])
            born_len = 20 if info.sys_flag & sysflag.BORNHOST_V6 else 8
            raw[40:48] = bytes(8)
            raw[48 + born_len : 56 + born_len] = bytes(8)
            out.append(bytes(raw))
    return out


def _result_fields(r: Any) -> tuple[Any, ...]:
    return (r.status, r.wrote_offset, r.wrote_bytes, r.queue_offset, r.msg_id, r.msg_num,
            r.batch_ids, r.record_sizes, r.store_host, r.remark)


props_st = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "a", "ø", "WAIT", "x" * 30]),
    st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["TagA", "k1 k2"])),
    max_size=4,
)
put_st = st.fixed_dictionaries({
    "kind": st.sampled_from(["message", "message", "encoded", "batch", "batch_encoded",
                             "batch_body"]),
    "extra": st.sampled_from([b"", b"CLUSTER\x01c\x02", b"a\x01b\x02UNIQ_KEY\x01X\x02"]),
    "topic": st.sampled_from(["T", "Orders", "Tø", "bad topic!", "x" * 130]),
    "queue_id": st.sampled_from([0, 0, 1, 3, -1]),
    "bodies": st.lists(st.binary(max_size=300), min_size=1, max_size=5),
    "props": props_st,
    "flag": st.sampled_from([0, 7, -1, 2**31]),
    "sys_flag": st.sampled_from([0, 0, sysflag.TRANSACTION_COMMIT_TYPE,
                                 sysflag.TRANSACTION_PREPARED_TYPE, sysflag.COMPRESSED]),
    "born_host": st.sampled_from([None, "10.1.2.3:4567", "[::1]:9876"]),
    "reconsume": st.sampled_from([0, 3]),
})


def _put(store: MessageStore, op: dict[str, Any], n: int) -> Any:
    props = {**op["props"], "UNIQ_KEY": f"ID{n:06d}"}
    bodies = op["bodies"]
    if op["kind"] == "message":
        return store.put_message(
            Message(op["topic"], bodies[0], flag=op["flag"], properties=props), op["queue_id"],
            sys_flag=op["sys_flag"], born_timestamp=1_700_000_000_000, born_host=op["born_host"],
            reconsume_times=op["reconsume"])
    if op["kind"] == "encoded":
        return store.put_encoded(
            op["topic"], bodies[0], encode_properties(props), op["queue_id"], flag=op["flag"],
            sys_flag=op["sys_flag"], born_timestamp=1_700_000_000_000, born_host=op["born_host"],
            reconsume_times=op["reconsume"])
    members = [{**props, "UNIQ_KEY": f"ID{n:06d}-{i}"} for i in range(len(bodies))]
    if op["kind"] == "batch":
        msgs = [Message(op["topic"], b, flag=op["flag"], properties=p)
                for b, p in zip(bodies, members, strict=True)]
        return store.put_messages(msgs, op["queue_id"], born_timestamp=1_700_000_000_000,
                                  born_host=op["born_host"])
    if op["kind"] == "batch_body":
        msgs = [Message(op["topic"], b, flag=op["flag"] % 2**31, properties=p)
                for b, p in zip(bodies, members, strict=True)]
        body = encode_batch_body(msgs)
        kw = {"born_timestamp": 1_700_000_000_000, "born_host": op["born_host"]}
        if store._appender is not None:
            r = store.try_put_batch_body(op["topic"], body, op["extra"], op["queue_id"], **kw)
            if r is not None:
                return r
        return store.put_batch_encoded(op["topic"], batch_members(body, op["extra"]),
                                       op["queue_id"], **kw)
    return store.put_batch_encoded(
        op["topic"], [(b, encode_properties(p), op["flag"]) for b, p in zip(bodies, members,
                                                                              strict=True)],
        op["queue_id"], born_timestamp=1_700_000_000_000, born_host=op["born_host"])


@compiled_only
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(put_st, min_size=1, max_size=40))
def test_fast_and_general_paths_write_the_same(ops: list[dict[str, Any]],
                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    fast_dir, general_dir = tmp_path_factory.mktemp("fast"), tmp_path_factory.mktemp("general")
    cfg_fast = small_config(fast_dir, mapped_file_size_commit_log=4096)
    cfg_general = small_config(general_dir, mapped_file_size_commit_log=4096)
    with MessageStore(cfg_fast) as fast, MessageStore(cfg_general) as general:
        assert fast._appender is not None
        general._appender = None
        for n, op in enumerate(ops):
            a, b = _put(fast, op, n), _put(general, op, n)
            assert _result_fields(a) == _result_fields(b), op
        assert fast.wait_dispatched(timeout=30) and general.wait_dispatched(timeout=30)
        assert _records(fast) == _records(general)
        for key, cq in general._queues.items():
            assert fast.get_max_offset_in_queue(*key) == cq.max_offset
    assert_consistent(cfg_fast)


@compiled_only
def test_the_fast_path_takes_the_common_put(tmp_path: Path) -> None:
    """After the first put of a topic (validated by the general path) the compiled path
    writes: the general path is not entered."""
    with MessageStore(small_config(tmp_path)) as store:
        assert store.put_message(Message("T", b"first", tags="A"), 0).ok
        calls = []
        general = store._append_one
        store._append_one = lambda *a: calls.append(a) or general(*a)  # type: ignore[method-assign]
        r = store.put_message(Message("T", b"x", tags="A", keys=["k1"]), 0)
        assert r.ok and r.queue_offset == 1 and not calls
        b = store.put_messages([Message("T", b"y"), Message("T", b"z")], 0)
        assert b.ok and b.queue_offset == 2 and b.msg_num == 2 and len(b.record_sizes or []) == 2
        assert not calls
        assert store.wait_dispatched(timeout=30)
        got = store.get_message("g", "T", 0, 0, 32)
        assert [m.body for m in got.messages] == [b"first", b"x", b"y", b"z"]
        assert got.messages[1].keys == ["k1"] and got.messages[1].tags == "A"
        assert [m.properties["UNIQ_KEY"] for m in got.messages[1:]] == [r.msg_id, *b.msg_ids]
        assert store.query_message("T", "k1", 10, 0, 2**62)[0].body == b"x"


@compiled_only
def test_generated_ids_are_unique_across_both_paths(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path, mapped_file_size_commit_log=8192)) as store:
        ids = []
        for i in range(400):  # segment rolls send some puts through the general path
            r = (store.put_message(Message("T", b"x" * 50), 0) if i % 3 else
                 store.put_messages([Message("T", b"y"), Message("T", b"z")], 1))
            assert r.ok
            ids.extend(r.msg_ids)
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9A-F]{32}", i) for i in ids)


@compiled_only
@pytest.mark.parametrize("case", ["delay", "new_topic", "bad_topic", "big_body", "big_props",
                                  "ipv6_born", "prepared", "not_str", "mixed_batch",
                                  "delay_in_batch"])
def test_unusual_puts_take_the_general_path(tmp_path: Path, case: str) -> None:
    """Each of these returns None from the compiled path: the general path decides."""
    with MessageStore(small_config(tmp_path, max_message_size=1024)) as store:
        assert store.put_message(Message("T", b"seed"), 0).ok
        appender = store._appender
        taken = []

        class Spy:
            def append(self, *a: Any) -> Any:
                taken.append(r := appender.append(*a))
                return r

            def append_batch(self, *a: Any) -> Any:
                taken.append(r := appender.append_batch(*a))
                return r

        store._appender = Spy()
        props: dict[str, Any] = {}
        topic, body, born, sys_flag = "T", b"x", None, 0
        if case == "delay":
            props["DELAY"] = "1"
        elif case == "new_topic":
            topic = "Fresh"
        elif case == "bad_topic":
            topic = "bad topic"
        elif case == "big_body":
            body = b"x" * 1025
        elif case == "big_props":
            props["p"] = "v" * 40_000
        elif case == "ipv6_born":
            born = "[::1]:10911"
        elif case == "prepared":
            sys_flag = sysflag.TRANSACTION_PREPARED_TYPE
        elif case == "not_str":
            props["n"] = 5
        if case == "mixed_batch":
            r = store.put_messages([Message("T", b"a"), Message("U", b"b")], 0)
            assert r.status is PutStatus.MESSAGE_ILLEGAL and "one topic" in r.remark
        elif case == "delay_in_batch":
            r = store.put_messages([Message("T", b"a", properties={"DELAY": "2"})], 0)
            assert r.status is PutStatus.MESSAGE_ILLEGAL and "delayed" in r.remark
        else:
            r = store.put_message(Message(topic, body, properties=props), 0, sys_flag=sys_flag,
                                  born_host=born)
        assert taken == [None]
        expect_ok = case in ("delay", "new_topic", "ipv6_born", "prepared", "not_str")
        assert r.ok is expect_ok, r.remark
        if case == "big_body":
            assert "maxMessageSize" in r.remark
        if case == "big_props":
            assert r.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
        if case == "delay":
            assert store.wait_dispatched(timeout=30)
            assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1
        store._appender = appender
    assert_consistent(store.config)


@compiled_only
@pytest.mark.parametrize("body", [b"", b"\x00" * 10, b"\x00" * 16 + b"\x7f\xff\xff\xff" + b"\x00" * 8])
def test_a_batch_body_that_does_not_parse_is_left_to_the_decoder(tmp_path: Path,
                                                                  body: bytes) -> None:
    with MessageStore(small_config(tmp_path)) as store:
        assert store.put_message(Message("T", b"seed"), 0).ok
        assert store.try_put_batch_body("T", body, b"", 0) is None
        assert store.wait_dispatched(timeout=30)
        assert store.get_max_offset_in_queue("T", 0) == 1


@compiled_only
def test_a_batch_body_is_stored_member_by_member(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path)) as store:
        assert store.put_message(Message("T", b"seed"), 0).ok
        body = encode_batch_body([Message("T", b"a", tags="x", flag=3),
                                  Message("T", b"b", keys=["k"], properties={"UNIQ_KEY": "U1"})])
        r = store.try_put_batch_body("T", body, b"CLUSTER\x01c\x02", 0)
        assert r is not None and r.ok and r.msg_num == 2 and r.queue_offset == 1
        assert r.msg_ids[1] == "U1"
        assert store.wait_dispatched(timeout=30)
        got = store.get_message("g", "T", 0, 1, 32).messages
        assert [(m.body, m.flag, m.properties.get("CLUSTER")) for m in got] == [
            (b"a", 3, "c"), (b"b", 0, "c")]
        assert got[0].tags == "x" and got[1].keys == ["k"]
        assert got[0].properties["UNIQ_KEY"] == r.msg_ids[0]


@compiled_only
def test_results_of_a_class_without_slots_are_made_by_calling_it(tmp_path: Path) -> None:
    """The compiled path fills PutMessageResult's slots; any other result class is called with
    the fields in order, and gives the same values."""
    import dataclasses

    from bolide.store import _append  # type: ignore[attr-defined]
    from bolide.store.results import PutMessageResult

    Plain = dataclasses.make_dataclass(
        "Plain", [(f.name, f.type, dataclasses.field(default=None))
                  for f in dataclasses.fields(PutMessageResult)])
    with MessageStore(small_config(tmp_path)) as store:
        assert store.put_message(Message("T", b"seed"), 0).ok
        cl = store.commit_log
        store._appender = _append.Appender(
            commit_log=cl, files=cl.files, queue_offsets=cl.queue_offsets,
            queue_room=store._queue_room, topic_fields=cl.topic_fields,
            store_host=cl.store_host, uniq=store._uniq, result_type=Plain, ok=PutStatus.PUT_OK,
            max_body=1 << 20, room_ahead=32)
        one = store.put_message(Message("T", b"one", properties={"UNIQ_KEY": "U1"}), 0)
        two = store.put_messages([Message("T", b"a"), Message("T", b"b")], 0)
    assert type(one) is Plain and type(two) is Plain
    assert (one.status, one.queue_offset, one.msg_id, one.msg_num, one.batch_ids,
            one.record_sizes, one.store_host) == (PutStatus.PUT_OK, 1, "U1", 1, None, None,
                                                   cl.store_host)
    assert (two.queue_offset, two.msg_num, len(two.batch_ids), two.wrote_bytes) == (
        2, 2, 2, sum(two.record_sizes))
