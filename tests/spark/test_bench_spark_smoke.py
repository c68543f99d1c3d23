"""``bench/spark_pipeline.py --quick`` runs end to end and prints its JSON document (the
figures themselves are never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "spark_pipeline.py"


def test_spark_pipeline_bench_quick_run(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["benchmark"] == "spark_pipeline" and doc["master"] == "local[2]"
    for size, messages in (("100b", 5_000), ("1k", 2_000)):
        case = doc["sizes"][size]
        for read in ("broker_read", "broker_read_large_pulls", "store_read", "parquet_read"):
            assert case[read]["rows"] == messages, (size, read, case)
        assert case["sink"]["rows"] == 1_000 and case["server_exit_status"] == 0
        assert case["broker_memory"]["anon_mib"] > 0
    assert list(tmp_path.iterdir()) == []  # the stores were removed
