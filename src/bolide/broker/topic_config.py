"""Topic configs of a broker, kept in memory (persisting ``topics.json`` comes later), with the
DataVersion bumped on every change and sent in REGISTER_BROKER."""

from __future__ import annotations

import time
from collections.abc import Callable

from bolide.broker.config import BrokerConfig
from bolide.common.topic import (
    AUTO_CREATE_TOPIC_KEY,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from bolide.protocol.bodies.broker import DataVersion, TopicConfig, TopicConfigSerializeWrapper

PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
# topics producers may not send to (spec 3.4 step 1) and admins may not create (3.7)
NOT_SENDABLE = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
                          "TRANS_CHECK_MAX_TIME_TOPIC", SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
SYSTEM_TOPICS = NOT_SENDABLE | {AUTO_CREATE_TOPIC_KEY, "BenchmarkTest"}


class TopicConfigManager:
    """The broker's topics by name; ``on_change`` is called after every create/update."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(timestamp=_now_ms(), counter=0)
        self.on_change: list[Callable[[TopicConfig], None]] = []
        self._put(TopicConfig(topic_name=SELF_TEST_TOPIC, read_queue_nums=1, write_queue_nums=1))
        self._put(TopicConfig(topic_name=OFFSET_MOVED_EVENT, read_queue_nums=1, write_queue_nums=1))
        self._put(TopicConfig(topic_name=SCHEDULE_TOPIC, read_queue_nums=18, write_queue_nums=18))
        if config.auto_create_topic_enable:
            n = config.default_topic_queue_nums
            self._put(TopicConfig(topic_name=AUTO_CREATE_TOPIC_KEY, read_queue_nums=n,
                                  write_queue_nums=n, perm=PERM_INHERIT | PERM_READ | PERM_WRITE))
        cluster = config.broker_cluster_name
        self._put(TopicConfig(topic_name=cluster, read_queue_nums=16, write_queue_nums=16, perm=1))
        self._put(TopicConfig(topic_name=config.broker_name, read_queue_nums=1, write_queue_nums=1,
                              perm=1))

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def _put(self, tc: TopicConfig) -> None:
        self.table[tc.topic_name] = tc

    def update(self, tc: TopicConfig) -> None:
        """Create or replace a topic; bumps the data version and notifies listeners."""
        self._put(tc)
        self.data_version = DataVersion(timestamp=_now_ms(), counter=self.data_version.counter + 1)
        for listener in self.on_change:
            listener(tc)

    def create_in_send(self, topic: str, default_topic: str, queue_nums: int) -> TopicConfig | None:
        """Auto-create ``topic`` from the template ``default_topic`` if it may be inherited."""
        template = self.table.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        if default_topic == AUTO_CREATE_TOPIC_KEY and not self.config.auto_create_topic_enable:
            return None
        nums = max(1, min(queue_nums, template.write_queue_nums))
        tc = TopicConfig(topic_name=topic, read_queue_nums=nums, write_queue_nums=nums,
                         perm=template.perm & ~PERM_INHERIT, topic_sys_flag=template.topic_sys_flag)
        self.update(tc)
        return tc

    def create_for_group(self, topic: str, queue_nums: int = 1, perm: int = 6) -> TopicConfig:
        """The ``%RETRY%``/``%DLQ%`` topic of a group, created when missing."""
        tc = self.table.get(topic)
        if tc is None:
            tc = TopicConfig(topic_name=topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums,
                             perm=perm)
            self.update(tc)
        return tc

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """Every topic and the data version (GET_ALL_TOPIC_CONFIG, REGISTER_BROKER)."""
        return TopicConfigSerializeWrapper(topic_config_table=dict(self.table),
                                           data_version=self.data_version)


def _now_ms() -> int:
    return int(time.time() * 1000)
