"""``bolide admin`` operations RocketMQ's MQAdminExt offers without an mqadmin command:
getTimerMetrics, updateGroupForbidden (a group's read ban on a topic), queryCorrectionOffset,
resumeCheckHalfMessage and getBrokerMemberGroup (:mod:`bolide.client.admin_ops`)."""

from __future__ import annotations

import click

from bolide.cli.admin_common import admin_options, emit, fmt_time, table, with_admin
from bolide.protocol.bodies.admin import GroupForbidden
from bolide.protocol.bodies.broker import TimerMetricsSerializeWrapper
from bolide.protocol.bodies.route import BrokerMemberGroup

BROKER = click.option("-b", "--broker-addr", required=True, help="The broker (host:port).")
TOPIC = click.option("-t", "--topic", required=True, help="The topic.")


@click.command("getTimerMetrics")
@admin_options
@BROKER
def timer_metrics(namesrv: str, output: str, broker_addr: str) -> None:
    """The timer messages waiting per topic in a broker (61, RocketMQ 5's config/timermetrics)."""
    metrics: TimerMetricsSerializeWrapper = with_admin(
        namesrv, lambda admin: admin.timer_metrics(broker_addr))
    rows = [[topic, m.count, fmt_time(m.time_stamp)] for topic, m in sorted(metrics.timing_count.items())]
    emit(output, metrics.to_json_obj(),
         table(f"Timer messages waiting in {broker_addr}", ["topic", "count", "lastChange"], rows))


@click.command("updateGroupForbidden")
@admin_options
@BROKER
@click.option("-g", "--group", required=True, help="The consumer group.")
@TOPIC
@click.option("-r", "--readable", type=click.BOOL,
              help="false: forbid the group to read the topic; true: allow it again (without: only ask).")
def group_forbidden(namesrv: str, output: str, broker_addr: str, group: str, topic: str,
                    readable: bool | None) -> None:
    """Forbid or allow a consumer group to read a topic on a broker, or ask whether it may (353)."""
    answer: GroupForbidden = with_admin(namesrv, lambda admin: admin.update_and_get_group_read_forbidden(
        broker_addr, group, topic, readable))
    emit(output, answer.to_json_obj(),
         note=f"{group} {'may' if answer.readable else 'may not'} read {topic} on {broker_addr}")


@click.command("queryCorrectionOffset")
@admin_options
@BROKER
@TOPIC
@click.option("-g", "--compare-group", required=True, help="The group whose lag is compared.")
@click.option("-f", "--filter-groups", default="",
              help="Groups to leave out, comma-separated (RocketMQ deletes their offsets as it answers).")
def correction_offset(namesrv: str, output: str, broker_addr: str, topic: str, compare_group: str,
                      filter_groups: str) -> None:
    """Per queue, the smallest offset committed by the other groups (308); Long.MAX_VALUE where
    the compared group is behind the queue's first message."""
    groups = [g.strip() for g in filter_groups.split(",") if g.strip()]
    offsets: dict[int, int] = with_admin(namesrv, lambda admin: admin.query_correction_offset(
        broker_addr, topic, compare_group, groups))
    emit(output, {str(q): o for q, o in sorted(offsets.items())},
         table(f"Correction offsets of {topic} on {broker_addr}", ["queueId", "offset"],
               sorted(offsets.items())))


@click.command("resumeCheckHalfMessage")
@admin_options
@TOPIC
@click.option("-i", "--msg-id", required=True,
              help="The half message's id (RMQ_SYS_TRANS_HALF_TOPIC, or TRANS_CHECK_MAX_TIME_TOPIC once its "
                   "checks ran out: give that topic with -t).")
def resume_check(namesrv: str, output: str, topic: str, msg_id: str) -> None:
    """Have the broker check a half message's transaction again from its first check (323)."""
    addr: str = with_admin(namesrv, lambda admin: admin.resume_check_half_message(topic, msg_id))
    emit(output, {"msgId": msg_id, "broker": addr}, note=f"half message {msg_id} checked again by {addr}")


@click.command("getBrokerMemberGroup")
@admin_options
@click.option("-c", "--cluster", required=True, help="The cluster.")
@click.option("-b", "--broker-name", required=True, help="The broker group (brokerName).")
def member_group(namesrv: str, output: str, cluster: str, broker_name: str) -> None:
    """The brokers of a broker group by broker id, as the NameServer has them (901, RocketMQ 5)."""
    found: BrokerMemberGroup = with_admin(
        namesrv, lambda admin: admin.broker_member_group(cluster, broker_name))
    emit(output, found.to_json_obj(),
         table(f"{broker_name} of {cluster}", ["brokerId", "addr"], sorted(found.broker_addrs.items())))


COMMANDS = [timer_metrics, group_forbidden, correction_offset, resume_check, member_group]
