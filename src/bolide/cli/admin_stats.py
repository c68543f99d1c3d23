"""``bolide admin`` statistics: statsAll (messages in and out of every topic and consumer group,
per second over the last minute and in the last 24 hours, and each group's accumulation) and
exportMetrics (each broker group's rates, counts and sizes into metrics.json)."""

from __future__ import annotations

from typing import Any

import click

from bolide.cli.admin_common import admin_options, emit, export_dir_option, table, with_admin, write_export
from bolide.client.admin_stats import TopicGroupStats


@click.command("statsAll")
@admin_options
@click.option("-a", "--active-topic", "active_only", is_flag=True,
              help="Only topics with messages in or out in the last 24 hours.")
@click.option("-t", "--topic", help="Only this topic.")
def stats_all(namesrv: str, output: str, active_only: bool, topic: str | None) -> None:
    """Topic and consumer group rates: messages in and out per second over the last minute, in
    the last 24 hours, and the messages each group has yet to consume (315, 300, 208)."""
    rows: list[TopicGroupStats] = with_admin(
        namesrv, lambda admin: admin.stats_all(topic, active_only=active_only))
    emit(output, [r.to_dict() for r in rows],
         table("Topics and consumer groups",
               ["topic", "group", "accumulation", "inTps", "outTps", "inMsg24Hour", "outMsg24Hour"],
               ([r.topic, r.group if r.group is not None else "", r.accumulation, f"{r.in_tps:.2f}",
                 "" if r.out_tps is None else f"{r.out_tps:.2f}", r.in_24h,
                 "NO_CONSUMER" if r.out_24h is None else r.out_24h] for r in rows)),
         note=None if rows else "no topic matched" + (" with traffic in the last 24 hours"
                                                       if active_only else ""))


@click.command("exportMetrics")
@admin_options
@click.option("-c", "--cluster", required=True, help="The cluster whose broker groups to report.")
@export_dir_option
def export_metrics(namesrv: str, output: str, cluster: str, file_path: str) -> None:
    """Each broker group's machine, messages per second and of the last day (plain, transaction
    and delayed), topic and group counts and its consumers' client versions, with the cluster's
    totals, into metrics.json (as mqadmin exportMetrics writes it; 106 (NS), 28, 26, 21, 201,
    315 and 203 per master)."""
    doc: dict[str, Any] = with_admin(namesrv, lambda admin: admin.export_metrics(cluster))
    path = write_export(file_path, "metrics.json", doc)
    tps, day = doc["totalData"]["totalTps"], doc["totalData"]["totalOneDayNum"]
    emit(output, {"file": str(path), **doc["totalData"]},
         table(f"Cluster {cluster}", ["total", "value"],
               [*([k, f"{v:.2f}"] for k, v in tps.items()), *([k, v] for k, v in day.items())]),
         note=f"export {path} success: {len(doc['evaluateReport'])} broker group(s)")


COMMANDS = [stats_all, export_metrics]
