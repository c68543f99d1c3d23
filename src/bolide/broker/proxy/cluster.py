"""The other brokers serving a topic, for the gRPC endpoint's QueryRoute and QueryAssignment.

RocketMQ's proxy in local mode (each broker serving gRPC from its own process) answers a
topic's route with the queues of every broker that has it, as the NameServers know them, each
at that broker's gRPC endpoint. A client that dialled one broker then sends to and receives
from all of them. RocketMQ takes a broker's endpoint to be its host and the proxy's own gRPC
port; Bolide asks each other broker for its port (``grpcServerPort`` in GET_BROKER_CONFIG: a
Bolide broker answers the port it bound), so brokers on one host with ports of their own work
too. A broker that names no port (RocketMQ's) is taken to serve on this endpoint's port, as
RocketMQ assumes; one whose endpoint is off (``-1``), or that does not answer, is left out.

A topic's route is kept ``ROUTE_TTL_S`` seconds; after that the old one is answered while a
new one is fetched, so a NameServer that is slow or down delays no client beyond the first
query of a topic. Both tables are bounded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from bolide.broker.acl.addresses import host_of
from bolide.broker.namesrv_route import route_from_namesrv
from bolide.common.config_file import parse_properties
from bolide.common.waiting import cancel_and_wait
from bolide.errors import ProtocolError, RemotingError
from bolide.protocol.bodies.broker import TopicConfig
from bolide.protocol.bodies.route import TopicRouteData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.admin import GetTopicConfigRequestHeader

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

ROUTE_TTL_S = 5.0  # a topic's route is fetched again after this long
PORT_TTL_S = 60.0  # a broker's gRPC port is asked again after this long
PORT_RETRY_S = 5.0  # ... or after this long when the broker did not answer
MAX_TOPICS = 4096  # routes kept; the oldest go first
MAX_BROKERS = 1024  # brokers whose gRPC port is kept
PEER_TIMEOUT_MS = 3000
MASTER_ID = 0
GRPC_PORT_KEY = "grpcServerPort"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PeerQueues:
    """Another broker's queues of a topic and where its gRPC endpoint is."""

    broker_name: str
    host: str
    grpc_port: int
    perm: int
    read_queue_nums: int
    write_queue_nums: int


@dataclass(frozen=True, slots=True)
class TopicView:
    """What the other brokers serve of a topic: their queues, and the topic's attributes as
    one of them has them (for the message types when this broker does not have the topic)."""

    peers: tuple[PeerQueues, ...] = ()
    attributes: dict[str, str] | None = None


NO_PEERS = TopicView()


def master_addresses(route: TopicRouteData, own_name: str) -> dict[str, str]:
    """The master address of each other broker in ``route`` (brokers without a master are left
    out: a slave serves no gRPC)."""
    found: dict[str, str] = {}
    for bd in route.broker_datas:
        addr = bd.broker_addrs.get(MASTER_ID)
        if bd.broker_name != own_name and addr:
            found[bd.broker_name] = addr
    return found


def peers_of(
    route: TopicRouteData, own_name: str, ports: dict[str, int | None], default_port: int
) -> tuple[PeerQueues, ...]:
    """The other brokers' queues in ``route``, each at its master's host and gRPC port
    (``ports`` by master address, ``default_port`` for one not in it; None: the broker serves
    no gRPC or did not answer, so it is left out), sorted by broker name."""
    masters = master_addresses(route, own_name)
    peers = []
    for qd in route.queue_datas:
        addr = masters.get(qd.broker_name)
        if addr is None:
            continue
        port = ports.get(addr, default_port)
        if port is None:
            continue
        peers.append(
            PeerQueues(qd.broker_name, host_of(addr), port, qd.perm, qd.read_queue_nums, qd.write_queue_nums)
        )
    return tuple(sorted(peers, key=lambda p: p.broker_name))


def grpc_port_of(config_text: str, default: int) -> int | None:
    """A broker's gRPC port from its GET_BROKER_CONFIG properties: ``default`` when it names
    none, None when its endpoint is off."""
    value = parse_properties(config_text).get(GRPC_PORT_KEY)
    if value is None:
        return default
    try:
        port = int(value)
    except ValueError:
        return None
    return port if 0 < port < 65536 else None


class ClusterRoutes:
    """The other brokers' queues of topics, from the NameServers, with their gRPC endpoints.

    ``own_port()`` is this endpoint's gRPC port (the port of brokers that name none)."""

    def __init__(
        self,
        broker: BrokerController,
        own_port: Callable[[], int],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker, self.own_port, self.clock = broker, own_port, clock
        self._routes: dict[str, tuple[float, TopicView]] = {}
        self._ports: dict[str, tuple[float, int | None]] = {}
        self._fetching: dict[str, asyncio.Task[Any]] = {}

    async def view(self, topic: str) -> TopicView:
        """The other brokers' queues of ``topic`` (none when the NameServers do not know it)."""
        now = self.clock()
        kept = self._routes.get(topic)
        if kept is not None and now - kept[0] < ROUTE_TTL_S:
            return kept[1]
        task = self._task(f"route:{topic}", lambda: self._fetch_view(topic))
        if kept is not None:
            return kept[1]  # the old route while the new one comes
        return await asyncio.shield(task)

    async def close(self) -> None:
        await cancel_and_wait(list(self._fetching.values()))

    def _task(self, key: str, start: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Task[T]:
        """The fetch running for ``key``, or a new one (one fetch per key at a time)."""
        task = self._fetching.get(key)
        if task is None:
            task = self._fetching[key] = asyncio.ensure_future(start())
            task.add_done_callback(lambda _: self._fetching.pop(key, None))
        return task

    async def _fetch_view(self, topic: str) -> TopicView:
        try:
            view = await self._peers_view(topic)
        except Exception:  # a bug must not fail the clients' queries: this broker's queues then
            log.exception("gRPC routes: the other brokers' queues of %s could not be read", topic)
            view = NO_PEERS
        _put(self._routes, topic, (self.clock(), view), MAX_TOPICS)
        return view

    async def _peers_view(self, topic: str) -> TopicView:
        broker = self.broker
        route = await route_from_namesrv(broker, topic)
        view = NO_PEERS
        if route is not None:
            own = broker.config.broker_name
            masters = master_addresses(route, own)
            found = await asyncio.gather(*(self._grpc_port(addr) for addr in masters.values()))
            peers = peers_of(route, own, dict(zip(masters.values(), found, strict=True)), self.own_port())
            attributes = None
            if peers and broker.topics.get(topic) is None:
                attributes = await self._attributes(topic, masters[peers[0].broker_name])
            view = TopicView(peers, attributes)
        return view

    async def _grpc_port(self, addr: str) -> int | None:
        now = self.clock()
        kept = self._ports.get(addr)
        if kept is not None and now - kept[0] < PORT_TTL_S:
            return kept[1]
        return await asyncio.shield(self._task(f"port:{addr}", lambda: self._fetch_port(addr)))

    async def _fetch_port(self, addr: str) -> int | None:
        request = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG)
        answer = await self._ask(addr, request)
        if answer is None:  # asked again sooner: it may be starting
            _put(self._ports, addr, (self.clock() - PORT_TTL_S + PORT_RETRY_S, None), MAX_BROKERS)
            return None
        port = grpc_port_of(answer.body_bytes().decode("utf-8", "replace"), self.own_port())
        _put(self._ports, addr, (self.clock(), port), MAX_BROKERS)
        return port

    async def _attributes(self, topic: str, addr: str) -> dict[str, str] | None:
        header = GetTopicConfigRequestHeader(topic=topic)
        request = RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, header)
        answer = await self._ask(addr, request)
        if answer is None:
            return None
        try:
            return TopicConfig.decode(answer.body_bytes()).attributes
        except (ProtocolError, ValueError):
            return None

    async def _ask(self, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        """The broker's successful answer; None (logged) otherwise."""
        what = RequestCode(request.code).name
        try:
            response = await self.broker.namesrv_client.invoke(addr, request, PEER_TIMEOUT_MS)
        except (RemotingError, ProtocolError) as exc:
            log.info("gRPC routes: broker %s did not answer %s: %s", addr, what, exc)
            return None
        if response.code != ResponseCode.SUCCESS:  # an ACL, most likely: left out of routes
            log.warning("gRPC routes leave out broker %s: it refused %s (%s); with an ACL on, let this "
                        "broker in (globalWhiteRemoteAddresses, or innerClientAuthenticationCredentials)",
                        addr, what, response.remark)
            return None
        return response


def _put(table: dict[str, T], key: str, value: T, limit: int) -> None:
    """``table[key] = value``, dropping the oldest entry when the table is full."""
    table.pop(key, None)
    if len(table) >= limit:
        del table[next(iter(table))]
    table[key] = value

