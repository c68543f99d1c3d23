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
- :meth:`AutoSwitchHA.epoch_entries`, :attr:`AutoSwitchHA.last_epoch` and
  :attr:`AutoSwitchHA.confirm_offset` for GET_BROKER_EPOCH_CACHE and the controller's
  election data; :meth:`AutoSwitchHA.runtime_info` for GET_BROKER_HA_STATUS.

The store must be open with enableControllerMode (its confirm offset and runtime roles).
A second change_to_master while master (re-elected) only records the epoch; a
change_to_slave naming the current master only records the epoch (RocketMQ's
changeToMasterWhenLastRoleIsMaster / changeToSlaveWhenMasterNotChange).

Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bolide.broker.ha.autoswitch.config import AutoSwitchHAConfig
from bolide.broker.ha.autoswitch.master import MasterSide
from bolide.broker.ha.autoswitch.slave import SlaveClient
from bolide.common.waiting import cancel_and_wait
from bolide.errors import BolideError
from bolide.protocol.bodies.ha import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo
from bolide.store import BrokerRole, MessageStore, PutStatus
from bolide.store.epoch_file import EpochEntry, EpochFile
from bolide.store.results import PutMessageResult

log = logging.getLogger(__name__)

SyncStateSetListener = Callable[[set[int]], None]


class HAStateError(BolideError):
    """A role change the HA service refuses (e.g. an epoch older than one it has seen)."""


_STORED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT)


class AutoSwitchHA:
    """The store's replication in controller mode: master side (AutoSwitchHAConnection) and
    slave side (AutoSwitchHAClient) with the epoch file and the confirm offset."""

    def __init__(self, store: MessageStore, config: AutoSwitchHAConfig,
                 on_sync_state_set_change: SyncStateSetListener | None = None) -> None:
        """``store`` is open, with enableControllerMode; its epoch file
        (``{storePathRootDir}/epochFileCheckpoint``) is loaded here.
        ``on_sync_state_set_change`` may also be set later as an attribute."""
        if not store.config.enable_controller_mode:
            raise HAStateError(f"the store at {store.root} is not in controller mode: set "
                               "enableControllerMode=true in broker.conf")
        self.store = store
        self.on_sync_state_set_change = on_sync_state_set_change
        self.epochs = EpochFile.in_store(store.root)
        self.master = MasterSide(store, self.epochs, config, self._sync_state_set_changed)
        self.slave: SlaveClient | None = None
        self._config = config
        self.master_epoch = -1
        self.master_broker_id = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._check: asyncio.Task[None] | None = None

    @property
    def config(self) -> AutoSwitchHAConfig:
        return self._config

    @config.setter
    def config(self, config: AutoSwitchHAConfig) -> None:
        """Replace the settings (e.g. ``local_broker_id`` once the controller assigned it);
        both sides use them from their next step."""
        self._config = config
        self.master.config = config
        if self.slave is not None:
            self.slave.config = config

    def _sync_state_set_changed(self, new: set[int]) -> None:
        listener = self.on_sync_state_set_change
        if listener is not None:
            try:
                listener(set(new))
            except Exception:  # the broker's error must not break replication
                log.exception("HA: the sync state set listener failed")

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Listen on ``config.ha_host:config.ha_port`` for slaves (see :attr:`port`)."""
        self._server = await asyncio.start_server(self.master.accept, self.config.ha_host,
                                                  self.config.ha_port)
        self.store.add_dispatch_listener(self._on_dispatch)
        self._loop = asyncio.get_running_loop()
        self._check = self._loop.create_task(self._check_loop())

    def _on_dispatch(self, touched: object) -> None:  # on the dispatch thread
        loop = self._loop
        if loop is not None and self.master.links:
            loop.call_soon_threadsafe(self.master.notify)

    async def close(self) -> None:
        """Stop listening, drop slaves and the connection to a master."""
        self.master.active = False
        if self._check is not None:
            await cancel_and_wait([self._check])
            self._check = None
        if self._server is not None:
            self._server.close()
        await self.master.drop_all()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        if self.slave is not None:
            await self.slave.close()
            self.slave = None

    @property
    def port(self) -> int:
        """The HA listener's port (after :meth:`start`)."""
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    # -- role changes -------------------------------------------------------------------
    @property
    def is_master(self) -> bool:
        return self.master.active

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.epochs.last_epoch:
            raise HAStateError(f"epoch {epoch} is older than this replica's last epoch "
                               f"{self.epochs.last_epoch}: a stale role change, ignore it")

    def new_epoch(self, master_epoch: int) -> None:
        """Still master, now of ``master_epoch`` (elected again): the epoch file gets it at the
        current max offset. Raises :class:`HAStateError` for an older epoch."""
        self._check_epoch(master_epoch)
        self._append_epoch(master_epoch)
        self.master_epoch = master_epoch

    async def change_to_master(self, master_epoch: int, sync_state_set: set[int],
                               sync_state_set_epoch: int = 0) -> None:
        """Become master of ``master_epoch``: stop replicating from a master, append
        ``(master_epoch, max offset)`` to the epoch file, make everything this replica holds
        readable (dispatch catches up; queue offsets continue from there), set the store's
        role to ``config.master_role`` and take ``sync_state_set``. Raises
        :class:`HAStateError` when ``master_epoch`` is older than the last epoch in the
        epoch file."""
        self._check_epoch(master_epoch)
        store = self.store
        if self.master.active:  # re-elected (changeToMasterWhenLastRoleIsMaster)
            self.new_epoch(master_epoch)
            self.master.set_sync_state_set(set(sync_state_set) | {self.config.local_broker_id},
                                           sync_state_set_epoch)
            return
        if self.slave is not None:
            await self.slave.close()
            self.slave = None
        self.master.active = False
        await self.master.drop_all()
        store.set_broker_role(self.config.master_role)  # drops a partial record held
        self._append_epoch(master_epoch)
        store.set_confirm_offset(None)
        await asyncio.to_thread(store.wait_dispatched, 60.0, False)
        store.recover_queue_offsets()
        self.master_epoch = master_epoch
        self.master_broker_id = self.config.local_broker_id
        self.master.local_broker_id = self.config.local_broker_id
        self.master.active = True
        self.master.set_sync_state_set(set(sync_state_set) | {self.config.local_broker_id},
                                       sync_state_set_epoch)
        log.info("HA: master of epoch %d from offset %d, sync state set %s", master_epoch,
                 store.max_phy_offset, sorted(self.master.sync_state_set()))

    def _append_epoch(self, epoch: int) -> None:
        """``(epoch, max offset)`` into the epoch file, replacing entries of epochs not
        older (AutoSwitchHAService.changeToMaster)."""
        offset = self.store.max_phy_offset
        if self.epochs.last_epoch >= epoch:
            self.epochs.truncate_suffix_by_epoch(epoch)
        if not self.epochs.append(epoch, offset):
            log.warning("HA: epoch %d at offset %d not added to the epoch file (last entry %s)",
                        epoch, offset, self.epochs.last_entry())

    async def _check_loop(self) -> None:
        """Every checkSyncStateSet interval: a master asks for a shrunk sync state set when
        slaves fell behind; both roles drop the epochs of deleted CommitLog files."""
        interval = self.config.check_sync_state_set_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.master.check_sync_state_set()
            first = self.epochs.first_entry()
            low = self.store.min_phy_offset
            if first is not None and low > 0 and first.end_offset <= low - 1:
                self.epochs.truncate_prefix_by_offset(low - 1)

    async def change_to_slave(self, master_ha_addr: str | None, master_epoch: int,
                              master_broker_id: int, local_broker_id: int) -> None:
        """Become a slave of the master of ``master_epoch``: drop slaves' connections, set
        the store's role to SLAVE, and connect to ``master_ha_addr`` ("host:port", or None
        until :meth:`set_master_ha_address`). On connecting: handshake with
        ``local_broker_id``, truncate the CommitLog (and ConsumeQueues) to where this
        replica's epochs agree with the master's, then receive. Raises :class:`HAStateError`
        when ``master_epoch`` is older than the last epoch in the epoch file."""
        self._check_epoch(master_epoch)
        if self.slave is not None and master_broker_id == self.master_broker_id:
            # the same master, a new epoch (changeToSlaveWhenMasterNotChange)
            self.master_epoch = master_epoch
            if master_ha_addr:
                self.slave.set_master(master_ha_addr)
            return
        self.master.active = False
        await self.master.drop_all()
        if self.slave is not None:
            await self.slave.close()
        store = self.store
        confirm = store.confirm_offset  # what consumers could read stays readable
        store.set_broker_role(BrokerRole.SLAVE)
        store.set_confirm_offset(confirm)
        self.master_epoch = master_epoch
        self.master_broker_id = master_broker_id
        self.slave = SlaveClient(store, self.epochs, self.config, local_broker_id,
                                 master_ha_addr)
        self.slave.start()
        log.info("HA: slave of broker %d (epoch %d) at %s", master_broker_id, master_epoch,
                 master_ha_addr)

    def set_master_ha_address(self, master_ha_addr: str) -> None:
        """A slave's master HA address ("host:port"); a change reconnects."""
        if self.slave is None:
            raise HAStateError("not a slave: call change_to_slave first")
        self.slave.set_master(master_ha_addr)

    # -- sync state set and confirm offset ---------------------------------------------
    @property
    def sync_state_set(self) -> frozenset[int]:
        """Broker ids of the in-sync replicas (the master's own id included), as last set by
        :meth:`set_sync_state_set`, plus a pending change not yet confirmed."""
        return frozenset(self.master.sync_state_set())

    @property
    def sync_state_set_epoch(self) -> int:
        return self.master.sync_state_set_epoch

    def set_sync_state_set(self, ids: set[int], sync_state_set_epoch: int) -> None:
        """The set the controller holds (ALTER_SYNC_STATE_SET answer, role change)."""
        self.master.set_sync_state_set(set(ids), sync_state_set_epoch)

    def in_sync_replicas(self) -> int:
        """Replicas in the sync state set (the master counts)."""
        return max(1, len(self.master.sync_state_set()))

    @property
    def confirm_offset(self) -> int:
        """CommitLog offset every in-sync replica holds: what consumers may read
        (unless readUnCommitted). A slave has it from its master's transfer headers."""
        return self.store.confirm_offset

    def epoch_entries(self) -> list[EpochEntry]:
        """The epoch file's entries, oldest first (``end_offset`` of the last: max i64)."""
        return self.epochs.entries()

    @property
    def last_epoch(self) -> int:
        """The newest epoch this replica has seen (-1: none)."""
        return self.epochs.last_epoch

    def runtime_info(self) -> HARuntimeInfo:
        """GET_BROKER_HA_STATUS's answer (AutoSwitchHAService.getRuntimeInfo): a master's
        slaves with their acks and whether they are in the sync state set, or a slave's
        master and progress."""
        store = self.store
        max_offset = store.max_phy_offset
        if self.slave is not None:
            s = self.slave
            return HARuntimeInfo(master=False, ha_client_runtime_info=HAClientRuntimeInfo(
                master_addr=s.master_addr or "", max_offset=max_offset,
                last_read_timestamp=s.last_read_ms, last_write_timestamp=s.last_write_ms,
                transferred_byte_in_second=s.rate.per_second(), is_activated=s.connected))
        info = HARuntimeInfo(master=True, master_commit_log_max_offset=max_offset)
        members = self.master.sync_state_set()
        for link in sorted(self.master.links, key=lambda x: x.addr):
            ack = link.ack_offset
            info.ha_connection_info.append(HAConnectionRuntimeInfo(
                addr=link.addr, slave_ack_offset=ack, diff=max_offset - ack,
                in_sync=link.slave_id in members, transferred_byte_in_second=link.rate.per_second(),
                transfer_from_where=link.next_offset))
        info.in_sync_slave_nums = max(0, len(members) - 1)
        return info

    async def wait_replicated(self, result: PutMessageResult) -> None:
        """A SYNC send: wait until the replicas it needs acknowledged the put (every member
        of the sync state set with allAckInSyncStateSet, else inSyncReplicas of them), up to
        ``slave_timeout_ms``; sets FLUSH_SLAVE_TIMEOUT, or SLAVE_NOT_AVAILABLE when fewer than
        minInSyncReplicas are in sync, on ``result``."""
        if result.status not in _STORED or result.wrote_offset < 0:
            return
        if self.in_sync_replicas() < self.config.min_in_sync_replicas:
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            result.remark = (f"in-sync replicas not enough: {self.in_sync_replicas()} in the "
                             f"sync state set, minInSyncReplicas="
                             f"{self.config.min_in_sync_replicas}; the message is stored on the "
                             "master only")
            return
        ok = await self.master.wait_acked(result.end_offset,
                                          self.config.slave_timeout_ms / 1000)
        if not ok:
            result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            result.remark = (f"the sync state set's replicas did not acknowledge the message "
                             f"within {self.config.slave_timeout_ms} ms; it is stored on the "
                             "master")
