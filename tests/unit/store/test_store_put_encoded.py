"""MessageStore.put_encoded: properties already encoded are stored as given."""

from __future__ import annotations

from collections.abc import Callable

from bolide.common.topic import SCHEDULE_TOPIC
from bolide.store import GetStatus, MessageStore

Open = Callable[..., MessageStore]
UNIQ = "0A0000010000AAAABBBB0000CCCC0001"


def test_stored_as_given_with_uniq_key(open_store: Open) -> None:
    store = open_store()
    props = f"TAGS\x01TagA\x02UNIQ_KEY\x01{UNIQ}\x02KEYS\x01k1 k2\x02".encode()
    r = store.put_encoded("T", b"hello", props, 1, flag=7)
    assert r.ok and r.msg_id == UNIQ and r.queue_offset == 0
    store.wait_dispatched()
    g = store.get_message("g", "T", 1, 0, tags=["TagA"])
    assert g.status is GetStatus.FOUND
    m = g.messages[0]
    assert (m.body, m.flag, m.tags, m.keys, m.msg_id) == (b"hello", 7, "TagA", ["k1", "k2"], UNIQ)
    assert list(m.properties) == ["TAGS", "UNIQ_KEY", "KEYS"]
    assert store.get_message("g", "T", 1, 0, tags=["TagB"]).status is not GetStatus.FOUND


def test_uniq_key_added_and_missing_separator_tolerated(open_store: Open) -> None:
    store = open_store()
    r = store.put_encoded("T", b"x", b"TAGS\x01A")
    assert r.ok and r.msg_id and len(r.msg_id) == 32
    r2 = store.put_encoded("T", b"y", b"")
    assert r2.ok and r2.queue_offset == 1
    store.wait_dispatched()
    first, second = store.get_message("g", "T", 0, 0).messages
    assert first.properties == {"TAGS": "A", "UNIQ_KEY": r.msg_id}
    assert second.properties == {"UNIQ_KEY": r2.msg_id}


def test_delayed_message_takes_the_schedule_path(open_store: Open) -> None:
    store = open_store()
    r = store.put_encoded("T", b"later", b"DELAY\x013\x02", 2)
    assert r.ok
    store.wait_dispatched()
    m = store.get_message("g", SCHEDULE_TOPIC, 2, 0).messages[0]
    assert m.properties["REAL_TOPIC"] == "T" and m.properties["REAL_QID"] == "2"


def test_bad_topic_refused(open_store: Open) -> None:
    store = open_store()
    assert not store.put_encoded("bad topic", b"x", b"").ok
