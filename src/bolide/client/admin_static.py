"""Calls of :class:`~bolide.client.admin.Admin` for static topics (RocketMQ 5's logic queues):
what mqadmin's ``updateStaticTopic`` and ``remappingStaticTopic`` do (RocketMQ's MQAdminUtils).

Both read every broker's config and mapping of the topic (GET_TOPIC_CONFIG 351 with ``lo=true``),
plan the change (:mod:`bolide.protocol.static_topic_plan`), write the mappings before and after
to ``<tmpdir>/<topic>-<epoch>.before|.after`` and send each broker its part
(UPDATE_AND_CREATE_STATIC_TOPIC 513). A remapping does it in RocketMQ's five steps: the brokers
taking queues in (their new items without a logic offset yet), the brokers giving them away (no
longer leaders: they stop taking writes), the old leaders' ends (GET_TOPIC_STATS_INFO 202) made
the new items' logic offsets, the brokers taking queues in again, then every other broker.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bolide.client.errors import ClientConfigError
from bolide.errors import BolideError
from bolide.protocol import RequestCode, ResponseCode
from bolide.protocol.bodies.admin import TopicOffset, TopicStatsTable
from bolide.protocol.bodies.broker import TopicConfig, TopicConfigAndQueueMapping
from bolide.protocol.bodies.client import MessageQueue
from bolide.protocol.bodies.route import MASTER_ID, ClusterInfo
from bolide.protocol.bodies.static_topic import TopicQueueMappingDetail
from bolide.protocol.headers import CreateTopicRequestHeader, GetTopicStatsInfoRequestHeader
from bolide.protocol.headers.admin import GetTopicConfigRequestHeader
from bolide.protocol.java_order import hash_order
from bolide.protocol.static_topic_checks import build_mapping_items, check_name_epoch_num, details
from bolide.protocol.static_topic_plan import Shuffle, create_plan, decide_logic_offsets, remapping_plan
from bolide.protocol.static_topic_wrapper import (
    TYPE_CREATE_OR_UPDATE,
    ConfigMap,
    RemappingDetail,
    StaticTopicError,
    new_config,
)

if TYPE_CHECKING:
    from bolide.protocol import RemotingCommand
    from bolide.protocol.headers.base import Header

DEFAULT_TOPIC = "TBW102"


@dataclass
class StaticTopicChange:
    """What a static topic command did: the plan, the files written, and each write
    (step, broker name, address) in order."""

    plan: RemappingDetail
    old_file: Path | None = None
    new_file: Path | None = None
    writes: list[tuple[str, str, str]] = field(default_factory=list)


class StaticTopicAdminCalls:
    """Mixed into Admin: needs its ``_call`` and ``cluster_info``."""

    if TYPE_CHECKING:
        async def _call(self, addr: str, code: int, header: Header | None, what: str,
                        body: bytes = b"", ok: tuple[int, ...] = ...) -> RemotingCommand: ...

        async def cluster_info(self) -> ClusterInfo: ...

    # -- single calls -------------------------------------------------------------------------
    async def topic_config(self, broker_addr: str, topic: str) -> TopicConfigAndQueueMapping | None:
        """The broker's config of ``topic`` with its static topic mapping (GET_TOPIC_CONFIG 351,
        ``lo=true``); None when the broker does not have the topic."""
        response = await self._call(broker_addr, RequestCode.GET_TOPIC_CONFIG,
                                    GetTopicConfigRequestHeader(topic=topic, lo=True),
                                    f"GET_TOPIC_CONFIG of {topic!r}",
                                    ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        return TopicConfigAndQueueMapping.decode(response.body_bytes())

    async def create_static_topic(self, broker_addr: str, config: TopicConfig,
                                  detail: TopicQueueMappingDetail, force: bool = False) -> None:
        """Send one broker its config and mapping of a static topic (UPDATE_AND_CREATE_STATIC_TOPIC
        513); ``force`` makes it take a mapping that contradicts the one it holds."""
        header = CreateTopicRequestHeader(topic=config.topic_name, default_topic=DEFAULT_TOPIC,
                                          read_queue_nums=config.read_queue_nums,
                                          write_queue_nums=config.write_queue_nums, perm=config.perm,
                                          topic_filter_type=config.topic_filter_type,
                                          topic_sys_flag=config.topic_sys_flag, order=config.order,
                                          force=force)
        await self._call(broker_addr, RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC, header,
                         f"updateStaticTopic {config.topic_name!r}", body=detail.encode())

    async def broker_topic_stats(self, broker_addr: str, topic: str) -> dict[MessageQueue, TopicOffset]:
        """Min and max offset of each of the broker's physical queues of ``topic`` (202)."""
        response = await self._call(broker_addr, RequestCode.GET_TOPIC_STATS_INFO,
                                    GetTopicStatsInfoRequestHeader(topic=topic), "GET_TOPIC_STATS_INFO")
        return TopicStatsTable.decode(response.body_bytes()).offset_table

    async def static_topic_configs(self, topic: str) -> ConfigMap:
        """Every master's config of ``topic`` by broker name (MQAdminUtils.examineTopicConfigAll)."""
        info = await self.cluster_info()
        found: ConfigMap = {}
        for broker, addr in sorted(_masters(info).items()):
            config = await self.topic_config(addr, topic)
            if config is not None:
                found[broker] = config
        return found

    # -- the commands -------------------------------------------------------------------------
    async def update_static_topic(self, topic: str, queue_num: int, *, brokers: Iterable[str] = (),
                                  clusters: Iterable[str] = (), force: bool = False,
                                  temp_dir: str | Path | None = None,
                                  shuffle: Shuffle = random.shuffle) -> StaticTopicChange:
        """Create static topic ``topic`` with ``queue_num`` logic queues on ``brokers`` (or the
        brokers of ``clusters``), or add queues up to ``queue_num`` (mqadmin updateStaticTopic)."""
        info = await self.cluster_info()
        targets = _targets(info, brokers, clusters)
        configs = await self.static_topic_configs(topic)
        checked = check_name_epoch_num(topic, configs) if configs else None
        directory = Path(temp_dir or tempfile.gettempdir())
        old = RemappingDetail(topic, TYPE_CREATE_OR_UPDATE,
                              checked[0] if checked else _now_ms(), configs)
        change = StaticTopicChange(create_plan(topic, queue_num, targets, configs, shuffle=shuffle))
        change.old_file = old.write_to(directory, after=False)
        change.new_file = change.plan.write_to(directory, after=True)
        _complete_no_target_brokers(change.plan, info)
        async with _resumable(change, "updateStaticTopic"):
            await self._write_all(change, info, "update", force)
        return change

    async def remap_static_topic(self, topic: str, *, brokers: Iterable[str] = (),
                                 clusters: Iterable[str] = (), force: bool = False,
                                 temp_dir: str | Path | None = None) -> StaticTopicChange:
        """Move ``topic``'s logic queues onto ``brokers`` (or the brokers of ``clusters``), as
        evenly as can be with the fewest moves (mqadmin remappingStaticTopic)."""
        info = await self.cluster_info()
        targets = _targets(info, brokers, clusters)
        masters = _masters(info)
        for broker in targets:
            if broker not in masters:
                raise StaticTopicError(f"Can't find addr for broker {broker}: it has no master "
                                       "registered with the NameServer; start it or check the name")
        configs = await self.static_topic_configs(topic)
        if not configs:
            raise StaticTopicError(f"No topic route to do the remapping: no broker has topic {topic!r}; "
                                   "create it with updateStaticTopic")
        checked = check_name_epoch_num(topic, configs)
        assert checked is not None
        directory = Path(temp_dir or tempfile.gettempdir())
        old = RemappingDetail(topic, TYPE_CREATE_OR_UPDATE, checked[0], configs)
        change = StaticTopicChange(remapping_plan(topic, configs, targets))
        change.old_file = old.write_to(directory, after=False)
        change.new_file = change.plan.write_to(directory, after=True)
        _complete_no_target_brokers(change.plan, info)
        async with _resumable(change, "remappingStaticTopic"):
            await self._remap(change, info, force)
        return change

    async def apply_static_topic_file(self, topic: str, path: str | Path, *, remap: bool,
                                      force: bool = False) -> StaticTopicChange:
        """Send the brokers the mappings of a TopicRemappingDetailWrapper file (``-mf``): a
        remapping's in its five steps, else every broker's at once."""
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ClientConfigError(f"cannot read the mapping file {path}: {exc}") from None
        plan = RemappingDetail.from_json(data)
        if not plan.broker_config_map:
            raise StaticTopicError(f"the mapping file {path} holds no broker's mapping")
        check_name_epoch_num(topic, plan.broker_config_map)
        build_mapping_items(details(plan.broker_config_map))
        info = await self.cluster_info()
        change = StaticTopicChange(plan)
        if remap:
            await self._remap(change, info, force)
        else:
            _complete_no_target_brokers(plan, info)
            await self._write_all(change, info, "update", force)
        return change

    # -- steps --------------------------------------------------------------------------------
    async def _write(self, change: StaticTopicChange, masters: dict[str, str], step: str,
                     broker: str, force: bool) -> None:
        config = change.plan.broker_config_map[broker]
        assert config.mapping_detail is not None
        await self.create_static_topic(masters[broker], config, config.mapping_detail, force)
        change.writes.append((step, broker, masters[broker]))

    async def _write_all(self, change: StaticTopicChange, info: ClusterInfo, step: str,
                         force: bool) -> None:
        """MQAdminUtils.updateTopicConfigMappingAll: every broker, in the order of its map."""
        masters = _alive(info, change.plan.broker_config_map)
        for broker in hash_order(list(change.plan.broker_config_map)):
            await self._write(change, masters, step, broker, force)

    async def _remap(self, change: StaticTopicChange, info: ClusterInfo, force: bool) -> None:
        """MQAdminUtils.remappingStaticTopic's five steps."""
        plan = change.plan
        masters = _alive(info, plan.broker_config_map)
        map_in, map_out = hash_order(plan.broker_to_map_in), hash_order(plan.broker_to_map_out)
        for broker in map_in:
            await self._write(change, masters, "map-in", broker, force)
        for broker in map_out:
            await self._write(change, masters, "map-out", broker, force)
        for broker in map_out:
            stats = await self.broker_topic_stats(masters[broker], plan.topic)
            decide_logic_offsets(plan, broker, {(mq.broker_name, mq.queue_id): o.max_offset
                                                for mq, o in stats.items()})
        for broker in map_in:
            await self._write(change, masters, "map-in-offsets", broker, force)
        for broker in hash_order(list(plan.broker_config_map)):
            if broker not in map_in and broker not in map_out:
                await self._write(change, masters, "others", broker, force)


@contextlib.asynccontextmanager
async def _resumable(change: StaticTopicChange, command: str) -> AsyncIterator[None]:
    """A failed write names the file to send again once its cause is fixed."""
    try:
        yield
    except BolideError as exc:
        done = ", ".join(f"{step} {broker}" for step, broker, _ in change.writes) or "none"
        raise StaticTopicError(f"{exc} (mappings sent: {done}); once that is fixed, send the "
                               f"planned ones with: {command} -t {change.plan.topic} "
                               f"-mf {change.new_file}") from exc


def _now_ms() -> int:
    return int(time.time() * 1000)


def _masters(info: ClusterInfo) -> dict[str, str]:
    """Broker name -> master address."""
    return {name: bd.broker_addrs[MASTER_ID] for name, bd in info.broker_addr_table.items()
            if MASTER_ID in bd.broker_addrs}


def _alive(info: ClusterInfo, brokers: Iterable[str]) -> dict[str, str]:
    """MQAdminUtils.checkIfMasterAlive: every broker's master address."""
    masters = _masters(info)
    for broker in brokers:
        if broker not in masters:
            raise StaticTopicError(f"Can't find addr for broker {broker}: it has no master registered "
                                   "with the NameServer; start it, or wait for it to register")
    return masters


def _targets(info: ClusterInfo, brokers: Iterable[str], clusters: Iterable[str]) -> list[str]:
    """The target broker names of ``-b`` (comma-separated names) or ``-c`` (their brokers)."""
    if not info.cluster_addr_table:
        raise StaticTopicError("The Cluster info is empty: no broker is registered with the NameServer")
    found = [b.strip() for text in brokers for b in text.split(",") if b.strip()]
    for text in clusters:
        for cluster in (c.strip() for c in text.split(",")):
            found.extend(sorted(info.cluster_addr_table.get(cluster, ())))
    if not found:
        known = ", ".join(sorted(info.cluster_addr_table))
        raise StaticTopicError(f"Find none brokers, do nothing: give broker names with -b, or "
                               f"clusters with -c (known: {known})")
    return list(dict.fromkeys(found))


def _complete_no_target_brokers(plan: RemappingDetail, info: ClusterInfo) -> None:
    """MQAdminUtils.completeNoTargetBrokers: every other broker of the clusters the topic is in
    gets the topic with no queues and the new epoch (so it knows the topic is static)."""
    first = next(iter(plan.broker_config_map.values()))
    assert first.mapping_detail is not None
    total, epoch = first.mapping_detail.total_queues, first.mapping_detail.epoch
    wanted: set[str] = set()
    for broker in plan.broker_config_map:
        for names in info.cluster_addr_table.values():
            if broker in names:
                wanted |= names
                break
    for broker in sorted(wanted - set(plan.broker_config_map)):
        plan.broker_config_map[broker] = new_config(plan.topic, broker, total, epoch)
