"""The controller process: a RemotingServer answering the controller codes, the heartbeat scan
that expires silent brokers (and re-elects a group whose master expired), the inactive-master
scan, and NOTIFY_BROKER_ROLE_CHANGED (1008) to a group's live brokers on a new master.

It listens on the port of its own ``controllerDLegerPeers`` entry (else ``listenPort``) and
answers GET_METADATA_INFO as the leader of its one-peer group.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bolide.common.hosts import local_ip
from bolide.common.waiting import cancel_and_wait
from bolide.controller import decisions
from bolide.controller.config import ControllerConfig
from bolide.controller.event_log import EventLog, Replay
from bolide.controller.heartbeat import HeartbeatManager
from bolide.controller.processor import ControllerProcessor
from bolide.controller.replicas import ReplicasState
from bolide.protocol.bodies.controller import ElectMasterResponseBody, SyncStateSet
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import controller as h
from bolide.remoting import Channel, RemotingClient, RemotingServer, RequestContext

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT_MS = 3000


class ControllerServer:
    """Owns the controller's socket, state, event log and timers; ``port=0`` binds a free port."""

    def __init__(self, config: ControllerConfig | None = None, *, host: str | None = None,
                 port: int | None = None, config_file: Path | None = None) -> None:
        """``host``: the address to advertise when no peers are configured (default: this
        host's outbound IP); ``config_file``: where UPDATE_CONTROLLER_CONFIG writes."""
        config = config if config is not None else ControllerConfig()
        # the host part of the leader address: the own peer's, else ``host``, else this host's IP
        self._advertised_host = config.self_peer(host or local_ip()).address.rsplit(":", 1)[0]
        self.state = ReplicasState()
        self.heartbeats = HeartbeatManager()
        self.event_log = EventLog(config.store_dir / config.self_id)
        self.replay = Replay()
        self.processor = ControllerProcessor(config, self.state, self.heartbeats, self.event_log,
                                             leader_address=lambda: self.address, config_file=config_file)
        self.processor.on_master_changed = self.notify_role_changed
        self.server = RemotingServer(host if host is not None else config.bind_address,
                                     config.port if port is None else port)
        for code in self.processor.codes:
            self.server.register(code, self._process)
        self.server.on_channel_close(self._channel_closed)
        self.client = RemotingClient()
        self._tasks: list[asyncio.Task[None]] = []
        self._notifies: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self._elections: set[asyncio.Task[bool]] = set()
        self._closing = False

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
        for name in decisions.need_reelect(self.state, self.processor.alive):
            self.on_broker_inactive(name, None)

    def on_broker_inactive(self, broker_name: str, broker_id: int | None) -> None:
        """Elect a new master when the inactive broker was its group's master (or ``None``)."""
        group = self.state.get(broker_name)
        if self._closing or group is None or (broker_id is not None and group.master_broker_id != broker_id):
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

    async def start(self) -> ControllerServer:
        """Replay the event log, then serve."""
        self.replay = await asyncio.to_thread(self.event_log.open)
        for event in self.replay.events:
            self.state.apply(event)
        if self.replay.dropped_bytes:
            log.warning("controller state: a torn tail of %d bytes was cut off (%s)",
                        self.replay.dropped_bytes, self.replay.reason)
        await self.server.start()
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
        await cancel_and_wait(self._tasks)
        self._tasks = []
        await self.server.close()
        await cancel_and_wait([*self._elections, *(t for _, t in self._notifies.values())])
        await self.client.close()
        self.event_log.close()

    async def __aenter__(self) -> ControllerServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
