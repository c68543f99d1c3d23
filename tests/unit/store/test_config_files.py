"""The config/*.json managers: Java's fastjson shapes, .bak fallback and atomic persistence."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from bolide.common import config_persist
from bolide.errors import ConfigError
from bolide.store.config_files import ConsumerOffsetManager, DataVersion, DelayOffsetManager
from bolide.store.topic_config import (
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
    TopicConfig,
    TopicConfigManager,
)

# As RocketMQ 4.9.x writes it (fastjson prettyFormat: int-keyed maps stay on the opening line).
JAVA_CONSUMER_OFFSET = (
    '{\n'
    '\t"offsetTable":{\n'
    '\t\t"%RETRY%please_rename_unique_group_name@please_rename_unique_group_name":{0:0\n'
    '\t\t},\n'
    '\t\t"TopicTest@please_rename_unique_group_name":{0:12,1:30\n'
    '\t\t}\n'
    '\t}\n'
    '}'
)

JAVA_5_CONSUMER_OFFSET = (
    '{\n'
    '\t"dataVersion":{\n'
    '\t\t"counter":3,\n'
    '\t\t"stateVersion":0,\n'
    '\t\t"timestamp":1700000000000\n'
    '\t},\n'
    '\t"groupTopicMap":{\n'
    '\t\t"g":["TopicTest"]\n'
    '\t},\n'
    '\t"offsetTable":{\n'
    '\t\t"TopicTest@g":{-1:5,0:12,1:30\n'
    '\t\t}\n'
    '\t}\n'
    '}'
)

JAVA_TOPICS = (
    '{\n'
    '\t"dataVersion":{\n'
    '\t\t"counter":2,\n'
    '\t\t"timestamp":1583919392097\n'
    '\t},\n'
    '\t"topicConfigTable":{\n'
    '\t\t"SCHEDULE_TOPIC_XXXX":{\n'
    '\t\t\t"order":false,\n'
    '\t\t\t"perm":6,\n'
    '\t\t\t"readQueueNums":18,\n'
    '\t\t\t"topicFilterType":"SINGLE_TAG",\n'
    '\t\t\t"topicName":"SCHEDULE_TOPIC_XXXX",\n'
    '\t\t\t"topicSysFlag":0,\n'
    '\t\t\t"writeQueueNums":18\n'
    '\t\t},\n'
    '\t\t"TopicTest":{\n'
    '\t\t\t"order":false,\n'
    '\t\t\t"perm":6,\n'
    '\t\t\t"readQueueNums":4,\n'
    '\t\t\t"topicFilterType":"SINGLE_TAG",\n'
    '\t\t\t"topicName":"TopicTest",\n'
    '\t\t\t"topicSysFlag":0,\n'
    '\t\t\t"writeQueueNums":4\n'
    '\t\t}\n'
    '\t}\n'
    '}'
)

JAVA_5_TOPICS = (
    '{\n'
    '\t"dataVersion":{\n'
    '\t\t"counter":1,\n'
    '\t\t"stateVersion":0,\n'
    '\t\t"timestamp":1700000000000\n'
    '\t},\n'
    '\t"topicConfigTable":{\n'
    '\t\t"T":{\n'
    '\t\t\t"attributes":{},\n'
    '\t\t\t"order":false,\n'
    '\t\t\t"perm":6,\n'
    '\t\t\t"readQueueNums":8,\n'
    '\t\t\t"topicFilterType":"SINGLE_TAG",\n'
    '\t\t\t"topicName":"T",\n'
    '\t\t\t"topicSysFlag":0,\n'
    '\t\t\t"writeQueueNums":8\n'
    '\t\t}\n'
    '\t}\n'
    '}'
)

JAVA_SUBSCRIPTION_GROUP = (
    '{\n'
    '\t"dataVersion":{\n'
    '\t\t"counter":1,\n'
    '\t\t"timestamp":1583919392097\n'
    '\t},\n'
    '\t"subscriptionGroupTable":{\n'
    '\t\t"please_rename_unique_group_name":{\n'
    '\t\t\t"brokerId":0,\n'
    '\t\t\t"consumeBroadcastEnable":true,\n'
    '\t\t\t"consumeEnable":true,\n'
    '\t\t\t"consumeFromMinEnable":true,\n'
    '\t\t\t"groupName":"please_rename_unique_group_name",\n'
    '\t\t\t"notifyConsumerIdsChangedEnable":true,\n'
    '\t\t\t"retryMaxTimes":16,\n'
    '\t\t\t"retryQueueNums":1,\n'
    '\t\t\t"whichBrokerWhenConsumeSlowly":1\n'
    '\t\t}\n'
    '\t}\n'
    '}'
)

JAVA_DELAY_OFFSET = '{\n\t"offsetTable":{1:1,2:1,3:13,4:1\n\t}\n}'


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- consumerOffset.json ----------------------------------------------------------------------
def test_consumer_offsets_commit_query_remove(tmp_path: Path) -> None:
    m = ConsumerOffsetManager.in_store(tmp_path)
    assert m.path == tmp_path / "config" / "consumerOffset.json"
    assert m.query("g", "T", 0) is None
    m.commit("g", "T", 0, 12)
    m.commit("g", "T", 1, 30)
    m.commit("g", "U", 0, 1)
    m.commit("h", "T", 0, 7)
    assert m.query("g", "T", 1) == 30 and m.query_all("g", "T") == {0: 12, 1: 30}
    assert m.topics_of_group("g") == {"T", "U"} and m.groups_of_topic("T") == {"g", "h"}
    assert m.remove("h", "T") and not m.remove("h", "T")
    assert sorted(m.remove_group("g")) == ["T", "U"]
    assert m.snapshot() == {}


def test_consumer_offsets_take_another_table_per_topic_and_group(tmp_path: Path) -> None:
    ours = ConsumerOffsetManager(tmp_path / "ours.json")
    ours.commit("g1", "T", 0, 5)
    ours.commit("g1", "T", 1, 7)
    ours.commit("g2", "T", 0, 9)
    theirs = ConsumerOffsetManager(tmp_path / "theirs.json")
    theirs.commit("g1", "T", 0, 12)  # g1 on T as a whole: queue 1 is not theirs, so it goes
    theirs.data_version = DataVersion(counter=3, timestamp=1000, state_version=0)
    ours.take(theirs)
    assert ours.query_all("g1", "T") == {0: 12}
    assert ours.query_all("g2", "T") == {0: 9}  # a pair they lack stays
    assert ours.data_version == DataVersion(counter=3, timestamp=1000, state_version=0)
    ours.take(ConsumerOffsetManager(tmp_path / "empty.json"))  # no version: ours stays
    assert ours.data_version is not None and ours.data_version.counter == 3


def test_consumer_offsets_round_trip_in_java_shape(tmp_path: Path) -> None:
    m = ConsumerOffsetManager.in_store(tmp_path)
    m.commit("please_rename_unique_group_name", "TopicTest", 1, 30)
    m.commit("please_rename_unique_group_name", "TopicTest", 0, 12)
    m.commit("please_rename_unique_group_name", "%RETRY%please_rename_unique_group_name", 0, 0)
    m.persist()
    assert m.path.read_text(encoding="utf-8") == JAVA_CONSUMER_OFFSET
    again = ConsumerOffsetManager(m.path)
    assert again.load()
    assert again.snapshot() == m.snapshot()
    assert again.encode() == m.encode()


def test_loads_java_consumer_offsets_and_quoted_keys(tmp_path: Path) -> None:
    path = _write(tmp_path / "consumerOffset.json", JAVA_CONSUMER_OFFSET)
    m = ConsumerOffsetManager(path)
    assert m.load()
    assert m.query("please_rename_unique_group_name", "TopicTest", 1) == 30
    assert m.data_version is None
    _write(path, '{"offsetTable":{"TopicTest@g":{"0":12, "1":30}}}')
    assert m.load() and m.query_all("g", "TopicTest") == {0: 12, 1: 30}


def test_consumer_offsets_keep_the_5x_shape(tmp_path: Path) -> None:
    path = _write(tmp_path / "consumerOffset.json", JAVA_5_CONSUMER_OFFSET)
    m = ConsumerOffsetManager(path)
    assert m.load()
    assert m.data_version == DataVersion(3, 1700000000000, 0)
    assert m.query_all("g", "TopicTest") == {-1: 5, 0: 12, 1: 30}
    assert m.encode().decode() == JAVA_5_CONSUMER_OFFSET  # groupTopicMap is derived again


def test_missing_files_load_empty(tmp_path: Path) -> None:
    m = ConsumerOffsetManager.in_store(tmp_path)
    assert not m.load() and m.snapshot() == {}
    _write(m.path, " \n")
    assert not m.load()


# -- .bak and atomic persistence --------------------------------------------------------------
def test_persist_keeps_the_previous_text_in_bak(tmp_path: Path) -> None:
    m = ConsumerOffsetManager.in_store(tmp_path)
    m.commit("g", "T", 0, 1)
    m.persist()
    first = m.path.read_bytes()
    assert not m.path.with_name("consumerOffset.json.bak").exists()
    m.commit("g", "T", 0, 2)
    m.persist()
    assert m.path.with_name("consumerOffset.json.bak").read_bytes() == first
    names = sorted(p.name for p in m.path.parent.iterdir())
    assert names == ["consumerOffset.json", "consumerOffset.json.bak"]


def test_corrupt_file_falls_back_to_bak_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = ConsumerOffsetManager.in_store(tmp_path)
    m.commit("g", "T", 0, 5)
    m.persist()
    m.commit("g", "T", 0, 6)
    m.persist()  # .bak holds offset 5
    m.path.write_bytes(b'{"offsetTable":{"T@g":{0:')  # torn write
    fresh = ConsumerOffsetManager(m.path)
    with caplog.at_level(logging.WARNING, logger="bolide.common.config_persist"):
        assert fresh.load()
    assert fresh.query("g", "T", 0) == 5
    assert any("backup" in r.getMessage() and "consumerOffset.json.bak" in r.getMessage()
               for r in caplog.records)


def test_missing_file_falls_back_to_bak(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _write(tmp_path / "delayOffset.json.bak", JAVA_DELAY_OFFSET).with_name("delayOffset.json")
    d = DelayOffsetManager(path)
    with caplog.at_level(logging.WARNING):
        assert d.load()
    assert d.get(3) == 13
    assert "is missing" in caplog.text


def test_corrupt_file_and_bak_is_an_error_and_changes_nothing(tmp_path: Path) -> None:
    m = ConsumerOffsetManager.in_store(tmp_path)
    m.commit("g", "T", 0, 5)
    _write(m.path, "{broken")
    _write(m.path.with_name("consumerOffset.json.bak"), '{"offsetTable":{"T@g":{"x":1}}}')
    with pytest.raises(ConfigError, match="move it away"):
        m.load()
    assert m.query("g", "T", 0) == 5


def test_atomic_persist_uses_tmp_then_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new text is complete in .tmp and fsynced before it replaces the file; the old text is
    copied to .bak before that; the directory is fsynced last."""
    m = ConsumerOffsetManager.in_store(tmp_path)
    m.commit("g", "T", 0, 1)
    m.persist()
    old = m.path.read_bytes()
    m.commit("g", "T", 0, 2)
    new = m.encode()
    steps: list[tuple[str, ...]] = []
    real_replace, real_sync_dir = config_persist.os.replace, config_persist.sync_dir

    def replace(src: Path, dst: Path) -> None:
        steps.append(("replace", Path(src).name, Path(dst).name))
        if Path(dst) == m.path:  # just before the switch: the file is still old, .tmp complete
            assert m.path.read_bytes() == old and Path(src).read_bytes() == new
            assert m.path.with_name("consumerOffset.json.bak").read_bytes() == old
        real_replace(src, dst)

    def sync_dir(directory: Path) -> None:
        steps.append(("sync_dir",))
        real_sync_dir(directory)

    monkeypatch.setattr(config_persist.os, "replace", replace)
    monkeypatch.setattr(config_persist, "sync_dir", sync_dir)
    m.persist()
    assert steps == [("replace", "consumerOffset.json.bak.tmp", "consumerOffset.json.bak"),
                     ("replace", "consumerOffset.json.tmp", "consumerOffset.json"), ("sync_dir",)]
    assert m.path.read_bytes() == new


def test_failed_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = ConsumerOffsetManager.in_store(tmp_path)
    m.commit("g", "T", 0, 1)
    m.persist()
    old = m.path.read_bytes()

    def full_disk(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(config_persist, "write_synced", full_disk)
    m.commit("g", "T", 0, 2)
    with pytest.raises(ConfigError, match="space"):
        m.persist()
    assert m.path.read_bytes() == old


def test_commits_while_persisting_from_another_thread(tmp_path: Path) -> None:
    m = ConsumerOffsetManager.in_store(tmp_path)
    stop = threading.Event()

    def persister() -> None:
        while not stop.is_set():
            m.persist()

    thread = threading.Thread(target=persister)
    thread.start()
    try:
        for i in range(2000):
            m.commit(f"g{i % 7}", f"T{i % 5}", i % 4, i)
    finally:
        stop.set()
        thread.join()
    m.persist()
    again = ConsumerOffsetManager(m.path)
    again.load()
    assert again.snapshot() == m.snapshot()


# -- topics.json ------------------------------------------------------------------------------
def test_topics_json_java_shape(tmp_path: Path) -> None:
    path = _write(tmp_path / "topics.json", JAVA_TOPICS)
    t = TopicConfigManager(path)
    assert t.load()
    assert t.data_version == DataVersion(2, 1583919392097)
    assert t.get("TopicTest") == TopicConfig("TopicTest", read_queue_nums=4, write_queue_nums=4)
    assert t.get("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18  # type: ignore[union-attr]
    assert t.encode().decode() == JAVA_TOPICS
    t.put(TopicConfig("New", 2, 2, perm=4, order=True))
    assert t.data_version.counter == 3
    t.persist()
    again = TopicConfigManager(path)
    again.load()
    assert again.snapshot() == t.snapshot() and again.get("New").order  # type: ignore[union-attr]
    assert again.remove("New") and not again.remove("New")


def test_topics_json_5x_attributes_and_unknown_fields_survive(tmp_path: Path) -> None:
    path = _write(tmp_path / "topics.json", JAVA_5_TOPICS)
    t = TopicConfigManager(path)
    t.load()
    assert t.get("T").attributes == {}  # type: ignore[union-attr]
    assert t.encode().decode() == JAVA_5_TOPICS
    _write(path, '{"topicConfigTable":{"T":{"topicName":"T","perm":"6","newField":[1]}},"mappingX":1}')
    t.load()
    cfg = t.get("T")
    assert cfg is not None and cfg.perm == 6 and cfg.read_queue_nums == 16 and cfg.extra == {"newField": [1]}
    assert b'"newField":[\n\t\t\t\t1\n\t\t\t]' in t.encode() and b'"mappingX":1' in t.encode()


def test_topics_json_bad_value_type_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "topics.json", '{"topicConfigTable":{"T":{"perm":"rw"}}}')
    with pytest.raises(ConfigError, match="perm"):
        TopicConfigManager(path).load()


@pytest.mark.parametrize("counts", ['"readQueueNums":2147483647', '"writeQueueNums":-1'])
def test_topics_json_queue_counts_outside_the_range_are_an_error(tmp_path: Path, counts: str) -> None:
    path = _write(tmp_path / "topics.json", '{"topicConfigTable":{"T":{"topicName":"T",' + counts + "}}}")
    with pytest.raises(ConfigError, match="0 to 65536 queues"):
        TopicConfigManager(path).load()


# -- subscriptionGroup.json -------------------------------------------------------------------
def test_subscription_group_java_shape_and_defaults(tmp_path: Path) -> None:
    path = _write(tmp_path / "subscriptionGroup.json", JAVA_SUBSCRIPTION_GROUP)
    s = SubscriptionGroupManager(path)
    assert s.load()
    group = "please_rename_unique_group_name"
    assert s.get(group) == SubscriptionGroupConfig(group)
    assert s.encode().decode() == JAVA_SUBSCRIPTION_GROUP
    s.put(SubscriptionGroupConfig("g2", consume_broadcast_enable=False, retry_max_times=3))
    s.persist()
    again = SubscriptionGroupManager(path)
    again.load()
    assert again.get("g2") == SubscriptionGroupConfig("g2", consume_broadcast_enable=False, retry_max_times=3)
    assert sorted(again.names()) == ["g2", "please_rename_unique_group_name"]


def test_subscription_group_5x_fields_are_kept(tmp_path: Path) -> None:
    text = ('{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":5},"forbiddenTable":{},'
            '"subscriptionGroupTable":{"g":{"groupName":"g","consumeTimeoutMinute":15,'
            '"groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,"retryMaxTimes":2}}}')
    s = SubscriptionGroupManager(_write(tmp_path / "subscriptionGroup.json", text))
    s.load()
    g = s.get("g")
    assert g is not None and g.retry_max_times == 2 and g.consume_enable
    assert g.extra == {"consumeTimeoutMinute": 15, "groupRetryPolicy": {"type": "CUSTOMIZED"},
                       "groupSysFlag": 0}
    out = s.encode()
    assert b'\t"forbiddenTable":{},\n' in out and b'"stateVersion":0' in out


# -- delayOffset.json -------------------------------------------------------------------------
def test_delay_offsets_java_shape(tmp_path: Path) -> None:
    d = DelayOffsetManager.in_store(tmp_path)
    for level, offset in ((1, 1), (2, 1), (3, 13), (4, 1)):
        d.update(level, offset)
    d.persist()
    assert d.path == tmp_path / "config" / "delayOffset.json"
    assert d.path.read_text(encoding="utf-8") == JAVA_DELAY_OFFSET
    again = DelayOffsetManager(d.path)
    assert again.load() and again.snapshot() == {1: 1, 2: 1, 3: 13, 4: 1}
    _write(d.path, '{"dataVersion":{"counter":1,"timestamp":2},"offsetTable":{"1":4}}')
    assert again.load() and again.get(1) == 4 and again.data_version is not None
