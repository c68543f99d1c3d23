"""What every gRPC call carries: the client id, namespace and peer from its metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bolide.broker.proxy.convert import Refused
from bolide.protocol.v5 import messaging_pb2 as pb


@dataclass(frozen=True, slots=True)
class Call:
    """One call's client (``x-mq-client-id``), namespace (``x-mq-namespace``) and address."""

    client_id: str
    namespace: str
    peer: str  # host:port
    authorization: str = ""  # MQv2-HMAC-SHA1 Credential=<accessKey>, ..., Signature=<hex>
    date_time: str = ""  # x-mq-date-time, what the signature signs

    def name(self, resource: pb.Resource) -> str:
        """A topic's or group's name on the broker: ``namespace%name`` inside a namespace (the
        resource's own, else the call's), as RocketMQ 4 names them."""
        namespace = resource.resource_namespace or self.namespace
        return f"{namespace}%{resource.name}" if namespace else resource.name


def peer_address(peer: str) -> str:
    """``host:port`` of a gRPC peer string (``ipv4:127.0.0.1:5555``, ``ipv6:[::1]:5555``)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        host, _, port = rest[1:].partition("]:")
        return f"{host}:{port}"
    return rest if kind in ("ipv4", "ipv6") else peer


def call_of(context: Any, peer: str | None = None) -> Call:
    """The :class:`Call` of a grpc.aio servicer context (``peer``: the client's address, if
    not the context's peer); Refused (CLIENT_ID_REQUIRED) without a client id."""
    metadata = {key: value for key, value in (context.invocation_metadata() or ())}
    client_id = metadata.get("x-mq-client-id", "")
    if not client_id:
        raise Refused(
            pb.CLIENT_ID_REQUIRED,
            "the call has no x-mq-client-id header: RocketMQ 5 clients send one; set it on your own calls",
        )
    return Call(
        client_id,
        metadata.get("x-mq-namespace", ""),
        peer if peer is not None else peer_address(context.peer() or ""),
        metadata.get("authorization", ""),
        metadata.get("x-mq-date-time", ""),
    )
