"""``bolide admin`` commands for groups: updateSubGroup, setConsumeMode, deleteSubGroup, consumerProgress,
consumerConnection, producerConnection, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset,
getConsumerConfig."""

from __future__ import annotations

from typing import Any

import click

from bolide.cli.admin_common import (
    admin_options,
    emit,
    fmt_duration,
    fmt_time,
    kv_table,
    parse_time,
    table,
    with_admin,
)
from bolide.client.admin import LATEST, Admin
from bolide.client.admin_types import GroupProgress
from bolide.client.errors import MQBrokerError
from bolide.common.topic import RETRY_GROUP_TOPIC_PREFIX
from bolide.protocol.bodies.admin import Connection
from bolide.protocol.bodies.broker import SubscriptionGroupConfig
from bolide.protocol.codes import ResponseCode


@click.command("updateSubGroup")
@admin_options
@click.option("-g", "--group", required=True, help="Consumer group name.")
@click.option("-b", "--broker-addr", help="Only on this broker (host:port).")
@click.option("-c", "--cluster", help="On every master of this cluster (default: every master).")
@click.option("--consume-enable/--no-consume-enable", default=True, show_default=True)
@click.option("--broadcast/--no-broadcast", "broadcast", default=True, show_default=True,
              help="Allow broadcasting consumers.")
@click.option("-q", "--retry-queue-nums", default=1, show_default=True, type=click.IntRange(0, 64))
@click.option("-r", "--retry-max-times", default=16, show_default=True, type=click.IntRange(0, 64))
@click.option("--notify/--no-notify", default=True, show_default=True,
              help="Tell consumers to rebalance when the group's members change.")
@click.option("-o", "--consume-orderly/--no-consume-orderly", default=False, show_default=True,
              help="RocketMQ 5 (gRPC) consumers of the group receive each queue in order (FIFO).")
def update_sub_group(namesrv: str, output: str, group: str, broker_addr: str | None, cluster: str | None,
                     consume_enable: bool, broadcast: bool, retry_queue_nums: int, retry_max_times: int,
                     notify: bool, consume_orderly: bool) -> None:
    """Create or update a subscription group (200)."""
    config = SubscriptionGroupConfig(group_name=group, consume_enable=consume_enable,
                                     consume_broadcast_enable=broadcast, retry_queue_nums=retry_queue_nums,
                                     retry_max_times=retry_max_times,
                                     notify_consumer_ids_changed_enable=notify,
                                     consume_message_orderly=consume_orderly)
    addrs = with_admin(namesrv, lambda admin: admin.create_subscription_group(
        config, broker_addr=broker_addr, cluster=cluster))
    doc = {"group": config.to_json_obj(), "brokers": addrs}
    emit(output, doc, table(f"Group {group} created or updated", ["broker"], ([a] for a in addrs)),
         table(None, ["setting", "value"], sorted(config.to_json_obj().items())))


@click.command("setConsumeMode")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-g", "--group", required=True, help="Consumer group name.")
@click.option("-m", "--mode", required=True, type=click.Choice(["PULL", "POP"]),
              help="How the group's consumers take the topic's messages.")
@click.option("-q", "--pop-share-queue-num", default=0, show_default=True, type=int,
              help="In POP mode, each consumer also pops the queues of this many consumers after it "
                   "(0: every consumer pops every queue).")
@click.option("-b", "--broker-addr", help="Only on this broker (host:port).")
@click.option("-c", "--cluster", help="On every master of this cluster (default: every master).")
def set_consume_mode(namesrv: str, output: str, topic: str, group: str, mode: str, pop_share_queue_num: int,
                     broker_addr: str | None, cluster: str | None) -> None:
    """Pull or pop, for RocketMQ 5 push consumers whose queues the broker allocates (401)."""
    addrs = with_admin(namesrv, lambda admin: admin.set_consume_mode(
        topic, group, mode, pop_share_queue_num, broker_addr=broker_addr, cluster=cluster))
    doc = {"topic": topic, "group": group, "mode": mode, "popShareQueueNum": pop_share_queue_num,
           "brokers": addrs}
    emit(output, doc, table(f"Group {group} {'pops' if mode == 'POP' else 'pulls'} {topic}", ["broker"],
                            ([a] for a in addrs)))


@click.command("deleteSubGroup")
@admin_options
@click.option("-g", "--group", required=True)
@click.option("-b", "--broker-addr", help="Only on this broker (host:port).")
@click.option("-c", "--cluster", help="On every master of this cluster (default: every master).")
@click.option("--keep-offsets", is_flag=True, help="Keep the group's consumer offsets.")
def delete_sub_group(namesrv: str, output: str, group: str, broker_addr: str | None, cluster: str | None,
                     keep_offsets: bool) -> None:
    """Delete a subscription group and (unless --keep-offsets) its offsets (207)."""
    addrs = with_admin(namesrv, lambda admin: admin.delete_subscription_group(
        group, broker_addr=broker_addr, cluster=cluster, remove_offset=not keep_offsets))
    emit(output, {"group": group, "deleted": True, "offsetsRemoved": not keep_offsets, "brokers": addrs},
         table(f"Group {group} deleted", ["broker"], ([a] for a in addrs)))


def progress_table(p: GroupProgress, show_client: bool = False) -> Any:
    columns = ["topic", "brokerName", "queueId", "brokerOffset", "consumerOffset", "lag", "lagTime",
               "lastConsumed"] + (["client"] if show_client else [])
    return table(f"Progress of {p.group}", columns,
                 ([q.queue.topic, q.queue.broker_name, q.queue.queue_id, q.broker_offset, q.consumer_offset,
                   q.lag, fmt_duration(q.lag_ms), fmt_time(q.last_consumed_ms)]
                  + ([q.client or ""] if show_client else []) for q in p.queues))


@click.command("consumerProgress")
@admin_options
@click.option("-g", "--group", help="Consumer group (default: a summary of every group).")
@click.option("-t", "--topic", help="Only this topic.")
@click.option("-s", "--show-client", is_flag=True,
              help="With -g: the consumer holding each queue (asks each online consumer, 307).")
def consumer_progress(namesrv: str, output: str, group: str | None, topic: str | None,
                      show_client: bool) -> None:
    """Lag per queue, in messages and in store time (105, then 208 and 202 per broker)."""
    if show_client and not group:
        raise click.UsageError("--show-client needs -g GROUP")

    async def job(admin: Admin) -> list[GroupProgress]:
        if group:
            progress = await admin.consumer_progress(group, topic)
            if show_client:
                owners = await admin.queue_owners(group)
                for q in progress.queues:
                    q.client = owners.get(q.queue)
            return [progress]
        groups = [t[len(RETRY_GROUP_TOPIC_PREFIX):] for t in await admin.topic_list()
                  if t.startswith(RETRY_GROUP_TOPIC_PREFIX)]
        return [await admin.consumer_progress(g, topic) for g in groups]

    found = with_admin(namesrv, job)
    if group:
        p = found[0]
        note = (f"total lag {p.total_lag} messages, max {fmt_duration(p.max_lag_ms)}; consume TPS "
                f"{p.consume_tps:.2f}" if p.queues else
                f"no consume stats for group {group}: it has committed no offset yet (or the name is wrong)")
        emit(output, p.to_dict(), progress_table(p, show_client), note=note)
        return
    rows = [[p.group, len(p.queues), f"{p.consume_tps:.2f}", p.total_lag, fmt_duration(p.max_lag_ms)]
            for p in found]
    emit(output, {"groups": [p.to_dict() for p in found]},
         table("Consumer groups", ["group", "queues", "consumeTps", "lag", "maxLagTime"], rows))


def connection_rows(conns: list[Connection]) -> list[list[Any]]:
    return [[c.client_id, c.client_addr, c.language, c.version] for c in conns]


@click.command("consumerConnection")
@admin_options
@click.option("-g", "--group", required=True)
def consumer_connection(namesrv: str, output: str, group: str) -> None:
    """The group's online consumers and subscriptions (203)."""
    async def job(admin: Admin) -> Any:
        try:
            return await admin.consumer_connection(group)
        except MQBrokerError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            raise click.ClickException(f"no consumer of group {group!r} is online: start one, or check "
                                       "the group name with consumerProgress") from None

    conn = with_admin(namesrv, job)
    note = (f"consumeType {conn.consume_type}, messageModel {conn.message_model}, "
            f"consumeFromWhere {conn.consume_from_where}")
    emit(output, conn.to_json_obj(),
         table(f"Consumers of {group}", ["clientId", "clientAddr", "language", "version"],
               connection_rows(conn.connection_set)),
         table("Subscriptions", ["topic", "expression"],
               ([t, s.sub_string] for t, s in sorted(conn.subscription_table.items()))), note=note)


@click.command("producerConnection")
@admin_options
@click.option("-g", "--group", required=True, help="Producer group.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to (picks the brokers).")
def producer_connection(namesrv: str, output: str, group: str, topic: str) -> None:
    """The group's connected producers (204)."""
    async def job(admin: Admin) -> Any:
        try:
            return await admin.producer_connection(group, topic)
        except MQBrokerError as exc:
            if exc.code != ResponseCode.SYSTEM_ERROR:
                raise
            raise click.ClickException(f"no producer of group {group!r} is connected to the brokers of "
                                       f"{topic!r}: start one, or check the group name") from None

    conn = with_admin(namesrv, job)
    emit(output, conn.to_json_obj(), table(f"Producers of {group}", ["clientId", "clientAddr", "language",
                                                                    "version"],
                                           connection_rows(conn.connection_set)))


@click.command("resetOffsetByTime")
@admin_options
@click.option("-g", "--group", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-s", "--timestamp", "when", required=True,
              help="ms since the epoch, 'now', ISO time (2024-05-01T10:00:00) or yyyy-MM-dd#HH:mm:ss:SSS.")
@click.option("--dry-run", is_flag=True, help="Show the new offsets without committing them.")
def reset_offset_by_time(namesrv: str, output: str, group: str, topic: str, when: str, dry_run: bool) -> None:
    """Move the group's offsets on a topic to the first message stored at or after a time
    (29 per queue, then 15; with consumers online the brokers also hand the offsets to them, 222)."""
    _reset(namesrv, output, group, topic, parse_time(when), dry_run)


@click.command("skipAccumulatedMessage")
@admin_options
@click.option("-g", "--group", required=True)
@click.option("-t", "--topic", required=True)
@click.option("--dry-run", is_flag=True, help="Show the new offsets without committing them.")
def skip_accumulated_message(namesrv: str, output: str, group: str, topic: str, dry_run: bool) -> None:
    """Move the group's offsets on a topic past the last message of each queue: what is waiting
    is skipped (30 per queue, then 15; with consumers online the brokers also hand the offsets
    to them, 222)."""
    _reset(namesrv, output, group, topic, LATEST, dry_run)


def _reset(namesrv: str, output: str, group: str, topic: str, timestamp: int, dry_run: bool) -> None:
    plan = with_admin(namesrv, lambda admin: admin.reset_offset_by_time(group, topic, timestamp,
                                                                        dry_run=dry_run))
    note = ("dry run: nothing was committed" if dry_run else
            f"committed {len(plan.changes)} offsets for group {group}")
    if plan.online_consumers and plan.relayed_by:
        note += (f"; the brokers handed them to the {len(plan.online_consumers)} online consumer(s): "
                 "they go on from there (Java's lite pull consumer does not)")
    elif plan.online_consumers:
        note += (f"; {len(plan.online_consumers)} consumer(s) of the group are online: a running "
                 "consumer's next commit moves the offsets back")
    when = "the end of each queue" if timestamp == LATEST else fmt_time(timestamp) or timestamp
    emit(output, plan.to_dict(),
         table(f"Reset of {group} on {topic} to {when}",
               ["topic", "brokerName", "queueId", "oldOffset", "newOffset"],
               ([c.queue.topic, c.queue.broker_name, c.queue.queue_id,
                 "none" if c.old_offset is None else c.old_offset, c.new_offset] for c in plan.changes)),
         note=note)


@click.command("getConsumerConfig")
@admin_options
@click.option("-g", "--group", required=True)
@click.option("-b", "--broker-addr", help="This broker only (host:port).")
@click.option("-c", "--cluster", help="Every master of this cluster (default: every master).")
def get_consumer_config(namesrv: str, output: str, group: str, broker_addr: str | None,
                        cluster: str | None) -> None:
    """A consumer group's settings on brokers (201): retries, broadcast, order, ..."""
    configs = with_admin(namesrv, lambda admin: admin.subscription_group(group, broker_addr=broker_addr,
                                                                         cluster=cluster))
    doc = {addr: None if c is None else c.to_json_obj() for addr, c in configs.items()}
    tables = [kv_table(f"{group} on {addr}", {k: v for k, v in obj.items() if not isinstance(v, dict)})
              for addr, obj in doc.items() if obj is not None]
    missing = [addr for addr, c in configs.items() if c is None]
    emit(output, doc, *tables, note=f"no group {group!r} on {', '.join(missing)}" if missing else None)


@click.command("cloneGroupOffset")
@admin_options
@click.option("-s", "--source", required=True, help="The group whose offsets are copied.")
@click.option("-d", "--dest", required=True, help="The group that gets them.")
@click.option("-t", "--topic", required=True)
def clone_group_offset(namesrv: str, output: str, source: str, dest: str, topic: str) -> None:
    """Give a group the offsets another group has on a topic's queues (208, 15), e.g. to start
    a new group where an old one is."""
    cloned = with_admin(namesrv, lambda admin: admin.clone_group_offset(source, dest, topic))
    rows = [[mq.broker_name, mq.queue_id, offset] for mq, offset in cloned.items()]
    emit(output, {"source": source, "dest": dest, "topic": topic,
                  "offsets": [dict(zip(["brokerName", "queueId", "offset"], r, strict=True)) for r in rows]},
         table(f"{dest} now at {source}'s offsets on {topic}", ["brokerName", "queueId", "offset"], rows),
         note=None if rows else f"{source} has no offsets on {topic}: nothing was copied")


COMMANDS = (update_sub_group, set_consume_mode, delete_sub_group, consumer_progress, consumer_connection,
            producer_connection, reset_offset_by_time, skip_accumulated_message, clone_group_offset,
            get_consumer_config)
