"""The master side of AutoSwitch HA (AutoSwitchHAConnection and the sync state set part of
AutoSwitchHAService): per slave a handshake answered with this replica's epoch entries, then
the CommitLog from the offset the slave reports, one epoch per frame, under transfer headers
carrying the confirm offset; the slaves' acks decide the sync state set and the confirm
offset (the smallest ack of the set's slaves)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from bolide.broker.ha.autoswitch.config import AutoSwitchHAConfig
from bolide.broker.ha.autoswitch.protocol import (
    HAState,
    SlaveHandshake,
    SlaveMessageReader,
    encode_master_handshake,
    encode_transfer_header,
)
from bolide.broker.ha.links import NewData, read_report
from bolide.broker.ha.master import _chunk
from bolide.broker.ha.status import ByteRate
from bolide.common.waiting import cancel_and_wait, wait_for
from bolide.errors import ProtocolError
from bolide.remoting.channel import format_address
from bolide.store import MessageStore
from bolide.store.epoch_file import MAX_OFFSET, EpochEntry, EpochFile

log = logging.getLogger(__name__)

_POLL = 0.1  # s: an idle sender looks for new data this often (a notify wakes it sooner)
_STREAM_POLL = 0.001  # s: and this often right after it sent something


def _now_ms() -> int:
    return int(time.time() * 1000)


class SlaveLink:
    """One slave's connection: its handshake and acks in, epochs and CommitLog out."""

    def __init__(self, master: MasterSide, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.master = master
        self.reader = reader
        self.writer = writer
        self.addr = format_address(writer.get_extra_info("peername"))
        self.state = HAState.HANDSHAKE
        self.slave_id = -1
        self.sync_from_last_file = False
        self.async_learner = False
        self.request_offset = -1  # the first report after the handshake
        self.ack_offset = -1  # the latest report
        self.next_offset = -1  # the next CommitLog byte to send
        self.last_master_max = -1  # the master's max offset at the last transfer
        self.last_transfer_ms = 0
        self.rate = ByteRate()
        self._epoch = -1  # the epoch of the bytes being sent
        self._epoch_end = -1  # where it ends (-1: the current epoch, open)
        self._handshake = asyncio.Event()
        self._reported = asyncio.Event()

    async def run(self) -> None:
        sender = asyncio.get_running_loop().create_task(self._send())
        try:
            await self._read()
        finally:
            self.state = HAState.SHUTDOWN
            await cancel_and_wait([sender])
            self.writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await self.writer.wait_closed()

    async def _read(self) -> None:
        cfg = self.master.config
        messages = SlaveMessageReader()
        while True:
            data = await read_report(self.reader, 65536, cfg.ha_housekeeping_interval_ms, self.addr)
            if not data:
                return
            try:
                items = messages.feed(data)
            except ProtocolError as exc:
                log.warning("HA: %s: %s", self.addr, exc)
                return
            for item in items:
                if isinstance(item, SlaveHandshake):
                    self.slave_id = item.broker_id
                    self.sync_from_last_file = item.sync_from_last_file
                    self.async_learner = item.async_learner
                    self.state = HAState.HANDSHAKE
                    log.info("HA: slave %s (broker id %d) handshakes", self.addr, item.broker_id)
                    self._handshake.set()
                else:
                    self._on_report(item)

    def _on_report(self, offset: int) -> None:
        master = self.master
        if self.state is not HAState.TRANSFER:
            self.state = HAState.TRANSFER
        self.ack_offset = offset
        if self.request_offset < 0:
            self.request_offset = offset
            self._reported.set()
        if not self.async_learner and offset >= self.last_master_max:
            caught_up = (_now_ms() if master.store.max_phy_offset == offset
                         else self.last_transfer_ms)
            master.caught_up(self.slave_id, caught_up)
            master.maybe_expand(self.slave_id, offset)
        master.on_ack(self.slave_id)

    # -- sending ------------------------------------------------------------------------
    async def _send(self) -> None:
        master = self.master
        writer = self.writer
        await self._handshake.wait()
        self._handshake.clear()
        epochs = master.epochs
        writer.write(encode_master_handshake(master.store.max_phy_offset, epochs.last_epoch,
                                             epochs.entries()))
        await writer.drain()
        await self._reported.wait()
        if not self._start():
            self.writer.close()
            return
        cfg = master.config
        heartbeat = cfg.ha_send_heartbeat_interval_ms / 1000
        last_write = time.monotonic()
        streaming = False
        while True:
            if self._handshake.is_set():  # the slave started over on this connection
                log.warning("HA: slave %s handshakes again; closing", self.addr)
                writer.close()
                return
            sent = self._send_chunk()
            if sent < 0:
                continue  # the next epoch's bytes
            if sent:
                self.rate.add(sent)
                await writer.drain()
                last_write = time.monotonic()
                streaming = True
                continue
            master.caught_up(self.slave_id, _now_ms())
            if time.monotonic() - last_write > heartbeat:
                self._write_header(self.next_offset, 0)
                await writer.drain()
                last_write = time.monotonic()
            await master.data_written(_STREAM_POLL if streaming else _POLL)
            streaming = False

    def _start(self) -> bool:
        """Where the stream starts, and its first epoch; False: this master cannot serve it."""
        store = self.master.store
        cl = store.commit_log
        if self.request_offset == 0:
            if self.sync_from_last_file:
                top = store.max_phy_offset
                self.next_offset = top - top % cl.segment_size
            else:
                self.next_offset = cl.min_offset if cl.files.files else 0
        else:
            self.next_offset = self.request_offset
        if self.next_offset > store.max_phy_offset:
            log.error("HA: slave %s (broker id %d) asks for offset %d, past this master's max "
                      "offset %d", self.addr, self.slave_id, self.next_offset,
                      store.max_phy_offset)
            return False
        if cl.files.files and self.next_offset < cl.min_offset:
            log.error("HA: slave %s asks for offset %d but this master's CommitLog starts at %d "
                      "(older files were deleted): empty the slave's store directory and "
                      "restart it", self.addr, self.next_offset, cl.min_offset)
            return False
        entry = self.master.epochs.find_by_offset(self.next_offset)
        if entry is None:
            log.error("HA: no epoch of this master holds offset %d (asked by slave %s); its "
                      "epoch file is %s", self.next_offset, self.addr, self.master.epochs.entries())
            return False
        self._use_epoch(entry)
        log.info("HA: sending slave %s (broker id %d) the CommitLog from %d, epoch %d",
                 self.addr, self.slave_id, self.next_offset, entry.epoch)
        return True

    def _use_epoch(self, entry: EpochEntry) -> None:
        self._epoch = entry.epoch
        last = entry.epoch == self.master.epochs.last_epoch
        self._epoch_end = -1 if last or entry.end_offset == MAX_OFFSET else entry.end_offset

    def _send_chunk(self) -> int:
        """Write the next frame if there are bytes to send; their count (0: none, -1: the
        epoch's end was reached and the next one taken, look again)."""
        master = self.master
        size = master.config.ha_transfer_batch_size
        if self._epoch_end == -1 and self._epoch != master.epochs.last_epoch:
            entry = master.epochs.get(self._epoch)  # a newer epoch began meanwhile
            if entry is not None:
                self._use_epoch(entry)
        end = self._epoch_end
        if end != -1:
            if self.next_offset >= end:
                nxt = master.epochs.next_entry(self._epoch)
                if nxt is None:
                    return 0
                self._use_epoch(nxt)
                return -1
            size = min(size, end - self.next_offset)
        chunk = _chunk(master.store, self.next_offset, size)
        if not chunk:
            return 0
        self.last_master_max = master.store.max_phy_offset
        self.last_transfer_ms = _now_ms()
        self._write_header(self.next_offset, len(chunk))
        self.writer.write(chunk)
        self.next_offset += len(chunk)
        return len(chunk)

    def _write_header(self, offset: int, size: int) -> None:
        epochs = self.master.epochs
        entry = epochs.get(self._epoch) or epochs.first_entry()
        epoch, start = (entry.epoch, entry.start_offset) if entry is not None else (-1, 0)
        self.writer.write(encode_transfer_header(offset, size, epoch, start,
                                                 self.master.store.confirm_offset))


class MasterSide(NewData):
    """The HA listener's connections and the sync state set of a master."""

    def __init__(self, store: MessageStore, epochs: EpochFile, config: AutoSwitchHAConfig,
                 notify_sync_state_set: Callable[[set[int]], None]) -> None:
        self.store = store
        self.epochs = epochs
        self.config = config
        self.local_broker_id = config.local_broker_id
        self.links: set[SlaveLink] = set()
        self.active = False  # this replica is master: acks count
        self._notify = notify_sync_state_set
        self._sync_state_set: set[int] = set()
        self._pending: set[int] | None = None  # sent to the controller, not yet confirmed
        self.sync_state_set_epoch = 0
        self._caught_up_ms: dict[int, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._new_data: asyncio.Future[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    # -- connections --------------------------------------------------------------------
    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.active:
            log.warning("HA: a slave connects but this replica is not master; closing")
            writer.close()
            return
        link = SlaveLink(self, reader, writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.links.add(link)
        try:
            await link.run()
        finally:
            self.links.discard(link)
            self._tasks.discard(task)
            log.info("HA: slave %s (broker id %d) disconnected at offset %d", link.addr,
                     link.slave_id, link.ack_offset)
            if self.active and link.slave_id in self._sync_state_set:
                new = set(self._sync_state_set) - {link.slave_id}
                self._pending = new
                self._notify(new)

    async def drop_all(self) -> None:
        """Close every slave's connection (a role change)."""
        for link in list(self.links):
            link.writer.transport.abort()  # its reader ends, then its task
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=2.0)
            await cancel_and_wait(pending)
        for _, fut in self._waiters:
            if not fut.done():
                fut.cancel()
        self._waiters.clear()

    # -- the sync state set --------------------------------------------------------------
    def sync_state_set(self) -> set[int]:
        """The confirmed set, with a pending change sent to the controller (RocketMQ's
        getSyncStateSet: their union while it is pending)."""
        if self._pending is not None:
            return self._sync_state_set | self._pending
        return set(self._sync_state_set)

    def set_sync_state_set(self, ids: set[int], epoch: int) -> None:
        self._pending = None
        self._sync_state_set = set(ids)
        self.sync_state_set_epoch = epoch
        self.update_confirm()

    def caught_up(self, slave_id: int, at_ms: int) -> None:
        if at_ms > self._caught_up_ms.get(slave_id, 0):
            self._caught_up_ms[slave_id] = at_ms

    def maybe_expand(self, slave_id: int, offset: int) -> None:
        """A slave that holds the confirm offset and reached the current epoch joins."""
        if not self.active or slave_id in self._sync_state_set:
            return
        last = self.epochs.last_entry()
        if offset >= self.store.confirm_offset and last is not None \
                and offset >= last.start_offset:
            new = self._sync_state_set | {slave_id}
            if self._pending == new:
                return  # already asked
            self._pending = new
            log.info("HA: slave %d caught up at %d: asking for sync state set %s", slave_id,
                     offset, sorted(new))
            self._notify(set(new))

    def maybe_shrink(self) -> set[int]:
        """The set without slaves that lagged more than haMaxTimeSlaveNotCatchup or are not
        connected (RocketMQ's maybeShrinkSyncStateSet)."""
        new = set(self._sync_state_set)
        limit = self.config.ha_max_time_slave_not_catchup_ms
        now = _now_ms()
        for sid, at in self._caught_up_ms.items():
            if sid in new and now - at > limit:
                new.discard(sid)
        connected = {link.slave_id for link in self.links}
        for sid in list(new):
            if sid != self.local_broker_id and (sid not in self._caught_up_ms
                                                or sid not in connected):
                new.discard(sid)
        if new != self._sync_state_set:
            self._pending = new
        return new

    def check_sync_state_set(self) -> None:
        """The periodic check: ask for a shrunk set when it changed."""
        if not self.active:
            return
        new = self.maybe_shrink()
        new.add(self.local_broker_id)
        if new != self._sync_state_set:
            log.info("HA: slaves %s fell behind: asking for sync state set %s",
                     sorted(self._sync_state_set - new), sorted(new))
            self._notify(new)

    # -- the confirm offset --------------------------------------------------------------
    def compute_confirm(self) -> int:
        """The smallest ack among the sync state set's slaves (the max offset without them);
        the current value while one of them is not connected."""
        members = self.sync_state_set()
        new = self.store.max_phy_offset
        connected = {link.slave_id for link in self.links}
        for sid in members:
            if sid not in connected and sid != self.local_broker_id:
                return self.store.confirm_offset
        for link in self.links:
            if link.slave_id in members and link.ack_offset > 0:
                new = min(new, link.ack_offset)
        return new

    def update_confirm(self) -> None:
        """The store's confirm offset as a master: it follows the max offset when the set is
        this replica alone or not every member must ack (RocketMQ's getConfirmOffset)."""
        if not self.active:
            return
        if len(self._sync_state_set) <= 1 or not self.config.all_ack_in_sync_state_set:
            self.store.set_confirm_offset(None)
        else:
            self.store.set_confirm_offset(self.compute_confirm())

    def on_ack(self, slave_id: int) -> None:
        if self.active and slave_id in self._sync_state_set:
            self.update_confirm()
        self._wake_waiters()

    # -- SYNC sends -----------------------------------------------------------------------
    def acked(self, end: int) -> bool:
        """Whether the acks meet a SYNC send's need for the bytes up to ``end``."""
        cfg = self.config
        if cfg.all_ack_in_sync_state_set:
            members = self.sync_state_set()
            if len(members) <= 1:
                return True
            acks = 1 + sum(1 for link in self.links
                           if link.slave_id in members and link.ack_offset >= end)
            return acks >= len(members)
        need = cfg.in_sync_replicas
        if need <= 1:
            return True
        return 1 + sum(1 for link in self.links if link.ack_offset >= end) >= need

    async def wait_acked(self, end: int, timeout: float) -> bool:
        if self.acked(end):
            return True
        fut = asyncio.get_running_loop().create_future()
        entry = (end, fut)
        self._waiters.append(entry)
        self.notify()
        try:
            await wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    def _wake_waiters(self) -> None:
        for end, fut in self._waiters:
            if not fut.done() and self.acked(end):
                fut.set_result(None)
