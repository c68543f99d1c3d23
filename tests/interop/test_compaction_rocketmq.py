"""Compacted topics (``cleanup.policy=COMPACTION``) checked against a real RocketMQ 5.3.3.

One NameServer (``orderMessageEnable=true``, as RocketMQ's compaction docs ask) and two broker
runs:

1. a RocketMQ broker with small compaction files and ``compactionScheduleInternal=1000``
   writes and compacts a topic (created with mqadmin ``updateTopic -a +cleanup.policy=COMPACTION``,
   several values per key sent to one queue with Bolide's producer); what it serves from
   offset 0 is read with Bolide's pull consumer; after a clean stop Bolide opens the store
   and must serve the same messages at the same offsets, and reads its compaction files
   (units, position-checkpoint) as it reads its own;
2. a store Bolide wrote and compacted (``compact_now``) is opened by a RocketMQ broker, which
   must serve the same messages from offset 0 as Bolide; mqadmin ``dumpCompactionLog`` reads a
   Bolide compaction log file.

RocketMQ needs no 30 s wait: the dispatcher creates a queue's compaction log at the first
message (``CompactionStore.doDispatch``), and its compaction is scheduled then, every
``compactionScheduleInternal`` + 1 s + a random part below ``compactionScheduleInternal``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from click.testing import CliRunner

from bolide.cli.main import cli
from bolide.client import ClientConfig, MQClientError, SendStatus, pulling
from bolide.client.blocking import Admin, Producer
from bolide.client.filtering import subscription
from bolide.client.pull_consumer import PullConsumer
from bolide.common import Message
from bolide.protocol.bodies.client import MessageQueue
from bolide.store import MessageStore, StoreConfig
from bolide.store.compaction import encode_positions
from bolide.store.compaction_files import END_UNIT, UNIT, UNIT_SIZE, log_file_size
from bolide.store.record import BLANK_MAGIC, RecordInfo, parse_record
from bolide.testing.rocketmq import BrokerSettings, RocketMQ, RocketMQUnavailable, write_topics_json
from bolide.testing.servers import running_servers
from conftest import unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

VERSION = "5.3.3"
TOPIC = "CompactedInterop"
KEYS = 4
ROUNDS = 6
CQ_SIZE = 46 * 6  # five units and the end unit per compaction queue file
LOG_CONFIG = 5 * CQ_SIZE  # compactionMappedFileSize
LOG_SIZE = log_file_size(CQ_SIZE, LOG_CONFIG)  # 6 x CQ_SIZE: RocketMQ rounds 5 x up to 6 x
COMPACTION = {"compactionMappedFileSize": str(LOG_CONFIG),
              "compactionCqMappedFileSize": str(CQ_SIZE),
              "compactionScheduleInternal": "1000",
              "compactionThreadNum": "1",
              "maxOffsetMapSize": str(1024 * 1024)}

Served = list[tuple[int, str, bytes]]  # (queue offset, keys, body)


def _unavailable(reason: str) -> NoReturn:
    unavailable(f"real RocketMQ unavailable: {reason}")


def _body(key: int, rnd: int) -> bytes:
    return b"value-%d-%d:" % (key, rnd) + b"z" * (40 + 13 * key)


def _plan() -> list[tuple[str, bytes]]:
    return [(f"key{k}", _body(k, r)) for r in range(ROUNDS) for k in range(KEYS)]


@dataclass
class Run:
    rmq: RocketMQ
    bolide_root: Path
    bolide_served: Served


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The NameServer, and the Bolide-written store (made first: mqadmin dumps its file in
    the same JVM as it creates the topic on the RocketMQ broker)."""
    base = tmp_path_factory.mktemp("compaction-rocketmq")
    try:
        rmq = RocketMQ(VERSION, base / "rmq")
    except RocketMQUnavailable as exc:
        _unavailable(str(exc))
    bolide_root = base / "bolide-store"
    served = write_bolide_store(bolide_root, rmq.broker_port)
    try:
        rmq.start_namesrv(extra={"orderMessageEnable": "true"})
        yield Run(rmq, bolide_root, served)
    finally:
        rmq.stop()


def _settings(store: Path) -> BrokerSettings:
    return BrokerSettings(store, extra=dict(COMPACTION))


def write_bolide_store(root: Path, broker_port: int) -> Served:
    """Bolide writes the plan to queue 0 of a compacted topic, compacts, closes; returns what
    it serves from offset 0."""
    geometry = BrokerSettings(root)  # the RocketMQ broker's CommitLog and ConsumeQueue sizes
    config = StoreConfig(store_path_root_dir=str(root), store_host="127.0.0.1", listen_port=broker_port,
                         mapped_file_size_commit_log=geometry.mapped_file_size_commit_log,
                         mapped_file_size_consume_queue=geometry.mapped_file_size_consume_queue,
                         compaction_mapped_file_size=LOG_CONFIG, compaction_cq_mapped_file_size=CQ_SIZE,
                         compaction_schedule_interval_ms=3_600_000,
                         max_hash_slot_num=50000, max_index_num=200000)
    store = MessageStore(config)
    store.set_topic_compaction(TOPIC, True)
    with store:
        for key, body in _plan():
            assert store.put_message(Message(TOPIC, body, keys=key), queue_id=0).ok
        assert store.compact_now() >= 1
        served = read_store(store)
    write_topics_json(root, {TOPIC: 1}, rocketmq_5=True,
                      attributes={TOPIC: {"cleanup.policy": "COMPACTION"}})
    return served


def read_store(store: MessageStore) -> Served:
    out: Served = []
    offset = 0
    while True:
        r = store.get_message("g", TOPIC, 0, offset, 32)
        for qoff, m in zip(r.queue_offsets, r.messages, strict=True):
            assert m.queue_offset == qoff
            out.append((qoff, m.properties.get("KEYS", ""), m.body))
        if r.next_begin_offset <= offset:
            return out
        offset = r.next_begin_offset


PROBES = (0, 3, 16, 18, 20, 23, 24, 30)  # compacted away, kept, the end, past it
Probe = tuple[str, int, int, int, list[int]]  # status, nextBeginOffset, min, max, queue offsets


async def read_broker_async(namesrv_addr: str, end: int) -> tuple[Served, dict[int, Probe]]:
    """Queue 0 of the topic from offset 0 with Bolide's pull consumer, up to offset ``end - 1``,
    and one pull of at most two messages from each of :data:`PROBES`."""
    mq = MessageQueue(TOPIC, "broker-a", 0)
    out: Served = []
    config = ClientConfig(namesrv_addr, client_ip="127.0.0.1")
    consumer = PullConsumer(config, "compaction-readers", auto_commit=False, poll_timeout_ms=500)
    consumer.assign([mq])
    probes: dict[int, Probe] = {}
    async with consumer:
        async with asyncio.timeout(60):  # a broker just started may not be registered yet
            while mq not in consumer.assignment():
                with contextlib.suppress(MQClientError):
                    if mq in await consumer.fetch_message_queues(TOPIC):
                        consumer.assign([mq])  # again: the first found no route
                await asyncio.sleep(0.2)
        await consumer.seek(mq, 0)
        async with asyncio.timeout(30):
            while not out or out[-1][0] < end - 1:
                for m in await consumer.poll():
                    out.append((m.queue_offset, m.properties.get("KEYS", ""), m.body))
        for offset in PROBES:
            r = await pulling.pull(consumer._instance, consumer.group, mq, offset,
                                   subscription(TOPIC, "*"), max_nums=2, suspend_ms=0,
                                   timeout_ms=10_000)
            probes[offset] = (r.status.value, r.next_begin_offset, r.min_offset, r.max_offset,
                              [m.queue_offset for m in r.messages])
    return out, probes


def read_broker(namesrv_addr: str, end: int) -> tuple[Served, dict[int, Probe]]:
    return asyncio.run(read_broker_async(namesrv_addr, end))


def read_bolide_broker(store: Path, end: int) -> tuple[Served, dict[int, Probe]]:
    """The same reads against a Bolide broker on ``store`` (it learns the topic and its
    cleanup.policy from ``config/topics.json``)."""
    async def main() -> tuple[Served, dict[int, Probe]]:
        geometry = BrokerSettings(store)
        options = {"mapped_file_size_commit_log": geometry.mapped_file_size_commit_log,
                   "mapped_file_size_consume_queue": geometry.mapped_file_size_consume_queue,
                   "compaction_mapped_file_size": LOG_CONFIG,
                   "compaction_cq_mapped_file_size": CQ_SIZE,
                   "compaction_schedule_interval_ms": 3_600_000,
                   "max_hash_slot_num": 50000, "max_index_num": 200000}
        async with running_servers(store, store_options=options) as servers:
            return await read_broker_async(servers.namesrv_addr, end)

    return asyncio.run(main())


def _differences(bolide: dict[int, Probe], rocketmq: dict[int, Probe]) -> str:
    return "\n".join(f"pull at {o}: Bolide {bolide.get(o)}, RocketMQ {rocketmq.get(o)}"
                     for o in PROBES if bolide.get(o) != rocketmq.get(o))


def kept_by_rule(position: int) -> Served:
    """What compaction up to ``position`` keeps of the plan: the newest value of each key among
    offsets up to ``position``, and everything after it."""
    plan = _plan()
    newest = {key: i for i, (key, _) in enumerate(plan) if i <= position}
    return [(i, key, body) for i, (key, body) in enumerate(plan)
            if i > position or newest.get(key) == i]


def _units(path: Path) -> list[tuple[int, int, int, int, int, int, int, int]]:
    data = path.read_bytes()
    return [UNIT.unpack_from(data, i) for i in range(0, len(data) - UNIT_SIZE + 1, UNIT_SIZE)]


def _compacted_up_to(store: Path) -> int | None:
    """RocketMQ's position for the queue once every file but the last is compacted."""
    ckpt = store / "compaction" / "position-checkpoint"
    cq_dir = store / "compaction" / "compactionCq" / TOPIC / "0"
    if not ckpt.is_file() or not cq_dir.is_dir():
        return None
    position = json.loads(ckpt.read_text()).get("queueOffsetMap", {}).get(f"{TOPIC}_0")
    files = sorted(p for p in cq_dir.iterdir() if p.is_file())
    if position is None or len(files) < 2:
        return None
    last_closed = max(u[4] for u in _units(files[-2]) if u[1] > 0)
    return int(position) if last_closed <= position else None


def _wait(what: str, probe, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while (value := probe()) is None:
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


@dataclass
class RocketWritten:
    root: Path
    position: int
    served: Served
    probes: dict[int, Probe]
    dump: str


@pytest.fixture(scope="module")
def rocket_written(run: Run, tmp_path_factory: pytest.TempPathFactory) -> RocketWritten:
    rmq = run.rmq
    root = tmp_path_factory.mktemp("rocket-store") / "store"
    rmq.start_broker(_settings(root))
    try:
        bolide_log = sorted((run.bolide_root / "compaction" / "compactionLog" / TOPIC / "0").glob("0*"))[0]
        created, dump = rmq.mqadmin_batch([
            ["updateTopic", "-b", rmq.broker_addr, "-t", TOPIC, "-r", "1", "-w", "1",
             "-a", "+cleanup.policy=COMPACTION"],
            ["dumpCompactionLog", "-f", str(bolide_log)],
        ])
        assert "success" in created, created
        config = ClientConfig(rmq.namesrv_addr, client_ip="127.0.0.1")
        with Admin(config) as admin:
            _wait("the topic route", lambda: True if TOPIC in admin.topic_list() else None, 30)
        with Producer(config, "compaction-writers") as producer:
            # RocketMQ refuses keyless messages on a compacted topic
            with pytest.raises(MQClientError, match="Required message key is missing"):
                producer.send(Message(TOPIC, b"no key"), queue=MessageQueue(TOPIC, "broker-a", 0))
            for i, (key, body) in enumerate(_plan()):
                result = producer.send(Message(TOPIC, body, keys=key),
                                       queue=MessageQueue(TOPIC, "broker-a", 0))
                assert result.status is SendStatus.SEND_OK and result.queue_offset == i, result
        position = _wait("RocketMQ's compaction", lambda: _compacted_up_to(root))
        served, probes = read_broker(rmq.namesrv_addr, len(_plan()))
    finally:
        code = rmq.stop_broker()
    assert not (root / "abort").exists(), f"the broker did not stop cleanly (exit {code})"
    return RocketWritten(root, position, served, probes, dump)


def test_rocketmq_compacts_as_bolide_expects(rocket_written: RocketWritten) -> None:
    w = rocket_written
    assert w.position >= KEYS  # at least one file was compacted
    assert w.served == kept_by_rule(w.position)


def test_rocketmq_compaction_files_have_bolide_layout(rocket_written: RocketWritten) -> None:
    comp = rocket_written.root / "compaction"
    assert (comp / "position-checkpoint").read_bytes() == encode_positions(
        {f"{TOPIC}_0": rocket_written.position})
    log_dir = comp / "compactionLog" / TOPIC / "0"
    cq_dir = comp / "compactionCq" / TOPIC / "0"
    logs = sorted(p.name for p in log_dir.iterdir() if p.is_file())
    assert logs == sorted(p.name for p in cq_dir.iterdir() if p.is_file())
    seen = []
    for name in logs:
        data = (log_dir / name).read_bytes()
        assert len(data) == LOG_SIZE and (cq_dir / name).stat().st_size == CQ_SIZE
        base = int(name)
        assert base % LOG_SIZE == 0
        for unit in _units(cq_dir / name):
            phys, size, tags_code, store_ts, qoff, batch, compacted, reserved = unit
            if size <= 0:
                assert unit == UNIT.unpack(END_UNIT) or not any(UNIT.pack(*unit)), unit
                break
            assert (batch, compacted, reserved, tags_code) == (1, -1, 0, 0), unit
            info = parse_record(memoryview(data)[phys - base: phys - base + size], 0, True)
            assert isinstance(info, RecordInfo) and info.size == size, (name, unit, info)
            assert info.queue_offset == qoff and info.commit_log_offset == phys, (name, unit)
            assert info.store_timestamp == store_ts
            seen.append(qoff)
    assert [o for o, _, _ in rocket_written.served] == seen


def test_bolide_store_verify_and_inspect_rocketmq_compaction_files(run: Run,
                                                                   rocket_written: RocketWritten) -> None:
    """``bolide store verify`` and ``inspect`` (with RocketMQ's broker.conf) on the store RocketMQ
    compacted: no problem, its compacted queue and position as RocketMQ wrote them."""
    root, conf = str(rocket_written.root), str(run.rmq.broker_conf_path)
    result = CliRunner().invoke(cli, ["store", "verify", root, "-c", conf, "--output", "json"])
    report = json.loads(result.output)
    assert result.exit_code == 0 and report["ok"], report["problems"]
    assert (report["compaction_queues"], report["compaction_records"]) == (1, len(rocket_written.served))
    result = CliRunner().invoke(cli, ["store", "inspect", root, "-c", conf, "--output", "json"])
    assert result.exit_code == 0, result.output
    [q] = json.loads(result.output)["compaction"]["queues"]
    offsets = [o for o, _, _ in rocket_written.served]
    assert (q["topic"], q["first_offset"], q["last_offset"], q["records"], q["position"]) == (
        TOPIC, offsets[0], offsets[-1], len(offsets), rocket_written.position)


def _file_shapes(store: Path) -> dict[str, tuple[list[int], bytes, bool]]:
    """Per compaction file pair: the queue offsets of its units, what follows the last unit
    (an end unit or zeros) and whether the log has a BLANK record after the last record."""
    cq_dir = store / "compaction" / "compactionCq" / TOPIC / "0"
    log_dir = store / "compaction" / "compactionLog" / TOPIC / "0"
    shapes = {}
    for path in sorted(cq_dir.iterdir()):
        units = [u for u in _units(path) if u[1] > 0]
        after = path.read_bytes()[len(units) * UNIT_SIZE:][:UNIT_SIZE]
        end = units[-1][0] + units[-1][1] - int(path.name)
        magic = (log_dir / path.name).read_bytes()[end + 4:end + 8]
        blank = magic == BLANK_MAGIC.to_bytes(4, "big", signed=True)
        shapes[path.name] = ([u[4] for u in units], after, blank)
    return shapes


def test_both_compact_the_same_sends_into_the_same_files(run: Run, rocket_written: RocketWritten) -> None:
    """The same sends, compacted by each (RocketMQ once its position covers every file but the
    last, Bolide by compact_now): the same file names, the same offsets in each, the same ends
    (no end unit and no BLANK after a compaction's last records)."""
    assert _file_shapes(run.bolide_root) == _file_shapes(rocket_written.root)


def test_bolide_serves_a_rocketmq_compacted_store(run: Run, rocket_written: RocketWritten) -> None:
    config = StoreConfig.from_properties(run.rmq.broker_conf_path)
    sizes = (config.compaction_cq_mapped_file_size, config.compaction_mapped_file_size)
    assert sizes == (CQ_SIZE, LOG_CONFIG)
    store = MessageStore(config)
    store.set_topic_compaction(TOPIC, True)
    with store:
        assert store.wait_dispatched()
        assert store.compaction is not None
        assert store.compaction.positions.get(TOPIC, 0) == rocket_written.position
        served = read_store(store)
    assert served == rocket_written.served


def test_a_bolide_broker_answers_pulls_on_a_rocketmq_store_as_rocketmq(rocket_written: RocketWritten) -> None:
    served, probes = read_bolide_broker(rocket_written.root, len(_plan()))
    assert served == rocket_written.served
    assert probes == rocket_written.probes, _differences(probes, rocket_written.probes)


def test_rocketmq_serves_a_bolide_compacted_store(run: Run, rocket_written: RocketWritten) -> None:
    rmq = run.rmq
    assert len(run.bolide_served) < len(_plan())
    rmq.start_broker(_settings(run.bolide_root))
    try:
        served, probes = read_broker(rmq.namesrv_addr, len(_plan()))
        logs = rmq.broker_logs()
    finally:
        rmq.kill_broker()
    assert served == run.bolide_served
    _, bolide_probes = read_bolide_broker(run.bolide_root, len(_plan()))
    assert bolide_probes == probes, _differences(bolide_probes, probes)
    bad = [line for line in logs.splitlines()
           if re.search(r"compaction|Compaction", line) and re.search(r"ERROR|xception|mismatch", line)]
    assert not bad, "\n".join(bad[:20])


def test_rocketmq_dumps_a_bolide_compaction_log(run: Run, rocket_written: RocketWritten) -> None:
    dump = rocket_written.dump
    printed = re.findall(r"queueOffset=(\d+)", dump)
    first_file = [o for o, _, _ in run.bolide_served]
    assert printed and [int(o) for o in printed] == first_file[: len(printed)], dump[-3000:]
    assert "Exception" not in dump, dump[-3000:]

