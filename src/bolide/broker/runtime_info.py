"""GET_BROKER_RUNTIME_INFO (28): the broker's figures as the string table mqadmin's clusterList
and brokerStatus read (spec 3.7). Every key clusterList parses is always present."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bolide.protocol.codes import DEFAULT_VERSION, DEFAULT_VERSION_DESC
from bolide.store import BrokerRole

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


def human_bytes(n: int) -> str:
    """Java MixAll.humanReadableByteCount(n, false): ``512 B``, ``1.5 KiB``, ``49.1 GiB``."""
    if n < 1024:
        return f"{n} B"
    value, units = float(n), "KMGTPE"
    exp = 0
    while value >= 1024 and exp < len(units):
        value /= 1024
        exp += 1
    return f"{value:.1f} {units[exp - 1]}iB"


def disk_ratio(path: Path) -> tuple[float, int, int]:
    """(used fraction, total bytes, free bytes) of the filesystem holding ``path`` (or its
    nearest existing parent); (0, 0, 0) when unknown."""
    while not path.exists() and path.parent != path:
        path = path.parent
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return 0.0, 0, 0
    return (usage.used / usage.total if usage.total else 0.0), usage.total, usage.free


def uptime_text(seconds: float) -> str:
    """Java's ``runtime`` value: ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
    s = int(seconds)
    return f"[ {s // 86400} days, {s % 86400 // 3600} hours, {s % 3600 // 60} minutes, {s % 60} seconds ]"


def runtime_info(broker: BrokerController) -> dict[str, str]:
    """The KVTable of GET_BROKER_RUNTIME_INFO."""
    store = broker.store
    stats = broker.stats
    stats.refresh()
    now = stats.counts()
    first = store.look_message_by_offset(store.min_phy_offset) if store.max_phy_offset > 0 else None
    cl_ratio, cl_total, cl_free = disk_ratio(store.config.commit_log_dir)
    cq_ratio = disk_ratio(store.config.consume_queue_dir)[0]
    table = {
        "brokerVersionDesc": DEFAULT_VERSION_DESC,
        "brokerVersion": str(DEFAULT_VERSION),
        # 5.x: the schedule and transaction check services run (masters, acting slaves)
        "brokerActive": "false" if broker.role is BrokerRole.SLAVE and not broker.acting else "true",
        "bootTimestamp": str(stats.boot_timestamp_ms),
        "runtime": uptime_text(time.time() - stats.boot_timestamp_ms / 1000),
        "msgPutTotalYesterdayMorning": str(stats.yesterday_morning.put),
        "msgPutTotalTodayMorning": str(stats.today_morning.put),
        "msgPutTotalTodayNow": str(now.put),
        "putMessageTimesTotal": str(max(now.put, 1)),  # RocketMQ's: 1 before the first put
        "putMessageSizeTotal": str(stats.put_bytes),
        "putMessageAverageSize": str(stats.put_bytes / max(now.put, 1)),
        "msgGetTotalYesterdayMorning": str(stats.yesterday_morning.transferred),
        "msgGetTotalTodayMorning": str(stats.today_morning.transferred),
        "msgGetTotalTodayNow": str(now.transferred),
        "commitLogMinOffset": str(store.min_phy_offset),
        "commitLogMaxOffset": str(store.max_phy_offset),
        "commitLogDirCapacity": f"Total : {human_bytes(cl_total)}, Free : {human_bytes(cl_free)}.",
        "commitLogDiskRatio": f"{cl_ratio:.4f}",
        "consumeQueueDiskRatio": f"{cq_ratio:.4f}",
        "earliestMessageTimeStamp": str(first.store_timestamp if first is not None else -1),
        "dispatchBehindBytes": str(store.dispatcher.behind()),
        "indexBehindBytes": str(store.index_behind()),  # Bolide's: the index has a thread of its own
        # Bolide's: how late the event loop ran (every request waits meanwhile)
        "bolideLoopLagMaxMs": f"{broker.loop_lag.max_ms:.1f}",
        "bolideLoopLagDistribution": broker.loop_lag.distribution_text(),
        "startAcceptSendRequestTimeStamp": "0",
        "pageCacheLockTimeMills": "0",
        # one event loop serves every request: there are no thread pool queues
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueCapacity": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueCapacity": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "queryThreadPoolQueueSize": "0",
        "queryThreadPoolQueueCapacity": "0",
    }
    table.update(stats.tps_text())
    table.update({f"{TABLE_PREFIX}{name}": str(size) for name, size in table_sizes(broker).items()})
    return table


TABLE_PREFIX = "bolideTable"


def table_sizes(broker: BrokerController) -> dict[str, int]:
    """Bolide's: how many entries the broker's in-memory tables hold (its memory must stay flat
    whatever the clients do: ``bench/soak.py`` watches these)."""
    clients = broker.clients
    sizes = {
        "Connections": len(broker.server.channels),
        "ClientChannels": len(clients.channels),
        "ProducerGroups": len(clients.producers),
        "ConsumerGroups": len(clients.consumers),
        "HeldPulls": broker.pull_holds.held,
        "StatsItems": len(broker.stats_items),
        "Topics": len(broker.topics.table),
        "SubscriptionGroups": len(broker.subscription_groups.names()),
        "ConsumerOffsets": broker.offsets.pairs(),
    }
    sizes.update(broker.pop.sizes())
    return sizes
