"""Bare calls of RocketMQ 5's gRPC API (Bolide's own v5 messages over grpc.aio) for tests and
benchmarks of the broker's gRPC endpoint: no client logic, one call per method."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration

from bolide.protocol.v5 import messaging_pb2 as pb

SERVICE = "/apache.rocketmq.v2.MessagingService/"
CLIENT = (("x-mq-client-id", "host@1@0@test"), ("x-mq-language", "PYTHON"))
Metadata = tuple[tuple[str, str], ...]


class V5Calls:
    """Calls on ``channel`` with ``metadata`` (a client id; ``()`` for none). A unary call takes
    ``<Name>Request`` and answers ``<Name>Response``."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Metadata = CLIENT) -> None:
        self.channel, self.metadata = channel, metadata

    async def __call__(self, rpc: str, request: Any, timeout: float = 10) -> Any:
        response = getattr(pb, f"{rpc}Response")
        call = self.channel.unary_unary(
            SERVICE + rpc,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response.FromString,
        )
        return await call(request, metadata=self.metadata, timeout=timeout)

    async def receive(
        self,
        request: pb.ReceiveMessageRequest,
        timeout: float = 10,
    ) -> tuple[int | None, list[pb.Message]]:
        """A ReceiveMessage to its end: the status code and the messages."""
        call = self.channel.unary_stream(
            SERVICE + "ReceiveMessage",
            request_serializer=pb.ReceiveMessageRequest.SerializeToString,
            response_deserializer=pb.ReceiveMessageResponse.FromString,
        )
        code, messages = None, []
        async for response in call(request, metadata=self.metadata, timeout=timeout):
            if response.HasField("status"):
                code = response.status.code
            elif response.HasField("message"):
                messages.append(response.message)
        return code, messages

    async def ack(self, group: str, topic: str, messages: list[pb.Message]) -> pb.AckMessageResponse:
        """Acknowledge ``messages`` in one AckMessage."""
        entries = [
            pb.AckMessageEntry(
                message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
            )
            for m in messages
        ]
        return await self(
            "AckMessage",
            pb.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries
            ),
        )


def message(topic: str, body: bytes, msg_id: str, **system: Any) -> pb.Message:
    """A v5 message as the clients send it (the client-made id is required)."""
    return pb.Message(
        topic=pb.Resource(name=topic),
        body=body,
        system_properties=pb.SystemProperties(message_id=msg_id, **system),
    )


def receive_request(
    topic: str, group: str, *, invisible_s: int = 30, poll_s: float = 0, batch: int = 32
) -> pb.ReceiveMessageRequest:
    """A ReceiveMessage of every tag, hiding what it gets for ``invisible_s``."""
    return pb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=batch,
        invisible_duration=Duration(seconds=invisible_s),
        long_polling_timeout=Duration(seconds=int(poll_s), nanos=int(poll_s % 1 * 1e9)),
    )
