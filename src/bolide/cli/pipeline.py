"""``bolide pipeline``: the offline Spark jobs (archive, lag-report, rebuild-index).

Each command runs on a local Spark (``--master local[*]`` by default) or on a cluster when
this file is what spark-submit runs (the master is then spark-submit's)::

    spark-submit --master spark://host:7077 \
        "$(python -c 'import bolide.cli.pipeline as m; print(m.__file__)')" \
        archive /data/store /data/archive --older-than-hours 48
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from bolide.cli.store_tools import store_config

_MASTER = click.option("--master", default=None,
                       help="Spark master URL (default local[*]; under spark-submit, its own).")
_OUTPUT = click.option("--output", type=click.Choice(["text", "json"]), default="text",
                       show_default=True)


@contextmanager
def spark_session(job: str, master: str | None) -> Iterator[Any]:
    """A SparkSession for one job, with Bolide's data sources registered.

    An active session (a notebook's, a test's) is reused and left running; under
    spark-submit the master comes from spark-submit; otherwise a local one is started with
    this interpreter as the executors' Python, and stopped at the end.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise click.ClickException("pyspark is not installed: pip install 'bolide[spark]' "
                                   "(Spark also needs Java 17 on PATH)") from exc
    from bolide.spark import register

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        register(active)
        yield active
        return
    builder = SparkSession.builder.appName(f"bolide-pipeline-{job}")
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # started by spark-submit
    if master is not None or not submitted:
        builder = builder.master(master or "local[*]")
        for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            os.environ.setdefault(name, sys.executable)
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def _emit(doc: dict[str, Any], output: str, text: str) -> None:
    if output == "json":
        click.echo(json.dumps(doc, indent=2, default=str))
    else:
        click.echo(text)


@click.group()
def pipeline() -> None:
    """Offline jobs on Spark over store files: archive, lag-report, rebuild-index."""


@pipeline.command()
@click.argument("store_dir", type=click.Path(file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--older-than-hours", type=float, required=True,
              help="Export the segments whose newest message is older than this.")
@click.option("-t", "--topic", "topics", multiple=True,
              help="Only these topics (repeatable; the same set on every run into OUT_DIR).")
@_MASTER
@_OUTPUT
def archive(store_dir: str, out_dir: str, older_than_hours: float, topics: tuple[str, ...],
            master: str | None, output: str) -> None:
    """Export old CommitLog segments to Parquet under OUT_DIR, partitioned by topic and date.

    Idempotent: OUT_DIR/_bolide_manifest.json lists what earlier runs exported, and those
    segments are skipped. Run it more often than fileReservedTime deletes segments.
    """
    from bolide.spark.jobs.archive import archive as run_archive

    console = Console(stderr=True)
    with spark_session("archive", master) as spark, console.status("archiving segments..."):
        try:
            result = run_archive(spark, store_dir, out_dir, older_than_hours,
                                 topics=list(topics) or None)
        except (ValueError, RuntimeError) as exc:
            raise click.ClickException(str(exc)) from exc
    doc = asdict(result)
    text = (f"exported {len(result.segments_exported)} segment(s), {result.rows} rows, "
            f"{result.bytes} Parquet bytes; skipped {len(result.segments_skipped)} already "
            f"archived; manifest {result.manifest_path}")
    _emit(doc, output, text)


@pipeline.command("lag-report")
@click.option("--store", "store_dir", type=click.Path(file_okay=False),
              help="Read offsets and queues from this store directory (offline).")
@click.option("-n", "--namesrv", help="Or ask the brokers through this NameServer (online).")
@click.option("-g", "--group", "groups", multiple=True, help="Only these consumer groups.")
@click.option("--broker-name", default="broker-a", show_default=True,
              help="The brokerName to show for an offline store.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Where report.json, report.txt and lag.png go.")
@_MASTER
@_OUTPUT
def lag_report(store_dir: str | None, namesrv: str | None, groups: tuple[str, ...],
               broker_name: str, out_dir: str, master: str | None, output: str) -> None:
    """Consumer lag per group, topic and queue: a table, JSON and a PNG chart."""
    from bolide.spark.jobs.lag_report import LagReportError, write_report
    from bolide.spark.jobs.lag_report import lag_report as run_lag_report

    if (store_dir is None) == (namesrv is None):
        raise click.UsageError("give either --store DIR (offline) or -n NAMESRV (online)")
    console = Console(stderr=True)
    with spark_session("lag-report", master) as spark, console.status("computing lag..."):
        try:
            df = run_lag_report(spark, store_dir=store_dir, namesrv=namesrv,
                                groups=list(groups) or None, broker_name=broker_name)
            files = write_report(df, out_dir)
        except LagReportError as exc:
            raise click.ClickException(str(exc)) from exc
    totals = json.loads(Path(files.json).read_text())["totals"]  # as write_report computed them
    doc = {"totals": totals, "files": {k: str(v) for k, v in files._asdict().items()}}
    _emit(doc, output, Path(files.txt).read_text() + f"\nchart: {files.png}")


@pipeline.command("rebuild-index")
@click.argument("store_dir", type=click.Path(exists=True, file_okay=False))
@click.option("-c", "--config", "conf", help="The broker.conf the store was written with.")
@click.option("--consume-queue/--no-consume-queue", default=True, show_default=True)
@click.option("--index/--no-index", default=True, show_default=True)
@click.option("--force", is_flag=True, help="Replace existing ConsumeQueue / index files.")
@_MASTER
@_OUTPUT
def rebuild_index(store_dir: str, conf: str | None, consume_queue: bool, index: bool,
                  force: bool, master: str | None, output: str) -> None:
    """Rebuild a stopped store's ConsumeQueue and index files from its CommitLog."""
    from bolide.spark.jobs.rebuild_index import RebuildRefused
    from bolide.spark.jobs.rebuild_index import rebuild_index as run_rebuild

    config = store_config(store_dir, conf)
    console = Console(stderr=True)
    with spark_session("rebuild-index", master) as spark, console.status("rebuilding..."):
        try:
            result = run_rebuild(spark, store_dir, consume_queue=consume_queue, index=index,
                                 force=force, config=config)
        except RebuildRefused as exc:
            raise click.ClickException(str(exc)) from exc
    doc = result.to_dict()
    text = (f"scanned {result.segments} segment(s), {result.records} records; wrote "
            f"{result.queue_entries} ConsumeQueue entries in {result.queue_files} file(s) for "
            f"{result.queues} queue(s) and {result.index_entries} index entries in "
            f"{result.index_files} file(s)")
    _emit(doc, output, text)


if __name__ == "__main__":  # run by spark-submit (see the module docstring)
    pipeline(prog_name="bolide pipeline")
