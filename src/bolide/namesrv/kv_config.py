"""The NameServer's KV config (RocketMQ's KVConfigManager): namespace -> key -> value, kept in
``kvConfig.json`` in Java's shape, ``{"configTable":{"<namespace>":{"<key>":"<value>"}}}``.

Every change is written at once: the new text goes to ``<file>.tmp`` and is fsynced, the
current file is copied to ``<file>.bak`` (fsynced), then the temp file is renamed over the
file and the directory fsynced, so the file is always a whole old or whole new version.
Loading falls back to ``.bak`` when the file is missing or unreadable.
"""

from __future__ import annotations

import os
from pathlib import Path

from bolide.common.config_persist import backup_path, load_with_backup, write_atomic
from bolide.errors import ConfigError
from bolide.protocol import fastjson
from bolide.protocol.bodies.admin import KVTable

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG


class KVConfigManager:
    """KV config in memory, persisted to ``path`` after every change (None: memory only)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._table: dict[str, dict[str, str]] = {}

    @property
    def backup_path(self) -> Path | None:
        return backup_path(self.path) if self.path else None

    # -- queries --------------------------------------------------------------------------
    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace's entries, or None when it holds none."""
        entries = self._table.get(namespace)
        return dict(entries) if entries else None

    def kv_list_body(self, namespace: str) -> bytes | None:
        """A namespace as a KVTable body (GET_KVLIST_BY_NAMESPACE, REGISTER_BROKER's answer)."""
        entries = self.namespace(namespace)
        return KVTable(table=entries).encode() if entries is not None else None

    def snapshot(self) -> dict[str, dict[str, str]]:
        return {ns: dict(entries) for ns, entries in self._table.items()}

    # -- changes --------------------------------------------------------------------------
    def put(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG; persisted before returning."""
        entries = self._table.setdefault(namespace, {})
        if entries.get(key) != value:
            entries[key] = value
            self.persist()

    def delete(self, namespace: str, key: str) -> bool:
        """DELETE_KV_CONFIG; an emptied namespace is dropped. True if the key existed."""
        entries = self._table.get(namespace)
        if entries is None or key not in entries:
            return False
        del entries[key]
        if not entries:
            del self._table[namespace]
        self.persist()
        return True

    # -- files ----------------------------------------------------------------------------
    def encode(self) -> bytes:
        """The file's text as Java's KVConfigSerializeWrapper writes it (compact JSON)."""
        return fastjson.dumps({"configTable": self._table})

    def persist(self) -> None:
        """Write the table atomically (see the module docstring); raises ConfigError."""
        if self.path is None:
            return
        try:
            write_atomic(self.path, self.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write KV config {self.path}: {exc.strerror or exc}; check that its "
                              "directory exists, is writable and the disk has space") from exc

    def load(self) -> None:
        """Read the file, or its ``.bak`` when the file is missing, empty or damaged; neither: empty."""
        if self.path is None:
            return
        table = load_with_backup(self.path, _decode, what="the KV config")
        self._table = table if table is not None else {}


def _decode(data: bytes) -> dict[str, dict[str, str]]:
    obj = fastjson.loads(data)
    table = obj.get("configTable") if isinstance(obj, dict) else obj
    if table is None:
        table = {}  # no namespaces yet
    if not isinstance(table, dict) or not all(isinstance(v, dict | None) for v in table.values()):
        raise ConfigError('expected {"configTable":{namespace:{key:value}}}')
    return {str(ns): {str(k): _text(v) for k, v in entries.items() if v is not None}
            for ns, entries in table.items() if entries}


def _text(value: object) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)
