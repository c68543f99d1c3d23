"""Registration with every NameServer: at start, every ``registerNameServerPeriod`` and soon
after a topic changes (REGISTER_BROKER with the topic config wrapper)."""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable

from bolide.broker.config import BrokerConfig
from bolide.broker.static_topics import StaticTopicMappings
from bolide.broker.topic_config import TopicConfigManager
from bolide.common.waiting import cancel_and_wait
from bolide.protocol.bodies.broker import RegisterBrokerBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.namesrv import RegisterBrokerRequestHeader
from bolide.remoting import RemotingClient, RemotingError

log = logging.getLogger(__name__)


class BrokerRegistration:
    """Registers ``broker_addr`` with the configured NameServers through ``client``."""

    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, client: RemotingClient,
                 broker_addr: str, ha_addr: str, static_topics: StaticTopicMappings | None = None) -> None:
        self.config = config
        self.topics = topics
        self.static_topics = static_topics
        self.client = client
        self.broker_addr = broker_addr
        self.ha_addr = ha_addr
        self._task: asyncio.Task[None] | None = None
        self._pending: asyncio.Task[None] | None = None
        self._dirty = False
        # called with each accepting NameServer's response (a slave learns its master from it)
        self.on_registered: Callable[[RemotingCommand], None] | None = None

    def _request(self) -> RemotingCommand:
        wrapper = self.topics.wrapper()
        if self.static_topics is not None and self.static_topics.table:
            wrapper.topic_queue_mapping_info_map = self.static_topics.infos()
        body = RegisterBrokerBody(topic_config_serialize_wrapper=wrapper).encode()
        header = RegisterBrokerRequestHeader(
            broker_name=self.config.broker_name, broker_addr=self.broker_addr,
            cluster_name=self.config.broker_cluster_name, ha_server_addr=self.ha_addr,
            broker_id=self.config.broker_id, compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF)
        if self.config.enable_slave_acting_master:  # as RocketMQ 5 sends them
            header.enable_acting_master = True
            header.heartbeat_timeout_millis = self.config.broker_not_active_timeout_ms
        return RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body)

    async def register_all(self) -> int:
        """Register with every NameServer; returns how many accepted. Failures are logged."""
        addrs = self.config.namesrv_addrs
        results = await asyncio.gather(*(self._register(a) for a in addrs), return_exceptions=True)
        ok = 0
        for addr, result in zip(addrs, results, strict=True):
            if result is True:
                ok += 1
            else:
                log.warning("registering with NameServer %s failed: %s", addr, result)
        return ok

    async def _register(self, addr: str) -> bool | str:
        try:
            response = await self.client.invoke(addr, self._request(),
                                                self.config.register_broker_timeout_ms)
        except RemotingError as exc:
            return str(exc)
        if response.code != ResponseCode.SUCCESS:
            return f"code {response.code}: {response.remark}"
        if self.on_registered is not None:
            self.on_registered(response)
        return True

    def request_register(self) -> None:
        """Register again soon (after a topic change); changes made while a registration is
        in flight are sent by one more registration right after it."""
        if self._task is None:
            return
        self._dirty = True
        if self._pending is None or self._pending.done():
            self._pending = asyncio.get_running_loop().create_task(self._register_changes())

    async def _register_changes(self) -> None:
        while self._dirty:
            self._dirty = False
            await self.register_all()

    async def wait_pending(self) -> None:
        """Wait for a registration requested by :meth:`request_register` to finish."""
        if self._pending is not None:
            await asyncio.shield(self._pending)

    @property
    def started(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        """Register now, then every period."""
        await self.register_all()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        period = self.config.register_name_server_period_ms / 1000
        while True:
            await asyncio.sleep(period)
            await self.register_all()

    async def close(self) -> None:
        await cancel_and_wait(task for task in (self._task, self._pending) if task is not None)
        self._task = self._pending = None
