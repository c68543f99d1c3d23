"""The NameServer process: a RemotingServer answering NamesrvProcessor's codes, a periodic
scan that expires silent brokers, and route cleanup when a broker's connection closes.

With ``enableControllerInNamesrv=true`` it also runs a controller (RocketMQ 5's embedded
controller): a :class:`~bolide.controller.ControllerServer` with its own socket on the port of
its ``controllerDLegerPeers`` entry, configured from the same file."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bolide.common.waiting import cancel_and_wait
from bolide.controller import ControllerConfig, ControllerServer
from bolide.namesrv.config import NamesrvConfig
from bolide.namesrv.processors import NamesrvProcessor
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Channel, RemotingServer, RequestContext
from bolide.remoting.tls import TlsServerConfig

log = logging.getLogger(__name__)


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
                                     idle_timeout_s=self.config.server_channel_max_idle_s)
        for code in self.processor.codes:
            self.server.register(code, self._process)
        self.server.on_channel_close(self._channel_closed)
        self._scan_task: asyncio.Task[None] | None = None
        self.controller: ControllerServer | None = None
        if self.config.enable_controller_in_namesrv:
            self.controller = ControllerServer(controller_config, host=host, port=controller_port)

    @property
    def port(self) -> int:
        return self.server.port

    async def _process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self.processor.process(request, ctx.channel)

    def _channel_closed(self, channel: Channel) -> None:
        for addr in self.processor.routes.on_channel_destroy(channel):
            log.info("broker %s unregistered: its connection closed", addr)

    def scan_not_active_brokers(self) -> None:
        """Expire brokers silent past their timeout and close their connections."""
        for expired in self.processor.routes.scan_not_active_broker():
            log.warning("broker %s expired: no registration within its timeout", expired.broker_addr)
            if isinstance(expired.channel, Channel):
                expired.channel.close()

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
        await self.server.close()
        if self.controller is not None:
            await self.controller.close()
