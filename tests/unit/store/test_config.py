"""StoreConfig: defaults, RocketMQ broker.conf loading, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.common.config_file import parse_properties, set_properties, update_properties_file
from bolide.errors import ConfigError
from bolide.store.config import BrokerRole, FlushDiskType, StoreConfig

BROKER_CONF = """\
# a RocketMQ broker.conf, unchanged
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
namesrvAddr=127.0.0.1:9876
storePathRootDir={root}
storePathCommitLog={root}/cl
mapedFileSizeCommitLog=65536
mappedFileSizeConsumeQueue=2010
flushDiskType=SYNC_FLUSH
brokerRole=sync_master
checkCRCOnRecover=false
messageIndexEnable=TRUE
flushCommitLogLeastPages = 8
deleteWhen=04;05
fileReservedTime 48
brokerIP1: 10.0.0.5
listenPort=10922
messageDelayLevel=1s 2s
"""


def write_conf(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broker.conf"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_rocketmq_defaults() -> None:
    c = StoreConfig()
    assert c.mapped_file_size_commit_log == 1073741824
    assert c.mapped_file_size_consume_queue == 6000000
    assert c.flush_disk_type is FlushDiskType.ASYNC_FLUSH and not c.sync_flush
    assert c.broker_role is BrokerRole.ASYNC_MASTER
    assert c.flush_interval_commit_log_ms == 500
    assert c.flush_commit_log_least_pages == 4
    assert c.flush_consume_queue_least_pages == 2
    assert c.flush_commit_log_thorough_interval_ms == 10000
    assert c.flush_consume_queue_thorough_interval_ms == 60000
    assert c.sync_flush_timeout_ms == 5000
    assert c.max_message_size == 4194304
    assert c.check_crc_on_recover is True
    assert c.delete_when == "04" and c.file_reserved_time_hours == 72
    assert c.store_address == "127.0.0.1:10911"
    assert c.message_delay_level.split()[0] == "1s" and len(c.message_delay_level.split()) == 18


def test_from_properties_reads_broker_conf(tmp_path: Path) -> None:
    root = tmp_path / "store"
    c = StoreConfig.from_properties(write_conf(tmp_path, BROKER_CONF.format(root=root)))
    assert c.store_path_root_dir == str(root)
    assert c.commit_log_dir == root / "cl"
    assert c.consume_queue_dir == root / "consumequeue"
    assert c.mapped_file_size_commit_log == 65536  # via the misspelt RocketMQ alias
    assert c.mapped_file_size_consume_queue == 2020  # rounded up to a multiple of 20
    assert c.flush_disk_type is FlushDiskType.SYNC_FLUSH and c.sync_flush
    assert c.broker_role is BrokerRole.SYNC_MASTER
    assert c.check_crc_on_recover is False
    assert c.message_index_enable is True
    assert c.flush_commit_log_least_pages == 8
    assert c.delete_when == "04;05"
    assert c.file_reserved_time_hours == 48
    assert c.store_host == "10.0.0.5" and c.listen_port == 10922
    assert c.store_address == "10.0.0.5:10922"
    assert c.message_delay_level == "1s 2s"


def test_from_properties_unknown_keys_ignored_and_overrides_win(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "someFutureKey=whatever\nlistenPort=1\nmappedFileSizeCommitLog=8192\n")
    c = StoreConfig.from_properties(path, listen_port=2)
    assert c.listen_port == 2
    assert c.mapped_file_size_commit_log == 8192
    assert c.commit_log_dir == c.root / "commitlog"


def test_both_spellings_of_the_commit_log_size() -> None:
    assert StoreConfig.from_mapping({"mapedFileSizeCommitLog": "8192"}).mapped_file_size_commit_log == 8192
    assert StoreConfig.from_mapping({"mappedFileSizeCommitLog": "8192"}).mapped_file_size_commit_log == 8192
    assert (StoreConfig.from_mapping({"mapedFileSizeConsumeQueue": "40"})
            .mapped_file_size_consume_queue == 40)


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("TRUE", True), ("False", False)])
def test_booleans(value: str, expected: bool) -> None:
    assert StoreConfig.from_mapping({"checkCRCOnRecover": value}).check_crc_on_recover is expected


def test_enums_are_case_insensitive() -> None:
    c = StoreConfig.from_mapping({"flushDiskType": "sync_flush", "brokerRole": "SLAVE"})
    assert c.flush_disk_type is FlushDiskType.SYNC_FLUSH and c.broker_role is BrokerRole.SLAVE


@pytest.mark.parametrize(
    ("key", "value", "fragments"),
    [
        ("listenPort", "abc", ["listenPort", "'abc'", "an integer"]),
        ("listenPort", "", ["listenPort", "an integer"]),
        ("checkCRCOnRecover", "yes", ["checkCRCOnRecover", "'yes'", "true or false"]),
        ("flushDiskType", "FAST", ["flushDiskType", "'FAST'", "ASYNC_FLUSH", "SYNC_FLUSH"]),
        ("brokerRole", "LEADER", ["brokerRole", "SLAVE"]),
        ("mapedFileSizeCommitLog", "1.5", ["mappedFileSizeCommitLog", "an integer"]),
    ],
)
def test_bad_values_raise_config_error(key: str, value: str, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_mapping({key: value})
    for fragment in fragments:
        assert fragment in str(info.value)


def test_too_small_segments_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="4096"):
        StoreConfig(mapped_file_size_commit_log=1024)
    for size in (0, -20):
        with pytest.raises(ConfigError, match="mappedFileSizeConsumeQueue"):
            StoreConfig(mapped_file_size_consume_queue=size)


@pytest.mark.parametrize(
    ("given", "rounded"), [(20, 20), (1, 20), (21, 40), (2000, 2000), (6000001, 6000020)]
)
def test_consume_queue_size_rounded_up_to_entries(given: int, rounded: int) -> None:
    c = StoreConfig(mapped_file_size_consume_queue=given)
    assert c.mapped_file_size_consume_queue == rounded
    assert c.replace(listen_port=1).mapped_file_size_consume_queue == rounded


def test_missing_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        StoreConfig.from_properties(tmp_path / "nope.conf")


def test_config_is_frozen() -> None:
    c = StoreConfig()
    with pytest.raises(AttributeError):
        c.listen_port = 1  # type: ignore[misc]
    assert c.replace(listen_port=1).listen_port == 1 and c.listen_port == 10911


def test_parse_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! another comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d = x = y\n"
        "e\n"
        "  f=  spaced  \n"
        "g=first \\\n"
        "   second\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "x = y", "e": "", "f": "spaced", "g": "first second",
    }


def test_parse_properties_comment_lines_are_not_continued() -> None:
    # Java: "a comment line cannot be extended" by a trailing backslash.
    assert parse_properties("# see C:\\\nlistenPort=1\n") == {"listenPort": "1"}


def test_set_properties_rewrites_the_last_entry_in_place_and_appends_new_keys() -> None:
    text = ("# broker\n"
            "a=1\n"
            "b : 2\n"
            "a = 3\n"
            "g=first \\\n"
            "   second\n"
            "! end")
    changed = set_properties(text, {"a": "9", "g": "one", "z": "new"})
    assert changed == "# broker\na=1\nb : 2\na=9\ng=one\n! end\nz=new\n"
    assert parse_properties(changed) == {"a": "9", "b": "2", "g": "one", "z": "new"}
    assert set_properties("", {"k": "v"}) == "k=v\n"
    assert set_properties("# only a comment \\\nk=1\n", {"k": "2"}) == "# only a comment \\\nk=2\n"


def test_update_properties_file_keeps_the_old_text_in_bak(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "broker.properties"
    update_properties_file(path, {"a": "1"})  # created, with its directory
    update_properties_file(path, {"a": "2", "b": "x"})
    assert path.read_text() == "a=2\nb=x\n"
    assert path.with_name("broker.properties.bak").read_text() == "a=1\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["broker.properties", "broker.properties.bak"]
