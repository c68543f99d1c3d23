"""Live producer and consumer connections from HEART_BEAT, dropped when the connection closes
or UNREGISTER_CLIENT arrives. Bounded in the number of groups."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bolide.protocol.bodies.client import SubscriptionData


@dataclass(slots=True)
class ConsumerGroupInfo:
    """One consumer group: its clients by connection and the latest subscriptions."""

    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None
    clients: dict[object, str] = field(default_factory=dict)  # channel -> clientID
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)


@dataclass(slots=True)
class ClientChannelInfo:
    """What a connection said about itself in its latest heartbeat (admin connection lists).

    ``client_addr`` empty: the connection's remote address is meant.
    """

    client_id: str
    language: str = "JAVA"
    version: int = 0
    client_addr: str = ""
    last_heartbeat: float = 0.0  # time.monotonic() of the latest registration


class ClientManager:
    """Producer and consumer groups seen in heartbeats.

    ``on_consumer`` listeners are called with the group name on every consumer registration
    (the broker creates the group's subscription group there).
    """

    def __init__(self, max_groups: int = 10_000) -> None:
        self.max_groups = max_groups
        self.producers: dict[str, dict[object, str]] = {}
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.channels: dict[object, ClientChannelInfo] = {}
        self.on_consumer: list[Callable[[str], None]] = []

    def _remember(self, channel: object, client_id: str, language: str | None, version: int | None,
                  client_addr: str | None) -> None:
        info = self.channels.get(channel)
        if info is None:
            info = self.channels[channel] = ClientChannelInfo(client_id)
        info.client_id = client_id
        info.last_heartbeat = time.monotonic()
        if language is not None:
            info.language = language
        if version is not None:
            info.version = version
        if client_addr is not None:
            info.client_addr = client_addr

    def register_producer(self, group: str, channel: object, client_id: str, *,
                          language: str | None = None, version: int | None = None,
                          client_addr: str | None = None) -> bool:
        """Record a producer; False when the group table is full."""
        clients = self.producers.get(group)
        if clients is None:
            if len(self.producers) >= self.max_groups:
                return False
            clients = self.producers[group] = {}
        clients[channel] = client_id
        self._remember(channel, client_id, language, version, client_addr)
        return True

    def register_consumer(self, group: str, channel: object, client_id: str,
                          subscriptions: list[SubscriptionData], consume_type: str | None,
                          message_model: str | None, consume_from_where: str | None, *,
                          language: str | None = None, version: int | None = None,
                          client_addr: str | None = None) -> bool:
        """Record a consumer and its subscriptions; False when the group table is full.

        ``language`` (a LanguageCode name), ``version`` (the request's) and ``client_addr``
        are what GET_CONSUMER/PRODUCER_CONNECTION_LIST report for the connection. Compare
        :meth:`membership` before and after to know whether the group changed.
        """
        info = self.consumers.get(group)
        if info is None:
            if len(self.consumers) >= self.max_groups:
                return False
            info = self.consumers[group] = ConsumerGroupInfo()
        info.consume_type, info.message_model = consume_type, message_model
        info.consume_from_where = consume_from_where
        info.clients[channel] = client_id
        info.subscriptions = {s.topic: s for s in subscriptions}
        self._remember(channel, client_id, language, version, client_addr)
        for listener in self.on_consumer:
            listener(group)
        return True

    def membership(self, group: str) -> tuple[frozenset[str], frozenset[str]]:
        """A consumer group's client ids and subscribed topics: when either changes, its
        members must rebalance."""
        info = self.consumers.get(group)
        if info is None:
            return frozenset(), frozenset()
        return frozenset(info.clients.values()), frozenset(info.subscriptions)

    def consumer_channels(self, group: str) -> list[object]:
        info = self.consumers.get(group)
        return list(info.clients) if info is not None else []

    def consumer_channel(self, group: str, client_id: str) -> object | None:
        """The connection of ``group``'s consumer ``client_id`` (the latest, if it has several)."""
        info = self.consumers.get(group)
        if info is None:
            return None
        found = [channel for channel, cid in info.clients.items() if cid == client_id]
        return found[-1] if found else None

    def producer_channel(self, client_id: str) -> object | None:
        """The connection of the producer ``client_id`` (of any group; the latest heartbeat's
        when it has several): where replies to its requests go."""
        best: tuple[float, object] | None = None
        for clients in self.producers.values():
            for channel, cid in clients.items():
                if cid == client_id:
                    info = self.channels.get(channel)
                    seen = info.last_heartbeat if info is not None else 0.0
                    if best is None or seen >= best[0]:
                        best = (seen, channel)
        return best[1] if best is not None else None

    def expired(self, timeout_s: float) -> list[object]:
        """Connections whose latest heartbeat is older than ``timeout_s`` seconds."""
        deadline = time.monotonic() - timeout_s
        return [channel for channel, info in self.channels.items() if info.last_heartbeat < deadline]

    def channel_info(self, channel: object) -> ClientChannelInfo | None:
        return self.channels.get(channel)

    def groups_of_topic(self, topic: str) -> set[str]:
        """Consumer groups subscribed to ``topic`` (QUERY_TOPIC_CONSUME_BY_WHO)."""
        return {group for group, info in self.consumers.items() if topic in info.subscriptions}

    def consumer_ids(self, group: str) -> list[str]:
        info = self.consumers.get(group)
        return sorted(set(info.clients.values())) if info is not None else []

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumers.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def unregister(self, channel: object, producer_group: str | None = None,
                   consumer_group: str | None = None) -> list[str]:
        """Drop ``channel`` from the named groups (every group when both are None); the
        consumer groups it left that still have members (they must rebalance)."""
        left: list[str] = []
        everything = producer_group is None and consumer_group is None
        if everything:
            self.channels.pop(channel, None)
        for group, clients in list(self.producers.items()):
            if everything or group == producer_group:
                clients.pop(channel, None)
                if not clients:
                    del self.producers[group]
        for group, info in list(self.consumers.items()):
            if (everything or group == consumer_group) and channel in info.clients:
                del info.clients[channel]
                if info.clients:
                    left.append(group)
                else:
                    del self.consumers[group]
        return left
