"""AutoSwitch replication (RocketMQ 5 controller mode): the facade the broker drives.

The broker's controller mode (registration, role changes decided by the controller) calls:

- :meth:`AutoSwitchHA.start` once, after the store is open; :meth:`AutoSwitchHA.close` at
  shutdown. The HA listener runs in both roles (RocketMQ's AutoSwitchHAService does too).
- :meth:`AutoSwitchHA.change_to_master` when the controller elects this replica
  (ReplicasManager.changeToMaster); :meth:`AutoSwitchHA.change_to_slave` when another
  replica is master (ReplicasManager.changeToSlave), then
  :meth:`AutoSwitchHA.set_master_ha_address` once the master's HA address is known (the
  master's registration names it).
- :meth:`AutoSwitchHA.set_sync_state_set` with what the controller accepted (the answer to
  ALTER_SYNC_STATE_SET, or the set given with a role change).
- ``on_sync_state_set_change(new_set)``: called (on the loop) when the master wants its sync
  state set expanded (a slave caught up) or shrunk (a slave fell behind for more than
  haMaxTimeSlaveNotCatchup, or disconnected); the broker sends ALTER_SYNC_STATE_SET to the
  controller and, on success, calls :meth:`AutoSwitchHA.set_sync_state_set`.
- :meth:`AutoSwitchHA.wait_replicated` for a SYNC send (SYNC_MASTER role, or
  allAckInSyncStateSet) before answering the producer.

Everything runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bolide.broker.ha.autoswitch.config import AutoSwitchHAConfig
from bolide.errors import BolideError
from bolide.store import MessageStore
from bolide.store.epoch_file import EpochEntry
from bolide.store.results import PutMessageResult

log = logging.getLogger(__name__)

SyncStateSetListener = Callable[[set[int]], None]


class HAStateError(BolideError):
    """A role change the HA service refuses (e.g. an epoch older than one it has seen)."""


class AutoSwitchHA:
    """The store's replication in controller mode: master side (AutoSwitchHAConnection) and
    slave side (AutoSwitchHAClient) with the epoch file and the confirm offset."""

    def __init__(self, store: MessageStore, config: AutoSwitchHAConfig,
                 on_sync_state_set_change: SyncStateSetListener | None = None) -> None:
        """``store`` is open; its epoch file (``{storePathRootDir}/epochFileCheckpoint``)
        is loaded here. ``on_sync_state_set_change`` may also be set later as an attribute."""
        raise NotImplementedError

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Listen on ``config.ha_host:config.ha_port`` for slaves (see :attr:`port`)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Stop listening, drop slaves and the connection to a master."""
        raise NotImplementedError

    @property
    def port(self) -> int:
        """The HA listener's port (after :meth:`start`)."""
        raise NotImplementedError

    # -- role changes -------------------------------------------------------------------
    @property
    def is_master(self) -> bool:
        raise NotImplementedError

    async def change_to_master(self, master_epoch: int, sync_state_set: set[int],
                               sync_state_set_epoch: int = 0) -> None:
        """Become master of ``master_epoch``: stop replicating from a master, cut a torn
        record off the CommitLog tail, append ``(master_epoch, max offset)`` to the epoch
        file, wait until dispatch has caught up (every confirmed message is readable), set
        the store's role to ``config.master_role``. Raises :class:`HAStateError` when
        ``master_epoch`` is older than the last epoch in the epoch file."""
        raise NotImplementedError

    async def change_to_slave(self, master_ha_addr: str | None, master_epoch: int,
                              master_broker_id: int, local_broker_id: int) -> None:
        """Become a slave of the master of ``master_epoch``: drop slaves' connections, set
        the store's role to SLAVE, and connect to ``master_ha_addr`` ("host:port", or None
        until :meth:`set_master_ha_address`). On connecting: handshake with
        ``local_broker_id``, truncate the CommitLog (and ConsumeQueues) to where this
        replica's epochs agree with the master's, then receive. Raises :class:`HAStateError`
        when ``master_epoch`` is older than the last epoch in the epoch file."""
        raise NotImplementedError

    def set_master_ha_address(self, master_ha_addr: str) -> None:
        """A slave's master HA address ("host:port"); a change reconnects."""
        raise NotImplementedError

    # -- sync state set and confirm offset ---------------------------------------------
    @property
    def sync_state_set(self) -> frozenset[int]:
        """Broker ids of the in-sync replicas (the master's own id included), as last set by
        :meth:`set_sync_state_set`, plus a pending expansion not yet confirmed."""
        raise NotImplementedError

    @property
    def sync_state_set_epoch(self) -> int:
        raise NotImplementedError

    def set_sync_state_set(self, ids: set[int], sync_state_set_epoch: int) -> None:
        """The set the controller holds (ALTER_SYNC_STATE_SET answer, role change)."""
        raise NotImplementedError

    def in_sync_replicas(self) -> int:
        """Replicas in the sync state set (the master counts)."""
        raise NotImplementedError

    @property
    def confirm_offset(self) -> int:
        """CommitLog offset every in-sync replica holds: what consumers may read
        (unless readUnCommitted). A slave has it from its master's transfer headers."""
        raise NotImplementedError

    def epoch_entries(self) -> list[EpochEntry]:
        """The epoch file's entries, oldest first (``end_offset`` of the last: max i64)."""
        raise NotImplementedError

    @property
    def last_epoch(self) -> int:
        """The newest epoch this replica has seen (-1: none)."""
        raise NotImplementedError

    async def wait_replicated(self, result: PutMessageResult) -> None:
        """A SYNC send: wait until every replica of the sync state set acknowledged the put
        (up to ``slave_timeout_ms``); sets FLUSH_SLAVE_TIMEOUT, or SLAVE_NOT_AVAILABLE
        when fewer than minInSyncReplicas are in sync, on ``result``."""
        raise NotImplementedError
