"""``bolide bench broker`` runs end to end against a real ``bolide start`` child process and
cleans up after itself, also when interrupted or when the server dies (no timing
assertions: only that every figure is there and positive)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from bolide.cli.bench_broker import CASES
from bolide.cli.main import cli

LAUNCH = "import sys; sys.argv[0] = 'bolide'; from bolide.cli.main import main; main()"
POSITIVE = ("msgs_s", "mib_s", "requests_s", "p50_ms", "p99_ms", "p999_ms", "max_ms",
            "broker_cpu_pct", "load_cpu_pct", "peak_rss_mib", "anon_mib", "count")


def _default_sigint() -> None:
    # a test run started in the background of a non-interactive shell ignores SIGINT, and an
    # ignored signal stays ignored across exec: give the bench the disposition of a terminal's
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _bench(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", LAUNCH, "bench", "broker", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _children_left(pids: list[int]) -> list[int]:
    return [pid for pid in pids if not _gone(pid)]


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"  # a zombie has exited


def _wait_for(condition, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_bench_broker_quick_runs_every_case(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = tmp_path / "results" / "broker.json"
    proc = _bench("--quick", "--duration", "0.5", "--dir", str(scratch), "--output", str(out))
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    doc = json.loads(stdout)
    assert json.loads(out.read_text()) == doc
    assert {"cpu_count", "python", "platform"} <= doc["machine"].keys()
    run = doc["run"]
    assert run["mode"] == "quick"
    assert run["flush_disk_type"] == "ASYNC_FLUSH"
    assert run["server_exit_status"] == 0  # SIGTERM closed the server cleanly
    assert list(doc["cases"]) == list(CASES)
    for name, case in doc["cases"].items():
        for key in POSITIVE:
            assert case[key] is not None and case[key] > 0, (name, key, case)
        assert case["errors"] == {}, (name, case)
        assert isinstance(case["loop_late_over_5ms"], int) and case["loop_late_over_5ms"] >= 0
        assert case["p50_ms"] <= case["p99_ms"] <= case["p999_ms"] <= case["max_ms"]
    assert doc["cases"]["send_batch_100b"]["per_request"] == 64
    assert doc["cases"]["pull_100b"]["per_request"] == 32
    assert doc["cases"]["send_1k_at_10k"]["target_msgs_s"] == 10_000
    assert {row["case"] for row in doc["targets"]} >= {"send_1k", "send_batch_100b", "pull_100b",
                                                       "send_1k_at_10k"}
    assert "send_1k" in stderr  # the table
    assert list(scratch.iterdir()) == []  # the store was removed


def test_bench_broker_sync_flush_single_case(tmp_path: Path) -> None:
    proc = _bench("--quick", "--duration", "0.3", "--only", "send_100b", "--flush", "sync",
                  "--codec", "rocketmq", "--producers", "1", "--connections", "2",
                  "--dir", str(tmp_path))
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    doc = json.loads(stdout)
    assert doc["run"]["flush_disk_type"] == "SYNC_FLUSH"
    assert doc["run"]["codec"] == "rocketmq"
    assert list(doc["cases"]) == ["send_100b"]
    case = doc["cases"]["send_100b"]
    assert case["msgs_s"] > 0 and case["workers"] == 1 and case["errors"] == {}


def test_bench_broker_interrupted_stops_server_and_workers(tmp_path: Path) -> None:
    proc = _bench("--duration", "120", "--only", "send_100b", "--dir", str(tmp_path))
    children: list[int] = []
    try:
        # the server and (spawned) workers are children of the bench process
        _wait_for(lambda: len(_children(proc.pid)) >= 4, 120, "the server and the workers")
        children = _children(proc.pid)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)  # the server's clean close can be slow on a busy machine
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
            for pid in _children_left(children):  # the server runs in its own session
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode != 0
    for pid in children:
        _wait_for(lambda pid=pid: _gone(pid), 30, f"process {pid} to exit")
    assert list(tmp_path.iterdir()) == []


def test_bench_broker_fails_fast_when_the_server_dies(tmp_path: Path) -> None:
    proc = _bench("--duration", "120", "--only", "send_100b", "--dir", str(tmp_path))
    try:
        _wait_for(lambda: len(_children(proc.pid)) >= 4, 120, "the server and the workers")
        server = next(pid for pid in _children(proc.pid)
                      if "--broker-port" in Path(f"/proc/{pid}/cmdline").read_text())
        children = _children(proc.pid)
        os.kill(server, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)  # long before the 120 s case would end
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0
    assert "server died" in stderr, stderr
    for pid in children:
        _wait_for(lambda pid=pid: _gone(pid), 30, f"process {pid} to exit")
    assert list(tmp_path.iterdir()) == []


def test_bench_broker_rejects_unknown_case() -> None:
    result = CliRunner().invoke(cli, ["bench", "broker", "--only", "nope"])
    assert result.exit_code != 0
    assert "nope" in result.output
