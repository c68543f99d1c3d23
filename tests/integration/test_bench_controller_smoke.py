"""``bench/controller_writes.py --changes 20`` runs a lone controller and a group of three as
real processes and prints one JSON document of the expected shape (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "controller_writes.py"


def test_controller_writes_runs(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--changes", "20", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert list(doc) == ["lone", "group_of_3"]
    for setup, size in (("lone", 1), ("group_of_3", 3)):
        figures = doc[setup]
        assert figures["changes"] == 20
        assert 0 < figures["p50_ms"] <= figures["p99_ms"] and figures["changes_per_s"] > 0
        assert len(figures["controllers"]) == size
        assert all(c["peak_rss_mib"] > 0 and c["anon_mib"] > 0 for c in figures["controllers"])
    assert list(tmp_path.iterdir()) == []  # the scratch directory was removed
