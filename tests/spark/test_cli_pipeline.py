"""``bolide pipeline archive | lag-report | rebuild-index`` end to end: in-process on the test
session, and the archive once through spark-submit (the way a cluster runs it), in the
background while the others run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import bolide.cli.pipeline as pipeline_cli
from bolide.cli.main import cli
from bolide.common import Message
from bolide.store import MessageStore, StoreConfig
from bolide.store.config_files import ConsumerOffsetManager

pytestmark = pytest.mark.spark

SEGMENT = 32 * 1024


def _config(root: Path) -> StoreConfig:
    return StoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=SEGMENT,
                       mapped_file_size_consume_queue=20 * 100)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 messages over several segments, two topics, a group with committed offsets; plus
    the broker.conf it was written with."""
    root = tmp_path_factory.mktemp("cli-pipeline") / "store"
    with MessageStore(_config(root)) as s:
        for i in range(300):
            s.put_message(Message(("Orders", "Audit")[i % 2], b"%04d" % i + bytes(300),
                                  keys=[f"k{i}"]), queue_id=i % 2)
        assert s.wait_dispatched()
    offsets = ConsumerOffsetManager.in_store(root)
    offsets.commit("billing", "Orders", 0, 70)
    offsets.commit("billing", "Orders", 1, 0)
    offsets.persist()
    (root.parent / "broker.conf").write_text(
        f"storePathRootDir={root}\nmapedFileSizeCommitLog={SEGMENT}\nmapedFileSizeConsumeQueue=2000\n")
    return root


def _run(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["pipeline", *args, "--output", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_archive_then_nothing_left_to_archive(spark: Any, store: Path, tmp_path: Path) -> None:
    first = _run("archive", str(store), str(tmp_path / "archive"), "--older-than-hours", "0")
    assert len(first["segments_exported"]) >= 3 and first["rows"] > 0
    again = _run("archive", str(store), str(tmp_path / "archive"), "--older-than-hours", "0")
    assert again["segments_exported"] == [] and again["rows"] == 0
    rows = spark.read.parquet(str(tmp_path / "archive")).count()
    assert rows == first["rows"]


def test_lag_report_offline(spark: Any, store: Path, tmp_path: Path) -> None:
    doc = _run("lag-report", "--store", str(store), "-g", "billing", "--out", str(tmp_path / "lag"))
    assert [(t["group"], t["topic"], t["brokerOffset"], t["consumerOffset"], t["lag"])
            for t in doc["totals"]] == [("billing", "Orders", 150, 70, 80)]
    assert Path(doc["files"]["png"]).read_bytes().startswith(b"\x89PNG")
    result = CliRunner().invoke(cli, ["pipeline", "lag-report", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "--store DIR" in result.output


def test_rebuild_index_restores_lost_queues(spark: Any, store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    originals = {p.relative_to(copy): p.read_bytes()
                 for p in (copy / "consumequeue").rglob("*") if p.is_file() and p.read_bytes().strip(b"\0")}
    shutil.rmtree(copy / "consumequeue")
    shutil.rmtree(copy / "index")
    doc = _run("rebuild-index", str(copy), "-c", str(store.parent / "broker.conf"))
    assert doc["queue_entries"] == 300 and doc["index_entries"] >= 300
    for rel, data in originals.items():
        assert (copy / rel).read_bytes() == data, rel
    refused = CliRunner().invoke(cli, ["pipeline", "rebuild-index", str(copy)])
    assert refused.exit_code != 0 and "force" in refused.output
    with MessageStore(_config(copy)) as s:
        assert s.get_max_offset_in_queue("Orders", 0) == 150
        assert len(s.query_message("Audit", "k1")) == 1


@dataclass
class Submitted:
    proc: subprocess.Popen[bytes]
    out_dir: Path
    stdout: Path
    stderr: Path


@pytest.fixture(scope="module", autouse=True)
def submitted(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Submitted]:
    """The archive job through spark-submit, started with the module so that its own JVM and
    driver start while the tests above run in the session (it only reads the store)."""
    import pyspark

    run = tmp_path_factory.mktemp("spark-submit")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    with (run / "stdout").open("wb") as out, (run / "stderr").open("wb") as err:
        proc = subprocess.Popen(
            [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
             "--driver-java-options", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",  # starts faster
             pipeline_cli.__file__, "archive", str(store), str(run / "archive"),
             "--older-than-hours", "0", "--output", "json"],
            stdout=out, stderr=err, env=env, start_new_session=True)
    job = Submitted(proc, run / "archive", run / "stdout", run / "stderr")
    try:
        yield job
    finally:
        if job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)
            job.proc.wait(30)


def test_archive_through_spark_submit(submitted: Submitted) -> None:
    """The job file as a cluster runs it: spark-submit starts the driver, the master is its."""
    returncode = submitted.proc.wait(240)
    stdout = submitted.stdout.read_text()
    assert returncode == 0, submitted.stderr.read_text()[-3000:]
    doc = json.loads(stdout[stdout.index("{"):])
    assert len(doc["segments_exported"]) >= 3
    manifest = json.loads((submitted.out_dir / "_bolide_manifest.json").read_text())
    assert sum(e["rows"] for e in manifest["segments"]) == doc["rows"]
