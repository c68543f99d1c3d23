"""``bench/spark_pipeline.py`` measures one body size end to end on the tests' SparkSession
(``main`` adds only its own session and the JSON document), each read timed once: every
figure comes out, on the number of rows written, and the store and server are gone
afterwards. Figures are never asserted."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from bolide.spark import register

pytestmark = pytest.mark.spark

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "spark_pipeline.py"


def bench_module() -> Any:
    spec = importlib.util.spec_from_file_location("spark_pipeline_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spark_pipeline_bench_one_size(spark: Any, tmp_path: Path) -> None:
    register(spark)
    case = bench_module().run_size(spark, tmp_path, 3_000, 100, 500, runs=1, warmup=0)
    for read in ("broker_read", "broker_read_large_pulls", "store_read", "parquet_read",
                 "python_source_ceiling", "store_read_body_only"):
        assert case[read]["rows"] == 3_000 and case[read]["rows_s"] > 0, (read, case)
    assert case["sink"]["rows"] == 500 and case["server_exit_status"] == 0
    assert case["broker_memory"]["anon_mib"] > 0 and case["store_vs_parquet"] > 0
    assert list(tmp_path.iterdir()) == []  # the store was removed
