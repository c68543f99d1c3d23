"""ClientInstance: one client id, one connection pool, the route cache and the shared timers
(Java MQClientInstance). Each producer or consumer owns one.

Timers: routes of every topic in use are re-read every ``poll_name_server_interval_ms``
(30 s) and every broker in those routes gets a HEART_BEAT every ``heartbeat_broker_interval_ms``
(30 s). ``close()`` sends UNREGISTER_CLIENT to each broker and closes the connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from bolide.client.api import ClientAPI
from bolide.client.config import ClientConfig
from bolide.client.errors import ClientStateError, NoRouteError
from bolide.client.route import TopicRoute, build_route, default_route
from bolide.common.topic import AUTO_CREATE_TOPIC_KEY
from bolide.common.waiting import cancel_and_wait, wait_for
from bolide.errors import BolideError
from bolide.protocol.bodies.client import ConsumerData, HeartbeatData, MessageQueue, ProducerData
from bolide.protocol.bodies.route import MASTER_ID
from bolide.remoting import Processor, RemotingClient
from bolide.remoting.hooks import AclClientRPCHook
from bolide.remoting.tls import client_context

log = logging.getLogger(__name__)
TIMER_GRACE_S = 3.0  # how long close() lets a timer job under way finish


class ClientInstance:
    """Routes, heartbeats and the remote API for one client id."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = config.make_client_id()
        hooks = ([AclClientRPCHook(config.access_key, config.secret_key, config.security_token)]
                 if config.access_key and config.secret_key else [])
        tls = (client_context(config.tls_ca_file, config.tls_cert_file, config.tls_key_file)
               if config.use_tls else None)
        self.remoting = RemotingClient(hooks=hooks, connect_timeout_ms=config.api_timeout_ms, tls=tls)
        self.api = ClientAPI(self.remoting, config.namesrv_addrs, config.api_timeout_ms)
        self.routes: dict[str, TopicRoute] = {}
        # the broker id each queue's last pull answer suggested pulling from next
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        self.producer_group: str | None = None
        self.consumer_data: Callable[[], ConsumerData] | None = None
        self._route_lock: asyncio.Lock | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._greeted: set[str] = set()  # broker addresses a heartbeat was sent to
        self._closing: asyncio.Event | None = None
        self._started = False
        self.closed = False

    def register_processor(self, code: int, processor: Processor) -> None:
        """Answer requests the broker sends down this client's connections."""
        self.remoting.register(code, processor)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        if self.closed:
            raise ClientStateError("this client is closed: create a new one")
        if self._started:
            return
        self._started = True
        self._closing = asyncio.Event()
        self._route_lock = asyncio.Lock()
        self.every(self.config.poll_name_server_interval_ms, self.refresh_routes, "route refresh")
        self.every(self.config.heartbeat_broker_interval_ms, self.heartbeat, "heartbeat")

    def every(self, interval_ms: int, job: Callable[[], Awaitable[object]], name: str,
              first_ms: int | None = None) -> None:
        """Run ``job`` every ``interval_ms`` (first after ``first_ms``) until close; errors are logged."""
        self._tasks.append(asyncio.ensure_future(self._loop(interval_ms, job, name, first_ms)))

    async def _loop(self, interval_ms: int, job: Callable[[], Awaitable[object]], name: str,
                    first_ms: int | None) -> None:
        assert self._closing is not None
        wait_ms = interval_ms if first_ms is None else first_ms
        while True:
            with contextlib.suppress(TimeoutError):
                await wait_for(self._closing.wait(), wait_ms / 1000)
            if self._closing.is_set():
                return
            wait_ms = interval_ms
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except BolideError as exc:
                log.warning("%s of client %s failed: %s", name, self.client_id, exc)
            except Exception:
                log.exception("%s of client %s failed", name, self.client_id)

    async def stop_timers(self) -> None:
        """Stop the timers (the first step of closing). A job under way (an offset commit, a
        heartbeat) may finish for up to TIMER_GRACE_S: cancelled, its request could still be
        applied by the broker after the requests of the close itself (a stale offset
        committed over the final one)."""
        if self._closing is not None:
            self._closing.set()
        tasks, self._tasks = self._tasks, []
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=TIMER_GRACE_S)
            await cancel_and_wait(pending)

    async def close(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """Stop timers, unregister from every known broker, close every connection."""
        if self.closed:
            return
        self.closed = True
        await self.stop_timers()
        addrs = self.broker_addrs()
        if addrs and self._started:
            results = await asyncio.gather(*(self.api.unregister_client(
                a, self.client_id, producer_group, consumer_group) for a in addrs), return_exceptions=True)
            for addr, result in zip(addrs, results, strict=True):
                if isinstance(result, Exception):
                    log.info("UNREGISTER_CLIENT to %s failed: %s", addr, result)
        await self.remoting.close()

    # -- routes -------------------------------------------------------------------------------
    async def route(self, topic: str) -> TopicRoute | None:
        """The cached route of ``topic``, looked up on first use (None: no route)."""
        found = self.routes.get(topic)
        if found is not None:
            return found
        return await self.update_route(topic)

    async def publish_route(self, topic: str, default_queue_nums: int) -> TopicRoute:
        """The route to send to: the topic's own or, when it has none, TBW102's (auto-create).

        Raises NoRouteError when neither exists.
        """
        found = self.routes.get(topic)
        if found is not None and found.publish_queues:
            return found
        route = await self.update_route(topic, default_queue_nums)
        if route is None or not route.publish_queues:
            raise NoRouteError(
                f"no route to send to topic {topic!r}: the NameServer at {self.config.namesrv_addr} knows "
                f"neither it nor {AUTO_CREATE_TOPIC_KEY}; create the topic, or enable "
                "autoCreateTopicEnable on a broker registered with that NameServer")
        return route

    async def update_route(self, topic: str, default_queue_nums: int | None = None) -> TopicRoute | None:
        """Ask the NameServer for ``topic`` (falling back to TBW102 when ``default_queue_nums``
        is given) and cache the answer; transport errors propagate."""
        assert self._route_lock is not None, "start() the client instance first"
        async with self._route_lock:
            data = await self.api.get_route(topic)
            if data is not None:
                route = build_route(topic, data)
            elif default_queue_nums is not None:
                template = await self.api.get_route(AUTO_CREATE_TOPIC_KEY)
                if template is None:
                    return None
                route = default_route(topic, template, default_queue_nums)
            else:
                self.routes.pop(topic, None)
                return None
            old = self.routes.get(topic)
            if old is not None and old.from_default and route.from_default:
                return old
            self.routes[topic] = route
            new = route.broker_addrs(False) - self._greeted
            if new:  # brokers this client has not met: introduce it now, not at the next timer
                self._greeted |= new
                self._tasks.append(asyncio.ensure_future(self._greet()))
            return route

    async def _greet(self) -> None:
        try:
            await self.heartbeat()
        except BolideError as exc:
            log.info("first heartbeat of client %s failed: %s", self.client_id, exc)

    async def refresh_routes(self) -> None:
        for topic, old in list(self.routes.items()):
            try:
                data = await self.api.get_route(topic)
            except BolideError as exc:
                log.info("route refresh of %s failed: %s", topic, exc)
                continue
            if data is not None:
                self.routes[topic] = build_route(topic, data)
            elif not old.from_default:
                log.info("topic %s has no route any more", topic)
                self.routes.pop(topic, None)

    def broker_addrs(self, masters_only: bool = False) -> list[str]:
        out: set[str] = set()
        for route in self.routes.values():
            out |= route.broker_addrs(masters_only)
        return sorted(out)

    def broker_of(self, mq: MessageQueue) -> str:
        """The broker serving ``mq`` (a static topic's logic queue: its leader)."""
        route = self.routes.get(mq.topic)
        return route.broker_of(mq) if route is not None else mq.broker_name

    def master_addr(self, broker_name: str) -> str | None:
        for route in self.routes.values():
            addr = route.master_addr(broker_name)
            if addr:
                return addr
        return None

    def subscribe_addr(self, broker_name: str, broker_id: int = MASTER_ID,
                       only_this: bool = False) -> tuple[str, bool] | None:
        """:meth:`TopicRoute.subscribe_addr` over every cached route."""
        for route in self.routes.values():
            found = route.subscribe_addr(broker_name, broker_id, only_this)
            if found:
                return found
        return None

    # -- heartbeats -----------------------------------------------------------------------------
    def heartbeat_data(self) -> HeartbeatData:
        data = HeartbeatData(client_id=self.client_id)
        if self.producer_group:
            data.producer_data_set.append(ProducerData(group_name=self.producer_group))
        if self.consumer_data is not None:
            data.consumer_data_set.append(self.consumer_data())
        return data

    async def heartbeat(self) -> None:
        """HEART_BEAT to the brokers of every known route (masters only for producers)."""
        data = self.heartbeat_data()
        if not data.producer_data_set and not data.consumer_data_set:
            return
        addrs = self.broker_addrs(masters_only=not data.consumer_data_set)
        results = await asyncio.gather(*(self.api.heartbeat(a, data) for a in addrs), return_exceptions=True)
        for addr, result in zip(addrs, results, strict=True):
            if isinstance(result, Exception):
                log.warning("HEART_BEAT to %s failed: %s", addr, result)
