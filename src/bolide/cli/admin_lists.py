"""``bolide admin`` batch commands with mqadmin's file formats: updateTopicList (a JSON array of
TopicConfig) and updateSubGroupList (a JSON array of SubscriptionGroupConfig)."""

from __future__ import annotations

import click

from bolide.cli.admin_common import admin_options, emit, table, with_admin
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


COMMANDS = (update_topic_list, update_sub_group_list)
