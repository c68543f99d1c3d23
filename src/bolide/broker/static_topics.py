"""The broker's static topics (RIP-21 logic queues) in ``config/topicQueueMapping.json``, as
RocketMQ 5's TopicQueueMappingManager keeps them: one TopicQueueMappingDetail per topic, written
in fastjson's pretty format with the file's DataVersion.

An update follows RocketMQ's rules: a new topic is taken as it comes; ``force`` keeps the old
logic queues the new detail lacks; otherwise the epoch may not go back, the scope may not change
and the items of a logic queue may only grow (see :func:`check_update`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from bolide.common.config_persist import load_with_backup, write_atomic
from bolide.common.fastjson import dumps_pretty
from bolide.errors import BolideError, ConfigError
from bolide.protocol.bodies.broker import DataVersion, TopicQueueMappingSerializeWrapper
from bolide.protocol.bodies.static_topic import (
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    TopicQueueMappingInfo,
    check_item_offsets,
)

FILE_NAME = "topicQueueMapping.json"


class MappingRefused(BolideError):
    """A static topic's new mapping contradicts the one the broker holds."""


def check_update(old: TopicQueueMappingDetail | None, new: TopicQueueMappingDetail,
                 force: bool) -> TopicQueueMappingDetail:
    """The detail to keep after ``new`` arrives (RocketMQ updateTopicQueueMapping); raises
    MappingRefused naming the conflict."""
    for global_id, items in new.hosted_queues.items():
        problem = check_item_offsets(items)
        if problem is not None:
            raise MappingRefused(f"logic queue {global_id} of {new.topic}: {problem}")
    if old is None:
        return new
    hosted = dict(new.hosted_queues)
    if force:
        for global_id, items in old.hosted_queues.items():
            hosted.setdefault(global_id, items)
        new.hosted_queues = hosted
        return new
    if new.epoch < old.epoch:
        raise MappingRefused(f"Can't accept data with small epoch {new.epoch} < {old.epoch}")
    if new.scope != old.scope:
        raise MappingRefused(f"Can't accept data with unmatched scope {new.scope} != {old.scope}")
    same_epoch = new.epoch == old.epoch
    for global_id, old_items in old.hosted_queues.items():
        new_items = hosted.get(global_id)
        if new_items is None:
            if same_epoch:
                raise MappingRefused("Cannot accept equal epoch with null data")
            hosted[global_id] = old_items
        else:
            _check_immutable(old_items, new_items, same_epoch)
    new.hosted_queues = hosted
    return new


def _check_immutable(old: list[LogicQueueMappingItem], new: list[LogicQueueMappingItem],
                     same_epoch: bool) -> None:
    """RocketMQ makeSureLogicQueueMappingItemImmutable: items of the same gen keep their broker,
    queue, start offset and a decided logic offset; at an equal epoch the leader stays."""
    if not old:
        return
    if not new:
        raise MappingRefused("The new item list is null or empty")
    i_old = i_new = 0
    while i_old < len(old) and i_new < len(new):
        before, after = old[i_old], new[i_new]
        if after.gen < before.gen:
            i_new += 1
        elif before.gen < after.gen:
            i_old += 1
        else:
            if ((before.bname, before.queue_id, before.start_offset)
                    != (after.bname, after.queue_id, after.start_offset)
                    or (before.logic_offset != -1 and before.logic_offset != after.logic_offset)):
                raise MappingRefused(f"the new mapping changes the item {before} into {after}")
            i_old += 1
            i_new += 1
    if same_epoch:
        a, b = old[-1], new[-1]
        if (a.gen, a.bname, a.queue_id, a.start_offset) != (b.gen, b.bname, b.queue_id, b.start_offset):
            raise MappingRefused("The new leader is different but epoch equal")


class StaticTopicMappings:
    """The static topics this broker hosts, by topic; ``on_change`` listeners run after every
    update or delete (the broker persists the file and registers again)."""

    def __init__(self, broker_name: str, path: str | Path) -> None:
        self.broker_name = broker_name
        self.path = Path(path)
        self.table: dict[str, TopicQueueMappingDetail] = {}
        self.data_version = DataVersion(timestamp=int(time.time() * 1000), counter=0, state_version=0)
        self.on_change: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    def get(self, topic: str) -> TopicQueueMappingDetail | None:
        return self.table.get(topic)

    def update(self, detail: TopicQueueMappingDetail, force: bool = False) -> None:
        """Take a static topic's mapping for this broker; raises MappingRefused."""
        if not detail.topic:
            raise MappingRefused("the mapping names no topic")
        if detail.bname != self.broker_name:
            raise MappingRefused(f"the mapping is for broker {detail.bname!r}, this is "
                                 f"{self.broker_name!r}")
        kept = check_update(self.table.get(detail.topic), detail, force)
        with self._lock:
            self.table = {**self.table, detail.topic: kept}
            self._next_version()
        for listener in self.on_change:
            listener(detail.topic)

    def delete(self, topic: str) -> bool:
        """Forget a static topic's mapping; True if there was one."""
        if topic not in self.table:
            return False
        with self._lock:
            self.table = {k: v for k, v in self.table.items() if k != topic}
            self._next_version()
        for listener in self.on_change:
            listener(topic)
        return True

    def infos(self) -> dict[str, TopicQueueMappingInfo]:
        """What REGISTER_BROKER carries: each topic's logic queues led here."""
        return {topic: detail.as_info() for topic, detail in self.table.items()}

    def _next_version(self) -> None:
        self.data_version.counter += 1
        self.data_version.timestamp = int(time.time() * 1000)

    # -- the file -----------------------------------------------------------------------------
    def encode(self) -> bytes:
        with self._lock:
            wrapper = TopicQueueMappingSerializeWrapper(topic_queue_mapping_info_map=dict(self.table),
                                                        data_version=self.data_version)
            return dumps_pretty(wrapper)

    def persist(self) -> None:
        """Write the file atomically, the old text kept in ``.bak``; raises ConfigError."""
        try:
            write_atomic(self.path, self.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write {self.path}: {exc.strerror or exc}; check that its "
                              "directory is writable and the disk has space") from exc

    def load(self) -> bool:
        """Read the file (or its ``.bak``); False when there is none. Raises ConfigError."""
        wrapper = load_with_backup(self.path, TopicQueueMappingSerializeWrapper.decode,
                                   what=f"the static topic mappings ({self.path})")
        if wrapper is None:
            return False
        with self._lock:
            self.table = dict(wrapper.topic_queue_mapping_info_map or {})
            self.data_version = wrapper.data_version
        return True
