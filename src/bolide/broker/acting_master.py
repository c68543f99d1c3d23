"""A broker's part of RocketMQ 5's slave acting master (``enableSlaveActingMaster=true``, a
master/slave group without controller): what BrokerController does in ``sendHeartbeat``,
``syncBrokerMemberGroup``, ``updateMinBroker`` and ``onMinBrokerChange``.

Every broker of the group:

- heartbeats to each NameServer every ``brokerHeartbeatInterval`` ms (one way), so that one
  silent for ``brokerNotActiveTimeoutMillis`` (sent in its registrations) is dropped: with
  ``compatibleWithOldNameSrv=true`` (RocketMQ's default) as QUERY_DATA_VERSION, otherwise as
  BROKER_HEARTBEAT;
- learns its group's live members every ``syncBrokerMemberGroupPeriod`` ms: with
  ``compatibleWithOldNameSrv`` from the route of its ``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>``
  topic, otherwise by GET_BROKER_MEMBER_GROUP; and from NOTIFY_MIN_BROKER_ID_CHANGE when the
  NameServer sends it.

A slave that finds itself the group's lowest live id acts as master: the broker's special
services (delay-level schedule with timer messages, transaction check) run, writing through the
:class:`~bolide.broker.escape.EscapeBridge`, and consumers commit offsets, pop and lock queues
on it; it stops copying the master's metadata while the master is away. When a lower id (the
master) comes back, the services stop and the copy resumes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bolide.broker.namesrv_route import ROUTE_TIMEOUT_MS, route_from_namesrv
from bolide.broker.topic_config import SYNC_BROKER_MEMBER_GROUP_PREFIX
from bolide.common.waiting import cancel_and_wait
from bolide.errors import ProtocolError, RemotingError
from bolide.protocol.bodies.route import MASTER_ID, GetBrokerMemberGroupResponseBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import BrokerHeartbeatRequestHeader
from bolide.protocol.headers.namesrv import (
    GetBrokerMemberGroupRequestHeader,
    NotifyMinBrokerIdChangeRequestHeader,
    QueryDataVersionRequestHeader,
)

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

def member_group_topic(broker_name: str) -> str:
    """The system topic whose route names the live members of ``broker_name``'s group."""
    return SYNC_BROKER_MEMBER_GROUP_PREFIX + broker_name


class ActingMaster:
    """Heartbeats, member group sync and the lowest live id of the broker's group."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.min_broker_id = MASTER_ID  # RocketMQ starts from the master's id, too
        self.min_broker_addr: str | None = None
        self.members: dict[int, str] = {}  # the last member group learned
        self._tasks: list[asyncio.Task[None]] = []
        self._switching: set[asyncio.Task[None]] = set()
        self._switch_lock = asyncio.Lock()

    @property
    def acting(self) -> bool:
        """This slave serves as its group's master now."""
        own = self.broker.config.broker_id
        return own != MASTER_ID and own == self.min_broker_id

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.broker.config
        self._tasks = [
            loop.create_task(self._every(cfg.broker_heartbeat_interval_ms, self.send_heartbeat),
                             name="bolide-namesrv-heartbeat"),
            loop.create_task(self._every(cfg.sync_broker_member_group_period_ms,
                                         self.sync_member_group), name="bolide-member-group-sync"),
        ]

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks + list(self._switching))

    @staticmethod
    async def _every(period_ms: int, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep going: a NameServer may be down for a while
                log.exception("slave acting master: %s failed", getattr(job, "__name__", job))
            await asyncio.sleep(period_ms / 1000)

    # -- NameServer calls -----------------------------------------------------------------
    async def send_heartbeat(self) -> None:
        """One heartbeat to each NameServer (one way; failures are logged at debug level)."""
        broker = self.broker
        cfg = broker.config
        for addr in cfg.namesrv_addrs:
            if cfg.compatible_with_old_name_srv:
                request = RemotingCommand.request(
                    RequestCode.QUERY_DATA_VERSION, QueryDataVersionRequestHeader(
                        broker_name=cfg.broker_name, broker_addr=broker.broker_addr,
                        cluster_name=cfg.broker_cluster_name, broker_id=cfg.broker_id),
                    broker.topics.data_version.encode(), oneway=True)
            else:
                request = RemotingCommand.request(
                    RequestCode.BROKER_HEARTBEAT, BrokerHeartbeatRequestHeader(
                        cluster_name=cfg.broker_cluster_name, broker_addr=broker.broker_addr,
                        broker_name=cfg.broker_name), oneway=True)
            try:
                await broker.namesrv_client.invoke_oneway(addr, request, cfg.send_heartbeat_timeout_ms)
            except (RemotingError, ProtocolError, OSError) as exc:
                log.debug("heartbeat to NameServer %s failed: %s", addr, exc)

    async def fetch_member_group(self) -> dict[int, str]:
        """The live members of this broker's group ({} when no NameServer knows them)."""
        cfg = self.broker.config
        if cfg.compatible_with_old_name_srv:
            route = await route_from_namesrv(self.broker, member_group_topic(cfg.broker_name))
            for data in route.broker_datas if route is not None else []:
                if data.broker_name == cfg.broker_name and data.cluster == cfg.broker_cluster_name:
                    return dict(data.broker_addrs)
            return {}
        header = GetBrokerMemberGroupRequestHeader(cluster_name=cfg.broker_cluster_name,
                                                   broker_name=cfg.broker_name)
        for addr in cfg.namesrv_addrs:
            request = RemotingCommand.request(RequestCode.GET_BROKER_MEMBER_GROUP, header)
            try:
                response = await self.broker.namesrv_client.invoke(addr, request, ROUTE_TIMEOUT_MS)
            except (RemotingError, ProtocolError, OSError) as exc:
                log.info("GET_BROKER_MEMBER_GROUP from NameServer %s failed: %s", addr, exc)
                continue
            if response.code == ResponseCode.SUCCESS and response.body_bytes():
                body = GetBrokerMemberGroupResponseBody.decode(response.body_bytes())
                group = body.broker_member_group
                return dict(group.broker_addrs) if group is not None else {}
        return {}

    async def sync_member_group(self) -> None:
        """syncBrokerMemberGroup: learn the members; a slave follows the lowest id."""
        members = await self.fetch_member_group()
        if not members:
            return
        self.members = members
        min_id = min(members)
        self.update_min_broker(min_id, members[min_id])

    # -- the lowest live id ---------------------------------------------------------------
    def update_min_broker(self, min_id: int, min_addr: str | None) -> None:
        """From the member group: a higher lowest id means the previous one went offline."""
        if min_id == self.min_broker_id:
            self.min_broker_addr = min_addr  # known from here on: the offline one when it goes
            return
        if not self._follows():
            return
        offline = self.min_broker_addr if min_id > self.min_broker_id else None
        self._changed(min_id, min_addr, offline, None)

    def notified(self, header: NotifyMinBrokerIdChangeRequestHeader) -> None:
        """NOTIFY_MIN_BROKER_ID_CHANGE from a NameServer."""
        log.warning("min broker id changed, prev %d, new %s", self.min_broker_id, header.min_broker_id)
        if header.min_broker_id is None or header.min_broker_id == self.min_broker_id:
            return
        if self._follows():
            self._changed(header.min_broker_id, header.min_broker_addr,
                          header.offline_broker_addr, header.ha_broker_addr)

    def _follows(self) -> bool:
        return self.broker.config.broker_id != MASTER_ID

    def _changed(self, min_id: int, min_addr: str | None, offline_addr: str | None,
                 master_ha_addr: str | None) -> None:
        broker = self.broker
        log.info("min broker changed, old: %d-%s, new %d-%s", self.min_broker_id,
                 self.min_broker_addr, min_id, min_addr)
        self.min_broker_id, self.min_broker_addr = min_id, min_addr
        sync = broker.slave_sync
        if offline_addr is not None and sync is not None and offline_addr == sync.master_addr:
            sync.clear_master()  # the master is gone: stop copying its metadata
        if min_id == MASTER_ID and min_addr:  # the master is back
            if sync is not None:
                sync.set_master(min_addr)
            if master_ha_addr and broker.ha_slave is not None:
                broker.ha_slave.set_master(master_ha_addr)
            if broker.registration is not None:
                broker.registration.request_register()  # its answer names the master again
        task = asyncio.get_running_loop().create_task(self._switch())
        self._switching.add(task)
        task.add_done_callback(self._switching.discard)

    async def _switch(self) -> None:
        """Start or stop the special services as the latest state says (one switch at a time)."""
        async with self._switch_lock:
            await self.broker.set_special_services(self.acting)

    async def settled(self) -> None:
        """Wait for the service switches under way."""
        while self._switching:
            await asyncio.gather(*self._switching, return_exceptions=True)
