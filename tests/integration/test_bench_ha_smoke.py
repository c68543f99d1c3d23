"""``bench/ha_replication.py --quick`` runs a NameServer, a master and a slave as real processes
for both master roles, prints one JSON document of the expected shape, and the slave ends
with every byte of the master after the send load and after the catch-up (no timing
assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "ha_replication.py"
SEND_KEYS = ("msgs_s", "p50_ms", "p99_ms", "p999_ms", "replication_mib_s", "commit_log_mib_s",
             "lag_max_bytes", "lag_p99_bytes", "catch_up_after_load_s", "count")
CATCH_UP_KEYS = ("bytes", "seconds", "mib_s", "fill_messages", "slave_dispatched_s")
PROCESS_KEYS = ("peak_rss_mib", "anon_mib")


def test_ha_replication_quick(tmp_path: Path) -> None:
    out = tmp_path / "ha.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--dir", str(tmp_path / "scratch"),
                           "--output", str(out)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == doc
    assert doc["benchmark"] == "ha_replication" and doc["run"]["mode"] == "quick"
    assert {"cpu_count", "python", "platform"} <= doc["machine"].keys()
    assert list(doc["roles"]) == ["ASYNC_MASTER", "SYNC_MASTER"]
    for role, figures in doc["roles"].items():
        send, catch_up = figures["send"], figures["catch_up"]
        for key in SEND_KEYS:
            assert send[key] is not None and send[key] >= 0, (role, key, send)
        assert send["count"] > 0 and send["errors"] == {}, (role, send)
        assert send["p50_ms"] <= send["p99_ms"] <= send["p999_ms"], (role, send)
        assert send["lag_samples"] > 0 and send["lag_p99_bytes"] <= send["lag_max_bytes"]
        assert send["caught_up"], (role, send)
        assert send["slave_max_offset"] == send["master_max_offset"] > 0
        for key in CATCH_UP_KEYS:
            assert catch_up[key] is not None and catch_up[key] > 0, (role, key, catch_up)
        assert catch_up["caught_up"], (role, catch_up)
        assert catch_up["slave_max_offset"] == catch_up["master_max_offset"]
        assert catch_up["master_max_offset"] - send["master_max_offset"] >= 16 * 1024 * 1024
        for phase in (send, catch_up):
            for who in ("master", "slave"):
                for key in PROCESS_KEYS:
                    assert phase[who][key] > 0, (role, who, key, phase)
        assert figures["exit_status"] == {"master": 0, "slave": 0}  # SIGTERM closed them cleanly
    assert "SYNC_MASTER" in proc.stderr  # the summary table
    assert list((tmp_path / "scratch").iterdir()) == []  # the stores were removed
