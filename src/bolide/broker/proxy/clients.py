"""gRPC clients as the broker knows them: their Telemetry streams, the settings answered on
them, and their place in the broker's producer and consumer tables.

A :class:`GrpcClient` stands in the broker's :class:`~bolide.broker.clients.ClientManager`
where a remoting connection would (admin connection lists, consumer groups, the transaction
check): the check's CHECK_TRANSACTION_STATE becomes a ``recover_orphaned_transaction_command``
on the client's Telemetry stream, as RocketMQ's proxy does.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable

from google.protobuf.duration_pb2 import Duration

from bolide.broker.clients import ClientManager
from bolide.broker.proxy.convert import delivered
from bolide.common.records import decode_record
from bolide.protocol.bodies.client import SubscriptionData
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.v5 import messaging_pb2 as pb

log = logging.getLogger(__name__)

OUTBOX_SIZE = 64  # commands waiting for a client's Telemetry stream; more are dropped
RECEIVE_BATCH = 32
LONG_POLLING_S = 20
# RocketMQ's default retry delays of a consumer group (delivery attempts 2, 3, ...)
RETRY_DELAYS_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
_V4_LANGUAGE = {
    pb.JAVA: "JAVA",
    pb.CPP: "CPP",
    pb.DOT_NET: "DOTNET",
    pb.GOLANG: "GO",
    pb.RUST: "RUST",
    pb.PYTHON: "PYTHON",
    pb.PHP: "PHP",
    pb.NODE_JS: "NODE_JS",
    pb.RUBY: "RUBY",
}
CONSUME_ACTIVELY, CONSUME_PASSIVELY = "CONSUME_ACTIVELY", "CONSUME_PASSIVELY"


class GrpcClient:
    """One client (``x-mq-client-id``) of the gRPC endpoint: a "channel" of the client tables."""

    writable = True

    def __init__(self, client_id: str, remote_address: str) -> None:
        self.client_id = client_id
        self.remote_address = remote_address
        self.settings: pb.Settings | None = None
        self.group: str | None = None  # a consumer's group
        self.topics: set[str] = set()  # a producer's topics (its producer groups)
        self.outbox: asyncio.Queue[pb.TelemetryCommand] | None = None  # while a stream is open
        self.is_active = True
        self.on_check: Callable[[str, int], None] | None = None  # transaction id, half offset

    def push(self, command: pb.TelemetryCommand) -> bool:
        """Send ``command`` on the client's Telemetry stream; False when none is open (or it
        is backed up)."""
        outbox = self.outbox
        if outbox is None:
            return False
        try:
            outbox.put_nowait(command)
        except asyncio.QueueFull:
            log.warning(
                "gRPC client %s does not read its Telemetry stream: a command was dropped", self.client_id
            )
            return False
        return True

    def oneway(self, request: RemotingCommand) -> None:
        """A broker-to-client call: the transaction check becomes an orphaned-transaction
        recovery command; the rest (rebalance notices) mean nothing to gRPC clients."""
        if request.code != RequestCode.CHECK_TRANSACTION_STATE or request.body is None:
            return
        fields = request.ext_fields
        half = decode_record(request.body_bytes())
        transaction_id = fields.get("transactionId") or fields.get("msgId") or ""
        if self.on_check is not None:
            self.on_check(transaction_id, int(fields.get("commitLogOffset", "-1")))
        message = delivered(half, handle="", attempt=1, invisible_ms=0)
        command = pb.TelemetryCommand(
            recover_orphaned_transaction_command=pb.RecoverOrphanedTransactionCommand(
                message=message, transaction_id=transaction_id
            )
        )
        if not self.push(command):
            raise ConnectionError(f"gRPC client {self.client_id} has no Telemetry stream open")

    def __repr__(self) -> str:
        return f"GrpcClient({self.client_id} at {self.remote_address})"


class GrpcClients:
    """The gRPC endpoint's clients by id, at most ``max_clients`` (the least recently seen go
    first), registered in the broker's client tables from their settings and heartbeats."""

    def __init__(self, tables: ClientManager, max_clients: int = 10_000) -> None:
        self.tables = tables
        self.max_clients = max_clients
        self._clients: OrderedDict[str, GrpcClient] = OrderedDict()
        self.on_check: Callable[[str, int], None] | None = None

    def get(self, client_id: str, remote_address: str) -> GrpcClient:
        client = self._clients.get(client_id)
        if client is None:
            client = self._clients[client_id] = GrpcClient(client_id, remote_address)
            client.on_check = self.on_check
            while len(self._clients) > self.max_clients:
                _, gone = self._clients.popitem(last=False)
                self.forget(gone)
        else:
            self._clients.move_to_end(client_id)
        return client

    def alive(self, client_id: str) -> bool:
        """Whether the client is still in the broker's tables (heartbeats keep it there)."""
        client = self._clients.get(client_id)
        return client is not None and client in self.tables.channels

    def register(self, client: GrpcClient, client_type: int, group: str | None = None) -> None:
        """Record the client in the producer or consumer tables (settings, heartbeat)."""
        settings = client.settings
        ua = settings.user_agent if settings is not None else None
        language = _V4_LANGUAGE.get(ua.language, "OTHER") if ua is not None else "OTHER"
        if client_type == pb.PRODUCER:
            if settings is not None and settings.HasField("publishing"):
                client.topics = {r.name for r in settings.publishing.topics}
            for topic in client.topics or {"CLIENT_INNER_PRODUCER"}:
                self.tables.register_producer(
                    topic, client, client.client_id, language=language, client_addr=client.remote_address
                )
            return
        if (
            settings is not None
            and settings.HasField("subscription")
            and settings.subscription.HasField("group")
        ):
            group = group or settings.subscription.group.name
        if not group:
            return
        client.group = group
        subs = []
        if settings is not None and settings.HasField("subscription"):
            for entry in settings.subscription.subscriptions:
                expression = entry.expression.expression or "*"
                kind = "SQL92" if entry.expression.type == pb.SQL else "TAG"
                subs.append(SubscriptionData.of(entry.topic.name, expression, 0, kind))
        consume_type = CONSUME_PASSIVELY if client_type == pb.PUSH_CONSUMER else CONSUME_ACTIVELY
        self.tables.register_consumer(
            group,
            client,
            client.client_id,
            subs,
            consume_type,
            "CLUSTERING",
            "CONSUME_FROM_LAST_OFFSET",
            language=language,
            client_addr=client.remote_address,
        )

    def forget(self, client: GrpcClient) -> None:
        """The client ended (NotifyClientTermination) or was pushed out: drop it everywhere."""
        client.is_active = False
        self.tables.unregister(client)
        if self._clients.get(client.client_id) is client:
            del self._clients[client.client_id]


def _duration(seconds: float) -> Duration:
    return Duration(seconds=int(seconds), nanos=int(seconds % 1 * 1e9))


def settings_reply(settings: pb.Settings, *, max_body: int, fifo: bool, max_attempts: int) -> pb.Settings:
    """The settings answered to a client's: its own with the broker's values merged in (what
    RocketMQ's proxy sends; the clients need every one of them)."""
    out = pb.Settings()
    out.CopyFrom(settings)
    out.metric.CopyFrom(pb.Metric(on=False))
    if settings.HasField("publishing") or settings.client_type == pb.PRODUCER:
        out.publishing.max_body_size = max_body
        out.publishing.validate_message_type = True
        out.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=3,
                exponential_backoff=pb.ExponentialBackoff(
                    initial=_duration(0.01), max=_duration(1), multiplier=2
                ),
            )
        )
        return out
    sub = out.subscription
    sub.receive_batch_size = RECEIVE_BATCH
    sub.long_polling_timeout.CopyFrom(_duration(LONG_POLLING_S))
    sub.fifo = fifo
    delays = [_duration(s) for s in RETRY_DELAYS_S[: max(1, max_attempts - 1)]]
    out.backoff_policy.CopyFrom(
        pb.RetryPolicy(max_attempts=max_attempts, customized_backoff=pb.CustomizedBackoff(next=delays))
    )
    return out
