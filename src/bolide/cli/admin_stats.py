"""``bolide admin`` statistics: statsAll (messages in and out of every topic and consumer group,
per second over the last minute and in the last 24 hours, and each group's accumulation)."""

from __future__ import annotations

import click

from bolide.cli.admin_common import admin_options, emit, table, with_admin
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


COMMANDS = [stats_all]
