"""Requests on a static topic's logic queue whose offsets lie on another broker, forwarded there
as physical requests (RocketMQ 5's broker RpcClient): the other broker's master is found in the
NameServers' cluster info, and the request goes with ``lo=false`` and ``bname`` so that it is
served as it is."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from bolide.errors import ProtocolError, RemotingError
from bolide.protocol.bodies.route import ClusterInfo
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.base import Header

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

MASTER_ID = 0
REFRESH_S = 5.0  # RocketMQ refreshes its brokers' metadata every 5 s
NAMESRV_TIMEOUT_MS = 3000


class ForwardFailed(Exception):
    """A forwarded request got no answer; the message names the broker and the cause."""


class BrokerDirectory:
    """Broker name -> master address, from GET_BROKER_CLUSTER_INFO, asked again when a name is
    missing or the table is older than :data:`REFRESH_S`."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._masters: dict[str, str] = {}
        self._fetched = 0.0

    async def master_addr(self, broker_name: str) -> str | None:
        addr = self._masters.get(broker_name)
        if addr is None or time.monotonic() - self._fetched > REFRESH_S:
            await self._refresh()
            addr = self._masters.get(broker_name)
        return addr

    async def _refresh(self) -> None:
        broker = self.broker
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        for namesrv in broker.config.namesrv_addrs:
            try:
                response = await broker.namesrv_client.invoke(namesrv, request, NAMESRV_TIMEOUT_MS)
                if response.code != ResponseCode.SUCCESS:
                    continue
                info = ClusterInfo.decode(response.body_bytes())
            except (RemotingError, ProtocolError) as exc:
                log.info("the cluster info from NameServer %s failed: %s", namesrv, exc)
                continue
            self._masters = {name: data.broker_addrs[MASTER_ID]
                             for name, data in info.broker_addr_table.items()
                             if MASTER_ID in data.broker_addrs}
            self._fetched = time.monotonic()
            return


async def forward(broker: BrokerController, broker_name: str, code: int,
                  header: Header) -> RemotingCommand:
    """``header``'s request (code ``code``) answered by the master of ``broker_name`` as a
    physical request; raises ForwardFailed naming the broker when it cannot be asked."""
    addr = await broker.broker_directory.master_addr(broker_name)
    if addr is None:
        raise ForwardFailed(f"no master of broker {broker_name} is registered with the NameServers "
                            f"({broker.config.namesrv_addr or 'none configured'})")
    request = RemotingCommand.request(code, header, ext_fields={"lo": "false", "bname": broker_name})
    try:
        return await broker.namesrv_client.invoke(addr, request, broker.config.forward_timeout)
    except (RemotingError, ProtocolError) as exc:
        raise ForwardFailed(f"broker {broker_name} ({addr}) did not answer: {exc}") from exc
