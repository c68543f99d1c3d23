"""A controller-mode broker's role changes at runtime (what RocketMQ 5's ReplicasManager does
to its BrokerController in changeToMaster / changeToSlave).

Master: the store takes puts (role SYNC_MASTER, as RocketMQ sets it), the delay-level schedule,
the transaction check (and, once, the timer wheel take-over) run, the broker registers with the
NameServers as brokerId 0, replication serves slaves. Slave: the store refuses puts
(SERVICE_NOT_AVAILABLE: clients send elsewhere), those services stop, the broker registers with
its controller id, replicates from the master (whose HA address the NameServer's answer gives)
and copies the master's configs and offsets (:class:`~bolide.broker.ha.slave_sync.SlaveSync`).

Replication is a :class:`Replication`: the AutoSwitch HA
(:mod:`bolide.broker.replicas.ha_autoswitch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from bolide.broker.ha.autoswitch import AutoSwitchHA
from bolide.broker.replicas.ha_autoswitch import AutoSwitchReplication
from bolide.protocol.bodies.controller import EpochEntry
from bolide.store import BrokerRole

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

MASTER_ID = 0  # MixAll.MASTER_ID: what a master registers with the NameServers
_LEARN_MASTER_TRIES = 30  # a new slave registers again each second until it knows the master


class Replication(Protocol):
    """The HA side of role changes. ``on_change`` is called when a master's in-sync replicas
    change (a slave caught up or fell behind)."""

    on_change: Callable[[], None] | None

    @property
    def ha(self) -> AutoSwitchHA:
        """The HA service (a master's SYNC sends wait on it)."""
        ...

    async def start(self) -> None: ...

    async def to_master(self, epoch: int, sync_state_set: frozenset[int], sync_state_set_epoch: int,
                        own_id: int) -> str:
        """Serve slaves as master of ``epoch``, every replicated record readable and the
        queues going on after them; returns the HA address to register."""
        ...

    async def to_slave(self, epoch: int, master_id: int, own_id: int) -> None: ...

    def new_master_epoch(self, epoch: int) -> None:
        """Still master, elected again: the new epoch starts at the CommitLog's end."""
        ...

    def set_master_ha_address(self, addr: str | None) -> None: ...

    def knows_master(self) -> bool: ...

    def last_epoch(self) -> int: ...

    def epoch_entries(self) -> list[EpochEntry]: ...

    def confirm_offset(self) -> int: ...

    def in_sync_replicas(self) -> set[int] | None: ...

    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None: ...

    async def close(self) -> None: ...


def replication_for(broker: BrokerController) -> Replication:
    """The AutoSwitch HA (RocketMQ 5's replication in controller mode)."""
    return AutoSwitchReplication(broker)


class RoleSwitch:
    """The :class:`~bolide.broker.replicas.manager.RoleTarget` of a BrokerController."""

    def __init__(self, broker: BrokerController, replication: Replication | None = None) -> None:
        self.broker = broker
        self.replication = replication if replication is not None else replication_for(broker)
        self.replication.on_change = self._in_sync_changed
        self.in_sync_changed: Callable[[], None] | None = None  # the manager reports the change
        self.broker_addr = broker.broker_addr
        self._timer_taken_over = False
        self._learning: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.replication.start()

    def _in_sync_changed(self) -> None:
        if self.in_sync_changed is not None:
            self.in_sync_changed()

    async def to_master(self, epoch: int, sync_state_set: frozenset[int], sync_state_set_epoch: int,
                        own_id: int) -> None:
        broker = self.broker
        await self._stop_learning()
        if broker.slave_sync is not None:
            await broker.slave_sync.close()
        ha_addr = await self.replication.to_master(epoch, sync_state_set, sync_state_set_epoch, own_id)
        broker.store.set_broker_role(BrokerRole.SYNC_MASTER)  # sends are taken from here on
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
        broker.store.set_broker_role(BrokerRole.SLAVE)  # sends are refused from here on
        broker.role = BrokerRole.SLAVE
        if broker.schedule is not None:
            await broker.schedule.close()
        await broker.transaction_check.close()
        await self.replication.to_slave(epoch, master_id, own_id)
        broker.set_broker_id(own_id, None)
        if broker.slave_sync is not None:
            broker.slave_sync.set_master(master_addr)
            broker.slave_sync.start()
        await self.reregister()
        await self._stop_learning()
        self._learning = asyncio.get_running_loop().create_task(self._learn_master())

    async def new_epoch(self, epoch: int) -> None:
        """Master again under a new epoch (RocketMQ's changeToMasterWhenLastRoleIsMaster)."""
        self.replication.new_master_epoch(epoch)
        await self.reregister()

    def registered(self, ha_server_addr: str | None) -> None:
        """A NameServer's answer to REGISTER_BROKER: a slave learns its master's HA address."""
        if self.broker.role is BrokerRole.SLAVE:
            self.replication.set_master_ha_address(ha_server_addr)

    async def _learn_master(self) -> None:
        """Register each second until the NameServer names the master's HA address (the new
        master may register after this slave)."""
        for _ in range(_LEARN_MASTER_TRIES):
            if self.broker.role is not BrokerRole.SLAVE or self.replication.knows_master():
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
        return self.replication.epoch_entries()

    def max_offset(self) -> int:
        return self.broker.store.max_phy_offset

    def confirm_offset(self) -> int:
        return self.replication.confirm_offset()

    def in_sync_replicas(self) -> set[int] | None:
        return self.replication.in_sync_replicas()

    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        self.replication.set_sync_state_set(members, epoch)

    async def close(self) -> None:
        await self._stop_learning()
        await self.replication.close()
