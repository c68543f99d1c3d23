"""``bolide admin`` and the controller (RocketMQ 5 controller mode): getControllerMetaData,
getSyncStateSet, getControllerConfig, updateControllerConfig, electMaster and
cleanBrokerMetadata, with mqadmin's options (``-a`` the controller address)."""

from __future__ import annotations

from typing import Any

import click

from bolide.cli.admin_common import admin_options, emit, kv_table, table, with_admin
from bolide.client.admin import Admin
from bolide.protocol.bodies.controller import BrokerReplicasInfo

CONTROLLER = click.option("-a", "--controller-address", "controller", required=True,
                          help="The controller's address host:port (e.g. 127.0.0.1:9878).")
CONTROLLERS = click.option("-a", "--controller-address", "controller", required=True,
                           help="Controller addresses, host:port joined by ';'.")


@click.command("getControllerMetaData")
@admin_options
@CONTROLLER
def get_controller_metadata(namesrv: str, output: str, controller: str) -> None:
    """The controller group, its leader and peers (1005)."""
    meta = with_admin(namesrv, lambda admin: admin.controller_metadata(controller))
    peers = [p for p in (meta.peers or "").split(";") if p]
    doc = {"group": meta.group, "controllerLeaderId": meta.controller_leader_id,
           "controllerLeaderAddress": meta.controller_leader_address, "isLeader": meta.is_leader,
           "peers": peers}
    emit(output, doc, kv_table(f"Controller {controller}", {
        "ControllerGroup": meta.group, "ControllerLeaderId": meta.controller_leader_id,
        "ControllerLeaderAddress": meta.controller_leader_address, "Peers": ", ".join(peers)}))


def _replica_tables(info: BrokerReplicasInfo) -> list[Any]:
    out = []
    for name, replicas in sorted(info.replicas_info_table.items()):
        out.append(kv_table(f"Broker group {name}", {
            "MasterBrokerId": replicas.master_broker_id, "MasterAddr": replicas.master_address,
            "MasterEpoch": replicas.master_epoch, "SyncStateSetEpoch": replicas.sync_state_set_epoch,
            "SyncStateSetNums": len(replicas.in_sync_replicas)}))
        groups = (("yes", replicas.in_sync_replicas), ("no", replicas.not_in_sync_replicas))
        rows = [[r.broker_id, r.broker_address, "yes" if r.alive else "no", in_sync]
                for in_sync, group in groups for r in group]
        out.append(table(f"Replicas of {name}", ["brokerId", "address", "alive", "inSync"], rows))
    return out


@click.command("getSyncStateSet")
@admin_options
@CONTROLLER
@click.option("-b", "--broker-name", help="The broker group (brokerName) to show.")
@click.option("-c", "--cluster", help="Every broker group of this cluster (from the NameServer).")
def get_sync_state_set(namesrv: str, output: str, controller: str, broker_name: str | None,
                       cluster: str | None) -> None:
    """Master, epochs and in-sync replicas of broker groups (1006)."""
    if not broker_name and not cluster:
        raise click.UsageError("give the broker group with -b or a cluster with -c")

    async def job(admin: Admin) -> BrokerReplicasInfo:
        names = [broker_name] if broker_name else []
        if cluster:
            info = await admin.cluster_info()
            if cluster not in info.cluster_addr_table:
                raise click.ClickException(f"the NameServer knows no cluster {cluster!r}")
            names = sorted(info.cluster_addr_table[cluster])
        return await admin.sync_state_data(controller.split(";")[0], names)

    info = with_admin(namesrv, job)
    emit(output, info.to_json_obj(), *_replica_tables(info))


@click.command("getControllerConfig")
@admin_options
@CONTROLLERS
def get_controller_config(namesrv: str, output: str, controller: str) -> None:
    """Every setting of each controller given with -a (1010)."""
    configs = with_admin(namesrv, lambda admin: admin.controller_config(controller))
    emit(output, configs, *(kv_table(f"Controller {addr}", props) for addr, props in configs.items()))


@click.command("updateControllerConfig")
@admin_options
@CONTROLLERS
@click.option("-k", "--key", required=True, help="The setting's key, e.g. enableElectUncleanMaster.")
@click.option("-v", "--value", required=True, help="Its new value.")
def update_controller_config(namesrv: str, output: str, controller: str, key: str, value: str) -> None:
    """Change a setting of each controller given with -a (1009)."""
    addrs = with_admin(namesrv, lambda admin: admin.update_controller_config({key: value}, controller))
    emit(output, {"key": key, "value": value, "controllers": addrs},
         note=f"{key}={value} set on {', '.join(addrs)}")


@click.command("electMaster")
@admin_options
@CONTROLLER
@click.option("-c", "--cluster", required=True, help="The broker group's cluster.")
@click.option("-bn", "--broker-name", required=True, help="The broker group (brokerName).")
@click.option("-b", "--broker-id", required=True, type=int,
              help="The controller id of the broker to make master (alive and in sync).")
def elect_master(namesrv: str, output: str, controller: str, cluster: str, broker_name: str,
                 broker_id: int) -> None:
    """Make a broker of a group its master (1002, designated election)."""
    header, body = with_admin(namesrv, lambda admin: admin.elect_master(controller, cluster, broker_name,
                                                                         broker_id))
    members = body.broker_member_group.broker_addrs if body.broker_member_group else {}
    doc = {"clusterName": cluster, "brokerName": broker_name, "masterBrokerId": header.master_broker_id,
           "masterAddress": header.master_address, "masterEpoch": header.master_epoch,
           "syncStateSetEpoch": header.sync_state_set_epoch,
           "brokers": {str(k): v for k, v in members.items()}}
    emit(output, doc, kv_table(f"Broker group {broker_name}", {
        "ClusterName": cluster, "BrokerMasterAddr": header.master_address,
        "MasterEpoch": header.master_epoch, "SyncStateSetEpoch": header.sync_state_set_epoch}),
         table("Brokers", ["brokerId", "address"], sorted(members.items())))


def _ids(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return [int(i) for i in text.split(";") if i.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: give broker ids joined by ';', e.g. 1;2",
                                 param_hint="-b") from None


@click.command("cleanBrokerMetadata")
@admin_options
@CONTROLLER
@click.option("-bn", "--broker-name", required=True, help="The broker group (brokerName).")
@click.option("-c", "--cluster", help="The broker group's cluster (needed unless -l).")
@click.option("-b", "--broker-ids", "ids", help="Only these controller ids, joined by ';' (e.g. 1;2).")
@click.option("-l", "--clean-living-broker", is_flag=True, help="Also when the brokers are alive.")
def clean_broker_metadata(namesrv: str, output: str, controller: str, broker_name: str, cluster: str | None,
                          ids: str | None, clean_living_broker: bool) -> None:
    """Forget a broker group, or some of its brokers, on the controller (1011)."""
    broker_ids = _ids(ids)
    if not clean_living_broker and not cluster:
        raise click.UsageError("give the cluster with -c (it may only be left out with -l)")
    with_admin(namesrv, lambda admin: admin.clean_broker_metadata(
        controller, broker_name, cluster=cluster, broker_ids=broker_ids, clean_living=clean_living_broker))
    emit(output, {"brokerName": broker_name, "brokerIds": broker_ids, "cleaned": True},
         note=f"cleared broker {broker_name} metadata from controller {controller}")


COMMANDS = (get_controller_metadata, get_sync_state_set, get_controller_config, update_controller_config,
            elect_master, clean_broker_metadata)
