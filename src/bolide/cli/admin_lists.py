"""``bolide admin`` batch commands with mqadmin's file formats: updateTopicList (a JSON array of
TopicConfig), updateSubGroupList (a JSON array of SubscriptionGroupConfig) and exportMetadata
(the topics and groups of applications, as mqadmin writes them)."""

from __future__ import annotations

from typing import Any

import click

from bolide.cli.admin_common import (
    admin_options,
    emit,
    export_dir_option,
    table,
    target_options,
    with_admin,
    write_export,
)
from bolide.client.admin_lists import read_group_list, read_topic_list
from bolide.client.errors import ClientConfigError

FILE = click.Path(exists=True, dir_okay=False)


@click.command("updateTopicList")
@admin_options
@click.option("-f", "--file", "path", required=True, type=FILE,
              help='JSON array of TopicConfig: [{"topicName": "T", "readQueueNums": 8, '
                   '"writeQueueNums": 8, "perm": 6}, ...].')
@click.option("-b", "--broker-addr", help="Create on this broker only (host:port).")
@click.option("-c", "--cluster", help="Create on every master of this cluster (default: every master).")
def update_topic_list(namesrv: str, output: str, path: str, broker_addr: str | None,
                      cluster: str | None) -> None:
    """Create or update the topics of a file on brokers, one request per broker (18; 17 per
    topic with RocketMQ 4.9)."""
    try:
        topics = read_topic_list(path)
    except ClientConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--file") from None
    addrs = with_admin(namesrv, lambda admin: admin.create_topic_list(topics, broker_addr=broker_addr,
                                                                      cluster=cluster))
    rows = [[tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.order] for tc in topics]
    emit(output, {"topics": [tc.to_json_obj() for tc in topics], "brokers": addrs},
         table(f"{len(topics)} topics created or updated", ["topic", "readQueueNums", "writeQueueNums",
                                                            "perm", "order"], rows),
         table(None, ["broker"], ([a] for a in addrs)),
         note=None if topics else f"{path} lists no topic: nothing was sent")


@click.command("updateSubGroupList")
@admin_options
@click.option("-f", "--file", "path", required=True, type=FILE,
              help='JSON array of SubscriptionGroupConfig: [{"groupName": "G", "retryMaxTimes": 16}, ...].')
@click.option("-b", "--broker-addr", help="Only on this broker (host:port).")
@click.option("-c", "--cluster", help="On every master of this cluster (default: every master).")
def update_sub_group_list(namesrv: str, output: str, path: str, broker_addr: str | None,
                          cluster: str | None) -> None:
    """Create or update the consumer groups of a file on brokers, one request per broker (225;
    200 per group with RocketMQ 4.9)."""
    try:
        groups = read_group_list(path)
    except ClientConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--file") from None
    addrs = with_admin(namesrv, lambda admin: admin.create_subscription_group_list(
        groups, broker_addr=broker_addr, cluster=cluster))
    emit(output, {"groups": groups, "brokers": addrs},
         table(f"{len(groups)} groups created or updated", ["group"], ([g["groupName"]] for g in groups)),
         table(None, ["broker"], ([a] for a in addrs)),
         note=None if groups else f"{path} lists no group: nothing was sent")


@click.command("exportMetadata")
@admin_options
@target_options
@export_dir_option
@click.option("-t", "--topic", "topics_only", is_flag=True, help="Only the topics (topic.json).")
@click.option("-g", "--sub-group", "groups_only", is_flag=True,
              help="Only the consumer groups (subscriptionGroup.json).")
@click.option("-s", "--special-topic", is_flag=True, help="Also the retry and dead letter topics.")
def export_metadata(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                    file_path: str, topics_only: bool, groups_only: bool, special_topic: bool) -> None:
    """The topics and consumer groups of applications on the brokers, into metadata.json (as
    mqadmin exportMetadata writes it: a topic's queues summed over its brokers), to keep or to
    create again elsewhere (21, 305, 201 per master)."""
    if topics_only and groups_only:
        raise click.UsageError("give -t or -g, not both (neither: both in metadata.json)")
    doc: dict[str, Any] = with_admin(namesrv, lambda admin: admin.export_metadata(
        broker_addr=broker_addr, cluster=cluster, special=special_topic))
    name = "metadata.json"
    if topics_only:
        doc.pop("subscriptionGroupTable")
        name = "topic.json"
    elif groups_only:
        doc.pop("topicConfigTable")
        name = "subscriptionGroup.json"
    path = write_export(file_path, name, doc)
    counts = {"topics": len(doc.get("topicConfigTable", {})),
              "groups": len(doc.get("subscriptionGroupTable", {}))}
    emit(output, {"file": str(path), **counts},
         note=f"export {path} success: {counts['topics']} topics, {counts['groups']} consumer groups")


COMMANDS = (export_metadata, update_topic_list, update_sub_group_list)
