"""How ``make test`` shares the suite between its pytest-xdist workers: the scheduling hooks
that tests/conftest.py takes in. Apart from conftest so that tests/unit/test_suite_scheduling.py
can run them in a small suite of its own without importing the whole of the suite's conftest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def xdist_scope(nodeid: str) -> str:
    """Where ``make test`` (pytest-xdist, ``--dist loadgroup``) runs a test: the tests of a
    module on one worker, so module fixtures (a RocketMQ cluster) start once, and every Spark
    module (under ``tests/spark/``, or named ``test_spark_*``) on one, so one SparkSession
    serves them all."""
    module = nodeid.split("::", 1)[0]
    spark = module.startswith("tests/spark/") or Path(module).name.startswith("test_spark_")
    return "spark" if spark else module


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` schedules by :func:`xdist_scope`, from node ids alone (the
    ``xdist_group`` marks reach the scheduler through node ids that pytest 9.2 no longer lets
    a plugin change)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Spark tests come first: their long stretch on one worker overlaps everything else
    on the other. A test marked ``spark`` outside a Spark module is refused, as it would start
    a second SparkSession on the other worker."""
    spark, rest = [], []
    for item in items:
        in_spark = xdist_scope(item.nodeid) == "spark"
        if item.get_closest_marker("spark") is not None and not in_spark:
            raise pytest.UsageError(f"{item.nodeid} is marked spark: move it to tests/spark/ or "
                                    "name its module test_spark_*")
        (spark if in_spark else rest).append(item)
    items[:] = spark + rest
