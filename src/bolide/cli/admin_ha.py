"""``bolide admin`` and replication: the haStatus command (GET_BROKER_HA_STATUS 907), and the
role and replication lag that clusterList and brokerStatus show for each broker.

A broker's role comes from its brokerId (0 is the master, as in RocketMQ's clusterList); a
slave's replication lag is its master's CommitLog max offset minus its own, in bytes, from
both brokers' runtime info (28). It is ``"-"`` for masters and when unknown.
"""

from __future__ import annotations

from typing import Any

import click

from bolide.cli.admin_common import admin_options, emit, fmt_time, kv_table, table, with_admin
from bolide.client.admin import Admin
from bolide.client.errors import MQClientError
from bolide.protocol.bodies.ha import HARuntimeInfo
from bolide.protocol.bodies.route import MASTER_ID

UNKNOWN = "-"


def role_name(broker_id: int) -> str:
    return "MASTER" if broker_id == MASTER_ID else "SLAVE"


def replication_lag(broker_id: int, runtime: dict[str, str],
                    master_runtime: dict[str, str] | None) -> int | str:
    """Bytes a slave lacks (``"-"`` for a master, or when either figure is missing)."""
    if broker_id == MASTER_ID or master_runtime is None:
        return UNKNOWN
    try:
        lag = int(master_runtime["commitLogMaxOffset"]) - int(runtime["commitLogMaxOffset"])
    except (KeyError, ValueError):
        return UNKNOWN
    return max(lag, 0)  # read one after the other: the slave may have passed the figure read


async def add_roles(admin: Admin, found: dict[str, dict[str, str]]) -> None:
    """Add ``brokerRole`` and ``replicationLag`` to each address's runtime table (brokerStatus);
    a slave's master is asked for its runtime info when it is not among ``found``."""
    info = await admin.cluster_info()
    for addr, runtime in found.items():
        runtime["brokerRole"], runtime["replicationLag"] = UNKNOWN, UNKNOWN
        for bd in info.broker_addr_table.values():
            ids = [bid for bid, a in bd.broker_addrs.items() if a == addr]
            if not ids:
                continue
            runtime["brokerRole"] = role_name(ids[0])
            master_addr = bd.broker_addrs.get(MASTER_ID)
            master_runtime = found.get(master_addr) if master_addr else None
            if master_addr and master_runtime is None and ids[0] != MASTER_ID:
                try:
                    master_runtime = await admin.broker_runtime_info(master_addr)
                except MQClientError:
                    master_runtime = None
            runtime["replicationLag"] = str(replication_lag(ids[0], runtime, master_runtime))
            break


def _tables(addr: str, info: HARuntimeInfo) -> list[Any]:
    if info.master:
        summary = kv_table(f"Master {addr}", {
            "commitLogMaxOffset": info.master_commit_log_max_offset,
            "slaveNum": len(info.ha_connection_info), "inSyncSlaveNum": info.in_sync_slave_nums})
        slaves = table(f"Slaves of {addr}", ["slaveAddr", "slaveAckOffset", "diff",
                                             "transferSpeed(KB/s)", "status", "transferFromWhere"],
                       ([c.addr, c.slave_ack_offset, c.diff,
                         f"{c.transferred_byte_in_second / 1024:.2f}",
                         "OK" if c.in_sync else "Fall Behind", c.transfer_from_where]
                        for c in info.ha_connection_info))
        return [summary, slaves]
    client = info.ha_client_runtime_info
    return [kv_table(f"Slave {addr}", {
        "masterHaAddr": client.master_addr or UNKNOWN, "commitLogMaxOffset": client.max_offset,
        "transferSpeed(KB/s)": f"{client.transferred_byte_in_second / 1024:.2f}",
        "lastReadTime": fmt_time(client.last_read_timestamp) or UNKNOWN,
        "lastWriteTime": fmt_time(client.last_write_timestamp) or UNKNOWN,
        "activated": client.is_activated})]


@click.command("haStatus")
@admin_options
@click.option("-b", "--broker-addr", help="Broker address host:port, master or slave "
                                          "(default: every master).")
@click.option("-c", "--cluster", help="Only the masters of this cluster.")
def ha_status(namesrv: str, output: str, broker_addr: str | None, cluster: str | None) -> None:
    """Replication status: a master's slaves, their acknowledged offsets and lag, or a slave's
    master and offsets (GET_BROKER_HA_STATUS 907, RocketMQ 5)."""
    async def job(admin: Admin) -> dict[str, HARuntimeInfo]:
        addrs = [broker_addr] if broker_addr else await admin.master_addrs(cluster)
        return {addr: await admin.ha_status(addr) for addr in addrs}

    found = with_admin(namesrv, job)
    emit(output, {addr: info.to_json_obj() for addr, info in found.items()},
         *(t for addr, info in found.items() for t in _tables(addr, info)))


COMMANDS = (ha_status,)
