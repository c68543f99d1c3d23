"""The broker's JSON config files in ``<storePathRootDir>/config/``, byte-compatible with RocketMQ.

Each manager holds one file's table in memory. :meth:`JsonConfigFile.encode` writes it as
fastjson's pretty format does (tab indents, bean properties in alphabetical order, integer map
keys bare: ``{0:12,1:30``), :meth:`~JsonConfigFile.persist` replaces the file atomically
keeping the previous text in ``<file>.bak``, and :meth:`~JsonConfigFile.load` reads the file or,
when it is missing, empty or damaged, its ``.bak`` (logged). Readers accept quoted integer keys
too. Fields a newer RocketMQ writes (5.x ``dataVersion.stateVersion``, ``attributes``,
``forbiddenTable``, ...) are kept and written back unchanged.

Every method is thread-safe: the broker's loop changes the tables while a persistence thread
writes them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from bolide.common.config_persist import load_with_backup, write_atomic
from bolide.common.fastjson import dumps_pretty, loads
from bolide.errors import ConfigError

TOPIC_GROUP_SEPARATOR = "@"


def _object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{what} is not a JSON object")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{what} is not an integer: {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{what} is not an integer: {value!r}") from None


def _int_map(value: Any, what: str) -> dict[int, int]:
    """``{0:12,"1":30}`` -> {0: 12, 1: 30}; bare and quoted keys alike."""
    return {_int(k, f"{what} key"): _int(v, f"{what}[{k}]")
            for k, v in _object(value, what).items() if v is not None}


@dataclass(slots=True)
class DataVersion:
    """RocketMQ's DataVersion; ``state_version`` is None in 4.9.x files (5.x writes it)."""

    counter: int = 0
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    state_version: int | None = None

    def next_version(self) -> None:
        self.counter += 1
        self.timestamp = int(time.time() * 1000)

    def to_json_obj(self) -> dict[str, Any]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def from_json_obj(cls, obj: Any) -> DataVersion:
        obj = _object(obj, "dataVersion")
        state = obj.get("stateVersion")
        return cls(counter=_int(obj.get("counter", 0), "dataVersion.counter"),
                   timestamp=_int(obj.get("timestamp", 0), "dataVersion.timestamp"),
                   state_version=None if state is None else _int(state, "dataVersion.stateVersion"))


class JsonConfigFile:
    """One ``config/*.json`` file: load with ``.bak`` fallback, fastjson encoding, atomic persist."""

    FILE_NAME: ClassVar[str] = ""
    WHAT: ClassVar[str] = ""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._persist_lock = threading.Lock()

    @classmethod
    def in_store(cls, store_root: str | Path) -> Self:
        """The manager of ``<store_root>/config/<FILE_NAME>``."""
        return cls(Path(store_root) / "config" / cls.FILE_NAME)

    def to_json_obj(self) -> dict[str, Any]:
        raise NotImplementedError

    def _apply(self, obj: dict[str, Any] | None) -> None:
        """Replace the table with a decoded file (None: empty)."""
        raise NotImplementedError

    def encode(self) -> bytes:
        """The file's text exactly as Java's fastjson pretty format writes it."""
        with self._lock:
            return dumps_pretty(self.to_json_obj())

    def decode(self, data: bytes | str) -> None:
        """Replace the table with ``data`` (a file's text); raises ConfigError or JSONError."""
        obj = loads(data)
        if not isinstance(obj, dict):
            raise ConfigError(f"{self.WHAT} is not a JSON object")
        with self._lock:
            self._apply(obj)

    def _checked(self, data: bytes) -> dict[str, Any]:
        obj = loads(data)
        if not isinstance(obj, dict):
            raise ConfigError(f"{self.WHAT} is not a JSON object")
        type(self)(self.path)._apply(obj)  # validate on a scratch copy: a bad file changes nothing
        return obj

    def load(self) -> bool:
        """Read the file, or its ``.bak`` (logged); False when neither exists (empty table).

        Raises ConfigError when there is text but none of it decodes.
        """
        obj = load_with_backup(self.path, self._checked, what=f"{self.WHAT} ({self.path})")
        with self._lock:
            self._apply(obj)
        return obj is not None

    def persist(self) -> None:
        """Write the file atomically keeping the previous text in ``.bak``; raises ConfigError."""
        self.write(self.encode())

    def write(self, data: bytes) -> None:
        """Write text made by :meth:`encode` (possibly earlier) as :meth:`persist` does."""
        with self._persist_lock:
            try:
                write_atomic(self.path, data)
            except OSError as exc:
                raise ConfigError(f"cannot write {self.path}: {exc.strerror or exc}; check that its "
                                  "directory is writable and the disk has space") from exc


class ConsumerOffsetManager(JsonConfigFile):
    """``consumerOffset.json``: ``{"offsetTable":{"<topic>@<group>":{queueId:nextOffset}}}``.

    Offsets are the next queue offset to consume. ``data_version`` is None for the 4.9.x shape;
    a 5.x file's ``dataVersion`` is kept, and then the derived ``groupTopicMap`` is written too.
    """

    FILE_NAME = "consumerOffset.json"
    WHAT = "the consumer offsets"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._table: dict[str, dict[int, int]] = {}
        self.data_version: DataVersion | None = None
        self._extra: dict[str, Any] = {}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record ``offset`` as the next offset ``group`` consumes from ``topic`` queue ``queue_id``."""
        key = topic + TOPIC_GROUP_SEPARATOR + group
        with self._lock:
            self._table.setdefault(key, {})[queue_id] = offset

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, or None when none was committed."""
        with self._lock:
            return self._table.get(topic + TOPIC_GROUP_SEPARATOR + group, {}).get(queue_id)

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        """Every queue's committed offset of ``group`` on ``topic`` (a copy)."""
        with self._lock:
            return dict(self._table.get(topic + TOPIC_GROUP_SEPARATOR + group, {}))

    def clone(self, src_group: str, dest_group: str, topic: str) -> dict[int, int]:
        """Give ``dest_group`` the offsets ``src_group`` has on ``topic`` (replacing those it had
        there); returns them, empty (and nothing changed) when ``src_group`` has none."""
        with self._lock:
            offsets = dict(self._table.get(topic + TOPIC_GROUP_SEPARATOR + src_group, {}))
            if offsets:
                self._table[topic + TOPIC_GROUP_SEPARATOR + dest_group] = dict(offsets)
            return offsets

    def remove(self, group: str, topic: str) -> bool:
        """Forget ``group``'s offsets on ``topic``; True if there were any."""
        with self._lock:
            return self._table.pop(topic + TOPIC_GROUP_SEPARATOR + group, None) is not None

    def remove_group(self, group: str) -> list[str]:
        """Forget every offset of ``group``; returns the topics it had offsets on."""
        with self._lock:
            keys = [k for k in self._table if k.partition(TOPIC_GROUP_SEPARATOR)[2] == group]
            for key in keys:
                del self._table[key]
            return [k.partition(TOPIC_GROUP_SEPARATOR)[0] for k in keys]

    def take(self, other: ConsumerOffsetManager) -> None:
        """Take ``other``'s offsets of every ``topic@group`` it has, each replacing ours as a
        whole (ours of pairs it lacks stay), and its data version when it has one (RocketMQ's
        ``offsetTable.putAll``, as a slave copies its master and a master its acting slave)."""
        taken = other.snapshot()
        with self._lock:
            self._table.update(taken)
            if other.data_version is not None:
                self.data_version = other.data_version

    def topics_of_group(self, group: str) -> set[str]:
        with self._lock:
            return {t for t, _, g in (k.partition(TOPIC_GROUP_SEPARATOR) for k in self._table) if g == group}

    def groups(self) -> set[str]:
        """Every group with an offset on some topic."""
        with self._lock:
            return {k.partition(TOPIC_GROUP_SEPARATOR)[2] for k in self._table}

    def groups_of_topic(self, topic: str) -> set[str]:
        with self._lock:
            return {g for t, _, g in (k.partition(TOPIC_GROUP_SEPARATOR) for k in self._table) if t == topic}

    def pairs(self) -> int:
        """How many (topic, group) pairs have offsets."""
        return len(self._table)

    def snapshot(self) -> dict[str, dict[int, int]]:
        """``{"topic@group": {queue_id: offset}}`` (a copy)."""
        with self._lock:
            return {k: dict(v) for k, v in self._table.items()}

    def to_json_obj(self) -> dict[str, Any]:
        with self._lock:
            obj: dict[str, Any] = dict(self._extra)
            obj["offsetTable"] = {k: dict(v) for k, v in self._table.items()}
            if self.data_version is not None:
                obj["dataVersion"] = self.data_version.to_json_obj()
                groups: dict[str, set[str]] = {}
                for key in self._table:
                    topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
                    groups.setdefault(group, set()).add(topic)
                obj["groupTopicMap"] = groups
            return obj

    def _apply(self, obj: dict[str, Any] | None) -> None:
        obj = dict(obj or {})
        table = _object(obj.pop("offsetTable", None), "offsetTable")
        self._table = {str(k): _int_map(v, f"offsetTable[{k!r}]") for k, v in table.items() if v is not None}
        version = obj.pop("dataVersion", None)
        self.data_version = None if version is None else DataVersion.from_json_obj(version)
        obj.pop("groupTopicMap", None)  # derived from offsetTable
        self._extra = obj


class DelayOffsetManager(JsonConfigFile):
    """``delayOffset.json``: ``{"offsetTable":{level:nextOffset}}`` for SCHEDULE_TOPIC_XXXX.

    Queue ``level - 1`` of the schedule topic is scanned from the stored offset. Clamping the
    loaded values into the queue's [min, max] offsets is left to the caller.
    """

    FILE_NAME = "delayOffset.json"
    WHAT = "the delay offsets"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._table: dict[int, int] = {}
        self.data_version: DataVersion | None = None
        self._extra: dict[str, Any] = {}

    def update(self, level: int, offset: int) -> None:
        with self._lock:
            self._table[level] = offset

    def get(self, level: int) -> int | None:
        with self._lock:
            return self._table.get(level)

    def snapshot(self) -> dict[int, int]:
        with self._lock:
            return dict(self._table)

    def to_json_obj(self) -> dict[str, Any]:
        with self._lock:
            obj: dict[str, Any] = dict(self._extra)
            obj["offsetTable"] = dict(self._table)
            if self.data_version is not None:
                obj["dataVersion"] = self.data_version.to_json_obj()
            return obj

    def _apply(self, obj: dict[str, Any] | None) -> None:
        obj = dict(obj or {})
        self._table = _int_map(obj.pop("offsetTable", None), "offsetTable")
        version = obj.pop("dataVersion", None)
        self.data_version = None if version is None else DataVersion.from_json_obj(version)
        self._extra = obj
