"""The master's HA service: a listener on the HA port streaming the CommitLog to each slave
from the offset it asks for, tracking the offsets slaves acknowledge, and the SYNC_MASTER
wait of a send for its slaves (RocketMQ's HAService, HAConnection, GroupTransferService)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time

from bolide.broker.config import BrokerConfig
from bolide.broker.ha.links import NewData, read_report
from bolide.broker.ha.protocol import OffsetReader, encode_frame_header
from bolide.broker.ha.status import ByteRate
from bolide.common.waiting import cancel_and_wait, wait_for
from bolide.remoting.channel import format_address
from bolide.store import MessageStore, PutStatus
from bolide.store.results import PutMessageResult

log = logging.getLogger(__name__)

_STORED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT)
_POLL = 0.1  # s: how long an idle sender waits for new data before looking again
# Appends do not wake the senders (dispatch does, and it runs behind a busy master), so a
# sender that has just sent looks again after _STREAM_POLL, and waits longer only once such a
# look found nothing: under load this halves the lag of an ASYNC_MASTER's slave
# (bench/ha_replication.py), and an idle or slow master makes no extra wakeups.
_STREAM_POLL = 0.001


class SlaveConnection:
    """One slave: a reader of its reports and a sender of CommitLog frames."""

    def __init__(self, master: HAMaster, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.master = master
        self.reader = reader
        self.writer = writer
        self.addr = format_address(writer.get_extra_info("peername"))
        self.request_offset = -1  # the first report: where the stream starts
        self.ack_offset = -1  # the latest report
        self.next_offset = -1  # the next byte to send
        self.heartbeats = 0  # empty frames sent while idle
        self.rate = ByteRate()  # CommitLog bytes sent per second
        self._requested = asyncio.Event()

    async def run(self) -> None:
        sender = asyncio.get_running_loop().create_task(self._send())
        try:
            await self._read()
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError, ConnectionError):
                await sender
            self.writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await self.writer.wait_closed()

    async def _read(self) -> None:
        cfg = self.master.config
        offsets = OffsetReader()
        store = self.master.store
        while True:
            data = await read_report(self.reader, 4096, cfg.ha_housekeeping_interval_ms, self.addr)
            if not data:
                return
            value = offsets.feed(data)
            if value is None:
                continue
            if self.request_offset < 0:
                if value < 0:
                    log.warning("HA: %s asks for the CommitLog from offset %d, which no CommitLog "
                                "has: closing (not a RocketMQ slave?)", self.addr, value)
                    return
                if value > store.max_phy_offset:
                    log.error("HA: slave %s has a CommitLog up to %d, past this master's max "
                              "offset %d: it holds data this master does not; empty the slave's "
                              "store directory (or point it at the right master)", self.addr,
                              value, store.max_phy_offset)
                    return
                self.request_offset = value
                log.info("HA: slave %s asks for the CommitLog from offset %d", self.addr, value)
                self._requested.set()
            elif value > store.max_phy_offset:
                log.warning("HA: slave %s acknowledges offset %d past this master's max offset "
                            "%d; closing (is it the slave of another master?)", self.addr, value,
                            store.max_phy_offset)
                return
            self.ack_offset = value
            self.master.on_ack(value)

    def _start_offset(self) -> int:
        store = self.master.store
        if self.request_offset == 0:  # an empty slave: from the start of the last segment
            max_offset = store.max_phy_offset
            return max_offset - max_offset % store.commit_log.segment_size
        return self.request_offset

    async def _send(self) -> None:
        await self._requested.wait()
        master = self.master
        cfg = master.config
        commit_log = master.store.commit_log
        self.next_offset = self._start_offset()
        if self.next_offset < commit_log.min_offset:
            log.error("HA: slave %s asks for offset %d but this master's CommitLog starts at %d "
                      "(older files were deleted): empty the slave's store directory and "
                      "restart it", self.addr, self.next_offset, commit_log.min_offset)
            self.writer.close()  # ends the reader too
            return
        heartbeat = cfg.ha_send_heartbeat_interval_ms / 1000
        batch = cfg.ha_transfer_batch_size
        last_write = time.monotonic()
        streaming = False  # data went out since the last wait
        writer = self.writer
        while True:
            chunk = _chunk(master.store, self.next_offset, batch)
            if chunk:
                writer.write(encode_frame_header(self.next_offset, len(chunk)))
                writer.write(chunk)
                self.next_offset += len(chunk)
                self.rate.add(len(chunk))
                await writer.drain()
                last_write = time.monotonic()
                streaming = True
                continue
            if time.monotonic() - last_write > heartbeat:
                writer.write(encode_frame_header(self.next_offset, 0))
                await writer.drain()
                self.heartbeats += 1
                last_write = time.monotonic()
            await master.data_written(_STREAM_POLL if streaming else _POLL)
            streaming = False


def _chunk(store: MessageStore, offset: int, batch: int) -> bytes:
    """Up to ``batch`` CommitLog bytes from ``offset``, within one segment (a copy: no view
    of the mapping is held while the socket drains)."""
    commit_log = store.commit_log
    found = commit_log.readable_from(offset, commit_log.max_offset)
    if found is None:
        return b""
    view, pos = found
    return bytes(view[pos : pos + min(len(view) - pos, batch)])


class HAMaster(NewData):
    """The HA listener of a master and its slaves' connections. Runs on the broker's loop."""

    def __init__(self, store: MessageStore, config: BrokerConfig) -> None:
        self.store = store
        self.config = config
        self.connections: set[SlaveConnection] = set()
        self.acked_offset = -1  # the highest offset any slave acknowledged
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._new_data: asyncio.Future[None] | None = None

    async def start(self, host: str, port: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(self._accept, host, port)
        self.store.add_dispatch_listener(self._on_dispatch)

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        await cancel_and_wait(list(self._tasks))
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.cancel()
        self._waiters.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = SlaveConnection(self, reader, writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections.add(conn)
        log.info("HA: slave %s connected", conn.addr)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)
            self._tasks.discard(task)
            log.info("HA: slave %s disconnected (acknowledged %d)", conn.addr, conn.ack_offset)

    # -- new data ----------------------------------------------------------------------
    def _on_dispatch(self, touched: object) -> None:  # on the dispatch thread
        loop = self._loop
        if loop is not None and self.connections and self._new_data is not None:
            loop.call_soon_threadsafe(self.notify)

    # -- acknowledgements and SYNC_MASTER ------------------------------------------------
    def on_ack(self, offset: int) -> None:
        if offset <= self.acked_offset:
            return
        self.acked_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= offset:
            fut = heapq.heappop(waiters)[2]
            if not fut.done():
                fut.set_result(None)

    def in_sync_slaves(self, end_offset: int) -> int:
        """Connected slaves that reported and lag ``end_offset`` by less than
        haSlaveFallbehindMax (RocketMQ's isSlaveOK, per slave)."""
        limit = self.config.ha_slave_fallbehind_max
        return sum(1 for c in self.connections
                   if c.ack_offset >= 0 and end_offset - c.ack_offset < limit)

    async def wait_replicated(self, result: PutMessageResult) -> None:
        """SYNC_MASTER: wait until a slave has the put's bytes, up to slaveTimeout; sets the
        status to SLAVE_NOT_AVAILABLE (no slave in sync) or FLUSH_SLAVE_TIMEOUT."""
        if result.status not in _STORED or result.wrote_offset < 0:
            return
        end = result.end_offset
        if self.acked_offset >= end:
            return
        if not self.in_sync_slaves(end):
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            result.remark = ("no slave is connected and in sync with this SYNC_MASTER (none, or "
                             "it lags more than haSlaveFallbehindMax): the message is stored on "
                             "the master only; start the slave, or use brokerRole=ASYNC_MASTER")
            return
        fut = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._waiters, (end, self._seq, fut))
        self.notify()
        try:
            await wait_for(fut, self.config.slave_timeout_ms / 1000)
        except TimeoutError:
            result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            result.remark = (f"no slave acknowledged the message within slaveTimeout="
                             f"{self.config.slave_timeout_ms} ms; it is stored on the master")
