"""How ``make test`` shares the suite between its pytest-xdist workers (tests/xdist_scheduling.py,
taken in by tests/conftest.py): a module's tests on one worker, the Spark modules together on one."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from xdist_scheduling import xdist_scope

SCHEDULING = Path(__file__).resolve().parents[1] / "xdist_scheduling.py"
MODULES = {"tests/unit/test_a.py": 4, "tests/unit/test_b.py": 4, "tests/spark/test_c.py": 2,
           "tests/interop/test_spark_d.py": 2}


def test_scopes() -> None:
    assert xdist_scope("tests/unit/common/test_topic.py::test_x[a-b]") == "tests/unit/common/test_topic.py"
    assert xdist_scope("tests/spark/test_cli_pipeline.py::test_lag_report_offline") == "spark"
    assert xdist_scope("tests/interop/test_spark_against_rocketmq.py::test_sink") == "spark"
    assert xdist_scope("tests/interop/test_store_compat_rocketmq.py::t") != "spark"


def test_each_module_runs_on_one_worker(tmp_path: Path) -> None:
    """A suite of small modules with the suite's own scheduling hooks, on two workers."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('suite_scheduling', {str(SCHEDULING)!r})\n"
        "suite = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(suite)\n"
        "pytest_xdist_make_scheduler = suite.pytest_xdist_make_scheduler\n"
        "pytest_collection_modifyitems = suite.pytest_collection_modifyitems\n")
    for module, count in MODULES.items():
        (tmp_path / module).parent.mkdir(exist_ok=True)
        (tmp_path / module).write_text("".join(f"def test_{i}():\n    pass\n" for i in range(count)))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), *MODULES], cwd=tmp_path, capture_output=True, text=True,
        timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", proc.stdout, re.M):
        workers[xdist_scope(nodeid)].add(worker)
    assert set(workers) == {xdist_scope(m) for m in MODULES}, proc.stdout[-3000:]
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
