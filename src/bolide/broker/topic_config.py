"""Topic configs of a broker, kept in ``config/topics.json`` through
:class:`bolide.store.topic_config.TopicConfigManager`, with the DataVersion bumped on every
change and sent in REGISTER_BROKER."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from bolide.broker.config import BrokerConfig
from bolide.common.topic import (
    AUTO_CREATE_TOPIC_KEY,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    reply_topic,
)
from bolide.protocol.bodies.broker import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from bolide.store import topic_config as stored

PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"  # TopicValidator's
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
# topics producers may not send to (spec 3.4 step 1) and admins may not create (3.7)
NOT_SENDABLE = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
                          "TRANS_CHECK_MAX_TIME_TOPIC", SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
SYSTEM_TOPICS = NOT_SENDABLE | {AUTO_CREATE_TOPIC_KEY, "BenchmarkTest"}


class TopicConfigManager:
    """The broker's topics by name, kept in the ``topics.json`` at ``path``.

    ``on_change`` is called after every create/update; a listener persists the file
    (:meth:`persist` blocks: call it off the event loop). :meth:`load` reads the file, a
    RocketMQ broker's too; the built-in topics it lacks are added as RocketMQ does.
    """

    def __init__(self, config: BrokerConfig, path: str | Path) -> None:
        self.config = config
        self.file = stored.TopicConfigManager(path)
        self.table: dict[str, TopicConfig] = {}
        self.on_change: list[Callable[[TopicConfig], None]] = []
        self._builtin: list[TopicConfig] = []
        self._put(TopicConfig(topic_name=SELF_TEST_TOPIC, read_queue_nums=1, write_queue_nums=1))
        self._put(TopicConfig(topic_name=OFFSET_MOVED_EVENT, read_queue_nums=1, write_queue_nums=1))
        self._put(TopicConfig(topic_name=SCHEDULE_TOPIC, read_queue_nums=18, write_queue_nums=18))
        if config.auto_create_topic_enable:
            n = config.default_topic_queue_nums
            self._put(TopicConfig(topic_name=AUTO_CREATE_TOPIC_KEY, read_queue_nums=n,
                                  write_queue_nums=n, perm=PERM_INHERIT | PERM_READ | PERM_WRITE))
        read_write = PERM_READ | PERM_WRITE
        cluster_perm = PERM_INHERIT | (read_write if config.cluster_topic_enable else 0)
        broker_perm = PERM_INHERIT | (read_write if config.broker_topic_enable else 0)
        self._put(TopicConfig(topic_name=config.broker_cluster_name, read_queue_nums=16,
                              write_queue_nums=16, perm=cluster_perm))
        self._put(TopicConfig(topic_name=config.broker_name, read_queue_nums=1, write_queue_nums=1,
                              perm=broker_perm))
        # replies to requests (DefaultMQProducer.request): a topic per cluster, as RocketMQ
        self._put(TopicConfig(topic_name=reply_topic(config.broker_cluster_name),
                              read_queue_nums=1, write_queue_nums=1))
        if config.enable_slave_acting_master:  # its route tells the group's live members
            self._put(TopicConfig(topic_name=SYNC_BROKER_MEMBER_GROUP_PREFIX + config.broker_name,
                                  read_queue_nums=1, write_queue_nums=1, perm=PERM_INHERIT))
        if config.trace_topic_enable:
            self._put(TopicConfig(topic_name=config.msg_trace_topic_name, read_queue_nums=1,
                                  write_queue_nums=1))

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def data_version(self) -> DataVersion:
        version = self.file.data_version
        return DataVersion(timestamp=version.timestamp, counter=version.counter,
                           state_version=version.state_version)

    def load(self) -> bool:
        """Read ``topics.json`` (or its ``.bak``); False when there is none. Raises ConfigError."""
        loaded = self.file.load()
        version = dataclasses.replace(self.file.data_version)
        for tc in self._builtin:
            if self.file.get(tc.topic_name) is None:
                self.file.put(_to_stored(tc))
        if loaded:
            self.file.data_version = version  # the built-in topics do not change the version
        self.table = {name: _from_stored(c) for name, c in self.file.snapshot().items()}
        return loaded

    def persist(self) -> None:
        """Write ``topics.json`` atomically (blocking); raises ConfigError."""
        self.file.persist()

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def _put(self, tc: TopicConfig) -> None:
        self._builtin.append(tc)
        self.table[tc.topic_name] = tc
        self.file.put(_to_stored(tc))

    def update(self, tc: TopicConfig) -> None:
        """Create or replace a topic; bumps the data version and notifies listeners."""
        self.table[tc.topic_name] = tc
        self.file.put(_to_stored(tc, self.file.get(tc.topic_name)))
        for listener in self.on_change:
            listener(tc)

    def delete(self, topic: str) -> bool:
        """Forget a topic; True if it existed (bumps the data version, notifies listeners)."""
        tc = self.table.pop(topic, None)
        if tc is None:
            return False
        self.file.remove(topic)
        for listener in self.on_change:
            listener(tc)
        return True

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


def _to_stored(tc: TopicConfig, old: stored.TopicConfig | None = None) -> stored.TopicConfig:
    """The file's bean of ``tc``, keeping the fields Bolide does not model from ``old``."""
    return stored.TopicConfig(topic_name=tc.topic_name, read_queue_nums=tc.read_queue_nums,
                              write_queue_nums=tc.write_queue_nums, perm=tc.perm,
                              topic_filter_type=tc.topic_filter_type, topic_sys_flag=tc.topic_sys_flag,
                              order=tc.order, attributes=tc.attributes,
                              extra=dict(old.extra) if old is not None else {})


def _from_stored(tc: stored.TopicConfig) -> TopicConfig:
    return TopicConfig(topic_name=tc.topic_name, read_queue_nums=tc.read_queue_nums,
                       write_queue_nums=tc.write_queue_nums, perm=tc.perm,
                       topic_filter_type=tc.topic_filter_type, topic_sys_flag=tc.topic_sys_flag,
                       order=tc.order, attributes=tc.attributes)
