"""Every ```python block of docs/pipeline.md runs, in order and in one namespace, with a local
SparkSession and an in-process NameServer + Broker."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from spark_cluster import ServerThread, wait_for

from bolide.client.blocking import Admin

DOC = Path(__file__).resolve().parents[2] / "docs" / "pipeline.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M)

pytestmark = pytest.mark.spark


def test_the_guide_has_examples() -> None:
    assert len(BLOCKS) >= 5


def _routed(ns: str, topics: tuple[str, ...]) -> bool:
    with Admin(ns) as admin:
        try:
            return all(admin.queues(t) for t in topics)
        except Exception:
            return False


def test_examples_run(spark: Any, tmp_path: Path) -> None:
    st = ServerThread(tmp_path / "store").start()
    try:
        namespace: dict[str, Any] = {"spark": spark, "NAMESRV": st.namesrv, "TMP": str(tmp_path),
                                     "STORE": str(tmp_path / "store"),
                                     "__name__": "example"}
        for index, source in enumerate(BLOCKS):
            exec(compile(source, f"pipeline.md[{index}]", "exec"), namespace)
            if index == 0:  # the topics the first block created are routed before the others read
                wait_for(lambda: _routed(st.namesrv, ("Clicks", "Orders", "ClicksCopy")), "topic routes")
    finally:
        st.stop()
