"""``bolide admin`` commands that look inside one broker: brokerConsumeStats (every group's
progress there), producer (its producer connections), queryCq (ConsumeQueue entries), and
cleanExpiredCQ (ConsumeQueues whose messages are all gone) / cleanUnusedTopic (those of topics
the brokers no longer have), and deleteExpiredCommitLog."""

from __future__ import annotations

from typing import Any

import click

from bolide.cli.admin_common import admin_options, emit, fmt_time, table, target_options, with_admin
from bolide.client.admin import Admin
from bolide.protocol.bodies.admin import ConsumeStatsList, ProducerInfo, QueryConsumeQueueResponseBody


@click.command("brokerConsumeStats")
@admin_options
@click.option("-b", "--broker-addr", required=True, help="Broker address host:port.")
@click.option("-o", "--order", "order_only", is_flag=True, help="Only ordered topics.")
def broker_consume_stats(namesrv: str, output: str, broker_addr: str, order_only: bool) -> None:
    """Every consumer group's progress on one broker, per queue (317)."""
    stats: ConsumeStatsList = with_admin(
        namesrv, lambda admin: admin.broker_consume_stats(broker_addr, order_only=order_only))
    rows = [[mq.topic, group, mq.broker_name, mq.queue_id, w.broker_offset, w.consumer_offset,
             w.broker_offset - w.consumer_offset, fmt_time(w.last_timestamp)]
            for entry in stats.consume_stats_list for group, per_topic in sorted(entry.items())
            for cs in per_topic for mq, w in sorted(cs.offset_table.items())]
    doc = {"brokerAddr": stats.broker_addr, "totalDiff": stats.total_diff,
           "queues": [dict(zip(["topic", "group", "brokerName", "queueId", "brokerOffset",
                                "consumerOffset", "diff"], r[:7], strict=True)) for r in rows]}
    emit(output, doc, table(f"Consumer groups on {broker_addr}",
                            ["topic", "group", "brokerName", "queueId", "brokerOffset",
                             "consumerOffset", "diff", "lastConsumed"], rows),
         note=f"messages behind in all: {stats.total_diff}")


@click.command("producer")
@admin_options
@click.option("-b", "--broker-addr", required=True, help="Broker address host:port.")
def producer(namesrv: str, output: str, broker_addr: str) -> None:
    """The broker's producer connections by group (328)."""
    groups: dict[str, list[ProducerInfo]] = with_admin(
        namesrv, lambda admin: admin.producer_table(broker_addr))
    rows = [[group, p.client_id, p.remote_ip.lstrip("/"), p.language, p.version,
             fmt_time(p.last_update_timestamp)] for group, infos in sorted(groups.items()) for p in infos]
    emit(output, {group: [p.to_json_obj() for p in infos] for group, infos in sorted(groups.items())},
         table(f"Producers on {broker_addr}", ["group", "clientId", "clientAddr", "language", "version",
                                               "lastHeartbeat"], rows),
         note=None if rows else "no producer is connected to this broker")


@click.command("queryCq")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-q", "--queue-id", required=True, type=click.IntRange(0))
@click.option("-i", "--index", required=True, type=click.IntRange(0), help="First queue offset.")
@click.option("-c", "--count", default=10, show_default=True, type=click.IntRange(1, 10_000))
@click.option("-b", "--broker-addr", help="Broker address host:port (default: the topic's first broker).")
@click.option("-g", "--group", help="Also show this consumer group's subscription of the topic.")
def query_cq(namesrv: str, output: str, topic: str, queue_id: int, index: int, count: int,
             broker_addr: str | None, group: str | None) -> None:
    """ConsumeQueue entries of one queue: CommitLog offset, size and tag hash of each (321)."""
    async def job(admin: Admin) -> tuple[str, QueryConsumeQueueResponseBody]:
        addr = broker_addr or sorted(a for _, a in await admin.queues(topic))[0]
        return addr, await admin.consume_queue(addr, topic, queue_id, index, count, group)

    addr, body = with_admin(namesrv, job)
    rows = [[index + i, d.physic_offset, d.physic_size, d.tags_code] for i, d in enumerate(body.queue_data)]
    doc: dict[str, Any] = {"brokerAddr": addr, "minQueueIndex": body.min_queue_index,
                           "maxQueueIndex": body.max_queue_index,
                           "entries": [dict(zip(["queueOffset", "commitLogOffset", "size", "tagsCode"], r,
                                                strict=True)) for r in rows]}
    if group is not None:
        doc["subscription"] = body.subscription_data.to_json_obj() if body.subscription_data else None
        doc["filter"] = body.filter_data
    note = f"queue offsets {body.min_queue_index} to {body.max_queue_index} (exclusive) on {addr}"
    if not rows:
        note += f"; none at {index}"
    emit(output, doc, table(f"{topic} queue {queue_id}",
                            ["queueOffset", "commitLogOffset", "size", "tagsCode"], rows), note=note)


def _clean(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
           unused_topics_only: bool) -> None:
    answers: dict[str, str] = with_admin(namesrv, lambda admin: admin.clean_expired_cq(
        unused_topics_only=unused_topics_only, broker_addr=broker_addr, cluster=cluster))
    emit(output, {"brokers": answers},
         table("cleanUnusedTopic" if unused_topics_only else "cleanExpiredCQ",
               ["broker", "result"], sorted(answers.items())))


@click.command("cleanExpiredCQ")
@admin_options
@target_options
def clean_expired_cq(namesrv: str, output: str, broker_addr: str | None, cluster: str | None) -> None:
    """Delete the ConsumeQueues whose messages retention has all removed (306)."""
    _clean(namesrv, output, broker_addr, cluster, False)


@click.command("cleanUnusedTopic")
@admin_options
@target_options
def clean_unused_topic(namesrv: str, output: str, broker_addr: str | None, cluster: str | None) -> None:
    """Delete the ConsumeQueues of topics the broker no longer has, messages and all (316)."""
    _clean(namesrv, output, broker_addr, cluster, True)


@click.command("deleteExpiredCommitLog")
@admin_options
@target_options
def delete_expired_commit_log(namesrv: str, output: str, broker_addr: str | None,
                              cluster: str | None) -> None:
    """Delete expired CommitLog files (older than fileReservedTime) now, whatever deleteWhen says
    (329); the brokers do it in their next clean runs."""
    addrs = with_admin(namesrv, lambda admin: admin.delete_expired_commit_log(broker_addr=broker_addr,
                                                                                cluster=cluster))
    emit(output, {"brokers": addrs}, table("deleteExpiredCommitLog", ["broker"], ([a] for a in addrs)))


COMMANDS = [broker_consume_stats, producer, query_cq, clean_expired_cq, clean_unused_topic,
            delete_expired_commit_log]
