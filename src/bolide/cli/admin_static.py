"""``bolide admin`` commands for static topics (RocketMQ 5's logic queues): updateStaticTopic and
remappingStaticTopic, with mqadmin's options (:mod:`bolide.client.admin_static`).

Like mqadmin they write the mappings before and after the change to
``<tmpdir>/<topic>-<epoch>.before`` and ``.after`` and print those paths; ``-mf`` (or ``-f``)
sends the brokers the mappings of such a file instead of planning a change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import click

from bolide.cli.admin_common import admin_options, console, print_json, table, with_admin
from bolide.client.admin import Admin
from bolide.client.admin_static import StaticTopicChange
from bolide.protocol.static_topic_checks import build_mapping_items, details

TOPIC = click.option("-t", "--topic", required=True, help="The topic name.")
BROKERS = click.option("-b", "--brokers", help="The target brokers' names, comma separated.")
CLUSTERS = click.option("-c", "--clusters", help="The target clusters (all their brokers), comma separated.")
MAP_FILE = click.option("-mf", "-f", "--mapFile", "map_file", type=click.Path(dir_okay=False),
                        help="Send the mappings of this file (a .before/.after file these commands "
                             "write) instead of planning a change.")
FORCE = click.option("-fr", "--forceReplace", "force", type=click.BOOL, default=False, show_default=True,
                     help="Have the brokers take the mappings even where they contradict theirs.")
TMP_DIR = click.option("--tmp-dir", type=click.Path(file_okay=False),
                       help="Where to write the mapping files (default: the system's temp directory, "
                            "as mqadmin's java.io.tmpdir).")


def _one_target(brokers: str | None, clusters: str | None, map_file: str | None) -> None:
    given = [name for name, value in (("-b", brokers), ("-c", clusters), ("-mf", map_file)) if value]
    if len(given) != 1:
        raise click.UsageError("give one of -b brokers, -c clusters or -mf mapping-file"
                               + (f" (not {' and '.join(given)})" if given else ""))


def _report(output: str, change: StaticTopicChange) -> None:
    """mqadmin's lines naming the files, then the logic queues and the writes (or one JSON
    document)."""
    plan = change.plan
    ones = build_mapping_items(details(plan.broker_config_map), replace=True, check_consistence=False)
    queues = [{"queueId": gid, "broker": one.bname, "physicalQueueId": one.items[-1].queue_id,
               "logicOffset": one.items[-1].logic_offset, "items": len(one.items)}
              for gid, one in sorted(ones.items())]
    writes = [{"step": step, "broker": broker, "addr": addr} for step, broker, addr in change.writes]
    if output == "json":
        print_json({"topic": plan.topic, "type": plan.type, "epoch": plan.epoch,
                    "totalQueues": len(queues), "oldMappingFile": str(change.old_file or ""),
                    "newMappingFile": str(change.new_file or ""),
                    "brokerToMapIn": sorted(plan.broker_to_map_in),
                    "brokerToMapOut": sorted(plan.broker_to_map_out), "queues": queues, "writes": writes})
        return
    if change.old_file is not None:
        click.echo(f"The old mapping data is written to file {change.old_file}")
    if change.new_file is not None:
        click.echo(f"The new mapping data is written to file {change.new_file}")
    out = console()
    out.print(table(f"Logic queues of {plan.topic} (epoch {plan.epoch})",
                    ["queueId", "broker", "physicalQueueId", "logicOffset", "items"],
                    ([q["queueId"], q["broker"], q["physicalQueueId"], q["logicOffset"], q["items"]]
                     for q in queues)))
    out.print(table("Mappings sent (UPDATE_AND_CREATE_STATIC_TOPIC)", ["step", "broker", "addr"],
                    ([w["step"], w["broker"], w["addr"]] for w in writes)))


def _run(namesrv: str, output: str, job: Callable[[Admin], Awaitable[StaticTopicChange]]) -> None:
    _report(output, with_admin(namesrv, job))


@click.command("updateStaticTopic")
@admin_options
@TOPIC
@click.option("-qn", "--totalQueueNum", "queue_num", type=click.IntRange(1, 1 << 16),
              help="The total number of logic queues (required without -mf).")
@BROKERS
@CLUSTERS
@MAP_FILE
@FORCE
@TMP_DIR
def update_static_topic(namesrv: str, output: str, topic: str, queue_num: int | None, brokers: str | None,
                        clusters: str | None, map_file: str | None, force: bool, tmp_dir: str | None) -> None:
    """Create a static topic with a fixed number of logic queues on brokers, or add queues to
    one (UPDATE_AND_CREATE_STATIC_TOPIC 513 to every broker of its clusters)."""
    _one_target(brokers, clusters, map_file)
    if queue_num is None and not map_file:
        raise click.UsageError("give the total number of logic queues with -qn N")
    topic = topic.strip()

    def job(admin: Admin) -> Awaitable[StaticTopicChange]:
        if map_file:
            return admin.apply_static_topic_file(topic, map_file, remap=False, force=force)
        assert queue_num is not None
        return admin.update_static_topic(topic, queue_num, brokers=[brokers or ""],
                                         clusters=[clusters or ""], force=force, temp_dir=tmp_dir)

    _run(namesrv, output, job)


@click.command("remappingStaticTopic")
@admin_options
@TOPIC
@BROKERS
@CLUSTERS
@MAP_FILE
@FORCE
@TMP_DIR
def remapping_static_topic(namesrv: str, output: str, topic: str, brokers: str | None, clusters: str | None,
                           map_file: str | None, force: bool, tmp_dir: str | None) -> None:
    """Move a static topic's logic queues onto other brokers, as evenly as can be with the fewest
    moves; messages already sent stay readable at their logic offsets."""
    _one_target(brokers, clusters, map_file)
    topic = topic.strip()

    def job(admin: Admin) -> Awaitable[StaticTopicChange]:
        if map_file:
            return admin.apply_static_topic_file(topic, map_file, remap=True, force=force)
        return admin.remap_static_topic(topic, brokers=[brokers or ""], clusters=[clusters or ""],
                                        force=force, temp_dir=tmp_dir)

    _run(namesrv, output, job)


COMMANDS: list[Any] = [update_static_topic, remapping_static_topic]
