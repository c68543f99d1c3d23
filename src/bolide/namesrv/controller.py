"""The NameServer process: a RemotingServer answering NamesrvProcessor's codes, a periodic
scan that expires silent brokers, and route cleanup when a broker's connection closes.

With ``enableControllerInNamesrv=true`` it also runs a controller (RocketMQ 5's embedded
controller): a :class:`~bolide.controller.ControllerServer` with its own socket on the port of
its ``controllerDLegerPeers`` entry, configured from the same file.

With ``notifyMinBrokerIdChanged=true`` it tells a broker group's members when the group's
lowest live broker id changes (NOTIFY_MIN_BROKER_ID_CHANGE, one way, as RocketMQ 5 does for
slave acting master)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bolide.common.waiting import cancel_and_wait
from bolide.controller import ControllerConfig, ControllerServer
from bolide.errors import ProtocolError, RemotingError
from bolide.namesrv.acting import MinBrokerIdChange
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.processors import NamesrvProcessor
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.namesrv import NotifyMinBrokerIdChangeRequestHeader
from bolide.remoting import Channel, RemotingClient, RemotingServer, RequestContext
from bolide.remoting.tls import TlsServerConfig

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT_MS = 300  # RocketMQ's invokeOneway timeout for the notice


class NamesrvController:
    """Owns the NameServer's server socket, state and timers; ``port=0`` binds a free port."""

    def __init__(self, config: NamesrvConfig | None = None, *, host: str | None = None,
                 port: int | None = None, tls: TlsServerConfig | None = None,
                 config_file: Path | None = None, controller_config: ControllerConfig | None = None,
                 controller_port: int | None = None) -> None:
        """``config_file``: where UPDATE_NAMESRV_CONFIG writes its changes (None: nowhere);
        ``controller_config``: the embedded controller's settings when enableControllerInNamesrv
        is on (default: RocketMQ's); ``controller_port`` overrides its port."""
        self.config = config if config is not None else NamesrvConfig()
        self.processor = NamesrvProcessor(self.config, config_file=config_file)
        tls = (tls or TlsServerConfig()).resolved()
        self.server = RemotingServer(host if host is not None else self.config.bind_address,
                                     self.config.listen_port if port is None else port,
                                     tls=tls.server_context(), tls_mode=tls.tls_mode,
                                     idle_timeout_s=self.config.server_channel_max_idle_s,
                                     proxy_protocol=self.config.proxy_protocol_enable)
        for code in self.processor.codes:
            self.server.register(code, self._process)
        self.server.on_channel_close(self._channel_closed)
        self._scan_task: asyncio.Task[None] | None = None
        self._notify_client: RemotingClient | None = None  # made at the first notice
        self._notifying: set[asyncio.Task[None]] = set()
        self.controller: ControllerServer | None = None
        if self.config.enable_controller_in_namesrv:
            self.controller = ControllerServer(controller_config, host=host, port=controller_port)

    @property
    def port(self) -> int:
        return self.server.port

    async def _process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        response = self.processor.process(request, ctx.channel)
        self._send_notices()
        return response

    def _channel_closed(self, channel: Channel) -> None:
        for addr in self.processor.routes.on_channel_destroy(channel):
            log.info("broker %s unregistered: its connection closed", addr)
        self._send_notices()

    def scan_not_active_brokers(self) -> None:
        """Expire brokers silent past their timeout and close their connections."""
        for expired in self.processor.routes.scan_not_active_broker():
            log.warning("broker %s expired: no registration within its timeout", expired.broker_addr)
            if isinstance(expired.channel, Channel):
                expired.channel.close()
        self._send_notices()

    def _send_notices(self) -> None:
        """Send the NOTIFY_MIN_BROKER_ID_CHANGE messages the routes made due (when
        notifyMinBrokerIdChanged is on; dropped otherwise)."""
        notices = self.processor.routes.drain_notices()
        if not notices or not self.processor.config.notify_min_broker_id_changed:
            return
        loop = asyncio.get_running_loop()
        for notice in notices:
            task = loop.create_task(self._notify(notice))
            self._notifying.add(task)
            task.add_done_callback(self._notifying.discard)

    async def _notify(self, notice: MinBrokerIdChange) -> None:
        if self._notify_client is None:
            self._notify_client = RemotingClient()
        header = NotifyMinBrokerIdChangeRequestHeader(
            min_broker_id=notice.min_broker_id, broker_name=notice.broker_name,
            min_broker_addr=notice.min_broker_addr, offline_broker_addr=notice.offline_broker_addr,
            ha_broker_addr=notice.ha_broker_addr)
        log.info("min broker id of %s changed to %d, notify %s, offline broker %s",
                 notice.broker_name, notice.min_broker_id, list(notice.targets),
                 notice.offline_broker_addr)
        for addr in notice.targets:
            request = RemotingCommand.request(RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, header,
                                              oneway=True)
            try:
                await self._notify_client.invoke_oneway(addr, request, NOTIFY_TIMEOUT_MS)
            except (RemotingError, ProtocolError, OSError) as exc:
                log.info("NOTIFY_MIN_BROKER_ID_CHANGE to %s failed: %s", addr, exc)

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.scan_not_active_brokers()

    async def start(self) -> NamesrvController:
        if self.controller is not None:
            await self.controller.start()
        await self.server.start()
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop())
        return self

    async def close(self) -> None:
        if self._scan_task is not None:
            await cancel_and_wait([self._scan_task])
            self._scan_task = None
        await cancel_and_wait(list(self._notifying))
        if self._notify_client is not None:
            await self._notify_client.close()
            self._notify_client = None
        await self.server.close()
        if self.controller is not None:
            await self.controller.close()
