"""A controller-mode broker's dealings with the controller (RocketMQ 5's ``ReplicasManager``).

At start: find the leading controller (GET_METADATA_INFO to each of ``controllerAddr``), get an
id (the identity files of :mod:`bolide.store.broker_identity`: GET_NEXT_BROKER_ID, the temp
file, APPLY_BROKER_ID, the identity file), register (CONTROLLER_REGISTER_BROKER), send a
heartbeat and, when the group has no master, ask for an election (ELECT_MASTER). Until then the
broker is fenced: its store refuses sends and it does not register with the NameServers.
Retried every :data:`RETRY_S` until it works.

Then, on the broker's loop: heartbeats (904) to every controller each
``brokerHeartbeatInterval``; GET_REPLICA_INFO each ``syncBrokerMetadataPeriod`` (a newer master
epoch changes the role; no master: ELECT_MASTER); the leader looked up again each
``syncControllerMetadataPeriod``; while master, the in-sync set checked each
``checkSyncStateSetPeriod`` and ALTER_SYNC_STATE_SET sent when it changed. A role change told by
the controller (NOTIFY_BROKER_ROLE_CHANGED) goes through :meth:`change_role` too.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from bolide.broker.config import BrokerConfig
from bolide.broker.replicas.controller_client import ControllerCallError, ControllerClient, MasterInfo
from bolide.common.waiting import cancel_and_wait
from bolide.errors import ConfigError
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers.controller import BrokerHeartbeatRequestHeader
from bolide.store.broker_identity import (
    BrokerIdentity,
    TempBrokerIdentity,
    read_identity,
    read_temp_identity,
    remove_identity,
    temp_path,
    write_identity,
)

log = logging.getLogger(__name__)

RETRY_S = 5.0  # RocketMQ retries its start every 5 s
REGISTER_TRIES = 5


class State(enum.Enum):
    INITIAL = "INITIAL"
    CONTROLLER_FOUND = "FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE"
    REGISTERED = "REGISTER_TO_CONTROLLER_DONE"
    RUNNING = "RUNNING"
    SHUTDOWN = "SHUTDOWN"


class RegisterState(enum.Enum):
    INITIAL = "INITIAL"
    TEMP_FILE_DONE = "CREATE_TEMP_METADATA_FILE_DONE"
    FILE_DONE = "CREATE_METADATA_FILE_DONE"
    REGISTERED = "REGISTERED"


class RoleTarget(Protocol):
    """What the manager switches and reads: the broker (:class:`~bolide.broker.replicas.roles.RoleSwitch`)."""

    broker_addr: str
    in_sync_changed: Callable[[], None] | None  # set by the manager: report at once

    async def to_master(self, epoch: int, sync_state_set: frozenset[int], sync_state_set_epoch: int,
                        own_id: int) -> None: ...

    async def to_slave(self, master_addr: str, master_id: int, epoch: int, own_id: int) -> None: ...

    async def reregister(self) -> None: ...

    async def new_epoch(self, epoch: int) -> None: ...

    def last_epoch(self) -> int: ...

    def max_offset(self) -> int: ...

    def confirm_offset(self) -> int: ...

    def in_sync_replicas(self) -> set[int] | None: ...

    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None: ...


class ReplicasManager:
    """Runs on the broker's loop; :meth:`start` returns at once, the registration goes on in
    the background (``registered`` is set once the role is known)."""

    def __init__(self, config: BrokerConfig, client: ControllerClient, identity_path: Path,
                 target: RoleTarget) -> None:
        self.config = config
        self.client = client
        self.identity_path = identity_path
        self.temp_path = temp_path(identity_path)
        self.target = target
        self.state = State.INITIAL
        self.register_state = RegisterState.INITIAL
        self.controller_addrs: list[str] = config.controller_addrs
        self.leader: str | None = None
        self.broker_controller_id: int | None = None  # the id the controller applied
        self.master_broker_id: int | None = None
        self.master_address = ""
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.is_master = False
        self.role_known = asyncio.Event()
        self._lock = asyncio.Lock()  # one role change at a time
        self._tasks: list[asyncio.Task[None]] = []
        self._report: asyncio.Task[None] | None = None
        target.in_sync_changed = self.report_soon

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._start_loop(), name="bolide-replicas-start"))

    async def close(self) -> None:
        self.state = State.SHUTDOWN
        await cancel_and_wait([*self._tasks, *([self._report] if self._report else [])])
        self._tasks.clear()

    async def _start_loop(self) -> None:
        tries = 0
        while not await self.start_basic():
            tries += 1
            log.warning("controller mode: not registered yet (state %s, try %d); again in %.0f s",
                        self.state.value, tries, RETRY_S)
            await asyncio.sleep(RETRY_S)
        log.info("controller mode: running as broker id %s of %s (master %s, epoch %d)",
                 self.broker_controller_id, self.config.broker_name, self.master_broker_id,
                 self.master_epoch)
        for name, period, job in (
                ("heartbeat", self.config.broker_heartbeat_interval_ms, self.send_heartbeats),
                ("sync-broker-metadata", self.config.sync_broker_metadata_period_ms, self.sync_replica_info),
                ("sync-controller-metadata", self.config.sync_controller_metadata_period_ms,
                 self.update_leader),
                ("check-sync-state-set", self.config.check_sync_state_set_period_ms,
                 self.check_sync_state_set)):
            self._tasks.append(asyncio.get_running_loop().create_task(
                self._every(period / 1000, job), name=f"bolide-replicas-{name}"))

    async def _every(self, period: float, job: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await job()
            except ControllerCallError as exc:
                log.warning("controller mode: %s", exc)
            except Exception:  # keep the schedule; never let the task die silently
                log.exception("controller mode: %s failed", getattr(job, "__name__", job))

    async def start_basic(self) -> bool:
        """One try of RocketMQ's startBasicService; True once the role is known."""
        if self.state is State.INITIAL:
            if not await self._first_leader():
                return False
            self.state = State.CONTROLLER_FOUND
        if self.state is State.CONTROLLER_FOUND:
            for _ in range(REGISTER_TRIES):
                if await self.register():
                    self.state = State.REGISTERED
                    break
                await asyncio.sleep(random.random())  # registrations racing for one id
            else:
                return False
        if self.state is State.REGISTERED:
            await self.send_heartbeats()
            if self.master_broker_id is None and not await self.elect():
                return False
            self.state = State.RUNNING
        return True

    # -- the controller leader -----------------------------------------------------------
    async def _resolve_addrs(self) -> None:
        if not self.config.fetch_controller_addr_by_dns_lookup:
            self.controller_addrs = self.config.controller_addrs
            return
        found: list[str] = []
        for entry in self.config.controller_addrs:
            host, _, port = entry.rpartition(":")
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(host, int(port),
                                                                     type=socket.SOCK_STREAM)
            except (OSError, ValueError) as exc:
                log.warning("controller mode: cannot resolve controllerAddr %s: %s", entry, exc)
                continue
            found += [f"{info[4][0]}:{port}" for info in infos if info[0] == socket.AF_INET]
        if found:
            self.controller_addrs = list(dict.fromkeys(found))

    async def _first_leader(self) -> bool:
        for _ in range(3):
            if await self.update_leader():
                return True
            await asyncio.sleep(1)
        log.error("controller mode: no controller of %s answered with a leader; check "
                  "controllerAddr and that the controllers run", ";".join(self.controller_addrs))
        return False

    async def update_leader(self) -> bool:
        """GET_METADATA_INFO to the controllers until one names the leader."""
        await self._resolve_addrs()
        for addr in self.controller_addrs:
            try:
                leader = await self.client.leader_address(addr)
            except ControllerCallError as exc:
                log.debug("controller mode: %s", exc)
                continue
            if leader:
                if leader != self.leader:
                    log.info("controller mode: the controller leader is %s", leader)
                self.leader = leader
                return True
        return False

    # -- registration ----------------------------------------------------------------------
    def _confirm_register_state(self) -> None:
        identity = read_identity(self.identity_path)
        if identity is not None:
            self.register_state = RegisterState.FILE_DONE
            self.broker_controller_id = identity.broker_id
            self._check_names(identity, self.identity_path)
            return
        temp = read_temp_identity(self.temp_path)
        if temp is not None:
            self.register_state = RegisterState.TEMP_FILE_DONE
            self._check_names(temp, self.temp_path)

    def _check_names(self, identity: BrokerIdentity, path: Path) -> None:
        cfg = self.config
        if (identity.cluster_name, identity.broker_name) != (cfg.broker_cluster_name, cfg.broker_name):
            raise ConfigError(
                f"the broker identity file {path} is of broker {identity.broker_name} in cluster "
                f"{identity.cluster_name}, but this broker is {cfg.broker_name} in "
                f"{cfg.broker_cluster_name}: set brokerName/brokerClusterName as before, or use "
                "another storePathRootDir")

    async def register(self) -> bool:
        """The id and registration steps of RocketMQ's ``register()``; True once registered.
        A store of another broker name or cluster is logged and never registered."""
        leader = self.leader
        if leader is None:
            return False
        try:
            self._confirm_register_state()
        except ConfigError as exc:
            log.error("controller mode: %s", exc)
            return False
        try:
            if self.register_state is RegisterState.INITIAL:
                next_id = await self.client.next_broker_id(leader)
                code = f"{self.target.broker_addr};{int(time.time() * 1000)}"
                temp = TempBrokerIdentity(self.config.broker_cluster_name, self.config.broker_name,
                                          next_id, code)
                await asyncio.to_thread(write_identity, self.temp_path, temp)
                self.register_state = RegisterState.TEMP_FILE_DONE
                log.info("controller mode: asking for broker id %d", next_id)
            if self.register_state is RegisterState.TEMP_FILE_DONE:
                found = read_temp_identity(self.temp_path)
                if found is None:  # removed meanwhile: start over
                    self.register_state = RegisterState.INITIAL
                    return False
                temp = found
                try:
                    await self.client.apply_broker_id(leader, temp.broker_id, temp.register_check_code)
                except ControllerCallError as exc:
                    if exc.code is None:
                        raise
                    log.warning("controller mode: broker id %d not applied (%s); asking for "
                                "another", temp.broker_id, exc)
                    await asyncio.to_thread(remove_identity, self.temp_path)
                    self.register_state = RegisterState.INITIAL
                    return False
                identity = BrokerIdentity(temp.cluster_name, temp.broker_name, temp.broker_id)
                await asyncio.to_thread(write_identity, self.identity_path, identity)
                await asyncio.to_thread(remove_identity, self.temp_path)
                self.broker_controller_id = identity.broker_id
                self.register_state = RegisterState.FILE_DONE
                log.info("controller mode: this broker's id is %d (in %s)", identity.broker_id,
                         self.identity_path)
            if self.register_state is RegisterState.FILE_DONE:
                if not await self.register_to_controller():
                    return False
                self.register_state = RegisterState.REGISTERED
            return True
        except (ControllerCallError, OSError) as exc:
            log.warning("controller mode: registering failed: %s", exc)
            return False

    async def register_to_controller(self) -> bool:
        leader, own = self.leader, self.broker_controller_id
        if leader is None or own is None:
            return False
        info = await self.client.register(leader, own, self.target.broker_addr)
        if info.has_master:
            await self._apply(info)
        return True

    # -- roles ---------------------------------------------------------------------------
    async def elect(self) -> bool:
        """Ask for an election (no master in the group); True when there is a master now."""
        if self.leader is None or self.broker_controller_id is None:
            return False
        try:
            info = await self.client.elect(self.leader, self.broker_controller_id)
        except ControllerCallError as exc:
            log.warning("controller mode: no master in %s yet (%s)", self.config.broker_name, exc)
            return False
        if not info.has_master:
            return False
        await self._apply(info)
        return True

    async def change_role(self, master_id: int | None, master_addr: str | None, master_epoch: int | None,
                          sync_state_set_epoch: int | None, sync_state_set: set[int]) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED's change (nothing unless the master epoch is newer)."""
        if master_id is None or master_epoch is None:
            return
        await self._apply(MasterInfo(master_id, master_addr, master_epoch, frozenset(sync_state_set),
                                     sync_state_set_epoch or 0))

    async def _apply(self, info: MasterInfo) -> None:
        async with self._lock:
            if info.master_broker_id is not None and info.master_epoch < self.master_epoch:
                log.info("controller mode: master %s of epoch %d ignored: epoch %d is newer",
                         info.master_broker_id, info.master_epoch, self.master_epoch)
                return
            if (info.master_broker_id is None or info.master_epoch <= self.master_epoch
                    or self.state is State.SHUTDOWN):
                return
            own = self.broker_controller_id
            if own is None:  # not registered yet: the registration learns the master
                log.info("controller mode: master %s of epoch %d noted after registering",
                         info.master_broker_id, info.master_epoch)
                return
            if info.master_broker_id == own:
                await self._to_master(info)
            else:
                await self._to_slave(info)
            self.role_known.set()

    async def _to_master(self, info: MasterInfo) -> None:
        log.info("controller mode: %s becomes master (epoch %d)", self.config.broker_name,
                 info.master_epoch)
        self.master_epoch = info.master_epoch
        self._change_sync_state_set(info.sync_state_set, info.sync_state_set_epoch)
        assert self.broker_controller_id is not None
        if self.is_master and self.master_broker_id == self.broker_controller_id:
            await self.target.new_epoch(info.master_epoch)  # elected again: sends go on
            return
        await self.target.to_master(info.master_epoch, self.sync_state_set, self.sync_state_set_epoch,
                                    self.broker_controller_id)
        self.is_master = True
        self.master_broker_id = self.broker_controller_id
        self.master_address = self.target.broker_addr

    async def _to_slave(self, info: MasterInfo) -> None:
        assert info.master_broker_id is not None and self.broker_controller_id is not None
        log.info("controller mode: %s becomes slave of broker %d at %s (epoch %d)",
                 self.config.broker_name, info.master_broker_id, info.master_address,
                 info.master_epoch)
        self.master_epoch = info.master_epoch
        if not self.is_master and info.master_broker_id == self.master_broker_id:
            await self.target.reregister()
            return
        await self.target.to_slave(info.master_address or "", info.master_broker_id,
                                   info.master_epoch, self.broker_controller_id)
        self.is_master = False
        self.master_broker_id = info.master_broker_id
        self.master_address = info.master_address or ""

    def _change_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        if epoch > self.sync_state_set_epoch:
            log.info("controller mode: in-sync set %s -> %s (epoch %d)", sorted(self.sync_state_set),
                     sorted(members), epoch)
            self.sync_state_set, self.sync_state_set_epoch = members, epoch
            self.target.set_sync_state_set(members, epoch)

    # -- periodic jobs -------------------------------------------------------------------
    def heartbeat_header(self) -> BrokerHeartbeatRequestHeader:
        cfg = self.config
        return BrokerHeartbeatRequestHeader(
            cluster_name=cfg.broker_cluster_name, broker_addr=self.target.broker_addr,
            broker_name=cfg.broker_name, broker_id=self.broker_controller_id,
            epoch=self.target.last_epoch(), max_offset=self.target.max_offset(),
            confirm_offset=self.target.confirm_offset(),
            heartbeat_timeout_mills=cfg.controller_heart_beat_timeout_ms,
            election_priority=cfg.broker_election_priority)

    async def send_heartbeats(self) -> None:
        """BROKER_HEARTBEAT to every controller (failures are logged at debug level: a
        controller may be down while another leads)."""
        header = self.heartbeat_header()
        timeout = self.config.send_heartbeat_timeout_ms
        results = await asyncio.gather(*(self.client.heartbeat(addr, header, timeout)
                                         for addr in self.controller_addrs), return_exceptions=True)
        for addr, result in zip(self.controller_addrs, results, strict=True):
            if isinstance(result, BaseException):
                log.debug("controller mode: heartbeat to %s failed: %s", addr, result)

    async def sync_replica_info(self) -> None:
        """GET_REPLICA_INFO: follow a newer master epoch, ask for an election when there is
        no master, take the master's new in-sync set."""
        if self.leader is None:
            return
        try:
            info = await self.client.replica_info(self.leader)
        except ControllerCallError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                await self.register_to_controller()
                return
            raise
        if info.master_epoch > self.master_epoch:
            if info.has_master:
                await self._apply(info)
            else:
                await self.elect()
        elif info.master_epoch == self.master_epoch and self.is_master:
            self._change_sync_state_set(info.sync_state_set, info.sync_state_set_epoch)

    def report_soon(self) -> None:
        """The master's HA saw its in-sync replicas change: report them now (once at a time)."""
        if self._report is None or self._report.done():
            self._report = asyncio.get_running_loop().create_task(self._report_now())

    async def _report_now(self) -> None:
        try:
            await self.check_sync_state_set()
        except ControllerCallError as exc:
            log.warning("controller mode: %s", exc)

    async def check_sync_state_set(self) -> None:
        """The master's in-sync replicas as its HA sees them; ALTER_SYNC_STATE_SET when they
        differ from the controller's set (replication that cannot tell leaves it alone)."""
        if not self.is_master or self.leader is None or self.broker_controller_id is None:
            return
        seen = self.target.in_sync_replicas()
        if seen is None:
            return
        seen = seen | {self.broker_controller_id}
        if seen == set(self.sync_state_set):
            return
        result = await self.client.alter_sync_state_set(self.leader, self.broker_controller_id,
                                                        self.master_epoch, seen,
                                                        self.sync_state_set_epoch)
        async with self._lock:
            self._change_sync_state_set(frozenset(result.sync_state_set), result.sync_state_set_epoch)
