"""Messages an acting master must write (RocketMQ 5's ``failover/EscapeBridge``).

A slave acting as its group's master runs the delay-level schedule and the transaction check,
but its CommitLog only copies the master's: it never appends. What those services would store
is "escaped" instead: with ``enableRemoteEscape=true`` sent (SEND_MESSAGE, as a producer
would) to a queue of the topic on another broker group's master, chosen from the topic's route
as the NameServers give it; without it the write fails with SERVICE_NOT_AVAILABLE and the
service tries again later, the messages waiting in this broker's store as RocketMQ's do.

The topic's route is asked of the NameServers at most once every ``ROUTE_TTL_S`` seconds.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import TYPE_CHECKING

from bolide.broker.namesrv_route import route_from_namesrv
from bolide.common import properties as P
from bolide.common.message import Message
from bolide.common.topic import AUTO_CREATE_TOPIC_KEY
from bolide.errors import ProtocolError, RemotingError
from bolide.protocol.bodies.route import MASTER_ID, PERM_WRITE, TopicRouteData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.send import SendMessageRequestHeader
from bolide.store import PutMessageResult, PutStatus

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

SEND_TIMEOUT_MS = 3000  # EscapeBridge.SEND_TIMEOUT
ROUTE_TTL_S = 30.0  # RocketMQ's TopicRouteInfoManager refreshes its routes every 30 s
MAX_ROUTES = 10_000


def writable_queues(route: TopicRouteData, own_broker_name: str) -> list[tuple[str, str, int]]:
    """(broker name, master address, queue id) of every writable queue of ``route`` on another
    group that has a master (an acting group is read-only, so never chosen)."""
    masters = {b.broker_name: b.broker_addrs.get(MASTER_ID) for b in route.broker_datas}
    queues: list[tuple[str, str, int]] = []
    for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = masters.get(q.broker_name)
        if q.broker_name == own_broker_name or not addr or not q.perm & PERM_WRITE:
            continue
        queues.extend((q.broker_name, addr, i) for i in range(q.write_queue_nums))
    return queues


def _failed(remark: str, status: PutStatus = PutStatus.UNKNOWN_ERROR) -> PutMessageResult:
    return PutMessageResult(status, remark=remark)


class EscapeBridge:
    """Writes for the services of an acting master; see the module doc."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        cfg = broker.config
        self.inner_producer_group = f"InnerProducerGroup_{cfg.broker_name}_{cfg.broker_id}"
        self._routes: dict[str, tuple[float, TopicRouteData | None]] = {}
        self._turn = itertools.count()
        self.escaped = 0  # messages sent to another group's master

    async def put(self, msg: Message, *, sys_flag: int = 0, born_timestamp: int = 0,
                  reconsume_times: int = 0) -> PutMessageResult:
        """Send ``msg`` to another group's master (its queue chosen there) when remote escape
        is on; a failed result otherwise, or when no other master takes the topic."""
        cfg = self.broker.config
        if not cfg.enable_remote_escape:
            return _failed("this slave acts as master and enableRemoteEscape=false: the message "
                           "waits here until the master is back", PutStatus.SERVICE_NOT_AVAILABLE)
        route = await self._route(msg.topic)
        queues = writable_queues(route, cfg.broker_name) if route is not None else []
        if not queues:
            return _failed(f"no other master has writable queues of {msg.topic} to escape to")
        broker_name, addr, queue_id = queues[next(self._turn) % len(queues)]
        header = SendMessageRequestHeader(
            producer_group=msg.properties.get(P.PRODUCER_GROUP) or self.inner_producer_group,
            topic=msg.topic, default_topic=AUTO_CREATE_TOPIC_KEY, default_topic_queue_nums=4,
            queue_id=queue_id, sys_flag=sys_flag, born_timestamp=born_timestamp or int(time.time() * 1000),
            flag=msg.flag, properties=P.encode_properties(msg.properties).decode(),
            reconsume_times=reconsume_times, bname=broker_name)
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header, msg.body)
        try:
            response = await self.broker.namesrv_client.invoke(addr, request, SEND_TIMEOUT_MS)
        except (RemotingError, ProtocolError, OSError) as exc:
            self._routes.pop(msg.topic, None)  # look the route up again next time
            return _failed(f"escaping to {broker_name} ({addr}) failed: {exc}")
        if response.code != ResponseCode.SUCCESS:
            return _failed(f"escaping to {broker_name} ({addr}) refused: code {response.code} "
                           f"{response.remark or ''}".rstrip())
        self.escaped += 1
        return PutMessageResult(PutStatus.PUT_OK)

    async def _route(self, topic: str) -> TopicRouteData | None:
        now = time.monotonic()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < ROUTE_TTL_S:
            return cached[1]
        route = await route_from_namesrv(self.broker, topic)
        if len(self._routes) >= MAX_ROUTES:
            self._routes.clear()
        self._routes[topic] = (now, route)
        return route
