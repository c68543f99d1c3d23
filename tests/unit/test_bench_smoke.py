"""`bolide bench store` runs end to end and prints its JSON document (no timing assertions)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from bolide.cli.main import cli

FIGURES = {"msgs_s", "mib_s", "mib_s_vs_disk", "peak_rss_mib", "anon_mib"}


def test_bench_store_quick_single_case(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = tmp_path / "results" / "store.json"
    result = CliRunner().invoke(cli, ["bench", "store", "--quick", "--only", "put_async_100b",
                                      "--dir", str(scratch), "--output", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert json.loads(out.read_text()) == doc
    assert {"cpu_count", "python", "platform"} <= doc["machine"].keys()
    assert doc["run"]["mode"] == "quick"
    assert list(doc["cases"]) == ["put_async_100b"]
    case = doc["cases"]["put_async_100b"]
    assert case.keys() >= FIGURES
    assert case["count"] == 20_000
    assert case["msgs_s"] > 0
    assert case["mib_s_vs_disk"] is None  # the disk case did not run
    assert list(scratch.iterdir()) == []  # the run's temporary directory was removed


def test_bench_store_rejects_unknown_case() -> None:
    result = CliRunner().invoke(cli, ["bench", "store", "--only", "nope"])
    assert result.exit_code != 0
