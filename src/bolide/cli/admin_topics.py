"""``bolide admin`` commands for clusters, brokers and topics: clusterList, brokerStatus,
topicList, topicRoute, topicStatus, topicClusterList, updateTopic, updateTopicPerm, deleteTopic."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from bolide.cli.admin_common import admin_options, emit, fmt_time, kv_table, table, with_admin
from bolide.cli.admin_ha import add_roles, replication_lag, role_name
from bolide.client.admin import Admin
from bolide.client.errors import MQClientError, TopicNotExistError
from bolide.common.topic import MAX_QUEUE_NUMS
from bolide.protocol.bodies.route import MASTER_ID, PERM_READ, PERM_WRITE, TopicRouteData

QUEUE_COUNT = click.IntRange(0, MAX_QUEUE_NUMS)  # what brokers accept for a topic's queues


def first_number(text: str | None) -> str:
    """The first figure of a ``"12.50 11.00 10.20"`` TPS value."""
    return (text or "").split(" ")[0]


@click.command("clusterList")
@admin_options
def cluster_list(namesrv: str, output: str) -> None:
    """Clusters and their brokers with version and throughput (NameServer 106, broker 28)."""
    async def job(admin: Admin) -> list[dict[str, Any]]:
        info = await admin.cluster_info()
        rows = []
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                bd = info.broker_addr_table.get(name)
                master_runtime = None
                for broker_id, addr in sorted((bd.broker_addrs if bd else {}).items()):
                    try:
                        runtime = await admin.broker_runtime_info(addr)
                    except MQClientError as exc:  # e.g. a Java broker in its first seconds
                        runtime = {"brokerVersionDesc": "?", "error": str(exc)}
                    if broker_id == MASTER_ID:
                        master_runtime = runtime
                    rows.append({"cluster": cluster, "brokerName": name, "brokerId": broker_id,
                                 "brokerRole": role_name(broker_id), "addr": addr,
                                 "version": runtime.get("brokerVersionDesc", ""),
                                 "putTps": first_number(runtime.get("putTps")),
                                 "getTransferedTps": first_number(runtime.get("getTransferedTps")),
                                 "msgPutTotalTodayNow": runtime.get("msgPutTotalTodayNow", ""),
                                 "msgGetTotalTodayNow": runtime.get("msgGetTotalTodayNow", ""),
                                 "commitLogDiskRatio": runtime.get("commitLogDiskRatio", ""),
                                 "replicationLag": replication_lag(broker_id, runtime, master_runtime),
                                 **({"error": runtime["error"]} if "error" in runtime else {})})
        return rows

    rows = with_admin(namesrv, job)
    cols = ["cluster", "brokerName", "brokerId", "brokerRole", "addr", "version", "putTps",
            "getTransferedTps", "msgPutTotalTodayNow", "msgGetTotalTodayNow", "commitLogDiskRatio",
            "replicationLag"]
    emit(output, {"brokers": rows}, table("Clusters", cols, ([r[c] for c in cols] for r in rows)),
         note=None if rows else "no broker is registered with the NameServer")


@click.command("brokerStatus")
@admin_options
@click.option("-b", "--broker-addr", help="Broker address host:port (default: every master).")
@click.option("-c", "--cluster", help="Only the masters of this cluster.")
def broker_status(namesrv: str, output: str, broker_addr: str | None, cluster: str | None) -> None:
    """A broker's runtime figures (GET_BROKER_RUNTIME_INFO 28)."""
    async def job(admin: Admin) -> dict[str, dict[str, str]]:
        addrs = [broker_addr] if broker_addr else await admin.master_addrs(cluster)
        found = {addr: await admin.broker_runtime_info(addr) for addr in addrs}
        await add_roles(admin, found)  # brokerRole, replicationLag (bytes behind the master)
        return found

    found = with_admin(namesrv, job)
    emit(output, found, *(kv_table(f"Broker {addr}", kv) for addr, kv in found.items()))


@click.command("topicList")
@admin_options
def topic_list(namesrv: str, output: str) -> None:
    """Every topic the NameServer knows (206)."""
    topics = with_admin(namesrv, lambda admin: admin.topic_list())
    emit(output, {"topics": topics}, table(f"{len(topics)} topics", ["topic"], ([t] for t in topics)))


def perm_text(perm: int) -> str:
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-")


def route_tables(topic: str, route: TopicRouteData) -> tuple[Any, Any]:
    brokers = table(f"Brokers of {topic}", ["cluster", "brokerName", "brokerId", "addr"],
                    ([bd.cluster, bd.broker_name, bid, addr] for bd in route.broker_datas
                     for bid, addr in sorted(bd.broker_addrs.items())))
    queues = table(f"Queues of {topic}", ["brokerName", "readQueueNums", "writeQueueNums", "perm"],
                   ([qd.broker_name, qd.read_queue_nums, qd.write_queue_nums,
                     f"{qd.perm} ({perm_text(qd.perm)})"] for qd in route.queue_datas))
    return brokers, queues


@click.command("topicRoute")
@admin_options
@click.option("-t", "--topic", required=True)
def topic_route(namesrv: str, output: str, topic: str) -> None:
    """The topic's route: brokers and queue counts (105)."""
    route = with_admin(namesrv, lambda admin: admin.topic_route(topic))
    emit(output, route.to_json_obj(), *route_tables(topic, route))


@click.command("topicStatus")
@admin_options
@click.option("-t", "--topic", required=True)
def topic_status(namesrv: str, output: str, topic: str) -> None:
    """Min and max offset and last store time of every queue (105, then 202 per broker)."""
    stats = with_admin(namesrv, lambda admin: admin.topic_stats(topic))
    rows = [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": o.min_offset,
             "maxOffset": o.max_offset, "lastUpdateTimestamp": o.last_update_timestamp}
            for mq, o in stats.items()]
    emit(output, {"topic": topic, "queues": rows},
         table(f"Status of {topic}", ["brokerName", "queueId", "minOffset", "maxOffset", "lastUpdated"],
               ([r["brokerName"], r["queueId"], r["minOffset"], r["maxOffset"],
                 fmt_time(r["lastUpdateTimestamp"])] for r in rows)))


async def wait_route(admin: Admin, topic: str, write_queue_nums: int, timeout_s: float) -> bool:
    """Wait until the NameServer's route of ``topic`` shows ``write_queue_nums`` queues."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            data: TopicRouteData | None = await admin.topic_route(topic)
        except TopicNotExistError:
            data = None
        if data is not None and any(qd.write_queue_nums == write_queue_nums for qd in data.queue_datas):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.05)


@click.command("updateTopic")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-b", "--broker-addr", help="Create on this broker only (host:port).")
@click.option("-c", "--cluster", help="Create on every master of this cluster (default: every master).")
@click.option("-r", "--read-queue-nums", default=8, show_default=True, type=QUEUE_COUNT)
@click.option("-w", "--write-queue-nums", default=8, show_default=True, type=QUEUE_COUNT)
@click.option("-p", "--perm", default=6, show_default=True, type=click.IntRange(0, 7),
              help="2 write, 4 read, 6 both.")
@click.option("-o", "--order", is_flag=True, help="Mark the topic as ordered.")
@click.option("-a", "--attributes", help="Topic attribute changes, +key=value,-key (RocketMQ 5).")
@click.option("--retention-hours", type=float,
              help="Keep this topic's messages at most this long (a floor on fileReservedTime; "
                   "0 removes it). Same as -a +retention.hours=N.")
@click.option("--wait", "wait_s", default=5.0, show_default=True,
              help="Seconds to wait for the NameServer's route to show the topic (0: do not wait).")
def update_topic(namesrv: str, output: str, topic: str, broker_addr: str | None, cluster: str | None,
                 read_queue_nums: int, write_queue_nums: int, perm: int, order: bool,
                 attributes: str | None, retention_hours: float | None, wait_s: float) -> None:
    """Create or update a topic on brokers (17)."""
    if retention_hours is not None:
        if retention_hours < 0:
            raise click.BadParameter("give a number of hours >= 0 (0 removes the retention)",
                                     param_hint="--retention-hours")
        change = f"+retention.hours={retention_hours:g}" if retention_hours else "-retention.hours"
        attributes = f"{attributes},{change}" if attributes else change

    async def job(admin: Admin) -> tuple[list[str], bool]:
        addrs = await admin.create_topic(topic, read_queue_nums=read_queue_nums,
                                         write_queue_nums=write_queue_nums, perm=perm, order=order,
                                         broker_addr=broker_addr, cluster=cluster, attributes=attributes)
        routed = wait_s > 0 and await wait_route(admin, topic, write_queue_nums, wait_s)
        return addrs, routed

    addrs, routed = with_admin(namesrv, job)
    doc = {"topic": topic, "readQueueNums": read_queue_nums, "writeQueueNums": write_queue_nums,
           "perm": perm, "order": order, "attributes": attributes, "brokers": addrs, "routed": routed}
    note = None if routed or wait_s <= 0 else (
        f"the NameServer does not show the new route yet after {wait_s} s: the broker registers "
        "it within 30 s; check with topicRoute")
    emit(output, doc, table(f"Topic {topic} created or updated", ["broker", "readQueueNums",
                                                                  "writeQueueNums", "perm", "order"],
                            ([a, read_queue_nums, write_queue_nums, perm, order] for a in addrs)),
         note=note)


@click.command("topicClusterList")
@admin_options
@click.option("-t", "--topic", required=True)
def topic_cluster_list(namesrv: str, output: str, topic: str) -> None:
    """The clusters whose brokers serve a topic (105, 106)."""
    clusters = with_admin(namesrv, lambda admin: admin.topic_clusters(topic))
    emit(output, {"topic": topic, "clusters": clusters},
         table(f"Clusters of {topic}", ["cluster"], ([c] for c in clusters)))


@click.command("updateTopicPerm")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-p", "--perm", required=True, type=click.Choice(["2", "4", "6"]),
              help="2 write, 4 read, 6 both.")
@click.option("-b", "--broker-addr", help="On this broker only (host:port).")
@click.option("-c", "--cluster", help="On the topic's masters in this cluster (default: all of them).")
def update_topic_perm(namesrv: str, output: str, topic: str, perm: str, broker_addr: str | None,
                      cluster: str | None) -> None:
    """Change a topic's permission on the brokers of its route, keeping its queue counts (17)."""
    addrs = with_admin(namesrv, lambda admin: admin.update_topic_perm(
        topic, int(perm), broker_addr=broker_addr, cluster=cluster))
    emit(output, {"topic": topic, "perm": int(perm), "brokers": addrs},
         table(f"Topic {topic}: perm {perm} ({perm_text(int(perm))})", ["broker"], ([a] for a in addrs)))


@click.command("deleteTopic")
@admin_options
@click.option("-t", "--topic", required=True)
@click.option("-c", "--cluster", help="Delete on the masters of this cluster (default: every master).")
def delete_topic(namesrv: str, output: str, topic: str, cluster: str | None) -> None:
    """Delete a topic from brokers (215) and NameServers (216); messages stay until retention."""
    addrs = with_admin(namesrv, lambda admin: admin.delete_topic(topic, cluster=cluster))
    emit(output, {"topic": topic, "deleted": True, "brokers": addrs},
         table(f"Topic {topic} deleted", ["broker"], ([a] for a in addrs)))


COMMANDS = (cluster_list, broker_status, topic_list, topic_route, topic_status, topic_cluster_list,
            update_topic, update_topic_perm, delete_topic)
