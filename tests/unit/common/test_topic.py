"""Topic name rules (spec 2.13)."""

import pytest

from bolide.common import topic as T


@pytest.mark.parametrize(
    "name", ["TopicTest", "a", "%RETRY%group", "%DLQ%g", "a|b", "x_y-z", "9" * 127, "SCHEDULE_TOPIC_XXXX"]
)
def test_valid(name: str) -> None:
    assert T.validate_topic(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        ("t" * 128, "at most 127"),
        ("a b", "characters"),
        ("a.b", "characters"),
        ("a/b", "characters"),
        ("Tópic", "characters"),
        ("TopicTest\n", "characters"),
        ("\nTopicTest", "characters"),
    ],
)
def test_invalid(name: str, fragment: str) -> None:
    reason = T.validate_topic(name)
    assert reason is not None
    assert fragment in reason


def test_system_topic_names() -> None:
    assert T.SCHEDULE_TOPIC == "SCHEDULE_TOPIC_XXXX"
    assert T.TRANS_HALF_TOPIC == "RMQ_SYS_TRANS_HALF_TOPIC"
    assert T.TRANS_OP_HALF_TOPIC == "RMQ_SYS_TRANS_OP_HALF_TOPIC"
    assert T.RETRY_GROUP_TOPIC_PREFIX == "%RETRY%"
    assert T.DLQ_GROUP_TOPIC_PREFIX == "%DLQ%"
