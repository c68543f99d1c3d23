"""``bench/compaction.py`` runs end to end (no timing assertions: only that each case compacts
its queue down to one record per key in every file but the one being written)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "compaction.py"


def test_compaction_bench_quick_run() -> None:
    run = subprocess.run([sys.executable, str(BENCH), "--messages", "4000", "--file-units", "1000"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    few, many = (json.loads(line) for line in run.stdout.splitlines())
    assert (few["keys"], many["keys"]) == (100, 2000)
    for case in (few, many):
        assert case["passes"] >= 1 and case["compact_msgs_per_s"] > 0 and case["anon_mib_after"] > 0
    # files of 1,000 records: each but the one being written keeps one record per key
    assert few["units_left"] <= 100 + 1000 and few["units_left"] < few["messages"]
    assert many["units_left"] <= 2000 + 1000 and many["units_left"] < many["messages"]
