"""Controller mode over the classic HA (:mod:`bolide.broker.ha`): an HA listener while master,
an HA client while slave. It has no epoch file (the epochs of this process are kept in
memory) and cannot tell which slave is in sync (the controller's in-sync set is left alone,
so a controller must allow unclean elections: ``enableElectUncleanMaster=true``). Used when
the AutoSwitch replication (:mod:`bolide.broker.replicas.ha_autoswitch`) is not available."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from bolide.broker.ha import HAMaster, HASlave
from bolide.protocol.bodies.controller import EpochEntry

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)


class ClassicReplication:
    """The :class:`~bolide.broker.replicas.roles.Replication` of the classic HA."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.entries: list[EpochEntry] = []
        self.on_change: Callable[[], None] | None = None  # never called: no in-sync tracking

    def _ha_port(self) -> int:
        port = self.broker.config.ha_listen_port
        return self.broker.port + 1 if port < 0 else port

    def _new_epoch(self, epoch: int) -> None:
        offset = self.broker.store.max_phy_offset
        if self.entries and self.entries[-1].epoch >= epoch:
            return
        if self.entries:
            self.entries[-1].end_offset = offset
        self.entries.append(EpochEntry(epoch=epoch, start_offset=offset))

    async def start(self) -> None:
        return None  # the HA ports open with the role

    async def to_master(self, epoch: int, sync_state_set: frozenset[int], sync_state_set_epoch: int,
                        own_id: int) -> str:
        broker = self.broker
        if broker.ha_slave is not None:
            slave, broker.ha_slave = broker.ha_slave, None
            await slave.close()
        self._new_epoch(epoch)
        store = broker.store
        while not await asyncio.to_thread(store.wait_dispatched, 10.0, False):
            log.warning("becoming master: the replicated records are still being dispatched")
        store.recover_queue_offsets()  # queues go on after what was replicated
        if broker.ha_master is None:
            master = HAMaster(store, broker.config)
            try:
                await master.start(broker.config.bind_address, self._ha_port())
            except OSError as exc:
                log.error("the HA port %d is not available (%s): slaves cannot replicate from "
                          "this master; free the port or set haListenPort", self._ha_port(),
                          exc.strerror or exc)
                return f"{broker.config.broker_ip1}:{self._ha_port()}"
            broker.ha_master = master
        return f"{broker.config.broker_ip1}:{broker.ha_master.port}"

    async def to_slave(self, epoch: int, master_id: int, own_id: int) -> None:
        broker = self.broker
        if broker.ha_master is not None:
            master, broker.ha_master = broker.ha_master, None
            await master.close()
        self._new_epoch(epoch)
        if broker.ha_slave is None:
            broker.ha_slave = HASlave(broker.store, broker.config)
            broker.ha_slave.start()

    def new_master_epoch(self, epoch: int) -> None:
        self._new_epoch(epoch)

    def set_master_ha_address(self, addr: str | None) -> None:
        if addr and self.broker.ha_slave is not None:
            self.broker.ha_slave.set_master(addr)

    def knows_master(self) -> bool:
        slave = self.broker.ha_slave
        return slave is None or bool(slave.master_addr)

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self.entries)

    def confirm_offset(self) -> int:
        return self.broker.store.max_phy_offset

    def in_sync_replicas(self) -> set[int] | None:
        return None  # the classic HA does not know its slaves' broker ids

    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        return None

    async def close(self) -> None:
        return None  # the broker closes ha_master / ha_slave



