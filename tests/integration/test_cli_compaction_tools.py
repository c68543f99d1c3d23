"""``bolide store inspect|verify|repair`` on a store with a compacted topic, through the command
line and the library: the compaction files listed, a flipped byte, a cut file, a file without
its pair and an unreadable position-checkpoint found and repaired, the store then serving the
newest value of every key again."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bolide.cli.main import cli
from bolide.common import Message
from bolide.errors import StoreFormatError
from bolide.store import GetStatus, MessageStore, StoreConfig
from bolide.store.compaction_files import UNIT, UNIT_SIZE
from bolide.store.record import HEADER_V4
from bolide.store.repair import plan_repair
from bolide.store.verify_compaction import scan_compaction
from bolide.testing.crash import flip_byte
from conftest import SMALL_COMMIT_LOG, SMALL_CONSUME_QUEUE, assert_consistent, small_config

TOPIC = "CompactedTools"
CQ_SIZE = 46 * 10  # nine records a file pair
KEYS = 5
ROUNDS = 6


def config(root: Path) -> StoreConfig:
    return small_config(root, compaction_cq_mapped_file_size=CQ_SIZE,
                        compaction_mapped_file_size=64 * 1024,
                        compaction_schedule_interval_ms=3_600_000)


def newest(cfg: StoreConfig) -> dict[str, bytes]:
    """Key -> body of the last message served for it, read from offset 0 as a consumer does."""
    out: dict[str, bytes] = {}
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        store.compact_now()
        offset = 0
        while True:
            got = store.get_message("g", TOPIC, 0, offset, 32)
            for msg in got.messages if got.status is GetStatus.FOUND else []:
                out[msg.properties["KEYS"]] = msg.body
            if got.next_begin_offset <= offset:
                return out
            offset = got.next_begin_offset


EXPECTED = {f"k{k}": b"v%d-%d" % (k, ROUNDS - 1) for k in range(KEYS)}


@pytest.fixture
def compacted(tmp_path: Path) -> StoreConfig:
    cfg = config(tmp_path / "store")
    with MessageStore(cfg) as store:
        store.set_topic_compaction(TOPIC, True)
        for r in range(ROUNDS):
            for k in range(KEYS):
                assert store.put_message(Message(TOPIC, b"v%d-%d" % (k, r), keys=f"k{k}")).ok
        assert store.wait_dispatched()
        assert store.compact_now() >= 1
    return cfg


def run(cfg: StoreConfig, *args: str) -> tuple[int, str]:
    conf = Path(cfg.store_path_root_dir).parent / "broker.conf"
    conf.write_text(f"mappedFileSizeCommitLog={SMALL_COMMIT_LOG}\n"
                    f"mappedFileSizeConsumeQueue={SMALL_CONSUME_QUEUE}\n"
                    f"compactionCqMappedFileSize={CQ_SIZE}\ncompactionMappedFileSize={64 * 1024}\n")
    result = CliRunner().invoke(cli, ["store", args[0], cfg.store_path_root_dir, "-c", str(conf),
                                      *args[1:]])
    return result.exit_code, result.output


def dirs(cfg: StoreConfig) -> tuple[Path, Path]:
    base = cfg.root / "compaction"
    return base / "compactionLog" / TOPIC / "0", base / "compactionCq" / TOPIC / "0"


def units(cq_file: Path) -> list[tuple[int, ...]]:
    data = cq_file.read_bytes()
    out = []
    for i in range(len(data) // UNIT_SIZE):
        unit = UNIT.unpack_from(data, i * UNIT_SIZE)
        if unit[0] < 0 or unit[1] <= 0:
            break
        out.append(unit)
    return out


def test_inspect_and_verify_list_the_compaction_files(compacted: StoreConfig) -> None:
    code, out = run(compacted, "inspect", "--output", "json")
    assert code == 0, out
    comp = json.loads(out)["compaction"]
    [q] = comp["queues"]
    scan = scan_compaction(compacted)
    [sq] = scan.queues
    assert (q["topic"], q["queue_id"], q["files"], q["records"]) == (TOPIC, 0, len(sq.pairs), sq.records)
    assert q["last_offset"] == ROUNDS * KEYS - 1 and q["first_offset"] > 0  # compacted head gone
    assert q["records"] < ROUNDS * KEYS and q["bytes"] > 0 and not q["problems"]
    assert comp["positions"] == {f"{TOPIC}_0": q["position"]} and q["position"] >= KEYS
    code, out = run(compacted, "inspect")
    assert code == 0 and f"  {TOPIC} queue 0: {q['files']} file pair(s), offsets " in out
    assert f"compacted up to {q['position']}" in out
    code, out = run(compacted, "verify", "--output", "json")
    assert code == 0, out
    report = json.loads(out)
    assert (report["compaction_queues"], report["compaction_records"]) == (1, q["records"])
    code, out = run(compacted, "verify")
    assert code == 0 and f"1 compacted queues ({q['records']} records)" in out


def test_a_flipped_byte_is_found_and_repair_cuts_the_queue_there(compacted: StoreConfig) -> None:
    log_dir, cq_dir = dirs(compacted)
    last = sorted(cq_dir.iterdir())[-1]  # the pair being written: its records are in the CQ too
    phys, _size, _t, _s, qoff = units(last)[1][:5]
    flip_byte(log_dir / last.name, phys - int(last.name) + HEADER_V4.size + 1)
    code, out = run(compacted, "verify")
    assert code == 1, out
    where = f"compaction/compactionLog/{TOPIC}/0/{last.name}"
    assert f"PROBLEM {where} @ {phys}: unit 1: bad record (body CRC" in out
    assert "`bolide store repair` cuts the queue there" in out
    code, out = run(compacted, "repair", "--dry-run")
    assert code == 0 and "WOULD truncate-compaction " in out and "cut before unit 1" in out
    assert run(compacted, "verify")[0] == 1  # the dry run changed nothing
    code, out = run(compacted, "repair", "--output", "json")
    assert code == 0, out
    result = json.loads(out)
    assert result["ok_after"] and [a["action"] for a in result["actions"]] == ["truncate-compaction"]
    assert len(units(last)) == 1
    assert_consistent(compacted)
    assert newest(compacted) == EXPECTED  # copied in again from the ConsumeQueue
    assert_consistent(compacted)
    assert qoff == units(last)[1][4]


def test_a_cut_file_needs_the_queue_rebuilt(compacted: StoreConfig) -> None:
    log_dir, _ = dirs(compacted)
    first = sorted(log_dir.iterdir())[0]
    os.truncate(first, 1000)
    code, out = run(compacted, "verify")
    assert code == 1 and f"compaction/compactionLog/{TOPIC}/0/{first.name}: 1000 bytes, expected" in out
    assert f"--rebuild-compaction {TOPIC}:0" in out
    code, out = run(compacted, "repair")
    assert code == 1 and "no repair action for these problems" in out
    code, out = run(compacted, "repair", "--rebuild-compaction", "Nope")
    assert code == 1 and "--rebuild-compaction Nope: no compaction files for it" in out
    code, out = run(compacted, "repair", "--rebuild-compaction", f"{TOPIC}:0")
    assert code == 0 and f"DONE rebuild-compaction compaction/{TOPIC}/0" in out, out
    assert not log_dir.exists()
    positions = json.loads((compacted.root / "compaction/position-checkpoint").read_text())
    assert positions["queueOffsetMap"] == {}
    assert newest(compacted) == EXPECTED
    assert_consistent(compacted)


def test_a_file_without_its_pair_and_the_library_plan(compacted: StoreConfig) -> None:
    cq_dir = dirs(compacted)[1]
    names = sorted(p.name for p in cq_dir.iterdir())
    assert len(names) >= 2
    (cq_dir / names[0]).unlink()
    code, out = run(compacted, "verify", "--output", "json")
    assert code == 1
    [problem] = json.loads(out)["problems"]
    assert problem["where"] == f"compaction/compactionLog/{TOPIC}/0/{names[0]}"
    assert problem["message"].startswith(f"no matching file in compaction/compactionCq/{TOPIC}/0")
    with pytest.raises(StoreFormatError, match="no matching file"):
        MessageStore(compacted).open()  # the store refuses it too
    plan = plan_repair(compacted, rebuild_compaction=[TOPIC])
    assert [a.kind for a in plan.actions] == ["rebuild-compaction"]
    code, out = run(compacted, "repair", "--rebuild-compaction", TOPIC)
    assert code == 0, out
    assert newest(compacted) == EXPECTED
    assert_consistent(compacted)


def test_an_unreadable_position_checkpoint_is_restored_or_removed(compacted: StoreConfig) -> None:
    path = compacted.root / "compaction/position-checkpoint"
    bak = path.with_name(path.name + ".bak")
    good = path.read_bytes()
    path.write_bytes(b"{not json")
    shutil.copyfile(path, bak)
    code, out = run(compacted, "verify")
    assert code == 1 and "PROBLEM compaction/position-checkpoint: does not decode" in out
    assert "`bolide store repair` removes it" in out
    bak.write_bytes(good)
    code, out = run(compacted, "repair")
    assert code == 0 and "DONE restore-positions compaction/position-checkpoint" in out, out
    assert path.read_bytes() == good
    path.write_bytes(b"[]")
    bak.write_bytes(b"[]")
    code, out = run(compacted, "repair")
    assert code == 0 and "DONE remove-positions" in out and not path.exists() and not bak.exists()
    assert newest(compacted) == EXPECTED
    assert_consistent(compacted)
