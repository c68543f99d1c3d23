"""KVConfigManager: kvConfig.json in Java's shape, atomic writes with a .bak, and loading that
falls back to the .bak."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.errors import ConfigError
from bolide.namesrv.kv_config import KVConfigManager


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "namesrv" / "kvConfig.json"


def test_put_get_and_the_file_java_writes(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("ORDER_TOPIC_CONFIG", "TopicTest", "broker-a:4;broker-b:4")
    kv.put("ns", "k", "v")
    assert kv.get("ORDER_TOPIC_CONFIG", "TopicTest") == "broker-a:4;broker-b:4"
    assert kv.get("ns", "other") is None and kv.get("none", "k") is None
    assert path.read_bytes() == (b'{"configTable":{"ORDER_TOPIC_CONFIG":'
                                 b'{"TopicTest":"broker-a:4;broker-b:4"},"ns":{"k":"v"}}}')
    assert sorted(p.name for p in path.parent.iterdir()) == ["kvConfig.json", "kvConfig.json.bak"]
    again = KVConfigManager(path)
    again.load()
    assert again.snapshot() == kv.snapshot()


def test_bak_holds_the_previous_version(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("ns", "a", "1")
    kv.put("ns", "b", "2")
    assert path.with_name("kvConfig.json.bak").read_bytes() == b'{"configTable":{"ns":{"a":"1"}}}'
    kv.put("ns", "b", "2")  # no change, no write
    assert path.with_name("kvConfig.json.bak").read_bytes() == b'{"configTable":{"ns":{"a":"1"}}}'


@pytest.mark.parametrize("damage", [b'{"configTable":{"ns":{"a"', b"", b"[1,2]"])
def test_damaged_file_falls_back_to_bak(path: Path, damage: bytes) -> None:
    kv = KVConfigManager(path)
    kv.put("ns", "a", "1")
    kv.put("ns", "b", "2")
    path.write_bytes(damage)
    loaded = KVConfigManager(path)
    loaded.load()
    assert loaded.snapshot() == {"ns": {"a": "1"}}


def test_missing_file_with_bak(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("ns", "a", "1")
    kv.put("ns", "a", "2")
    path.unlink()
    loaded = KVConfigManager(path)
    loaded.load()
    assert loaded.get("ns", "a") == "1"


def test_nothing_on_disk_is_an_empty_table(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.load()
    assert kv.snapshot() == {}
    path.parent.mkdir(parents=True)
    path.write_bytes(b"  \n")
    kv.load()
    assert kv.snapshot() == {}


def test_damaged_file_and_bak_is_an_error(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{broken")
    path.with_name("kvConfig.json.bak").write_bytes(b'{"configTable":[]}')
    with pytest.raises(ConfigError, match="move it away"):
        KVConfigManager(path).load()


def test_reads_what_java_and_hand_editing_leave(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{\n  "configTable": {"ns": {"n": 4, "b": true, "gone": null}, "empty": {}}\n}')
    kv = KVConfigManager(path)
    kv.load()
    assert kv.snapshot() == {"ns": {"n": "4", "b": "true"}}
    path.write_bytes(b"{}")
    kv.load()
    assert kv.snapshot() == {}


def test_delete_drops_empty_namespaces(path: Path) -> None:
    kv = KVConfigManager(path)
    kv.put("ns", "a", "1")
    assert kv.kv_list_body("ns") == b'{"table":{"a":"1"}}'
    assert kv.delete("ns", "a")
    assert not kv.delete("ns", "a")
    assert kv.namespace("ns") is None and kv.kv_list_body("ns") is None
    assert path.read_bytes() == b'{"configTable":{}}'


def test_memory_only_manager_writes_nothing(tmp_path: Path) -> None:
    kv = KVConfigManager(None)
    kv.put("ns", "a", "1")
    kv.load()
    assert kv.get("ns", "a") == "1"
    assert list(tmp_path.iterdir()) == []


def test_write_failure_says_what_to_do(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    kv = KVConfigManager(blocker / "kvConfig.json")
    with pytest.raises(ConfigError, match="writable"):
        kv.put("ns", "a", "1")
