"""``bolide bench client`` runs end to end against a ``bolide start`` child process (no timing
assertions: only that every case of the target reports positive figures)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from bolide.cli.bench_client import CASES
from bolide.cli.main import cli


def test_bench_client_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "client.json"
    result = CliRunner().invoke(cli, ["bench", "client", "--quick", "--duration", "0.3", "--warmup", "0",
                                      "--dir", str(tmp_path / "data"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    cases = doc["targets"]["bolide"]
    assert set(cases) == set(CASES)
    for name, figures in cases.items():
        assert figures["messages"] > 0 and figures["msgs_s"] > 0, (name, figures)
    assert doc["run"]["rocketmq"] is None
    assert not (tmp_path / "data").exists()  # the scratch store (and the directory made for it) is gone


def test_no_bolide_needs_rocketmq() -> None:
    result = CliRunner().invoke(cli, ["bench", "client", "--no-bolide"])
    assert result.exit_code != 0 and "--rocketmq" in result.output
