"""The generated ``messaging_pb2`` is what ``messaging.proto`` says now: compiling the .proto
again gives the descriptor the committed module registers (regenerate with
``python -m bolide.protocol.v5.generate`` after changing it)."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from bolide.protocol.v5 import generate
from bolide.protocol.v5 import messaging_pb2 as pb


def test_the_committed_module_matches_the_proto(tmp_path: Path) -> None:
    out = tmp_path / "set.bin"
    args = [a for a in generate.protoc_args(tmp_path) if not a.startswith(("--python_out", "--pyi_out"))]
    assert protoc.main([*args[:-1], f"--descriptor_set_out={out}", args[-1]]) == 0
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in compiled.message_type:  # the Python generator leaves out the JSON names
        for field in [*message.field, *(f for nested in message.nested_type for f in nested.field)]:
            field.ClearField("json_name")
    committed = descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)
    assert compiled == committed


def test_the_service_has_every_call_of_the_v2_api() -> None:
    methods = [m.name for m in pb.DESCRIPTOR.services_by_name["MessagingService"].methods]
    assert methods == [
        "QueryRoute",
        "Heartbeat",
        "SendMessage",
        "QueryAssignment",
        "ReceiveMessage",
        "AckMessage",
        "ForwardMessageToDeadLetterQueue",
        "PullMessage",
        "UpdateOffset",
        "GetOffset",
        "QueryOffset",
        "EndTransaction",
        "Telemetry",
        "NotifyClientTermination",
        "ChangeInvisibleDuration",
        "RecallMessage",
        "SyncLiteSubscription",
    ]
    assert pb.DESCRIPTOR.package == "apache.rocketmq.v2"
