"""``bolide admin`` cold data flow control (RocketMQ 5): updateColdDataFlowCtrGroupConfig,
removeColdDataFlowCtrGroupConfig (a consumer group's own cold read threshold) and
getColdDataFlowCtrInfo (which groups read cold data, and the thresholds)."""

from __future__ import annotations

import click
from rich.table import Table

from bolide.cli.admin_common import admin_options, emit, fmt_time, table, target_options, with_admin
from bolide.client.admin_cold_data import ColdDataFlowCtrInfo

GROUP = click.option("-g", "--consumer-group", "group", required=True, help="The consumer group.")


@click.command("updateColdDataFlowCtrGroupConfig")
@admin_options
@target_options
@GROUP
@click.option("-v", "--threshold", required=True, type=click.IntRange(min=0),
              help="Bytes of cold data the group may read per 5 s before its pulls are throttled.")
def update_group_config(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                        group: str, threshold: int) -> None:
    """Give a consumer group its own cold read threshold (2001) instead of cgColdReadThreshold."""
    addrs: list[str] = with_admin(namesrv, lambda admin: admin.update_cold_data_flow_ctr_group_config(
        group, threshold, broker_addr=broker_addr, cluster=cluster))
    emit(output, {"group": group, "threshold": threshold, "brokers": addrs},
         note=f"cold read threshold of {group} set to {threshold} bytes per 5 s on {', '.join(addrs)}")


@click.command("removeColdDataFlowCtrGroupConfig")
@admin_options
@target_options
@GROUP
def remove_group_config(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                        group: str) -> None:
    """Drop a consumer group's own cold read threshold (2002): cgColdReadThreshold applies again."""
    addrs: list[str] = with_admin(namesrv, lambda admin: admin.remove_cold_data_flow_ctr_group_config(
        group, broker_addr=broker_addr, cluster=cluster))
    emit(output, {"group": group, "brokers": addrs},
         note=f"cold read threshold of {group} removed on {', '.join(addrs)}")


def _tables(addr: str, info: ColdDataFlowCtrInfo) -> list[Table]:
    return [
        table(f"Broker {addr}", ["cgColdReadThreshold", "globalColdReadThreshold", "globalAcc"],
              [[info.cg_cold_read_threshold, info.global_cold_read_threshold, info.global_acc]]),
        table("Groups reading cold data (bytes this 5 s window)",
              ["group", "coldAcc", "lastColdReadTime", "createTime"],
              [[g, e.cold_acc, fmt_time(e.last_cold_read_ms), fmt_time(e.create_ms)]
               for g, e in sorted(info.runtime_table.items())]),
        table("Thresholds set for groups (bytes per 5 s)", ["group", "threshold"],
              sorted(info.config_table.items())),
    ]


@click.command("getColdDataFlowCtrInfo")
@admin_options
@click.option("-b", "--broker-addr", help="This broker only (host:port).")
@click.option("-c", "--cluster", help="Every master and slave of this cluster (default: of every cluster).")
def get_info(namesrv: str, output: str, broker_addr: str | None, cluster: str | None) -> None:
    """Cold data flow control of brokers (2003): the groups that read cold data in the last
    minute with their bytes this window, the thresholds, and the broker's cold bytes."""
    infos: dict[str, ColdDataFlowCtrInfo | None] = with_admin(
        namesrv, lambda admin: admin.cold_data_flow_ctr_info(broker_addr=broker_addr, cluster=cluster))
    emit(output, {addr: info.to_dict() if info is not None else None for addr, info in infos.items()},
         *(t for addr, info in infos.items() if info is not None for t in _tables(addr, info)),
         note="\n".join(f"Broker[{addr}] has no cold ctr table" for addr, info in infos.items()
                        if info is None) or None)


COMMANDS = [update_group_config, remove_group_config, get_info]
