"""``bolide admin consumerStatus``: what a group's online consumers report of themselves
(GET_CONSUMER_RUNNING_INFO, relayed by the broker to each consumer), and ``getConsumerStatus``:
their own offsets of a topic's queues (relayed likewise), as mqadmin's commands."""

from __future__ import annotations

from typing import Any

import click

from bolide.cli.admin_common import admin_options, emit, fmt_time, kv_table, table, with_admin
from bolide.client.admin import Admin
from bolide.client.errors import MQBrokerError
from bolide.protocol.bodies.admin import (
    PROP_CONSUME_TYPE,
    ConsumerConnection,
    ConsumerRunningInfo,
)
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.codes import ResponseCode


def running_info_doc(client_id: str, info: ConsumerRunningInfo) -> dict[str, Any]:
    """One consumer's report as JSON (queues as a list: their keys are objects)."""
    return {"clientId": client_id, "properties": info.properties,
            "subscriptions": [s.to_json_obj() for s in info.subscription_set],
            "queues": [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                        **pq.to_json_obj()} for mq, pq in sorted(info.mq_table.items())],
            "status": {topic: s.to_json_obj() for topic, s in sorted(info.status_table.items())},
            "jstack": info.jstack}


def _detail_tables(client_id: str, info: ConsumerRunningInfo) -> list[Any]:
    queues = [[mq.topic, mq.broker_name, mq.queue_id, pq.commit_offset, pq.cached_msg_count,
               f"{pq.cached_msg_min_offset}-{pq.cached_msg_max_offset}" if pq.cached_msg_count else "",
               "yes" if pq.locked else "", fmt_time(pq.last_pull_timestamp),
               fmt_time(pq.last_consume_timestamp)] for mq, pq in sorted(info.mq_table.items())]
    status = [[topic, f"{s.pull_rt:.2f}", f"{s.pull_tps:.2f}", f"{s.consume_rt:.2f}",
               f"{s.consume_ok_tps:.2f}", f"{s.consume_failed_tps:.2f}", s.consume_failed_msgs]
              for topic, s in sorted(info.status_table.items())]
    return [kv_table(f"Consumer {client_id}", info.properties),
            table("Subscriptions", ["topic", "expression", "version"],
                  ([s.topic, s.sub_string, s.sub_version] for s in info.subscription_set)),
            table("Queues held", ["topic", "broker", "queue", "commitOffset", "cached", "cachedOffsets",
                                  "locked", "lastPull", "lastConsume"], queues),
            table("Last minute, per topic", ["topic", "pullRT ms", "pullTPS", "consumeRT ms", "consumeOKTPS",
                                             "consumeFailedTPS", "failedMsgs (1 h)"], status)]


def _summary_row(client_id: str, version: int, info: ConsumerRunningInfo) -> list[Any]:
    figures = info.status_table.values()
    return [client_id, version, info.properties.get(PROP_CONSUME_TYPE, ""), len(info.mq_table),
            sum(pq.cached_msg_count for pq in info.mq_table.values()),
            f"{sum(s.consume_ok_tps for s in figures):.2f}",
            f"{sum(s.consume_failed_tps for s in figures):.2f}",
            sum(s.consume_failed_msgs for s in figures)]


@click.command("consumerStatus")
@admin_options
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-i", "--client-id", help="Only this consumer, in detail (default: a line per consumer).")
@click.option("-s", "--jstack", is_flag=True, help="Include the consumer's thread stacks.")
def consumer_status(namesrv: str, output: str, group: str, client_id: str | None, jstack: bool) -> None:
    """What the group's online consumers report: settings, subscriptions, queues held and
    their figures (307, relayed by the broker)."""
    async def job(admin: Admin) -> tuple[ConsumerConnection | None, dict[str, ConsumerRunningInfo | str]]:
        conn = None
        if client_id is None:
            try:
                conn = await admin.consumer_connection(group)
            except MQBrokerError as exc:
                if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                raise click.ClickException(f"no consumer of group {group!r} is online: start one, or "
                                           "check the group name with consumerProgress") from None
        ids = [client_id] if client_id is not None else sorted(c.client_id for c in conn.connection_set)
        infos: dict[str, ConsumerRunningInfo | str] = {}
        for cid in ids:
            try:
                infos[cid] = await admin.consumer_running_info(group, cid, jstack=jstack)
            except MQBrokerError as exc:
                if client_id is not None:
                    raise click.ClickException(f"{exc.remark or exc}: check the client id with "
                                               f"consumerConnection -g {group}") from None
                infos[cid] = exc.remark or str(exc)  # gone since the list, or not answering
        return conn, infos

    conn, infos = with_admin(namesrv, job)
    answered = {cid: info for cid, info in infos.items() if isinstance(info, ConsumerRunningInfo)}
    failed = {cid: why for cid, why in infos.items() if isinstance(why, str)}
    if client_id is not None:
        info = answered[client_id]
        emit(output, running_info_doc(client_id, info), *_detail_tables(client_id, info),
             note=f"jstack:\n{info.jstack}" if info.jstack else None)
        return
    assert conn is not None
    versions = {c.client_id: c.version for c in conn.connection_set}
    subscriptions = {tuple(sorted((s.topic, s.sub_string) for s in info.subscription_set))
                     for info in answered.values()}
    same = len(subscriptions) <= 1
    note = ("Same subscription in the group." if same else
            "WARN: different subscriptions in the same group: each member owns queues the others "
            "do not subscribe to the same way; give every member the same subscriptions.")
    if failed:
        note += "".join(f"\n{cid}: {why}" for cid, why in sorted(failed.items()))
    doc = {"group": group, "sameSubscription": same,
           "consumers": [running_info_doc(cid, info) for cid, info in sorted(answered.items())],
           "unanswered": failed}
    emit(output, doc,
         table(f"Consumers of {group}", ["clientId", "version", "consumeType", "queues", "cached",
                                         "consumeOKTPS", "consumeFailedTPS", "failedMsgs (1 h)"],
               [_summary_row(cid, versions.get(cid, 0), info) for cid, info in sorted(answered.items())]),
         note=note)


@click.command("getConsumerStatus")
@admin_options
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", required=True, help="The topic whose queues to report.")
@click.option("-i", "--origin-client-id", "client_id", help="Only this consumer (default: every one online).")
def get_consumer_status(namesrv: str, output: str, group: str, topic: str, client_id: str | None) -> None:
    """Each online consumer's own offset of each queue of a topic, as it holds them (223, which
    the broker relays to the consumers as 221); a consumer that does not answer is left out."""
    async def job(admin: Admin) -> dict[str, dict[MessageQueue, int]]:
        try:
            return await admin.consumer_offsets_by_client(topic, group, client_id)
        except MQBrokerError as exc:
            raise click.ClickException(f"{exc.remark or exc}: check the group with consumerConnection "
                                       f"-g {group}") from None

    tables = with_admin(namesrv, job)
    rows = [(cid, mq.broker_name, mq.queue_id, offset)
            for cid, table_ in sorted(tables.items()) for mq, offset in sorted(table_.items())]
    emit(output, [{"clientId": cid, "brokerName": b, "queueId": q, "offset": o} for cid, b, q, o in rows],
         table(f"Consumer offsets of {topic} in {group}", ["clientId", "brokerName", "queueId", "offset"],
               rows),
         note=None if rows else f"no consumer of {group!r} reported offsets of {topic!r}")


COMMANDS = [consumer_status, get_consumer_status]
