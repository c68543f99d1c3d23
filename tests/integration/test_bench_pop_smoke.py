"""``bench/remoting_pop.py`` runs end to end against a ``bolide start`` child process (no timing
assertions: only that both ways of acknowledging take every message back)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "remoting_pop.py"


def test_pop_bench_quick_run() -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--messages", "2000", "--consumers", "2"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert set(doc["cases"]) == {"pop_ack_each", "pop_batch_ack"}
    assert all(case["msgs_s"] > 0 for case in doc["cases"].values())
    assert doc["broker"]["anon_peak_mib"] > 0
