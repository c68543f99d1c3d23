"""A slave's copy of its master's metadata (RocketMQ's SlaveSynchronize): right after it
learns the master's broker address from a registration, then every
``bolideSlaveSyncInterval`` ms, it asks the master for GET_ALL_TOPIC_CONFIG (21),
GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45), GET_ALL_SUBSCRIPTIONGROUP_CONFIG
(201), GET_ALL_MESSAGE_REQUEST_MODE (402) and GET_TIMER_METRICS (61), takes them as its own and
writes its ``config/*.json`` files (and ``timermetrics``); then it pulls the records of compacted
topics older than its CommitLog copy (:mod:`bolide.broker.ha.compaction_heads`).

As in RocketMQ: topics and subscription groups are replaced only when the master's data
version differs from the slave's (the slave then takes the master's version; a copy fetched
while the slave's own table changed waits for the next round); consumer offsets
of every ``topic@group`` the master has replace the slave's (an offset a consumer committed to
the slave lasts until the next sync); the delay offsets are replaced as a whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING

from bolide.broker.ha.compaction_heads import fetch_heads
from bolide.broker.loop_service import LoopService
from bolide.broker.request_modes import MessageRequestModes
from bolide.common.waiting import wait_for
from bolide.errors import BolideError
from bolide.protocol.bodies.broker import DataVersion, TopicConfigSerializeWrapper
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.store import config_files
from bolide.store import topic_config as stored
from bolide.store.config_files import ConsumerOffsetManager, DelayOffsetManager
from bolide.store.timer_metrics import TimerMetrics

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

TIMEOUT_MS = 3000  # per call, as RocketMQ's BrokerOuterAPI


class SlaveSyncError(BolideError):
    """The master refused or failed one of the calls."""


def _same_version(a: DataVersion | config_files.DataVersion,
                  b: DataVersion | config_files.DataVersion) -> bool:
    return (a.timestamp, a.counter) == (b.timestamp, b.counter)


class SlaveSync(LoopService):
    """Runs on the broker's loop; ``set_master`` is fed by the registration results."""

    TASK_NAME = "bolide-slave-sync"

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.master_addr: str | None = None
        self.rounds = 0  # sync rounds completed without an error
        self._failing = False
        self._wake = asyncio.Event()

    def set_master(self, addr: str | None) -> None:
        """Sync with the master at ``addr`` ("ip:port", its main port) from now on, starting
        at once when the address is new. None (the NameServer knows no master) keeps the
        last one."""
        if not addr or addr == self.master_addr or addr == self.broker.broker_addr:
            return
        log.info("slave sync: master broker address is now %s", addr)
        self.master_addr = addr
        self._wake.set()


    def clear_master(self) -> None:
        """The master went offline (slave acting master): copy nothing until it is set again."""
        if self.master_addr is not None:
            log.info("slave sync: master %s is offline; not syncing until it is back", self.master_addr)
        self.master_addr = None

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            if self.master_addr:
                try:
                    await self.sync_all()
                except Exception:  # keep syncing later; never let the task die silently
                    log.exception("slave sync from master %s failed", self.master_addr)
            with contextlib.suppress(TimeoutError):
                await wait_for(self._wake.wait(),
                                       self.broker.config.slave_sync_interval_ms / 1000)

    async def sync_all(self) -> bool:
        """One round: topics, consumer offsets, delay offsets, subscription groups, request
        modes, timer metrics. Each part that fails is logged and left as it was; True when every part
        succeeded."""
        addr = self.master_addr
        if not addr:
            return False
        errors = []
        for what, part in (("topic configs", self._sync_topics),
                           ("consumer offsets", self._sync_consumer_offsets),
                           ("delay offsets", self._sync_delay_offsets),
                           ("subscription groups", self._sync_subscription_groups),
                           ("request modes", self._sync_request_modes),
                           ("timer metrics", self._sync_timer_metrics)):
            try:
                await part(addr)
            except (BolideError, ValueError, OSError) as exc:
                errors.append(f"{what}: {exc}")
        await fetch_heads(self.broker, addr)  # compacted queues' records older than the copy
        if errors:
            if not self._failing:  # once per failure streak: the master may be down a while
                log.warning("slave sync from master %s failed (%s); retrying every %d ms",
                            addr, "; ".join(errors), self.broker.config.slave_sync_interval_ms)
            self._failing = True
            return False
        if self._failing:
            log.info("slave sync from master %s works again", addr)
        self._failing = False
        self.rounds += 1
        return True

    async def _fetch(self, addr: str, code: RequestCode) -> bytes:
        response = await self.broker.namesrv_client.invoke(
            addr, RemotingCommand.request(code), TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise SlaveSyncError(f"{code.name} answered code {response.code}: {response.remark}")
        return response.body_bytes()

    async def _sync_topics(self, addr: str) -> None:
        topics = self.broker.topics
        before = topics.data_version
        wrapper = TopicConfigSerializeWrapper.decode(
            await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        master_version = wrapper.data_version
        if (_same_version(master_version, topics.data_version)
                or not _same_version(before, topics.data_version)):
            return  # the same, or changed here meanwhile: the next round takes a fresher copy
        for name in [n for n in topics.table if n not in wrapper.topic_config_table]:
            topics.delete(name)
        for name, tc in wrapper.topic_config_table.items():
            if topics.get(name) != tc:
                topics.update(tc)
        topics.file.data_version = config_files.DataVersion(
            counter=master_version.counter, timestamp=master_version.timestamp,
            state_version=master_version.state_version)
        await asyncio.to_thread(topics.persist)
        log.info("slave sync: %d topic configs from master %s", len(wrapper.topic_config_table), addr)

    async def _sync_consumer_offsets(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        master = ConsumerOffsetManager(self.broker.offsets.path)  # a scratch table: not written
        master.decode(body)
        self.broker.offsets.take(master)
        await asyncio.to_thread(self.broker.offsets.persist)

    async def _sync_delay_offsets(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        DelayOffsetManager(self.broker.delay_offsets.path).decode(body)  # check before replacing
        self.broker.delay_offsets.decode(body)
        await asyncio.to_thread(self.broker.delay_offsets.persist)

    async def _sync_subscription_groups(self, addr: str) -> None:
        groups = self.broker.subscription_groups
        before = dataclasses.replace(groups.file.data_version)
        body = await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        master = stored.SubscriptionGroupManager(groups.path)  # a scratch table: not written
        master.decode(body)
        if (_same_version(groups.file.data_version, master.data_version)
                or not _same_version(before, groups.file.data_version)):
            return
        groups.file.decode(body)
        await asyncio.to_thread(groups.persist)
        log.info("slave sync: %d subscription groups from master %s", len(master.names()), addr)

    async def _sync_request_modes(self, addr: str) -> None:
        """RocketMQ 5's consumer groups' request modes; a master that has none to give (a
        RocketMQ 4.x one answers REQUEST_CODE_NOT_SUPPORTED) leaves the slave's as they are."""
        response = await self.broker.namesrv_client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE), TIMEOUT_MS)
        if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            return
        if response.code != ResponseCode.SUCCESS:
            raise SlaveSyncError(f"GET_ALL_MESSAGE_REQUEST_MODE answered code {response.code}: "
                                 f"{response.remark}")
        modes = self.broker.request_modes
        master = MessageRequestModes(modes.path)  # a scratch table: not written
        master.decode(response.body_bytes())
        if master.table != modes.table:
            modes.table = master.table
            await asyncio.to_thread(modes.persist)

    async def _sync_timer_metrics(self, addr: str) -> None:
        """RocketMQ 5's timer metrics, taken whole when the master's data version differs (not
        when this broker's timers are off; a RocketMQ 4.x master has none to give)."""
        if not self.broker.config.timer_wheel_enable:
            return
        response = await self.broker.namesrv_client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_TIMER_METRICS), TIMEOUT_MS)
        if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            return
        if response.code != ResponseCode.SUCCESS:
            raise SlaveSyncError(f"GET_TIMER_METRICS answered code {response.code}: {response.remark}")
        metrics = self.broker.timer_metrics
        master = TimerMetrics(metrics.path)  # a scratch table: not written
        master.decode(response.body_bytes())
        if not _same_version(master.data_version, metrics.data_version):
            metrics.decode(response.body_bytes())
            await asyncio.to_thread(metrics.persist)
