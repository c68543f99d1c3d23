"""Controller mode over the AutoSwitch replication (:mod:`bolide.broker.ha.autoswitch`,
RocketMQ 5's AutoSwitchHAService): the epoch file, truncation of a diverged slave, the confirm
offset and the master's in-sync set, which the broker reports to the controller
(ALTER_SYNC_STATE_SET). The HA listener runs in both roles, as in RocketMQ."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from bolide.broker.ha.autoswitch import AutoSwitchHA, AutoSwitchHAConfig
from bolide.protocol.bodies.controller import EpochEntry

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController


class AutoSwitchReplication:
    """The :class:`~bolide.broker.replicas.roles.Replication` of the AutoSwitch HA."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._ha: AutoSwitchHA | None = None
        self.on_change: Callable[[], None] | None = None

    @property
    def ha(self) -> AutoSwitchHA:
        assert self._ha is not None, "start() first"
        return self._ha

    async def start(self) -> None:
        cfg = self.broker.config
        ha_config = AutoSwitchHAConfig.from_broker_config(cfg, ha_host=cfg.bind_address)
        self._ha = AutoSwitchHA(self.broker.store, ha_config, self._changed)
        await self._ha.start()

    def _changed(self, new: set[int]) -> None:
        if self.on_change is not None:
            self.on_change()

    def _own(self, own_id: int) -> None:
        self.ha.config = dataclasses.replace(self.ha.config, local_broker_id=own_id)

    async def to_master(self, epoch: int, sync_state_set: frozenset[int], sync_state_set_epoch: int,
                        own_id: int) -> str:
        self._own(own_id)
        await self.ha.change_to_master(epoch, set(sync_state_set), sync_state_set_epoch)
        return f"{self.broker.config.broker_ip1}:{self.ha.port}"

    async def to_slave(self, epoch: int, master_id: int, own_id: int) -> None:
        self._own(own_id)
        await self.ha.change_to_slave(None, epoch, master_id, own_id)

    def new_master_epoch(self, epoch: int) -> None:
        self.ha.new_epoch(epoch)

    def set_master_ha_address(self, addr: str | None) -> None:
        if addr and self.ha.slave is not None:
            self.ha.set_master_ha_address(addr)

    def knows_master(self) -> bool:
        slave = self.ha.slave
        return slave is None or bool(slave.master_addr)

    def last_epoch(self) -> int:
        return max(self.ha.last_epoch, 0)

    def epoch_entries(self) -> list[EpochEntry]:
        return [EpochEntry(epoch=e.epoch, start_offset=e.start_offset, end_offset=e.end_offset)
                for e in self.ha.epoch_entries()]

    def confirm_offset(self) -> int:
        return self.ha.confirm_offset

    def in_sync_replicas(self) -> set[int] | None:
        return set(self.ha.sync_state_set) if self.ha.is_master else None

    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        self.ha.set_sync_state_set(set(members), epoch)

    async def close(self) -> None:
        if self._ha is not None:
            await self._ha.close()
