"""Message and MessageExt value types."""

from bolide.common import properties as P
from bolide.common.message import Message, MessageExt


def test_message_tags_and_keys_go_into_properties() -> None:
    m = Message("T", b"body", tags="TagA", keys=["k1", "k2"], flag=7)
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1 k2"}
    assert m.tags == "TagA"
    assert m.keys == ["k1", "k2"]
    assert m.flag == 7
    assert m.body == b"body"


def test_message_keys_string_and_empty_parts() -> None:
    assert Message("T", keys="a  b ").keys == ["a", "b"]
    assert Message("T").keys == []
    assert Message("T").tags is None


def test_message_copies_the_given_properties() -> None:
    props = {"X": "1"}
    m = Message("T", properties=props, tags="t")
    m.properties["Y"] = "2"
    assert props == {"X": "1"}


def test_delay_time_level() -> None:
    assert Message("T").delay_time_level == 0
    assert Message("T", properties={P.DELAY_TIME_LEVEL: "3"}).delay_time_level == 3
    assert Message("T", properties={P.DELAY_TIME_LEVEL: ""}).delay_time_level == 0


def test_message_ext_fields_and_ids() -> None:
    m = MessageExt(
        "T", b"x", properties={P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "ABC"}, flag=3, queue_id=2,
        queue_offset=5, commit_log_offset=202, store_host="192.168.0.1:10911",
    )
    assert (m.queue_id, m.queue_offset, m.commit_log_offset, m.flag) == (2, 5, 202, 3)
    assert m.msg_id == "ABC"
    assert m.offset_msg_id == "C0A8000100002A9F00000000000000CA"
    assert m.reconsume_times == 0 and m.sys_flag == 0 and m.born_host == ""
    assert "queue_offset=5" in repr(m)


def test_message_ext_without_uniq_key_and_ipv6_store_host() -> None:
    m = MessageExt("T", store_host="[::1]:10911", commit_log_offset=1)
    assert m.msg_id is None
    assert len(m.offset_msg_id) == 56
