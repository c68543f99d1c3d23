"""``bolide store``: the embedded store quick start and offline tools."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from bolide.cli.store_tools import COMMANDS, store_config
from bolide.common import Message
from bolide.store import MessageStore, StoreConfig
from bolide.store.verify import verify_store


@click.group()
def store() -> None:
    """Work with a store directory (offline tools and the embedded demo)."""


def _config(path: str, conf: str | None) -> StoreConfig:
    return store_config(path, conf)


@store.command()
@click.option("--store", "path", default="./store", show_default=True, help="Store directory.")
@click.option("-c", "--config", "conf", help="A RocketMQ broker.conf to take settings from.")
@click.option("--count", default=10, show_default=True, help="Messages to write.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def demo(path: str, conf: str | None, count: int, output: str) -> None:
    """Write and read back a few messages with the embedded store."""
    console = Console(quiet=output == "json")
    config = _config(path, conf)
    with MessageStore(config) as st:
        report = st.recovery_report
        console.print(f"[bold]Opened[/] {Path(path).resolve()} — {report.summary()}")
        first = None
        for i in range(count):
            r = st.put_message(Message("TopicTest", f"Hello Bolide {i}".encode(), tags="TagA",
                                       keys=[f"demo-{i}"]), queue_id=0)
            first = r if first is None else first
            if not r.ok:
                raise click.ClickException(f"put failed: {r.status.value}: {r.remark}")
        st.wait_dispatched()
        assert first is not None
        g = st.get_message("demo_group", "TopicTest", 0, first.queue_offset, max_count=count)
        if output == "json":
            click.echo(json.dumps({
                "store": str(Path(path).resolve()), "topic": "TopicTest", "queue_id": 0,
                "queue_max_offset": st.get_max_offset_in_queue("TopicTest", 0),
                "messages": [{"queue_offset": m.queue_offset, "commit_log_offset": m.commit_log_offset,
                              "body": m.body.decode(), "msg_id": m.msg_id} for m in g.messages],
            }, indent=2))
        for m in g.messages:
            console.print(f"  queue offset {m.queue_offset:>6}  commitlog {m.commit_log_offset:>10}"
                          f"  {m.body.decode()!r}  id {m.msg_id}")
        console.print(f"Wrote {count} messages to TopicTest queue 0; "
                      f"queue now holds {st.get_max_offset_in_queue('TopicTest', 0)}.")
        console.print(f"CommitLog segments: {config.commit_log_dir.resolve()}")
        console.print(f"ConsumeQueue:       {(config.consume_queue_dir / 'TopicTest' / '0').resolve()}")


@store.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("-c", "--config", "conf", help="A RocketMQ broker.conf (for segment sizes).")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify(path: str, conf: str | None, output: str) -> None:
    """Check a store (an fsck): record CRCs and chain, CommitLog <-> ConsumeQueue, index
    chains, config files, compaction files. Exit 1 on problems, each named with its global offset."""
    config = _config(path, conf)
    total = sum(p.stat().st_size for p in config.commit_log_dir.glob("*")) if (
        config.commit_log_dir.is_dir()) else 0
    with Progress(TextColumn("verify"), BarColumn(), DownloadColumn(binary_units=True),
                  TransferSpeedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True,
                  disable=output == "json") as bar:
        task = bar.add_task("commitlog", total=total or None)
        started = time.perf_counter()
        report = verify_store(path, config, progress=lambda n: bar.advance(task, n))
        elapsed = time.perf_counter() - started
    if output == "json":
        click.echo(json.dumps({**report.to_json(), "seconds": round(elapsed, 3)}, indent=2))
    else:
        rate = report.bytes_checked / elapsed / 2**20 if elapsed > 0 else 0.0
        click.echo(f"{report.records} records, {report.bytes_checked} bytes ({rate:.0f} MiB/s), "
                   f"{report.queues} queues, {report.queue_entries} queue entries, "
                   f"{report.index_files} index files, {report.index_entries} index entries, "
                   f"{report.config_files} config files"
                   + (f", {report.compaction_queues} compacted queues ({report.compaction_records} "
                      "records)" if report.compaction_queues else ""))
        if report.deleted_queue_records:
            click.echo(f"{report.deleted_queue_records} records of deleted queues (skipped "
                       "until retention removes them)")
        for p in report.warnings:
            click.echo(f"WARNING {p}")
        for p in report.problems:
            click.echo(f"PROBLEM {p}")
        click.echo("OK" if report.ok else f"{len(report.problems)} problem(s): `bolide store "
                   "repair --dry-run` shows what repair would do")
    sys.exit(0 if report.ok else 1)


for _command in COMMANDS:
    store.add_command(_command)
