"""``bolide admin`` commands over the servers' settings: getBrokerConfig, updateBrokerConfig,
getNamesrvConfig, updateNamesrvConfig, updateKvConfig, deleteKvConfig, updateOrderConf,
exportConfigs, setCommitLogReadAheadMode, checkRocksdbCqWriteProgress and rocksDBConfigToJson
(RocketMQ 5.3's RocksDB migration), and wipeWritePerm / addWritePerm (a broker's write
permission on the NameServers, to take it out of service and back)."""

from __future__ import annotations

import time
from typing import Any

import click

from bolide.cli.admin_common import (
    admin_options,
    emit,
    export_dir_option,
    kv_table,
    table,
    target_options,
    with_admin,
    write_export,
)
from bolide.client.admin import Admin
from bolide.protocol.headers.admin import ROCKSDB_CONFIG_TYPES

CHECK_STATUS = {0: "CHECK_OK", 1: "CHECK_NOT_OK", 2: "CHECK_IN_PROGRESS", 3: "CHECK_ERROR"}

KEY = click.option("-k", "--key", required=True, help="The setting's key, e.g. brokerPermission.")
VALUE = click.option("-v", "--value", required=True, help="Its new value.")


@click.command("getBrokerConfig")
@admin_options
@target_options
def get_broker_config(namesrv: str, output: str, broker_addr: str | None, cluster: str | None) -> None:
    """Every setting of brokers (26): one broker with -b, the masters of a cluster with -c, else
    every master."""
    async def job(admin: Admin) -> dict[str, dict[str, str]]:
        addrs = [broker_addr] if broker_addr else await admin.master_addrs(cluster)
        return {addr: await admin.broker_config(addr) for addr in addrs}

    configs = with_admin(namesrv, job)
    emit(output, configs, *(kv_table(f"Broker {addr}", props) for addr, props in configs.items()))


@click.command("updateBrokerConfig")
@admin_options
@target_options
@KEY
@VALUE
def update_broker_config(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                         key: str, value: str) -> None:
    """Change a setting of running brokers (25); each writes it into its config file, so it
    stays after a restart. Settings that need a restart are refused, naming the key."""
    addrs = with_admin(namesrv, lambda admin: admin.update_broker_config(
        {key: value}, broker_addr=broker_addr, cluster=cluster))
    emit(output, {"key": key, "value": value, "brokers": addrs},
         note=f"{key}={value} set on {', '.join(addrs)}")


@click.command("getNamesrvConfig")
@admin_options
def get_namesrv_config(namesrv: str, output: str) -> None:
    """Every setting of each NameServer given with -n (319)."""
    configs = with_admin(namesrv, lambda admin: admin.namesrv_config())
    emit(output, configs, *(kv_table(f"NameServer {addr}", props) for addr, props in configs.items()))


@click.command("updateNamesrvConfig")
@admin_options
@KEY
@VALUE
def update_namesrv_config(namesrv: str, output: str, key: str, value: str) -> None:
    """Change a setting of each NameServer given with -n (318); one started from a config
    file writes it there."""
    addrs = with_admin(namesrv, lambda admin: admin.update_namesrv_config({key: value}))
    emit(output, {"key": key, "value": value, "namesrvs": addrs},
         note=f"{key}={value} set on {', '.join(addrs)}")


NAMESPACE = click.option("-s", "--namespace", required=True, help="e.g. ORDER_TOPIC_CONFIG.")


@click.command("updateKvConfig")
@admin_options
@NAMESPACE
@KEY
@VALUE
def update_kv_config(namesrv: str, output: str, namespace: str, key: str, value: str) -> None:
    """Set a key of the KV config of each NameServer given with -n (100)."""
    addrs = with_admin(namesrv, lambda admin: admin.update_kv_config(namespace, key, value))
    emit(output, {"namespace": namespace, "key": key, "value": value, "namesrvs": addrs},
         note=f"{namespace}/{key}={value} set on {', '.join(addrs)}")


ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


@click.command("updateOrderConf")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-m", "--method", required=True, type=click.Choice(["get", "put", "delete"]))
@click.option("-v", "--order-conf",
              help="With put: the topic's queues per broker, e.g. 'broker-a:4;broker-b:4'.")
def update_order_conf(namesrv: str, output: str, topic: str, method: str, order_conf: str | None) -> None:
    """A globally ordered topic's queue layout in the NameServers' KV config
    (ORDER_TOPIC_CONFIG: 101 get, 100 put on each NameServer, 102 delete on each)."""
    if method == "put" and not (order_conf or "").strip():
        raise click.UsageError("give the order conf with -v, e.g. -v 'broker-a:4;broker-b:4'")

    async def job(admin: Admin) -> tuple[str | None, list[str]]:
        if method == "get":
            return await admin.kv_config(ORDER_TOPIC_CONFIG, topic), []
        if method == "put":
            conf = (order_conf or "").strip()
            return conf, await admin.update_kv_config(ORDER_TOPIC_CONFIG, topic, conf)
        return None, await admin.delete_kv_config(ORDER_TOPIC_CONFIG, topic)

    conf, addrs = with_admin(namesrv, job)
    note = {"get": f"orderConf of {topic}: {conf}" if conf is not None else f"{topic} has no orderConf",
            "put": f"orderConf of {topic} set to {conf} on {', '.join(addrs)}",
            "delete": f"orderConf of {topic} deleted on {', '.join(addrs)}"}[method]
    doc = {"topic": topic, "orderConf": conf} if method == "get" else {
        "topic": topic, "orderConf": conf, "namesrvs": addrs}
    emit(output, doc, note=note)


@click.command("exportConfigs")
@admin_options
@click.option("-c", "--cluster", required=True, help="The cluster whose brokers' settings to write.")
@export_dir_option
def export_configs(namesrv: str, output: str, cluster: str, file_path: str) -> None:
    """The main settings of each broker group of a cluster and its size, into configs.json (as
    mqadmin exportConfigs writes it; 106 (NS), 26 per master)."""
    doc = with_admin(namesrv, lambda admin: admin.export_configs(cluster))
    path = write_export(file_path, "configs.json", doc)
    emit(output, {"file": str(path), **doc["clusterScale"]},
         note=f"export {path} success: {len(doc['brokerConfigs'])} broker group(s)")


@click.command("setCommitLogReadAheadMode")
@admin_options
@target_options
@click.option("-m", "--mode", required=True, type=click.Choice(["0", "1"]),
              help="0: the kernel reads ahead (the default); 1: random reads, only the pages asked for.")
def set_commit_log_read_ahead_mode(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                                   mode: str) -> None:
    """Read-ahead in the brokers' CommitLog files, on or off (2004): off suits consumers that
    read old messages here and there, whose read-ahead would fill the page cache with pages
    nobody reads."""
    answers: dict[str, str] = with_admin(namesrv, lambda admin: admin.set_commit_log_read_ahead(
        int(mode), broker_addr=broker_addr, cluster=cluster))
    emit(output, {"mode": int(mode), "brokers": answers},
         table("setCommitLogReadAheadMode", ["broker", "answer"], sorted(answers.items())))


@click.command("deleteKvConfig")
@admin_options
@NAMESPACE
@KEY
def delete_kv_config(namesrv: str, output: str, namespace: str, key: str) -> None:
    """Delete a key of the KV config of each NameServer given with -n (102)."""
    addrs = with_admin(namesrv, lambda admin: admin.delete_kv_config(namespace, key))
    emit(output, {"namespace": namespace, "key": key, "namesrvs": addrs},
         note=f"{namespace}/{key} deleted on {', '.join(addrs)}")


def _perm_command(name: str, wipe: bool) -> click.Command:
    verb = "wipe" if wipe else "add"

    @click.command(name)
    @admin_options
    @click.option("-b", "--broker-name", required=True, help="The broker group's name (brokerName).")
    def command(namesrv: str, output: str, broker_name: str) -> None:
        async def job(admin: Admin) -> dict[str, int]:
            return await (admin.wipe_write_perm(broker_name) if wipe else admin.add_write_perm(broker_name))

        counts = with_admin(namesrv, job)
        emit(output, {"brokerName": broker_name, "topics": counts},
             table(f"{verb} write permission of {broker_name}", ["nameServer", "topics"],
                   sorted(counts.items())))

    command.help = (
        "Route no more sends to a broker group on every NameServer given with -n (205), as "
        "before taking it out of service; its topics stay readable. Set its brokerPermission "
        "to 4 with updateBrokerConfig to keep it so after a restart."
        if wipe else
        "Give a broker group's topics their write permission back on every NameServer given "
        "with -n (327).")
    return command


@click.command("checkRocksdbCqWriteProgress")
@admin_options
@target_options
@click.option("-t", "--topic", default="", help="Only this topic (default: every topic).")
@click.option("--cf", "--check-from", "check_from", type=int, default=None,
              help="Check messages stored from this time on (ms since the epoch; default: 30 days ago).")
def check_rocksdb_cq_write_progress(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                                    topic: str, check_from: int | None) -> None:
    """Whether brokers' RocksDB ConsumeQueues keep up with their files (RocketMQ 5.3's
    migration to RocksDB; 354). Bolide keeps files only and says so; a RocketMQ broker checks in
    the background and logs the outcome."""
    since = check_from if check_from is not None else int(time.time() * 1000) - 30 * 86_400_000
    answers: dict[str, dict[str, Any]] = with_admin(
        namesrv, lambda admin: admin.check_rocksdb_cq_write_progress(
            topic=topic, check_from_ms=since, broker_addr=broker_addr, cluster=cluster))
    emit(output, answers, table("checkRocksdbCqWriteProgress", ["broker", "status", "result"],
                                ([addr, CHECK_STATUS.get(a.get("checkStatus"), a.get("checkStatus")),
                                  a.get("checkResult") or ""] for addr, a in sorted(answers.items()))))


@click.command("rocksDBConfigToJson")
@admin_options
@target_options
@click.option("-t", "--config-type", default=";".join(ROCKSDB_CONFIG_TYPES), show_default=True,
              help="The configs to write, joined by ';'.")
def rocksdb_config_to_json(namesrv: str, output: str, broker_addr: str | None, cluster: str | None,
                           config_type: str) -> None:
    """Have brokers write the configs they keep in RocksDB (RocketMQ 5.3) as JSON files (355).
    Bolide's configs are JSON files already, so its brokers have nothing to write."""
    types = [t.strip() for t in config_type.split(";") if t.strip()]
    unknown = [t for t in types if t not in ROCKSDB_CONFIG_TYPES]
    if not types or unknown:
        known = ", ".join(ROCKSDB_CONFIG_TYPES)
        raise click.BadParameter(f"{', '.join(unknown) or 'nothing'}: give {known}, joined by ';'",
                                 param_hint="-t")
    addrs: list[str] = with_admin(namesrv, lambda admin: admin.export_rocksdb_config_to_json(
        types, broker_addr=broker_addr, cluster=cluster))
    emit(output, {"brokers": addrs, "configTypes": types},
         note=f"{', '.join(types)} written as JSON by {len(addrs)} broker(s)")


COMMANDS = (get_broker_config, update_broker_config, get_namesrv_config, update_namesrv_config,
            update_kv_config, delete_kv_config, update_order_conf, set_commit_log_read_ahead_mode,
            export_configs, check_rocksdb_cq_write_progress, rocksdb_config_to_json,
            _perm_command("wipeWritePerm", wipe=True), _perm_command("addWritePerm", wipe=False))
