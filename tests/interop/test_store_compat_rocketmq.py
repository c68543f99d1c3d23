"""The store promise, checked against real Apache RocketMQ: a store Bolide writes opens in a
RocketMQ broker, and a store a RocketMQ broker wrote opens in Bolide.

Each RocketMQ version (:data:`bolide.testing.rocketmq.VERSIONS`) gets one NameServer; every
scenario starts a broker of its own on a store directory, talks to it with ``mqadmin`` or
Bolide's client and stops it. Both sides use 64 MiB CommitLog segments and 3000-entry ConsumeQueue files.

Needs java, javac and mvn (the jars come from Maven Central once, into ``interop/.m2``):
without them the module is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

from bolide.client import ClientConfig, SendStatus
from bolide.client.blocking import Admin, Producer
from bolide.common import Message
from bolide.common.message import MessageExt
from bolide.protocol.bodies.client import MessageQueue
from bolide.store import GetStatus, MessageStore, StoreConfig
from bolide.store.consume_queue import ENTRY, ENTRY_SIZE, EXT_ADDRESS_MAX
from bolide.testing import rocketmq as rmqmod
from bolide.testing.rocketmq import (
    BrokerSettings,
    PrintedMessage,
    QueueStatus,
    RocketMQ,
    RocketMQUnavailable,
    parse_print_msg,
    parse_query_by_key,
    parse_topic_status,
    write_topics_json,
)
from conftest import assert_consistent, unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(900)]

COMMIT_LOG = 64 * 1024 * 1024
CONSUME_QUEUE = 3000 * ENTRY_SIZE
QUEUES = 4
TOPICS = ("BolideInteropA", "BolideInteropB")
PER_QUEUE = 40  # messages per (topic, queue): 2 x 4 x 40 = 320
FILL_TOPIC = "BolideInteropFill"
FILL_BODY = 1024 * 1024
FILL_COUNT = 64  # 64 MiB of filler between the two halves: the second half is in segment 2


def _unavailable(reason: str) -> NoReturn:
    unavailable(f"real RocketMQ unavailable: {reason}")


@pytest.fixture(scope="module", params=rmqmod.VERSIONS, ids=lambda v: f"rocketmq-{v}")
def rmq(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQ]:
    """A running NameServer of one RocketMQ version; tests start and stop brokers on it."""
    version = request.param
    try:
        server = RocketMQ(version, tmp_path_factory.mktemp(f"rocketmq-{version}"))
    except RocketMQUnavailable as exc:
        _unavailable(str(exc))
    try:
        server.start_namesrv()
        yield server
    finally:
        server.stop()


def _broker(store: Path) -> BrokerSettings:
    return BrokerSettings(store, mapped_file_size_commit_log=COMMIT_LOG,
                          mapped_file_size_consume_queue=CONSUME_QUEUE)


# -- Bolide writes ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Written:
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    msg_id: str
    body: bytes
    tags: str
    keys: tuple[str, ...]


@dataclass
class BolideStore:
    root: Path
    config: StoreConfig
    messages: list[Written] = field(default_factory=list)
    max_phy_offset: int = 0

    def counts(self, topic: str) -> dict[int, int]:
        return {q: sum(1 for w in self.messages if w.topic == topic and w.queue_id == q)
                for q in range(QUEUES)}


def _body(topic: str, queue_id: int, i: int) -> bytes:
    text = f"{topic}/q{queue_id}/#{i}: " + "x" * (i * 37 % 700)
    if i % 5 == 0:
        text += " Grüße, €uro ✓"  # multi-byte UTF-8
    return text.encode()


def write_bolide_store(root: Path, broker_port: int) -> BolideStore:
    """Two topics x 4 queues with tags and keys, half of them past a CommitLog segment end."""
    config = StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=COMMIT_LOG,
                         mapped_file_size_consume_queue=CONSUME_QUEUE, store_host="127.0.0.1",
                         listen_port=broker_port, max_hash_slot_num=50000, max_index_num=200000)
    result = BolideStore(root, config)

    def put(store: MessageStore, i: int) -> None:
        for topic in TOPICS:
            for q in range(QUEUES):
                keys = (f"{topic}.{q}.{i}", f"shared{i % 5}")
                tags = f"Tag{i % 3}"
                body = _body(topic, q, i)
                r = store.put_message(Message(topic, body, tags=tags, keys=keys), queue_id=q)
                assert r.ok, r
                assert r.msg_id is not None
                result.messages.append(Written(topic, q, r.queue_offset, r.wrote_offset, r.msg_id,
                                               body, tags, keys))

    with MessageStore(config) as store:
        for i in range(PER_QUEUE // 2):
            put(store, i)
        for n in range(FILL_COUNT):
            filler = bytes([n % 251]) * FILL_BODY
            assert store.put_message(Message(FILL_TOPIC, filler, tags="Fill"), queue_id=0).ok
        for i in range(PER_QUEUE // 2, PER_QUEUE):
            put(store, i)
        assert store.wait_dispatched()
        result.max_phy_offset = store.max_phy_offset
    assert result.max_phy_offset > COMMIT_LOG, "the filler should push the second half into segment 2"
    assert not (root / "abort").exists()
    return result


# -- what a broker says about a store ----------------------------------------------------------
@dataclass
class BrokerView:
    status: dict[str, dict[int, QueueStatus]]
    printed: dict[str, list[PrintedMessage]]
    by_key: dict[str, list[tuple[str, int, int]]]
    logs: str
    raw_printed: dict[str, str]


def read_back(rmq: RocketMQ, written: BolideStore, keys: list[str]) -> BrokerView:
    commands = [["topicStatus", "-t", t] for t in (*TOPICS, FILL_TOPIC)]
    commands += [["printMsg", "-t", t, "-c", "UTF-8", "-d", "true"] for t in TOPICS]
    commands += [["queryMsgByKey", "-t", key.split(".")[0], "-k", key] for key in keys]
    out = rmq.mqadmin_batch(commands)
    names = (*TOPICS, FILL_TOPIC)
    status = {t: parse_topic_status(o) for t, o in zip(names, out[:3], strict=True)}
    raw = dict(zip(TOPICS, out[3:5], strict=True))
    printed = {t: parse_print_msg(o) for t, o in raw.items()}
    by_key = {k: parse_query_by_key(o) for k, o in zip(keys, out[5:], strict=True)}
    return BrokerView(status, printed, by_key, rmq.broker_logs(), raw)


_BAD_LOG = re.compile(
    r"\bERROR\b|CRC check failed|illegal magic code 0x(?!0\b)|\[BUG\]|load .* failed|"
    r"mappedFile size|Exception"
)


# Netty's word for a client that closed its connection before its answer (mqadmin's own client
# shutting down as its heartbeat is answered): nothing to do with the store
_HUNG_UP = re.compile(r"Failed to write response\[request code: \d+, response code: 0\b|"
                      r"^io\.netty\.channel\.StacklessClosedChannelException: null$")


def assert_store_log_clean(view: BrokerView, max_phy_offset: int, *, abnormal: bool) -> None:
    """The broker loaded the whole CommitLog and logged no error while doing so."""
    logs = view.logs
    expected = "abnormally" if abnormal else "normally"
    assert re.search(rf"last shutdown {expected}", logs), (
        f"the broker did not report a {expected} last shutdown:\n{logs[-4000:]}")
    loaded = re.findall(r"load over, and the max phy offset = (\d+)", logs)
    assert loaded and int(loaded[-1]) == max_phy_offset, (
        f"the broker loaded the CommitLog up to {loaded}, Bolide wrote up to {max_phy_offset}")
    bad = [line for line in logs.splitlines() if _BAD_LOG.search(line) and not _HUNG_UP.search(line)]
    assert not bad, "the broker logged problems while opening the store:\n" + "\n".join(bad[:40])


def assert_queues_match(view: BrokerView, written: BolideStore) -> None:
    for topic in TOPICS:
        counts = written.counts(topic)
        got = {q: (s.min_offset, s.max_offset) for q, s in view.status[topic].items()}
        assert got == {q: (0, n) for q, n in counts.items()}, f"topicStatus {topic}: {got}"
    fill = view.status[FILL_TOPIC]
    assert fill[0].max_offset == FILL_COUNT, f"topicStatus {FILL_TOPIC}: {fill}"


def assert_messages_match(view: BrokerView, written: BolideStore, broker_addr: str) -> None:
    for topic in TOPICS:
        expected = {w.msg_id: w for w in written.messages if w.topic == topic}
        printed = {m.msg_id: m for m in view.printed[topic]}
        assert len(view.printed[topic]) == len(expected), (
            f"printMsg -t {topic} printed {len(view.printed[topic])} messages, Bolide wrote "
            f"{len(expected)}; its output ends with:\n{view.raw_printed[topic][-3000:]}")
        assert printed.keys() == expected.keys(), (
            f"{topic}: missing {sorted(expected.keys() - printed.keys())[:5]}, "
            f"unexpected {sorted(printed.keys() - expected.keys())[:5]}")
        for msg_id, m in printed.items():
            w = expected[msg_id]
            where = f"{topic} queue {w.queue_id} offset {w.queue_offset}"
            assert (m.topic, m.queue_id, m.queue_offset) == (topic, w.queue_id, w.queue_offset), where
            assert m.commit_log_offset == w.commit_log_offset, where
            assert m.body == w.body.decode(), where
            assert m.tags == w.tags, where
            assert tuple(m.keys) == w.keys, where
            assert m.properties.get("UNIQ_KEY") == w.msg_id, where
            assert m.store_host == broker_addr, where


# -- a: Bolide writes, RocketMQ reads ----------------------------------------------------------
def _probe_keys(written: BolideStore) -> list[str]:
    """A key from the first segment and one from the second, per topic."""
    keys = []
    for topic in TOPICS:
        mine = [w for w in written.messages if w.topic == topic]
        keys += [mine[0].keys[0], mine[-1].keys[0]]
    return keys


@pytest.fixture(scope="module")
def clean_handoff(rmq: RocketMQ, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[BolideStore, BrokerView]]:
    """Bolide writes and closes cleanly; the broker opens the store as it is."""
    root = tmp_path_factory.mktemp(f"bolide-clean-{rmq.version}") / "store"
    written = write_bolide_store(root, rmq.broker_port)
    write_topics_json(root, dict.fromkeys((*TOPICS, FILL_TOPIC), QUEUES), rocketmq_5=rmq.major >= 5)
    rmq.start_broker(_broker(root))
    try:
        view = read_back(rmq, written, _probe_keys(written))
    finally:
        rmq.kill_broker()  # nothing to keep: skip the slow clean shutdown
    yield written, view
    shutil.rmtree(root, ignore_errors=True)


def test_rocketmq_opens_a_bolide_store(rmq: RocketMQ,
                                       clean_handoff: tuple[BolideStore, BrokerView]) -> None:
    written, view = clean_handoff
    assert_store_log_clean(view, written.max_phy_offset, abnormal=False)
    assert_queues_match(view, written)
    assert_messages_match(view, written, rmq.broker_addr)


def test_rocketmq_finds_bolide_messages_by_key(clean_handoff: tuple[BolideStore, BrokerView]) -> None:
    written, view = clean_handoff
    ids = {w.keys[0]: w.msg_id for w in written.messages}
    for key, rows in view.by_key.items():
        assert [r[0] for r in rows] == [ids[key]], f"queryMsgByKey {key}: {rows}"


def test_rocketmq_rebuilds_a_bolide_store_from_its_commitlog(rmq: RocketMQ, tmp_path: Path) -> None:
    """Handing over only the CommitLog (``abort`` + zeroed checkpoint, no ConsumeQueues) makes
    the broker re-parse every record, CRC included, and rebuild the ConsumeQueues and the
    index: the rebuilt ConsumeQueue files must equal Bolide's byte for byte."""
    root = tmp_path / "store"
    written = write_bolide_store(root, rmq.broker_port)
    write_topics_json(root, dict.fromkeys((*TOPICS, FILL_TOPIC), QUEUES), rocketmq_5=rmq.major >= 5)
    bolide_cq = tmp_path / "consumequeue.bolide"
    (root / "consumequeue").rename(bolide_cq)
    (root / "abort").touch()
    (root / "checkpoint").write_bytes(bytes(4096))
    rmq.start_broker(_broker(root))
    try:
        view = read_back(rmq, written, _probe_keys(written))
        rebuilt = {p.relative_to(root / "consumequeue"): p.read_bytes()
                   for p in (root / "consumequeue").glob("*/*/*")
                   if p.parent.parent.name in (*TOPICS, FILL_TOPIC)}
    finally:
        rmq.kill_broker()
    assert_store_log_clean(view, written.max_phy_offset, abnormal=True)
    assert_queues_match(view, written)
    assert_messages_match(view, written, rmq.broker_addr)
    ids = {w.keys[0]: w.msg_id for w in written.messages}
    for key, rows in view.by_key.items():
        assert [r[0] for r in rows] == [ids[key]], f"queryMsgByKey {key}: {rows}"
    ours = {p.relative_to(bolide_cq): p.read_bytes() for p in bolide_cq.glob("*/*/*")}
    assert rebuilt.keys() == ours.keys()
    for path, data in ours.items():
        assert rebuilt[path] == data, f"ConsumeQueue file {path} differs from the one Bolide wrote"
    shutil.rmtree(root, ignore_errors=True)


# -- b: RocketMQ writes, Bolide reads ----------------------------------------------------------
RMQ_TOPIC = "RocketInteropA"
RMQ_TOPIC_2 = "RocketInteropB"


@dataclass(frozen=True)
class Sent:
    topic: str
    queue_id: int
    msg_id: str
    body: str
    tags: str | None
    keys: tuple[str, ...]


def send_messages(rmq: RocketMQ, *, status: bool = True
                  ) -> tuple[list[Sent], dict[str, dict[int, QueueStatus]]]:
    """Create two topics and send messages to the RocketMQ broker (with Bolide's client: the
    broker writes the store whatever the client); returns the acknowledged ones and (with
    ``status``) what the broker's topic stats say about the topics afterwards."""
    plan: list[tuple[str, int, str, str | None, tuple[str, ...]]] = []
    for i in range(10):
        q = i % QUEUES
        body = f"rocketmq body {i}:" + "y" * (i * 53 % 400) + (" Grüße ✓" if i % 4 == 1 else "")
        plan.append((RMQ_TOPIC, q, body, f"Tag{i % 3}", (f"rk{i}", f"both{i % 2}")))
    plan.append((RMQ_TOPIC_2, 0, "no tag and no key", None, ()))
    plan.append((RMQ_TOPIC_2, 1, "tag only", "Lonely", ()))
    config = ClientConfig(rmq.namesrv_addr, client_ip="127.0.0.1")
    with Admin(config) as admin:
        deadline = time.monotonic() + 30  # a 5.x broker may log its boot before it registers
        while rmq.broker_addr not in admin.master_addrs():
            assert time.monotonic() < deadline, f"{rmq.broker_addr} never registered"
            time.sleep(0.1)
        for topic in (RMQ_TOPIC, RMQ_TOPIC_2):
            admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES,
                               broker_addr=rmq.broker_addr)
        sent = []
        with Producer(config, "compat_pg") as producer:
            for topic, q, body, tags, keys in plan:
                msg = Message(topic, body.encode(), tags=tags, keys=keys or None)
                result = producer.send(msg, queue=MessageQueue(topic, "broker-a", q))
                assert result.status is SendStatus.SEND_OK and result.queue.queue_id == q, result
                sent.append(Sent(topic, q, result.msg_id, body, tags, keys))
        if not status:
            return sent, {}
        stats = {t: admin.topic_stats(t) for t in (RMQ_TOPIC, RMQ_TOPIC_2)}
    return sent, {t: {mq.queue_id: QueueStatus(mq.broker_name, mq.queue_id, o.min_offset, o.max_offset)
                      for mq, o in by_queue.items()} for t, by_queue in stats.items()}


def read_with_bolide(store: MessageStore, topic: str) -> dict[str, tuple[int, int, MessageExt]]:
    """Every message of a topic: UNIQ_KEY -> (queue id, queue offset, message)."""
    found: dict[str, tuple[int, int, MessageExt]] = {}
    for q in range(QUEUES):
        offset = store.get_min_offset_in_queue(topic, q)
        while offset < store.get_max_offset_in_queue(topic, q):
            result = store.get_message("interop", topic, q, offset, max_count=32)
            assert result.status is GetStatus.FOUND, (topic, q, offset, result.status)
            for qoff, m in zip(result.queue_offsets, result.messages, strict=True):
                assert m.msg_id is not None
                found[m.msg_id] = (q, qoff, m)
            offset = result.next_begin_offset
    return found


def check_bolide_reads(store: MessageStore, sent: list[Sent], broker_addr: str) -> None:
    for topic in (RMQ_TOPIC, RMQ_TOPIC_2):
        found = read_with_bolide(store, topic)
        mine = [s for s in sent if s.topic == topic]
        assert sorted(found) == sorted(s.msg_id for s in mine), f"{topic}: ids differ"
        for q in range(QUEUES):  # a fresh store: queue offsets 0 .. n-1
            n = sum(1 for s in mine if s.queue_id == q)
            assert (store.get_min_offset_in_queue(topic, q), store.get_max_offset_in_queue(topic, q)) \
                == (0, n), (topic, q)
            assert sorted(qoff for qid, qoff, _ in found.values() if qid == q) == list(range(n))
        for s in mine:
            q, _, m = found[s.msg_id]
            assert q == s.queue_id
            assert m.body == s.body.encode(), s
            assert m.tags == s.tags, s
            assert tuple(m.keys) == s.keys, s
            assert m.store_host == broker_addr


def _bolide_config(rmq: RocketMQ) -> StoreConfig:
    # the broker's own broker.conf: storePathRootDir, segment sizes, brokerIP1, listenPort
    config = StoreConfig.from_properties(rmq.broker_conf_path)
    assert config.mapped_file_size_commit_log == COMMIT_LOG
    assert config.mapped_file_size_consume_queue == CONSUME_QUEUE
    return config


def test_bolide_opens_a_rocketmq_store_after_a_clean_stop(rmq: RocketMQ, tmp_path: Path) -> None:
    root = tmp_path / "store"
    rmq.start_broker(_broker(root))
    try:
        sent, status = send_messages(rmq)
    finally:
        code = rmq.stop_broker()  # SIGTERM: flush, persist, delete abort
    assert not (root / "abort").exists(), f"the broker did not stop cleanly (exit {code})"
    config = _bolide_config(rmq)
    with MessageStore(config) as store:
        report = store.recovery_report
        assert not report.abnormal and report.clean, report.summary()
        for topic, queues in status.items():
            for q, s in queues.items():
                assert (store.get_min_offset_in_queue(topic, q),
                        store.get_max_offset_in_queue(topic, q)) == (s.min_offset, s.max_offset)
        check_bolide_reads(store, sent, rmq.broker_addr)
    assert_consistent(config)


def test_bolide_opens_a_rocketmq_store_after_sigkill(rmq: RocketMQ, tmp_path: Path) -> None:
    """Also with enableConsumeQueueExt: RocketMQ then puts in each ConsumeQueue entry's tagsCode
    the address of a ConsumeQueueExt unit instead of the tag's hash, and a tag-filtered get of
    Bolide still finds exactly the messages of the tag."""
    root = tmp_path / "store"
    settings = _broker(root)
    settings.extra["enableConsumeQueueExt"] = "true"
    rmq.start_broker(settings)
    try:
        sent, _ = send_messages(rmq, status=False)
    finally:
        rmq.kill_broker()  # no shutdown hook runs: abort stays, the broker flushes nothing
    assert (root / "abort").exists()
    codes = [c for f in (root / "consumequeue" / RMQ_TOPIC).glob("*/*")
             for _, size, c in ENTRY.iter_unpack(f.read_bytes()) if size > 0]
    assert any(c <= EXT_ADDRESS_MAX for c in codes), codes  # ext addresses, not hashes
    config = _bolide_config(rmq)
    with MessageStore(config) as store:
        report = store.recovery_report
        assert report.abnormal, report.summary()
        check_bolide_reads(store, sent, rmq.broker_addr)
        for tag in ("Tag0", "Tag1", "Tag2"):
            found = []
            for q in range(QUEUES):
                r = store.get_message("g", RMQ_TOPIC, q, 0, 32, tags=[tag])
                assert r.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE), r.status
                found += [m.msg_id for m in r.messages]
            assert found and sorted(found) == sorted(
                s.msg_id for s in sent if s.topic == RMQ_TOPIC and s.tags == tag), tag
    assert_consistent(config)
