"""Redelivery of failed messages: the ``%RETRY%<group>`` and ``%DLQ%<group>`` topics.

A consumer that fails a message sends it back (CONSUMER_SEND_MSG_BACK) or, when that fails,
sends a copy to its group's retry topic itself. Either way the message is delivered again after
a delay level that grows with its reconsume count, and goes to the group's dead letter queue
once the count reaches the group's maximum (RocketMQ's rules, spec 3.4 rule 4 and 3.5).
"""

from __future__ import annotations

from dataclasses import dataclass

from bolide.common.topic import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

DEFAULT_MAX_RECONSUME_TIMES = 16  # a subscription group's retryMaxTimes
FIRST_RETRY_LEVEL = 3  # delay level of the first retry (10 s with the default levels)
V3_4_9 = 121  # from this client version on, the request's maxReconsumeTimes is honoured


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def group_of_retry_topic(topic: str) -> str | None:
    """The consumer group of a ``%RETRY%`` topic; None for other topics."""
    return topic[len(RETRY_GROUP_TOPIC_PREFIX):] if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else None


def max_reconsume_times(request_version: int, from_header: int | None,
                        group_max: int = DEFAULT_MAX_RECONSUME_TIMES) -> int:
    """The request's maximum when its client is new enough to send one, else the group's."""
    return from_header if from_header is not None and request_version >= V3_4_9 else group_max


@dataclass(frozen=True, slots=True)
class Redelivery:
    """Where a sent-back message goes: the DLQ (no delay) or the retry topic after a delay."""

    topic: str
    delay_level: int  # 0: no delay

    @property
    def dead(self) -> bool:
        return self.topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def redelivery(group: str, reconsume_times: int, max_times: int, delay_level: int) -> Redelivery:
    """Decide a sent-back message's fate from its reconsume count so far.

    ``delay_level`` is the consumer's request: 0 lets the broker choose (3 + reconsume count),
    a negative level sends the message straight to the dead letter queue.
    """
    if reconsume_times >= max_times or delay_level < 0:
        return Redelivery(dlq_topic(group), 0)
    return Redelivery(retry_topic(group), delay_level or FIRST_RETRY_LEVEL + reconsume_times)
