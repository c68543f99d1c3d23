"""A topic's route as the broker's NameServers know it: the queues of every broker serving it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bolide.errors import ProtocolError, RemotingError
from bolide.protocol.bodies.route import TopicRouteData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import GetRouteInfoRequestHeader

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

ROUTE_TIMEOUT_MS = 3000


async def route_from_namesrv(broker: BrokerController, topic: str) -> TopicRouteData | None:
    """``topic``'s route from the first NameServer that has it; None when none has it (or none
    answers)."""
    header = GetRouteInfoRequestHeader(topic=topic)
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header)
    for addr in broker.config.namesrv_addrs:
        try:
            response = await broker.namesrv_client.invoke(addr, request, ROUTE_TIMEOUT_MS)
            if response.code == ResponseCode.SUCCESS:
                return TopicRouteData.decode(response.body_bytes())
        except (RemotingError, ProtocolError) as exc:
            log.info("the route of %s from NameServer %s failed: %s", topic, addr, exc)
    return None
