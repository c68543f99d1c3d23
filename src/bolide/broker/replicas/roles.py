"""A controller-mode broker's role changes at runtime (what RocketMQ 5's ReplicasManager does
to its BrokerController in changeToMaster / changeToSlave).

Master: the store takes puts (role SYNC_MASTER, as RocketMQ sets it), the delay-level schedule,
the transaction check (and, once, the timer wheel take-over) run, the broker registers with the
NameServers as brokerId 0, replication serves slaves. Slave: the store refuses puts
(SERVICE_NOT_AVAILABLE: clients send elsewhere), those services stop, the broker registers with
its controller id, replicates from the master (whose HA address the NameServer's answer gives)
and copies the master's configs and offsets (:class:`~bolide.broker.ha.slave_sync.SlaveSync`).

Replication goes through :class:`ClassicReplication`, the adapter over the classic HA
(:mod:`bolide.broker.ha`): it has no epoch file and cannot tell which slave is in sync, so the
master's in-sync set stays as the controller has it and the epoch entries are kept in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from bolide.broker.ha import HAMaster, HASlave
from bolide.protocol.bodies.controller import EpochEntry
from bolide.store import BrokerRole

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

MASTER_ID = 0  # MixAll.MASTER_ID: what a master registers with the NameServers
_LEARN_MASTER_TRIES = 30  # a new slave registers again each second until it knows the master


class ClassicReplication:
    """The classic HA behind the role changes: an HA listener while master, an HA client
    while slave, and the epoch entries of this process."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.entries: list[EpochEntry] = []

    def ha_port(self) -> int:
        port = self.broker.config.ha_listen_port
        return self.broker.port + 1 if port < 0 else port

    def _new_epoch(self, epoch: int) -> None:
        offset = self.broker.store.max_phy_offset
        if self.entries and self.entries[-1].epoch >= epoch:
            return
        if self.entries:
            self.entries[-1].end_offset = offset
        self.entries.append(EpochEntry(epoch=epoch, start_offset=offset))

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    async def to_master(self, epoch: int) -> str:
        """Serve slaves; the HA address to register."""
        broker = self.broker
        if broker.ha_slave is not None:
            slave, broker.ha_slave = broker.ha_slave, None
            await slave.close()
        self._new_epoch(epoch)
        if broker.ha_master is None:
            master = HAMaster(broker.store, broker.config)
            try:
                await master.start(broker.config.bind_address, self.ha_port())
            except OSError as exc:
                log.error("the HA port %d is not available (%s): slaves cannot replicate from "
                          "this master; free the port or set haListenPort", self.ha_port(),
                          exc.strerror or exc)
                return f"{broker.config.broker_ip1}:{self.ha_port()}"
            broker.ha_master = master
        return f"{broker.config.broker_ip1}:{broker.ha_master.port}"

    async def to_slave(self, epoch: int) -> None:
        """Stop serving slaves; replicate from the master the NameServer names."""
        broker = self.broker
        if broker.ha_master is not None:
            master, broker.ha_master = broker.ha_master, None
            await master.close()
        self._new_epoch(epoch)
        if broker.ha_slave is None:
            broker.ha_slave = HASlave(broker.store, broker.config)
            broker.ha_slave.start()


class RoleSwitch:
    """The :class:`~bolide.broker.replicas.manager.RoleTarget` of a BrokerController."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.replication = ClassicReplication(broker)
        self.broker_addr = broker.broker_addr
        self._timer_taken_over = False
        self._learning: asyncio.Task[None] | None = None

    async def to_master(self, epoch: int, sync_state_set: frozenset[int]) -> None:
        broker = self.broker
        await self._stop_learning()
        if broker.slave_sync is not None:
            await broker.slave_sync.close()
        ha_addr = await self.replication.to_master(epoch)
        store = broker.store
        while not await asyncio.to_thread(store.wait_dispatched, 10.0, False):
            log.warning("becoming master: the replicated records are still being dispatched")
        store.change_role(BrokerRole.SYNC_MASTER)  # sends are taken from here on
        broker.role = BrokerRole.SYNC_MASTER
        broker.set_broker_id(MASTER_ID, ha_addr)
        if not self._timer_taken_over:
            self._timer_taken_over = True
            await broker.take_over_timer_wheel()
        assert broker.schedule is not None
        broker.schedule.start()
        broker.transaction_check.start()
        await self.reregister()

    async def to_slave(self, master_addr: str, master_id: int, epoch: int, own_id: int) -> None:
        broker = self.broker
        broker.store.change_role(BrokerRole.SLAVE)  # sends are refused from here on
        broker.role = BrokerRole.SLAVE
        if broker.schedule is not None:
            await broker.schedule.close()
        await broker.transaction_check.close()
        await self.replication.to_slave(epoch)
        broker.set_broker_id(own_id, None)
        if broker.slave_sync is not None:
            broker.slave_sync.set_master(master_addr)
            broker.slave_sync.start()
        await self.reregister()
        await self._stop_learning()
        self._learning = asyncio.get_running_loop().create_task(self._learn_master())

    async def _learn_master(self) -> None:
        """Register each second until the NameServer names the master's HA address (the new
        master may register after this slave)."""
        for _ in range(_LEARN_MASTER_TRIES):
            slave = self.broker.ha_slave
            if slave is None or slave.master_addr:
                return
            await asyncio.sleep(1)
            await self.reregister()

    async def _stop_learning(self) -> None:
        task, self._learning = self._learning, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def reregister(self) -> None:
        registration = self.broker.registration
        if registration is None:
            return
        if not registration.started:
            await registration.start()
        else:
            await registration.register_all()

    def last_epoch(self) -> int:
        return self.replication.last_epoch()

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self.replication.entries)

    def max_offset(self) -> int:
        return self.broker.store.max_phy_offset

    def confirm_offset(self) -> int:
        return self.broker.store.max_phy_offset

    def in_sync_replicas(self) -> set[int] | None:
        return None  # the classic HA does not know its slaves' broker ids

    def set_sync_state_set(self, members: frozenset[int]) -> None:
        log.debug("in-sync set now %s", sorted(members))

    async def close(self) -> None:
        await self._stop_learning()

