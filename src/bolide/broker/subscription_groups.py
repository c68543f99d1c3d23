"""Subscription groups of a broker (consumer group settings such as ``retryMaxTimes``), kept in
``config/subscriptionGroup.json`` through :class:`bolide.store.topic_config.SubscriptionGroupManager`.

Consumer groups are created on first use when ``autoCreateSubscriptionGroup`` is on (the
default), as the Java broker does on HEART_BEAT and PULL_MESSAGE.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from bolide.broker.config import BrokerConfig
from bolide.protocol import fastjson
from bolide.store import topic_config as stored
from bolide.store.topic_config import SubscriptionGroupConfig

INDEX_PERM_READ = 2  # RocketMQ's PermName.INDEX_PERM_READ: the forbidden bit of reading

# groups every Java broker has (SubscriptionGroupManager.init), all with broadcast enabled
BUILTIN_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                  "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_SYS_RMQ_TRANS")


class SubscriptionGroupManager:
    """The broker's subscription groups by name, kept in the file at ``path``.

    ``on_change`` listeners run after every create, update or delete (the broker persists the
    file from there; :meth:`persist` blocks, so call it off the event loop).
    """

    def __init__(self, config: BrokerConfig, path: str | Path) -> None:
        self.config = config
        self.file = stored.SubscriptionGroupManager(path)
        self.on_change: list[Callable[[], None]] = []
        self._add_builtins()

    @property
    def path(self) -> Path:
        return self.file.path

    def _add_builtins(self) -> None:
        for name in BUILTIN_GROUPS:
            if self.file.get(name) is None:
                self.file.put(SubscriptionGroupConfig(group_name=name))

    def load(self) -> bool:
        """Read the file (or its ``.bak``); False when there is none. Raises ConfigError."""
        loaded = self.file.load()
        version = dataclasses.replace(self.file.data_version)
        self._add_builtins()
        if loaded:
            self.file.data_version = version  # the built-in groups do not change the version
        return loaded

    def persist(self) -> None:
        """Write the file atomically (blocking); raises ConfigError."""
        self.file.persist()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings, or None when it is unknown (never creates it)."""
        return self.file.get(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings, created with the defaults when unknown and
        ``autoCreateSubscriptionGroup`` is on; None otherwise."""
        found = self.file.get(group)
        if found is None and self.config.auto_create_subscription_group and group:
            found = SubscriptionGroupConfig(group_name=group)
            self.update(found)
        return found

    def update(self, config: SubscriptionGroupConfig) -> None:
        """Create or replace a group (the data version moves on)."""
        self.file.put(config)
        self._changed()

    def delete(self, group: str) -> bool:
        """Forget a group; True if it existed."""
        removed = self.file.remove(group)
        if removed:
            self._changed()
        return removed

    def names(self) -> list[str]:
        return self.file.names()

    def forbidden(self, group: str, topic: str, index: int) -> bool:
        """Whether bit ``index`` of ``group``'s forbidden bits on ``topic`` is set (RocketMQ 5's
        ``getForbidden``; :data:`INDEX_PERM_READ`: the group may not read the topic)."""
        bit = 1 << index
        return self.file.forbidden_bits(group, topic) & bit == bit

    def update_forbidden(self, group: str, topic: str, index: int, forbid: bool) -> None:
        """Set (``forbid``) or clear bit ``index`` of ``group``'s forbidden bits on ``topic``;
        persisted like any other change."""
        bits = self.file.forbidden_bits(group, topic)
        bits = bits | 1 << index if forbid else bits & ~(1 << index)
        self.file.set_forbidden_bits(group, topic, bits)
        self._changed()

    def _changed(self) -> None:
        for listener in self.on_change:
            listener()

    def encode(self) -> bytes:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body: the file's JSON, compact, as Java sends
        ``SubscriptionGroupManager.encode()`` (``dataVersion``, ``subscriptionGroupTable`` and
        whatever else a 5.x file holds)."""
        return fastjson.dumps(self.file.to_json_obj())
