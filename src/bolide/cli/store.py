"""``bolide store``: the embedded store quick start and offline tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TransferSpeedColumn

from bolide.common import Message
from bolide.store import MessageStore, StoreConfig
from bolide.store.verify import verify_store


@click.group()
def store() -> None:
    """Work with a store directory (offline tools and the embedded demo)."""


def _config(path: str, conf: str | None) -> StoreConfig:
    if conf:
        return StoreConfig.from_properties(conf, store_path_root_dir=path)
    return StoreConfig(store_path_root_dir=path)


@store.command()
@click.option("--store", "path", default="./store", show_default=True, help="Store directory.")
@click.option("-c", "--config", "conf", help="A RocketMQ broker.conf to take settings from.")
@click.option("--count", default=10, show_default=True, help="Messages to write.")
def demo(path: str, conf: str | None, count: int) -> None:
    """Write and read back a few messages with the embedded store."""
    console = Console()
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
    """Check a store directory's consistency (CRC, record chain, ConsumeQueues). Exit 1 on problems."""
    config = _config(path, conf)
    total = sum(p.stat().st_size for p in config.commit_log_dir.glob("*")) if (
        config.commit_log_dir.is_dir()) else 0
    with Progress(TextColumn("verify"), BarColumn(), TransferSpeedColumn(),
                  console=Console(stderr=True), transient=True,
                  disable=output == "json") as bar:
        task = bar.add_task("commitlog", total=total or None)
        report = verify_store(path, config, progress=lambda n: bar.advance(task, n))
    if output == "json":
        click.echo(json.dumps({
            "ok": report.ok, "records": report.records, "bytes": report.bytes_checked,
            "commit_log_min": report.commit_log_min, "commit_log_end": report.commit_log_end,
            "queues": report.queues, "queue_entries": report.queue_entries,
            "problems": [{"where": p.where, "offset": p.offset, "message": p.message}
                         for p in report.problems],
        }, indent=2))
    else:
        click.echo(f"{report.records} records, {report.bytes_checked} bytes, "
                   f"{report.queues} queues, {report.queue_entries} queue entries")
        for p in report.problems:
            click.echo(f"PROBLEM {p}")
        click.echo("OK" if report.ok else f"{len(report.problems)} problem(s)")
    sys.exit(0 if report.ok else 1)
