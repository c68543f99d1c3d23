"""The checks a topic or a subscription group passes before an admin request creates or
updates it, shared by the single requests (UPDATE_AND_CREATE_TOPIC 17,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200) and the 5.x list requests (18, 225), so that both
validate the same way. Storing the result (``TopicConfigManager.update``,
``SubscriptionGroupManager.update``) persists it and, for topics, registers it with the
NameServers."""

from __future__ import annotations

from typing import Any

from bolide.broker.topic_attributes import TopicAttributeError, apply_changes, check_unchangeable
from bolide.broker.topic_config import SYSTEM_TOPICS, TopicConfigManager
from bolide.common.topic import validate_queue_nums, validate_topic
from bolide.errors import BolideError
from bolide.protocol.bodies.broker import TopicConfig
from bolide.store.topic_config import SubscriptionGroupConfig


class CreateRefused(BolideError):
    """The topic or group cannot be created as asked; the message says why."""


def refuse_topic_name(topic: str) -> str | None:
    """Why ``topic`` may not be created by an admin, or None."""
    why = validate_topic(topic)
    if why is None and topic in SYSTEM_TOPICS:
        why = f"The topic[{topic}] is conflict with system topic."
    return why


def checked_topic(topics: TopicConfigManager, tc: TopicConfig, attribute_changes: str | None) -> TopicConfig:
    """``tc`` as it will be stored: its name and queue counts checked, and RocketMQ 5's
    attribute changes (``+key=value,-key``) applied to the topic's current attributes.
    Raises CreateRefused."""
    why = refuse_topic_name(tc.topic_name) or validate_queue_nums(tc.read_queue_nums, tc.write_queue_nums)
    if why is not None:
        raise CreateRefused(why)
    old = topics.get(tc.topic_name)
    try:
        attributes = apply_changes(old.attributes if old is not None else None, attribute_changes)
        if old is not None:
            check_unchangeable(old.attributes, attributes)
    except TopicAttributeError as exc:
        raise CreateRefused(str(exc)) from None
    return TopicConfig(topic_name=tc.topic_name, read_queue_nums=tc.read_queue_nums,
                       write_queue_nums=tc.write_queue_nums, perm=tc.perm,
                       topic_filter_type=tc.topic_filter_type, topic_sys_flag=tc.topic_sys_flag,
                       order=tc.order, attributes=attributes)


def attribute_changes(attributes: dict[str, str] | None) -> str | None:
    """A TopicConfig body's ``attributes`` (RocketMQ 5: ``{"+key": "value", "-key": ""}``) as
    the changes string of UPDATE_AND_CREATE_TOPIC. Raises CreateRefused for a key with
    neither sign, as RocketMQ refuses it."""
    if not attributes:
        return None
    changes = []
    for key, value in attributes.items():
        if key.startswith("+"):
            changes.append(f"{key}={value}")
        elif key.startswith("-"):
            changes.append(key)
        else:
            raise CreateRefused(f"topic attribute {key!r}: write \"+{key}\": \"{value}\" to set it, "
                                f"or \"-{key}\": \"\" to remove it")
    return ",".join(changes)


def checked_group(obj: Any, what: str = "the body") -> SubscriptionGroupConfig:
    """A SubscriptionGroupConfig from its parsed JSON (5.x fields kept); raises CreateRefused
    when it is not one or has no ``groupName``."""
    try:
        config = SubscriptionGroupConfig.from_json_obj(obj, what)
    except BolideError as exc:
        raise CreateRefused(f"{what} is not a SubscriptionGroupConfig: {exc}") from None
    if not config.group_name:
        raise CreateRefused(f"{what} has no groupName: set it")
    return config
