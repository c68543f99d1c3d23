"""The controller process: a RemotingServer answering the controller codes, the heartbeat scan
that expires silent brokers (and re-elects a group whose master expired), the inactive-master
scan, and NOTIFY_BROKER_ROLE_CHANGED (1008) to a group's live brokers on a new master.

It listens on the port of its own ``controllerDLegerPeers`` entry (else ``listenPort``). Alone
it is its group's leader and keeps its state in its event log; in a group of several peers the
state is replicated with Raft (:mod:`bolide.controller.raft`) and only the leader elects
masters and notifies brokers (every peer keeps the heartbeats, which brokers send to all).
With ``metricsExporterType=PROM`` it serves RocketMQ's controller metrics to Prometheus
(:mod:`bolide.controller.metrics`, on ``metricsPromExporterPort``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from bolide.common.hosts import local_ip
from bolide.common.waiting import cancel_and_wait
from bolide.controller import decisions, seed
from bolide.controller.config import ControllerConfig
from bolide.controller.event_log import EventLog
from bolide.controller.heartbeat import HeartbeatManager
from bolide.controller.journal import Journal, LocalJournal
from bolide.controller.metrics import ControllerMetrics
from bolide.controller.processor import ControllerProcessor
from bolide.controller.raft.core import Timing
from bolide.controller.raft.journal import RaftJournal
from bolide.controller.raft.storage import RAFT_DIR, RaftStorage
from bolide.controller.replicas import ReplicasState
from bolide.metrics.exposition import Labels, render
from bolide.metrics.http import MetricsEndpoint
from bolide.metrics.settings import parse_labels, serves_prometheus
from bolide.protocol.bodies.controller import ElectMasterResponseBody, SyncStateSet
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import controller as h
from bolide.remoting import Channel, RemotingClient, RemotingServer, RequestContext

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT_MS = 3000
# RocketMQ brokers' default controllerHeartBeatTimeoutMills: a new peer hears every live broker
# within it
HEARTBEAT_GRACE_S = 10.0


class ControllerServer:
    """Owns the controller's socket, state, event log and timers; ``port=0`` binds a free port."""

    def __init__(self, config: ControllerConfig | None = None, *, host: str | None = None,
                 port: int | None = None, config_file: Path | None = None,
                 raft_timing: Timing | None = None, heartbeat_grace_s: float = HEARTBEAT_GRACE_S) -> None:
        """``host``: the address to advertise when no peers are configured (default: this
        host's outbound IP); ``config_file``: where UPDATE_CONTROLLER_CONFIG writes;
        ``raft_timing``: heartbeat and election timeouts of a group of several peers;
        ``heartbeat_grace_s``: how long a peer of such a group waits after its start before
        brokers it has not heard from count as inactive."""
        config = config if config is not None else ControllerConfig()
        # the host part of the leader address: the own peer's, else ``host``, else this host's IP
        self._advertised_host = config.self_peer(host or local_ip()).address.rsplit(":", 1)[0]
        self.state = ReplicasState()
        self.heartbeats = HeartbeatManager()
        self.store_dir = config.store_dir / config.self_id
        self.server = RemotingServer(host if host is not None else config.bind_address,
                                     config.port if port is None else port,
                                     proxy_protocol=config.proxy_protocol_enable)
        self.journal: Journal
        if len(config.peers) > 1:
            self.store_dir = self.store_dir / RAFT_DIR
            raft = RaftJournal(self.state, self.server, config.peers, config.self_id,
                               RaftStorage(self.store_dir), timing=raft_timing or Timing())
            raft.on_leadership = self._leadership_changed
            self.journal = raft
        else:
            self.journal = LocalJournal(EventLog(self.store_dir), self.state, config.self_id,
                                        lambda: self.address)
        self.processor = ControllerProcessor(config, self.state, self.heartbeats, self.journal,
                                             config_file=config_file, store_dir=self.store_dir)
        self.processor.on_master_changed = self.notify_role_changed
        for code in self.processor.codes:
            self.server.register(code, self._process)
        self.server.on_channel_close(self._channel_closed)
        self.client = RemotingClient()
        self._tasks: list[asyncio.Task[None]] = []
        self._notifies: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self._elections: set[asyncio.Task[bool]] = set()
        self._closing = False
        self._raft = len(config.peers) > 1
        self._started_at = time.monotonic()
        self._heartbeat_grace_s = heartbeat_grace_s
        self.metrics_endpoint: MetricsEndpoint | None = None

    @property
    def config(self) -> ControllerConfig:
        """The settings, as UPDATE_CONTROLLER_CONFIG left them (the scan intervals, port and
        store path apply at the next start)."""
        return self.processor.config

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        """The address brokers and mqadmin reach this controller at (the leader address)."""
        return f"{self._advertised_host}:{self.port}"

    async def _process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return await self.processor.process(request, ctx.channel)

    # -- liveness -------------------------------------------------------------------------
    def _channel_closed(self, channel: Channel) -> None:
        key = self.heartbeats.on_channel_close(channel)
        if key is not None:
            log.info("broker %s/%s id %d disconnected", *key)
            self.on_broker_inactive(key[1], key[2])

    def scan_not_active_brokers(self) -> None:
        """Expire brokers silent past their heartbeat timeout; re-elect where one was master."""
        for key, info in self.heartbeats.scan_not_active():
            log.warning("broker %s (%s id %d) expired: no heartbeat within %d ms", info.broker_addr,
                        key[1], key[2], info.heartbeat_timeout_ms)
            if isinstance(info.channel, Channel):
                info.channel.close()
            self.on_broker_inactive(key[1], key[2])

    def scan_inactive_masters(self) -> None:
        if not self._may_elect():
            return
        for name in decisions.need_reelect(self.state, self.processor.alive):
            self.on_broker_inactive(name, None)

    def _may_elect(self) -> bool:
        """Whether inactivity may start elections here: as the leader, and in a group of several
        peers not before every broker had the time to send this controller a heartbeat."""
        if self._closing or not self.journal.is_leader:
            return False
        return not self._raft or time.monotonic() - self._started_at >= self._heartbeat_grace_s

    def _leadership_changed(self, leading: bool) -> None:
        if leading:
            self.scan_inactive_masters()  # a master may have died while the group had no leader

    def on_broker_inactive(self, broker_name: str, broker_id: int | None) -> None:
        """Elect a new master when the inactive broker was its group's master (or ``None``)."""
        group = self.state.get(broker_name)
        if not self._may_elect() or group is None or (broker_id is not None
                                                      and group.master_broker_id != broker_id):
            return
        task = asyncio.get_running_loop().create_task(self.trigger_elect(broker_name))
        self._elections.add(task)
        task.add_done_callback(self._elections.discard)

    async def trigger_elect(self, broker_name: str) -> bool:
        """The controller's own election for a group (up to electMasterMaxRetryCount tries)."""
        for _ in range(self.config.elect_master_max_retry_count):
            try:
                result = await self.processor.elect(h.ElectMasterRequestHeader(broker_name=broker_name))
            except OSError as exc:
                log.error("election in %s not persisted: %s", broker_name, exc)
                continue
            if result.code == ResponseCode.SUCCESS:
                log.warning("broker group %s: new master %s", broker_name, result.header)
                return True
            if result.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
                return True  # another election already replaced the master
        log.warning("broker group %s: no master could be elected", broker_name)
        return False

    # -- notification ---------------------------------------------------------------------
    def notify_role_changed(self, header: h.ElectMasterResponseHeader, body: ElectMasterResponseBody) -> None:
        """Tell each live broker of the group its new master (oneway 1008), newest epoch wins."""
        group = body.broker_member_group
        if group is None or header.master_broker_id is None:
            return
        notice = h.NotifyBrokerRoleChangedRequestHeader(
            master_address=header.master_address, master_epoch=header.master_epoch,
            sync_state_set_epoch=header.sync_state_set_epoch, master_broker_id=header.master_broker_id)
        payload = SyncStateSet(set(body.sync_state_set), header.sync_state_set_epoch or 0).encode()
        epoch = header.master_epoch or 0
        for broker_id, addr in group.broker_addrs.items():
            if not addr or not self.heartbeats.is_active(group.cluster, group.broker_name, broker_id):
                continue
            previous = self._notifies.get(addr)
            if previous is not None and epoch > previous[0] and not previous[1].done():
                previous[1].cancel()
            request = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, notice, payload)
            task = asyncio.get_running_loop().create_task(self._notify(addr, request))
            self._notifies[addr] = (epoch, task)

    async def _notify(self, addr: str, request: RemotingCommand) -> None:
        try:
            await self.client.invoke_oneway(addr, request, NOTIFY_TIMEOUT_MS)
        except Exception as exc:  # a broker that cannot be told learns it from GET_REPLICA_INFO
            log.warning("could not tell broker %s its role changed: %s", addr, exc)

    # -- lifecycle ------------------------------------------------------------------------
    async def _every(self, interval_ms: int, job: str) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                getattr(self, job)()
            except Exception:
                log.exception("controller %s failed", job)

    def _metric_labels(self) -> Labels:
        """RocketMQ's labels of every controller series: this peer's address, group and id, and
        metricsLabel's pairs."""
        config = self.config
        own = config.self_peer("").address if config.peers else self.address
        return (("address", own), ("group", config.group), ("peer_id", config.self_id),
                *sorted(parse_labels(config.metrics_label).items()))

    async def _start_metrics(self) -> None:
        config = self.config
        if not serves_prometheus(config.metrics_exporter_type, config.metrics_prom_exporter_port):
            return
        metrics = ControllerMetrics(self._metric_labels, self.heartbeats, lambda: self.journal.role,
                                    self.store_dir)
        endpoint = MetricsEndpoint(lambda: render(metrics.families()), config.metrics_prom_exporter_host,
                                   config.metrics_prom_exporter_port)
        await endpoint.start()
        self.processor.metrics, self.metrics_endpoint = metrics, endpoint

    async def start(self) -> ControllerServer:
        """Load the state (replay the event log, or open the Raft log), then serve."""
        self._started_at = time.monotonic()
        seed.check_store(self.config)
        await self.journal.start()
        if self.journal.dropped_bytes:
            log.warning("controller state: a torn tail of %d bytes was cut off (%s)",
                        self.journal.dropped_bytes, self.journal.reason)
        await self.server.start()
        try:
            await self._start_metrics()
        except BaseException:
            await self.close()
            raise
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(self.config.scan_not_active_broker_interval_ms,
                                         "scan_not_active_brokers")),
            loop.create_task(self._every(self.config.scan_inactive_master_interval_ms,
                                         "scan_inactive_masters")),
        ]
        return self

    async def close(self) -> None:
        self._closing = True  # closing the brokers' connections triggers no election
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.close()
        await cancel_and_wait(self._tasks)
        self._tasks = []
        await self.server.close()
        await cancel_and_wait([*self._elections, *(t for _, t in self._notifies.values())])
        await self.client.close()
        await self.journal.close()

    async def __aenter__(self) -> ControllerServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
