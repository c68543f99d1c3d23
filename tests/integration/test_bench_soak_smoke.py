"""``bench/soak.py`` runs end to end against a ``bolide start`` child process for a few
seconds (no timing or memory assertions: only that every worker did its part and the
report has its sections)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


def test_soak_bench_short_run_reports() -> None:
    args = ["--minutes", "0.5", "--sample-s", "2", "--rate", "100"]
    run = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert doc["broker_alive_at_end"] is True
    counts = doc["counts"]
    for what in ("send", "poll", "receive", "create_topic", "consumer_progress", "runtime_info"):
        assert counts.get(what, 0) > 0, (what, counts, doc["errors"])
    assert counts["sent"] > 0 and counts["requests"] > 0
    anon = doc["anon_mib"]
    assert len(anon["series"]) >= 2 and anon["peak"] >= anon["first"] > 0
    assert "slope_mib_per_min_second_half" in anon and doc["peak_rss_mib"] > 0
    last = doc["tables"]["last"]
    assert {"Connections", "ClientChannels", "HeldPulls", "PopLeases", "Topics"} <= set(last), last
    assert isinstance(doc["errors"], dict)
