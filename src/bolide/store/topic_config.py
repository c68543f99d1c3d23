"""``topics.json`` and ``subscriptionGroup.json``: the data part of RocketMQ's TopicConfigManager
and SubscriptionGroupManager (see :mod:`bolide.store.config_files` for loading and persisting).

Fields a 5.x broker adds that are not modelled here are kept in ``extra`` and written back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bolide.common.topic import validate_queue_nums
from bolide.errors import ConfigError
from bolide.store.config_files import DataVersion, JsonConfigFile

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class _Bean:
    """A fastjson bean: snake_case fields <-> camelCase properties, unknown ones in ``extra``."""

    extra: dict[str, Any]

    def to_json_obj(self) -> dict[str, Any]:
        obj = dict(self.extra)
        for f in fields(self):  # type: ignore[arg-type]
            if f.name != "extra":
                obj[_camel(f.name)] = getattr(self, f.name)
        return obj

    @classmethod
    def _kwargs(cls, obj: Any, what: str) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise ConfigError(f"{what} is not a JSON object")
        extra = dict(obj)
        kwargs: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            prop = _camel(f.name)
            if f.name == "extra" or extra.get(prop) is None:
                extra.pop(prop, None)
                continue
            kwargs[f.name] = _coerce(extra.pop(prop), f.default, f"{what}.{prop}")
        kwargs["extra"] = extra
        return kwargs


def _coerce(value: Any, default: Any, what: str) -> Any:
    """``value`` checked against the type of the field's default (fastjson converts leniently)."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lstrip("-").isdecimal():
            return int(value)
    elif isinstance(default, str):
        if isinstance(value, str):
            return value
    else:
        return value
    raise ConfigError(f"{what} has a value of the wrong type: {value!r}")


@dataclass(slots=True)
class TopicConfig(_Bean):
    """RocketMQ's TopicConfig. ``attributes`` is None in 4.9.x files (5.x writes ``{}``)."""

    topic_name: str = ""
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json_obj(cls, obj: Any, what: str = "TopicConfig") -> TopicConfig:
        config = cls(**cls._kwargs(obj, what))
        why = validate_queue_nums(config.read_queue_nums, config.write_queue_nums)
        if why is not None:
            raise ConfigError(f"{what}: {why}")
        return config


@dataclass(slots=True)
class SubscriptionGroupConfig(_Bean):
    """RocketMQ 4.9.x SubscriptionGroupConfig with its defaults (5.x fields land in ``extra``)."""

    group_name: str = ""
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json_obj(cls, obj: Any, what: str = "SubscriptionGroupConfig") -> SubscriptionGroupConfig:
        return cls(**cls._kwargs(obj, what))


class _TableFile(JsonConfigFile):
    """``{"dataVersion":{...},"<TABLE>":{name: bean}}``; each change bumps the data version."""

    TABLE: str = ""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._table: dict[str, Any] = {}
        self.data_version = DataVersion()
        self._extra: dict[str, Any] = {}

    def _bean(self, obj: Any, what: str) -> Any:
        raise NotImplementedError

    def names(self) -> list[str]:
        with self._lock:
            return list(self._table)

    def _put(self, name: str, bean: Any) -> None:
        with self._lock:
            self._table[name] = bean
            self.data_version.next_version()

    def remove(self, name: str) -> bool:
        """Delete an entry; True if it existed (the data version moves on)."""
        with self._lock:
            if self._table.pop(name, None) is None:
                return False
            self.data_version.next_version()
            return True

    def to_json_obj(self) -> dict[str, Any]:
        with self._lock:
            obj = dict(self._extra)
            obj["dataVersion"] = self.data_version.to_json_obj()
            obj[self.TABLE] = {name: bean.to_json_obj() for name, bean in self._table.items()}
            return obj

    def _apply(self, obj: dict[str, Any] | None) -> None:
        obj = dict(obj or {})
        version = obj.pop("dataVersion", None)
        self.data_version = DataVersion() if version is None else DataVersion.from_json_obj(version)
        table = obj.pop(self.TABLE, None) or {}
        if not isinstance(table, dict):
            raise ConfigError(f"{self.TABLE} is not a JSON object")
        self._table = {str(k): self._bean(v, f"{self.TABLE}[{k!r}]") for k, v in table.items()
                       if v is not None}
        self._extra = obj


class TopicConfigManager(_TableFile):
    """``topics.json``: ``{"dataVersion":{...},"topicConfigTable":{"<topic>":{TopicConfig}}}``."""

    FILE_NAME = "topics.json"
    WHAT = "the topic configs"
    TABLE = "topicConfigTable"

    def _bean(self, obj: Any, what: str) -> TopicConfig:
        return TopicConfig.from_json_obj(obj, what)

    def get(self, topic: str) -> TopicConfig | None:
        with self._lock:
            return self._table.get(topic)

    def put(self, config: TopicConfig) -> None:
        """Add or replace the config of ``config.topic_name``."""
        self._put(config.topic_name, config)

    def snapshot(self) -> dict[str, TopicConfig]:
        with self._lock:
            return dict(self._table)


class SubscriptionGroupManager(_TableFile):
    """``subscriptionGroup.json``: ``{"dataVersion":{...},"subscriptionGroupTable":{"<group>":{...}}}``.

    RocketMQ 5's ``forbiddenTable`` (``{"<group>":{"<topic>":bits}}``, bit 2 forbids reading)
    is :attr:`forbidden`; it is written when it has entries or the file had it.
    """

    FILE_NAME = "subscriptionGroup.json"
    WHAT = "the subscription groups"
    TABLE = "subscriptionGroupTable"
    FORBIDDEN = "forbiddenTable"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.forbidden: dict[str, dict[str, int]] = {}
        self._forbidden_written = False

    def forbidden_bits(self, group: str, topic: str) -> int:
        """The forbidden bits of ``group`` on ``topic`` (0: none)."""
        with self._lock:
            return max(self.forbidden.get(group, {}).get(topic, 0), 0)

    def set_forbidden_bits(self, group: str, topic: str, bits: int) -> None:
        """Replace the bits (0 forgets the entry); the data version moves on."""
        with self._lock:
            topics = self.forbidden.setdefault(group, {})
            if bits > 0:
                topics[topic] = bits
            else:
                topics.pop(topic, None)
            if not topics:
                del self.forbidden[group]
            self.data_version.next_version()

    def remove(self, name: str) -> bool:
        with self._lock:
            self.forbidden.pop(name, None)
            return super().remove(name)

    def to_json_obj(self) -> dict[str, Any]:
        with self._lock:
            obj = super().to_json_obj()
            if self.forbidden or self._forbidden_written:
                obj[self.FORBIDDEN] = {g: dict(t) for g, t in self.forbidden.items()}
            return obj

    def _apply(self, obj: dict[str, Any] | None) -> None:
        obj = dict(obj or {})
        found = self.FORBIDDEN in obj
        table = obj.pop(self.FORBIDDEN, None) or {}
        if not isinstance(table, dict):
            raise ConfigError(f"{self.FORBIDDEN} is not a JSON object")
        forbidden: dict[str, dict[str, int]] = {}
        for group, topics in table.items():
            if topics is None:
                continue
            if not isinstance(topics, dict):
                raise ConfigError(f"{self.FORBIDDEN}[{group!r}] is not a JSON object")
            forbidden[str(group)] = {str(t): _coerce(v, 0, f"{self.FORBIDDEN}[{group!r}][{t!r}]")
                                     for t, v in topics.items() if v is not None}
        super()._apply(obj)
        self.forbidden, self._forbidden_written = forbidden, found

    def _bean(self, obj: Any, what: str) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig.from_json_obj(obj, what)

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            return self._table.get(group)

    def put(self, config: SubscriptionGroupConfig) -> None:
        """Add or replace the config of ``config.group_name``."""
        self._put(config.group_name, config)

    def snapshot(self) -> dict[str, SubscriptionGroupConfig]:
        with self._lock:
            return dict(self._table)
