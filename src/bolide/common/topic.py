"""Topic name rules shared by the store and the broker."""

import re

MAX_TOPIC_LENGTH = 127
MAX_QUEUE_NUMS = 65536  # read or write queues of a topic on one broker, as broker and client accept
_VALID = re.compile(r"[%|a-zA-Z0-9_-]+")

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
AUTO_CREATE_TOPIC_KEY = "TBW102"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # RocketMQ 5's timer messages wait here (queue 0)
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # RocketMQ 5's system topics (TopicValidator.isSystemTopic)
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # RocketMQ's system consumer groups (MixAll.isSysConsumerGroup)
# RocketMQ's MixAll.PREDEFINE_GROUP_SET: groups of the servers and tools, not of applications
PREDEFINED_GROUPS = frozenset({
    "DEFAULT_CONSUMER", "DEFAULT_PRODUCER", "TOOLS_CONSUMER", "SCHEDULE_CONSUMER", "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER", "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL",
    "CID_SYS_RMQ_TRANS"})


def reply_topic(cluster: str) -> str:
    """The topic replies to requests go to in ``cluster`` (``<cluster>_REPLY_TOPIC``)."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


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


def validate_queue_nums(read_queue_nums: int, write_queue_nums: int) -> str | None:
    """Return why a topic cannot have these queue counts on a broker, or None when it can."""
    for what, count in (("readQueueNums", read_queue_nums), ("writeQueueNums", write_queue_nums)):
        if not 0 <= count <= MAX_QUEUE_NUMS:
            return (f"{what} is {count}; a topic has 0 to {MAX_QUEUE_NUMS} queues on a broker: "
                    "give a count in that range")
    return None
