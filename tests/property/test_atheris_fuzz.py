"""Coverage-guided fuzzing with atheris (:mod:`bolide.testing.fuzz`): each target runs a fixed
number of inputs from a fixed seed, in a child process (libFuzzer owns it: a crash in the
compiled code ends it with the input saved). The decoders may refuse an input only with
ProtocolError, and the compiled twins must agree with their Python versions. Longer runs:
``make fuzz``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bolide.testing.fuzz import TARGETS
from conftest import unavailable

RUNS = {"records": 4000, "decoder": 2500}  # numpy and Arrow per input; the others 10,000


def _atheris_or_skip() -> None:
    try:
        import atheris  # noqa: F401
    except ImportError:
        unavailable("atheris is not installed (make test installs it; or pip install atheris)")


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_target_finds_nothing(target: str, tmp_path: Path) -> None:
    _atheris_or_skip()
    proc = subprocess.run(
        [sys.executable, "-m", "bolide.testing.fuzz", target, f"-runs={RUNS.get(target, 10000)}",
         "-seed=1", f"-artifact_prefix={tmp_path}/", str(tmp_path / "corpus")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    found = sorted(p.name for p in tmp_path.iterdir() if p.name != "corpus")
    assert proc.returncode == 0 and not found, (
        f"{target}: exit {proc.returncode}, saved {found}\n{proc.stderr[-3000:]}")


def test_an_unknown_target_names_the_known_ones() -> None:
    proc = subprocess.run([sys.executable, "-m", "bolide.testing.fuzz", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "frames" in proc.stderr
