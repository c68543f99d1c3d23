"""Client housekeeping (RocketMQ's ClientHousekeepingService): a connection that has not sent
a heartbeat for ``channelExpiredTimeout`` is closed, which unregisters its producers and
consumers and makes the rest of their consumer groups rebalance."""

from __future__ import annotations

import asyncio
import logging

from bolide.broker.clients import ClientManager
from bolide.broker.loop_service import LoopService
from bolide.remoting import Channel

log = logging.getLogger(__name__)

MAX_SCAN_INTERVAL_S = 10.0


class ClientHousekeeping(LoopService):
    """Closes expired client connections, scanning every few seconds on the event loop."""

    TASK_NAME = "bolide-client-expiry"

    def __init__(self, clients: ClientManager, expiry_ms: int) -> None:
        self.clients = clients
        self.expiry_s = expiry_ms / 1000
        self.closed = 0

    async def _run(self) -> None:
        interval = min(MAX_SCAN_INTERVAL_S, self.expiry_s / 4)
        while True:
            await asyncio.sleep(interval)
            self.scan()

    def scan(self) -> int:
        """Close every expired connection now; how many were closed."""
        expired = self.clients.expired(self.expiry_s)
        for channel in expired:
            log.info("closing %s: no heartbeat for %.0f s", channel, self.expiry_s)
            if isinstance(channel, Channel):
                channel.close()  # its close callback unregisters it
            else:
                self.clients.unregister(channel)
        self.closed += len(expired)
        return len(expired)
