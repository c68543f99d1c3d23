"""``bolide store inspect|dump|verify|query|repair`` through the command line, on a store
written by Bolide: JSON output, exit codes, a damaged tail repaired, a locked store refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from bolide.cli.main import cli
from bolide.common import Message
from bolide.store import MessageStore, StoreConfig
from bolide.store.mapped_file import file_name
from bolide.store.record import HEADER_V4
from bolide.testing.crash import flip_byte
from conftest import SMALL_COMMIT_LOG, SMALL_CONSUME_QUEUE, assert_consistent, small_config

TOPIC = "CliTools"


@pytest.fixture
def written(tmp_path: Path) -> tuple[StoreConfig, list[tuple[int, str]]]:
    config = small_config(tmp_path / "store")
    puts = []
    with MessageStore(config) as store:
        for i in range(80):
            r = store.put_message(Message(TOPIC, b"payload %d " % i + b"z" * 900, tags="A",
                                          keys=[f"key{i}"]), i % 2)
            assert r.ok and r.msg_id
            puts.append((r.wrote_offset, r.msg_id))
    return config, puts


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["store", *args])
    return result.exit_code, result.output


def conf_file(config: StoreConfig) -> str:
    path = Path(config.store_path_root_dir).parent / "broker.conf"
    path.write_text(f"mappedFileSizeCommitLog={SMALL_COMMIT_LOG}\n"
                    f"mappedFileSizeConsumeQueue={SMALL_CONSUME_QUEUE}\n")
    return str(path)


def test_inspect_dump_query_verify_as_json(written: tuple[StoreConfig, list[tuple[int, str]]]) -> None:
    config, puts = written
    root, conf = config.store_path_root_dir, conf_file(config)
    code, out = run("inspect", root, "-c", conf, "--output", "json")
    assert code == 0, out
    info = json.loads(out)
    assert info["topics"][TOPIC]["1"] == {"min_offset": 0, "max_offset": 40, "count": 40, "files": 1}
    code, out = run("dump", root, "-c", conf, "--topic", TOPIC, "--queue", "1", "--from-offset", "39",
                    "--output", "json", "--hex")
    assert code == 0, out
    [rec] = json.loads(out)
    assert (rec["queue_offset"], rec["commit_log_offset"], rec["body"][:11]) == (39, puts[79][0],
                                                                                  "payload 79 ")
    assert rec["fields"][-1]["name"] == "PROPERTIES"
    code, out = run("query", root, "-c", conf, "--topic", TOPIC, "--key", "key5", "--output", "json")
    assert code == 0 and [m["msg_id"] for m in json.loads(out)] == [puts[5][1]]
    code, out = run("query", root, "-c", conf, "--msg-id", puts[6][1])
    assert code == 0 and "1 message(s)" in out and f"@{puts[6][0]} " in out
    code, out = run("query", root, "-c", conf, "--topic", TOPIC, "--key", "nokey")
    assert code == 1 and "0 message(s)" in out
    code, out = run("verify", root, "-c", conf, "--output", "json")
    assert code == 0, out
    report = json.loads(out)
    assert (report["ok"], report["records"], report["queue_entries"]) == (True, 80, 80)
    assert report["index_entries"] == 160


def test_dump_hex_text_shows_field_boundaries(written: tuple[StoreConfig, list[tuple[int, str]]]) -> None:
    config, puts = written
    code, out = run("dump", config.store_path_root_dir, "-c", conf_file(config), "--phy-offset",
                    str(puts[3][0]), "--limit", "1", "--hex")
    assert code == 0, out
    assert "PHYSICALOFFSET" in out and f"{puts[3][0]}" in out
    assert "+0058 BODY" in out and "0058: 70 61 79 6c 6f 61 64" in out  # "payload" at byte 88
    code, out = run("dump", config.store_path_root_dir, "-c", conf_file(config), "--phy-offset",
                    str(puts[3][0] + 1))
    assert code == 1 and f"use --phy-offset {puts[3][0]}" in out


def test_verify_fails_on_a_flipped_byte_and_repair_fixes_it(
        written: tuple[StoreConfig, list[tuple[int, str]]]) -> None:
    config, puts = written
    root, conf = config.store_path_root_dir, conf_file(config)
    bad = puts[60][0]
    flip_byte(config.commit_log_dir / file_name(bad - bad % SMALL_COMMIT_LOG),
              bad % SMALL_COMMIT_LOG + HEADER_V4.size + 3)
    code, out = run("verify", root, "-c", conf)
    assert code == 1 and f"PROBLEM commitlog @ {bad}: body CRC mismatch" in out
    assert "repair --dry-run" in out
    code, out = run("repair", root, "-c", conf, "--dry-run")
    assert code == 0 and f"WOULD truncate commitlog: cut at offset {bad}" in out
    assert run("verify", root, "-c", conf)[0] == 1  # the dry run changed nothing
    code, out = run("repair", root, "-c", conf, "--output", "json")
    assert code == 0, out
    result = json.loads(out)
    assert result["ok_after"] and result["recovery"]["commit_log_end"] == bad
    code, out = run("verify", root, "-c", conf)
    assert code == 0 and "60 records, " in out
    assert_consistent(config)


@pytest.fixture
def lock_holder(written: tuple[StoreConfig, list[tuple[int, str]]]) -> Iterator[None]:
    root = written[0].store_path_root_dir
    code = ("import sys; from pathlib import Path; from bolide.store.checkpoint import StoreLock\n"
            f"StoreLock(Path({root!r})).acquire(); print('locked', flush=True)\n"
            "sys.stdin.readline()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    yield
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def test_repair_is_refused_while_another_process_holds_the_lock(
        written: tuple[StoreConfig, list[tuple[int, str]]], lock_holder: None) -> None:
    config, _ = written
    root, conf = config.store_path_root_dir, conf_file(config)
    code, out = run("repair", root, "-c", conf, "--rebuild-queues")
    assert code == 1 and "locked by a running process (a broker?): stop it first" in out
    code, out = run("inspect", root, "-c", conf)
    assert code == 0 and "lock: HELD by a running process" in out
    assert run("verify", root, "-c", conf)[0] == 0
