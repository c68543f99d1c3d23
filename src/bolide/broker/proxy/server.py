"""The broker's gRPC endpoint: RocketMQ 5's ``apache.rocketmq.v2.MessagingService`` (what
RocketMQ's proxy serves on port 8081) in the broker's process, on its event loop.

Errors travel inside each response as a ``Status`` (the gRPC status stays OK), as the official
5.x clients expect; a call the endpoint does not serve answers NOT_IMPLEMENTED the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from bolide.broker.proxy.auth import authorize, authorize_v2
from bolide.broker.proxy.call import Call, call_of, peer_address
from bolide.broker.proxy.clients import GrpcClients, settings_reply
from bolide.broker.proxy.cluster import ClusterRoutes
from bolide.broker.proxy.consumer import GrpcConsumer, orderly
from bolide.broker.proxy.convert import Refused, status
from bolide.broker.proxy.front import LOOPBACK, GrpcFront
from bolide.broker.proxy.producer import GrpcProducer
from bolide.broker.proxy.routes import query_assignment, query_route
from bolide.protocol.v5 import messaging_pb2 as pb
from bolide.remoting.selfsigned import self_signed
from bolide.remoting.tls import TlsMode, TlsServerConfig

if TYPE_CHECKING:
    from bolide.broker.controller import BrokerController

log = logging.getLogger(__name__)

SERVICE = "apache.rocketmq.v2.MessagingService"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# The first settings of a stream are answered again after this long: the Node.js client 1.0.8
# sends them while it fetches its routes and starts waiting for the answer only afterwards, so
# an answer that comes first is missed and its start would wait for the next one (5 minutes).
SETTINGS_REPEAT_S = 1.0  # a request's size limit (a body is at most maxMessageSize)
Unary = Callable[[Any, Any], Awaitable[Any]]


class GrpcEndpoint:
    """Serves RocketMQ 5 gRPC clients for one broker; ``start()`` binds ``port`` (0: any)."""

    def __init__(
        self, broker: BrokerController, bind_address: str, port: int, tls: TlsServerConfig | None = None
    ) -> None:
        self.broker = broker
        self.bind_address, self.requested_port = bind_address, port
        self.tls = (tls or TlsServerConfig()).resolved()
        self.mode = self.tls.grpc_mode  # permissive unless tls.server.mode says otherwise
        self.port = -1
        self.clients = GrpcClients(broker.clients, broker.config.max_client_groups)
        self.pop = broker.pop
        self.producer = GrpcProducer(broker)
        self.consumer = GrpcConsumer(broker, self.pop)
        self.clients.on_check = self.producer.remember_half
        self.cluster = ClusterRoutes(broker, lambda: self.port)
        self._server: grpc.aio.Server | None = None
        self._front: GrpcFront | None = None  # permissive: the public port, relaying to grpcio

    async def start(self) -> GrpcEndpoint:
        """Serve in :attr:`mode`: ``disabled`` and ``enforcing`` are grpcio's own port, plain
        or TLS; ``permissive`` a :class:`GrpcFront` before grpcio's plain and TLS ports on
        loopback."""
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ]
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, self._handlers()),))
        public = f"{self.bind_address}:{self.requested_port}"
        credentials = None if self.mode is TlsMode.DISABLED else _credentials(self.tls)
        try:
            if self.mode is TlsMode.DISABLED:
                self.port = server.add_insecure_port(public)
            elif self.mode is TlsMode.ENFORCING:
                self.port = server.add_secure_port(public, credentials)
            else:
                plain = server.add_insecure_port(f"{LOOPBACK}:0")
                secure = server.add_secure_port(f"{LOOPBACK}:0", credentials)
        except RuntimeError as exc:
            raise OSError(
                f"the gRPC port {self.requested_port} is not available ({exc}): free it or set grpcServerPort"
            ) from None
        await server.start()
        self._server = server
        if self.mode is TlsMode.PERMISSIVE:
            front = GrpcFront(plain, secure, accept_proxy=self.broker.config.proxy_protocol_enable)
            try:
                self.port = await front.start(self.bind_address, self.requested_port)
            except OSError as exc:
                self._server = None
                await server.stop(None)
                raise OSError(f"the gRPC port {self.requested_port} is not available ({exc}): free it "
                              "or set grpcServerPort") from None
            self._front = front
        log.info("gRPC endpoint (RocketMQ 5 clients) listening on port %d (%s)", self.port, {
            TlsMode.DISABLED: "plain text", TlsMode.ENFORCING: "TLS",
            TlsMode.PERMISSIVE: "TLS and plain text"}[self.mode])
        return self

    async def close(self) -> None:
        front, self._front = self._front, None
        if front is not None:
            front.close()  # no new connections; the open ones see grpcio's goodbye
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop(grace=1.0)
        if front is not None:
            front.abort()
            await front.wait_closed()
        await self.cluster.close()

    def peer(self, context: Any) -> str:
        """A call's client address (``host:port``): the relayed client's in permissive mode."""
        address = peer_address(context.peer() or "")
        if self._front is None:
            return address
        tls = context.auth_context().get("transport_security_type") == [b"ssl"]
        return self._front.peer(address, tls)

    # -- the handler table ----------------------------------------------------------------
    def _handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        producer, consumer, broker = self.producer, self.consumer, self.broker
        unary: dict[str, Unary] = {  # each takes <name>Request and answers <name>Response
            "QueryRoute": functools.partial(query_route, broker, self.cluster),
            "Heartbeat": self._heartbeat,
            "SendMessage": producer.send,
            "QueryAssignment": self._query_assignment,
            "AckMessage": _sync(consumer.ack),
            "ForwardMessageToDeadLetterQueue": _sync(consumer.forward_to_dlq),
            "UpdateOffset": _sync(consumer.update_offset),
            "GetOffset": _sync(consumer.get_offset),
            "QueryOffset": _sync(consumer.query_offset),
            "EndTransaction": producer.end_transaction,
            "NotifyClientTermination": self._terminated,
            "ChangeInvisibleDuration": _sync(consumer.change_invisible),
            "RecallMessage": producer.recall,
            "SyncLiteSubscription": _not_served("lite topics"),
        }
        handlers = {}
        for name, fn in unary.items():
            request, response = getattr(pb, f"{name}Request"), getattr(pb, f"{name}Response")
            handlers[name] = grpc.unary_unary_rpc_method_handler(
                self._guarded(name, fn, response),
                request_deserializer=_decoder(request),
                response_serializer=response.SerializeToString,
            )
        handlers["ReceiveMessage"] = grpc.unary_stream_rpc_method_handler(
            self._receive,
            request_deserializer=_decoder(pb.ReceiveMessageRequest),
            response_serializer=pb.ReceiveMessageResponse.SerializeToString,
        )
        handlers["PullMessage"] = grpc.unary_stream_rpc_method_handler(
            self._pull,
            request_deserializer=pb.PullMessageRequest.FromString,
            response_serializer=pb.PullMessageResponse.SerializeToString,
        )
        handlers["Telemetry"] = grpc.stream_stream_rpc_method_handler(
            self._telemetry,
            request_deserializer=_decoder(pb.TelemetryCommand),
            response_serializer=pb.TelemetryCommand.SerializeToString,
        )
        return handlers

    def _call(self, context: Any, rpc: str, request: Any) -> Call:
        """The call's metadata, checked against the plain ACL when the broker has it on.
        Raises Refused."""
        call = call_of(context, self.peer(context))
        if self.broker.acl is not None:
            authorize(self.broker.acl.state, call, rpc, request)
        config = self.broker.config
        if config.authentication_enabled or config.authorization_enabled:
            authorize_v2(self.broker.auth, call, rpc, request, authn=config.authentication_enabled,
                         authz=config.authorization_enabled)
        return call

    def _guarded(self, rpc: str, fn: Unary, response: Any) -> Callable[[Any, Any], Awaitable[Any]]:
        """A unary handler that reads (and checks) the call's metadata and answers errors in-band."""

        async def handle(request: Any, context: Any) -> Any:
            try:
                if request is None:
                    raise Refused(pb.BAD_REQUEST, f"the {rpc} request is not a valid {rpc}Request message")
                return await fn(self._call(context, rpc, request), request)
            except Refused as refused:
                return response(status=status(refused.code, refused.message))
            except Exception as exc:  # a bug must not leave the client without an answer
                log.exception("gRPC %s failed", rpc)
                return response(status=status(pb.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))

        return handle

    # -- clients ----------------------------------------------------------------------------
    async def _heartbeat(self, call: Any, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        client = self.clients.get(call.client_id, call.peer)
        group = call.name(request.group) if request.HasField("group") else None
        self.clients.register(client, request.client_type, group)
        return pb.HeartbeatResponse(status=status())

    async def _terminated(
        self,
        call: Any,
        request: pb.NotifyClientTerminationRequest,
    ) -> pb.NotifyClientTerminationResponse:
        self.clients.forget(self.clients.get(call.client_id, call.peer))
        return pb.NotifyClientTerminationResponse(status=status())

    async def _query_assignment(
        self, call: Any, request: pb.QueryAssignmentRequest
    ) -> pb.QueryAssignmentResponse:
        _, settings = self.consumer.group(call, request.group)
        return await query_assignment(self.broker, self.cluster, call, request, orderly(settings))

    def _settings_reply(self, settings: pb.Settings, call: Any) -> pb.TelemetryCommand:
        fifo, attempts = False, 17
        if settings.HasField("subscription") and settings.subscription.HasField("group"):
            group = self.broker.subscription_groups.find(call.name(settings.subscription.group))
            if group is not None:
                fifo, attempts = orderly(group), group.retry_max_times + 1
        reply = settings_reply(
            settings, max_body=self.broker.store.config.max_message_size, fifo=fifo, max_attempts=attempts
        )
        return pb.TelemetryCommand(status=status(), settings=reply)

    async def _telemetry(self, requests: AsyncIterator[pb.TelemetryCommand], context: Any) -> None:
        """A client's Telemetry stream: its settings answered with the broker's, and the
        broker's commands (transaction checks) written to it while it is open."""
        try:
            call = self._call(context, "Telemetry", None)
        except Refused as refused:
            await context.write(pb.TelemetryCommand(status=status(refused.code, refused.message)))
            return
        client = self.clients.get(call.client_id, call.peer)
        outbox: asyncio.Queue[pb.TelemetryCommand] = asyncio.Queue(maxsize=64)
        client.outbox = outbox

        async def read() -> None:
            first = True
            async for command in requests:
                if command is None:  # not a TelemetryCommand: answered, the stream goes on
                    _offer(
                        outbox, pb.TelemetryCommand(status=status(pb.BAD_REQUEST, "not a TelemetryCommand"))
                    )
                    continue
                if command.HasField("settings"):
                    client.settings = command.settings
                    kind = command.settings.client_type
                    self.clients.register(client, kind)
                    reply = self._settings_reply(command.settings, call)
                    outbox.put_nowait(reply)
                    if first:  # once more a little later: see SETTINGS_REPEAT_S
                        first = False
                        loop.call_later(SETTINGS_REPEAT_S, _offer, outbox, reply)

        loop = asyncio.get_running_loop()

        reader = asyncio.ensure_future(read())
        try:
            while True:
                take = asyncio.ensure_future(outbox.get())
                done, _ = await asyncio.wait({take, reader}, return_when=asyncio.FIRST_COMPLETED)
                if take not in done:
                    take.cancel()
                    break
                await context.write(take.result())
        finally:
            reader.cancel()
            if client.outbox is outbox:
                client.outbox = None

    # -- streams ----------------------------------------------------------------------------
    async def _receive(
        self,
        request: pb.ReceiveMessageRequest,
        context: Any,
    ) -> AsyncIterator[pb.ReceiveMessageResponse]:
        try:
            if request is None:
                raise Refused(pb.BAD_REQUEST, "the request is not a valid ReceiveMessageRequest message")
            call = self._call(context, "ReceiveMessage", request)
        except Refused as refused:
            yield pb.ReceiveMessageResponse(status=status(refused.code, refused.message))
            return
        async for response in self.consumer.receive(call, request, context.time_remaining()):
            yield response

    async def _pull(
        self, request: pb.PullMessageRequest, context: Any
    ) -> AsyncIterator[pb.PullMessageResponse]:
        yield pb.PullMessageResponse(
            status=status(pb.NOT_IMPLEMENTED, "PullMessage is not served: use SimpleConsumer or PushConsumer")
        )


def _offer(outbox: asyncio.Queue[pb.TelemetryCommand], command: pb.TelemetryCommand) -> None:
    """Queue ``command`` unless the outbox is full (its stream then is not being read)."""
    with contextlib.suppress(asyncio.QueueFull):
        outbox.put_nowait(command)


def _credentials(tls: TlsServerConfig) -> grpc.ServerCredentials:
    """The gRPC server credentials of the ``tls.server.*`` certificate and key, or of a
    self-signed certificate when none is configured. With ``tls.server.need.client.auth=require``
    a client must present a certificate that ``trustCertPath``'s CA signed; with ``optional``
    or ``none`` none is asked for (grpcio cannot ask for one without requiring it)."""
    key, cert = tls.key_and_cert() or self_signed()
    roots = tls.required_client_roots()
    if roots is None:
        return grpc.ssl_server_credentials([(key, cert)])
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=roots, require_client_auth=True)


def _decoder(message: Any) -> Callable[[bytes], Any]:
    """A request deserializer that gives None for bytes that are not a ``message`` (the
    handlers answer BAD_REQUEST in the response, not an UNKNOWN gRPC error)."""

    def decode(data: bytes) -> Any:
        try:
            return message.FromString(data)
        except DecodeError:
            return None

    return decode


def _sync(fn: Callable[[Any, Any], Any]) -> Unary:
    """A handler that answers at once (no waiting) as the handler table's async function."""

    async def answer(call: Any, request: Any) -> Any:
        return fn(call, request)

    return answer


def _not_served(what: str) -> Unary:
    async def refuse(call: Any, request: Any) -> Any:
        raise Refused(pb.NOT_IMPLEMENTED, f"{what} is not served by this broker")

    return refuse
