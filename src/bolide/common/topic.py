"""Topic name rules shared by the store and the broker."""

import re

MAX_TOPIC_LENGTH = 127
_VALID = re.compile(r"[%|a-zA-Z0-9_-]+")

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
AUTO_CREATE_TOPIC_KEY = "TBW102"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def validate_topic(topic: str) -> str | None:
    """Return why ``topic`` is not a valid topic name, or None when it is valid."""
    if not topic:
        return "the topic is empty; give a topic name of 1 to 127 characters"
    if len(topic) > MAX_TOPIC_LENGTH:
        return (
            f"the topic is {len(topic)} characters long; RocketMQ allows at most "
            f"{MAX_TOPIC_LENGTH}: use a shorter name"
        )
    if not _VALID.fullmatch(topic):
        return (
            f"the topic {topic!r} has characters RocketMQ does not allow; use only ASCII "
            "letters, digits, '%', '|', '_' and '-'"
        )
    return None
