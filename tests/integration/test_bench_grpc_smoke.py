"""``bench/grpc_endpoint.py`` runs end to end against a ``bolide start`` child process (no timing
assertions: only that it sends, receives everything it sent and reports the broker's memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grpc_endpoint.py"


def test_grpc_bench_quick_run() -> None:
    run = subprocess.run(
        [sys.executable, str(BENCH), "--seconds", "0.5", "--loaders", "1", "--concurrency", "4"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert doc["send_1k"]["msgs_s"] > 0 and doc["receive_ack"]["msgs"] > 0
    assert doc["receive_ack"]["msgs"] >= doc["send_1k"]["messages"]  # everything sent is received
    assert doc["broker"]["anon_peak_mib"] > 0
