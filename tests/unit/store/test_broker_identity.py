"""The controller-mode identity files: RocketMQ's text, read and written byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.errors import ConfigError
from bolide.store import StoreConfig
from bolide.store.broker_identity import (
    BrokerIdentity,
    TempBrokerIdentity,
    read_identity,
    read_temp_identity,
    remove_identity,
    temp_path,
    write_identity,
)


def test_paths_default_to_the_store_root_as_rocketmq(tmp_path: Path) -> None:
    config = StoreConfig(store_path_root_dir=str(tmp_path))
    assert config.broker_identity_path == tmp_path / "brokerIdentity"
    assert temp_path(config.broker_identity_path) == tmp_path / "brokerIdentity-temp"
    other = config.replace(store_path_broker_identity=str(tmp_path / "id"))
    assert other.broker_identity_path == tmp_path / "id"


def test_identity_text_is_rocketmqs(tmp_path: Path) -> None:
    path = tmp_path / "brokerIdentity"
    write_identity(path, BrokerIdentity("DefaultCluster", "broker-a", 3))
    assert path.read_bytes() == b"DefaultCluster#broker-a#3"  # BrokerMetadata.encodeToStr
    assert read_identity(path) == BrokerIdentity("DefaultCluster", "broker-a", 3)
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob("*.bak"))


def test_temp_identity_text_is_rocketmqs(tmp_path: Path) -> None:
    path = temp_path(tmp_path / "brokerIdentity")
    temp = TempBrokerIdentity("c1", "broker-b", 2, "127.0.0.1:10911;1700000000000")
    write_identity(path, temp)
    assert path.read_bytes() == b"c1#broker-b#2#127.0.0.1:10911;1700000000000"
    assert read_temp_identity(path) == temp
    remove_identity(path)
    assert not path.exists() and read_temp_identity(path) is None
    remove_identity(path)  # nothing to remove: no error


def test_files_written_by_rocketmq_are_read(tmp_path: Path) -> None:
    path = tmp_path / "brokerIdentity"
    path.write_text("DefaultCluster#broker-a#1")
    assert read_identity(path) == BrokerIdentity("DefaultCluster", "broker-a", 1)
    path.write_text("")  # what a crash between RocketMQ's delete and write may leave
    assert read_identity(path) is None
    assert read_identity(tmp_path / "missing") is None


@pytest.mark.parametrize("text", ["broker-a#1", "c#b#one", "c#b#1#"])
def test_a_damaged_identity_is_a_config_error_naming_the_fix(tmp_path: Path, text: str) -> None:
    path = tmp_path / "brokerIdentity-temp"
    path.write_text(text)
    with pytest.raises(ConfigError, match="fix or delete it"):
        read_temp_identity(path)
